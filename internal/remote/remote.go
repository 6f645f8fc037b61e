// Package remote runs commands on the build host through Packer's communicator. It only moves
// bytes: what the output means is for the packages that judge it.
package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
)

// ErrDisconnected reports that the connection dropped before the command's exit status came
// back (a reboot, a network blip).
var ErrDisconnected = errors.New("connection to the host dropped")

// Host is where commands run.
type Host interface {
	// Run runs command with /bin/sh semantics as the login user, feeding stdin (may be nil)
	// and streaming output to stdout and stderr (may be nil). It returns the exit status, or
	// ErrDisconnected when the connection dropped first.
	Run(ctx context.Context, command string, stdin io.Reader, stdout, stderr io.Writer) (int, error)
	// Upload writes data to the remote path dst, owned by the login user.
	Upload(ctx context.Context, dst string, data io.Reader) error
}

// Comm adapts a Packer communicator to Host.
type Comm struct {
	C packersdk.Communicator
}

// Run implements Host.
func (c Comm) Run(ctx context.Context, command string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cmd := &packersdk.RemoteCmd{Command: command, Stdin: stdin, Stdout: stdout, Stderr: stderr}
	if err := c.C.Start(ctx, cmd); err != nil {
		return 0, fmt.Errorf("starting remote command: %w", err)
	}
	done := make(chan int, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case code := <-done:
		if code == packersdk.CmdDisconnect {
			return code, ErrDisconnected
		}
		return code, nil
	}
}

// Upload implements Host.
func (c Comm) Upload(ctx context.Context, dst string, data io.Reader) error {
	errc := make(chan error, 1)
	go func() { errc <- c.C.Upload(dst, data, nil) }()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("uploading %s: %w", dst, err)
		}
		return nil
	}
}

// ScriptCommand returns the command line that runs script with /bin/sh. The script travels
// as one single-quoted argument rather than on stdin, so a command inside it that reads
// stdin can never eat the rest of the script.
func ScriptCommand(script string) string {
	return "sh -c " + bundle.Quote(script)
}

// Output runs a read-only script and returns what it printed (stdout and stderr together)
// and its exit status. A dropped connection is retried once, since running a read-only
// script twice is harmless.
func Output(ctx context.Context, h Host, script string) (string, int, error) {
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		var out Buffer
		code, err := h.Run(ctx, ScriptCommand(script), nil, &out, &out)
		if err == nil {
			return out.String(), code, nil
		}
		lastErr = err
		if !errors.Is(err, ErrDisconnected) || ctx.Err() != nil {
			break
		}
	}
	return "", 0, lastErr
}

// Buffer collects a command's output when stdout and stderr share one writer. The
// communicator copies both streams at once with io.Copy; a *bytes.Buffer there is not only
// racy but, because it implements io.ReaderFrom, lets the empty stream's ReadFrom reset the
// length when it returns, losing the other stream's output. Buffer has only Write.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

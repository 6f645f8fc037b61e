// Package remote implements host.Host over Packer's communicator (SSH). It is the only place
// that writes shell lines for the host API; it only moves bytes, and what the output means is
// for the packages that judge it.
package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"time"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
	"github.com/dlami-bake/packer-plugin-dlami/internal/pause"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// ErrDisconnected is host.ErrDisconnected, kept here for callers that only see this package.
var ErrDisconnected = host.ErrDisconnected

// SSH implements host.Host over a Packer communicator.
type SSH struct {
	C packersdk.Communicator
	// TempDir is where Install stages files before moving them into place (remote_folder,
	// resolved by the caller); Install refuses to run without one.
	TempDir string
	// Poll is how often Reboot and Reconnect look again; 0 means 2s.
	Poll time.Duration
}

var _ host.Host = SSH{}

// exec runs one command line and waits for its exit status.
func (s SSH) exec(ctx context.Context, command string, stdout, stderr io.Writer) (int, error) {
	cmd := &packersdk.RemoteCmd{Command: command, Stdout: stdout, Stderr: stderr}
	// Start opens the SSH session synchronously and ignores ctx while it does: on a
	// black-holed connection it would outlast every deadline built on exec (kill, staging
	// folder removal, reboot polling). It runs aside, and ctx bounds the wait for it.
	started := make(chan error, 1)
	go func() { started <- s.C.Start(ctx, cmd) }()
	select {
	case <-ctx.Done():
		return 0, fmt.Errorf("starting remote command: %w", ctx.Err())
	case err := <-started:
		if err != nil {
			return 0, fmt.Errorf("starting remote command: %w", err)
		}
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

// short runs a command that must succeed, and reports its output when it does not.
func (s SSH) short(ctx context.Context, what, command string) error {
	var out Buffer
	code, err := s.exec(ctx, command, &out, &out)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if code != 0 {
		return fmt.Errorf("%s: exit status %d: %s", what, code, textcut.Head(strings.TrimSpace(out.String()), 500))
	}
	return nil
}

// ScriptCommand returns the command line that runs script with /bin/sh. The script travels
// as one single-quoted argument rather than on stdin, so a command inside it that reads
// stdin can never eat the rest of the script.
func ScriptCommand(script string) string {
	return "/bin/sh -c " + bundle.Quote(script)
}

// retryOnDrop runs attempt once more when the connection dropped under it; callers pass only
// read-only work, which is harmless to run twice.
func retryOnDrop(ctx context.Context, attempt func() error) error {
	err := attempt()
	if errors.Is(err, ErrDisconnected) && ctx.Err() == nil {
		err = attempt()
	}
	return err
}

// output runs a read-only script and returns what it printed (stdout and stderr together)
// and its exit status, retried once on a dropped connection.
func (s SSH) output(ctx context.Context, script string) (string, int, error) {
	var out *Buffer
	var code int
	err := retryOnDrop(ctx, func() (err error) {
		out = new(Buffer)
		code, err = s.exec(ctx, ScriptCommand(script), out, out)
		return err
	})
	if err != nil {
		return "", 0, err
	}
	return out.String(), code, nil
}

// Query implements host.Runner. The whole bundle gets a deadline of every command's own
// timeout plus slack, so one hung command cannot hold the bake past its budget.
func (s SSH) Query(ctx context.Context, cmds []bundle.Command) (map[string]bundle.Section, error) {
	script, err := bundle.Script(cmds)
	if err != nil {
		return nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, bundle.Budget(cmds))
	defer cancel()
	out, code, err := s.output(bctx, script)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("the command bundle exited %d: %s", code, textcut.Tail(out, 2000))
	}
	return bundle.Parse(out, cmds)
}

// The shell this package runs on the host beyond one-line commands lives in scripts/*.sh
// (shellcheck reads them as they are: GNUmakefile's LINT_SHELL); values reach them quoted, as
// positional parameters or as variables set before the body (withVars).
//
//go:embed scripts/*.sh
var scriptFiles embed.FS

// scriptFile is an embedded script; a missing one is a bug of this package.
func scriptFile(name string) string {
	data, err := scriptFiles.ReadFile("scripts/" + name)
	if err != nil {
		panic(fmt.Sprintf("remote: embedded script %s: %v", name, err))
	}
	return string(data)
}

// withVars returns script with each variable set, quoted, before it.
func withVars(script string, vars [][2]string) string {
	var b strings.Builder
	for _, v := range vars {
		b.WriteString(v[0] + "=" + bundle.Quote(v[1]) + "\n")
	}
	return b.String() + script
}

// jobCommand is the command line that runs j through host.JobScript, watched by the SSH
// session it runs under.
func jobCommand(j host.Job) string {
	return shellCommand(j.AsRoot, host.JobScript, host.JobRunArgs(j, 0))
}

// shellCommand is the command line that runs script with /bin/sh -c and args ($0 first), every
// word quoted, through sudo -n when asRoot.
func shellCommand(asRoot bool, script string, args []string) string {
	cmd := "/bin/sh -c " + bundle.Quote(script)
	for _, a := range args {
		cmd += " " + bundle.Quote(a)
	}
	if asRoot {
		cmd = "sudo -n " + cmd
	}
	return cmd
}

// Run implements host.Runner.
func (s SSH) Run(ctx context.Context, j host.Job) (int, error) {
	w := j.Output
	if w == nil {
		w = io.Discard
	}
	code, err := s.exec(ctx, jobCommand(j), w, w)
	if err != nil {
		return code, fmt.Errorf("%s: %w", j.Name, err)
	}
	return code, nil
}

// Kill implements host.Runner.
func (s SSH) Kill(ctx context.Context, j host.Job) error {
	return s.short(ctx, "stopping "+j.Name, shellCommand(j.AsRoot, host.JobScript, host.JobKillArgs(j)))
}

// MakeDir implements host.Files.
func (s SSH) MakeDir(ctx context.Context, dir string) error {
	return s.short(ctx, "creating "+dir, "mkdir -p -m 0700 "+bundle.Quote(dir))
}

// MakeTempDir implements host.Files.
func (s SSH) MakeTempDir(ctx context.Context, parent, prefix string) (string, error) {
	if !strings.HasPrefix(parent, "/") {
		return "", fmt.Errorf("creating a folder in %q: not an absolute path", parent)
	}
	if prefix == "" || strings.HasPrefix(prefix, "-") || strings.Trim(prefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
		return "", fmt.Errorf("creating a folder in %s: prefix %q must be letters, digits, '.', '_' and '-'", parent, prefix)
	}
	if parent = strings.TrimRight(parent, "/"); parent == "" {
		parent = "/"
	}
	base := strings.TrimSuffix(parent, "/") + "/" + prefix + "."
	var out, errOut Buffer
	code, err := s.exec(ctx, shellCommand(false, scriptFile("mktemp.sh"), []string{"dlami-mktemp", parent, prefix}), &out, &errOut)
	if err != nil {
		return "", fmt.Errorf("creating a folder in %s: %w", parent, err)
	}
	if code != 0 {
		return "", fmt.Errorf("creating a folder in %s: exit status %d: %s", parent, code, textcut.Head(strings.TrimSpace(errOut.String()+out.String()), 500))
	}
	dir := strings.TrimSuffix(out.String(), "\n")
	if rest, ok := strings.CutPrefix(dir, base); !ok || len(rest) < 6 || strings.ContainsAny(rest, "/\n") {
		return "", fmt.Errorf("creating a folder in %s: mktemp answered %q, not a folder %sXXXXXXXXXX", parent, textcut.Head(dir, 200), base)
	}
	return dir, nil
}

// Upload implements host.Files.
func (s SSH) Upload(ctx context.Context, dst string, data io.Reader) error {
	errc := make(chan error, 1)
	go func() { errc <- s.C.Upload(dst, data, nil) }()
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

// Install implements host.Files: the data is uploaded beside the other staged files as the
// login user, then moved into place by root with install(1), which creates the parents.
func (s SSH) Install(ctx context.Context, data []byte, dst string, mode fs.FileMode) error {
	if s.TempDir == "" {
		return fmt.Errorf("installing %s: no staging folder (remote.SSH.TempDir) was set", dst)
	}
	tmp := strings.TrimRight(s.TempDir, "/") + "/.dlami-install-" + randomSuffix()
	if err := s.Upload(ctx, tmp, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("installing %s: %w", dst, err)
	}
	cmd := fmt.Sprintf("sudo -n install -D -m %04o %s %s; rc=$?; rm -f %s; exit $rc", mode.Perm(), bundle.Quote(tmp), bundle.Quote(dst), bundle.Quote(tmp))
	return s.short(ctx, "installing "+dst, cmd)
}

// readExitMissing is the read script's exit status when the file does not exist.
const readExitMissing = 44

// ReadFile implements host.Files. stdout carries the file as is; stderr is kept apart so a
// warning can never end up inside the content.
func (s SSH) ReadFile(ctx context.Context, path string) ([]byte, error) {
	script := fmt.Sprintf(`[ -e "$1" ] || exit %d; exec cat -- "$1"`, readExitMissing)
	cmd := "sudo -n /bin/sh -c " + bundle.Quote(script) + " dlami-read " + bundle.Quote(path)
	var out, errOut *Buffer
	var code int
	err := retryOnDrop(ctx, func() (err error) {
		out, errOut = new(Buffer), new(Buffer)
		code, err = s.exec(ctx, cmd, out, errOut)
		return err
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", path, err)
	case code == readExitMissing:
		return nil, fmt.Errorf("reading %s: %w", path, fs.ErrNotExist)
	case code != 0:
		return nil, fmt.Errorf("reading %s: exit status %d: %s", path, code, textcut.Head(strings.TrimSpace(errOut.String()), 300))
	}
	return []byte(out.String()), nil
}

// RemoveAll implements host.Files.
func (s SSH) RemoveAll(ctx context.Context, path string) error {
	return s.short(ctx, "removing "+path, "sudo -n rm -rf -- "+bundle.Quote(path))
}

// Hold implements host.Packages.
func (s SSH) Hold(ctx context.Context, pkgs []string) error {
	if len(pkgs) == 0 {
		return nil
	}
	return s.short(ctx, "apt-mark hold", holdCommand("sudo -n /usr/bin/apt-mark", pkgs, 3))
}

// holdCommand is the command line that puts pkgs on hold with aptMark (scripts/hold.sh),
// waiting as the layers do (hosttools.AptLockTimeoutSeconds) while cloud-init or
// unattended-upgrades hold the dpkg lock at first boot, instead of failing at once.
func holdCommand(aptMark string, pkgs []string, retryEvery int) string {
	script := withVars(scriptFile("hold.sh"), [][2]string{
		{"apt_mark", aptMark},
		{"lock_timeout", strconv.Itoa(hosttools.AptLockTimeoutSeconds)},
		{"retry_every", strconv.Itoa(retryEvery)},
	})
	return shellCommand(false, script, append([]string{"dlami-hold"}, pkgs...))
}

// BootID implements host.Power.
func (s SSH) BootID(ctx context.Context) (string, error) {
	out, code, err := s.output(ctx, "cat /proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("reading the boot id: %w", err)
	}
	id := strings.TrimSpace(out)
	if code != 0 || id == "" || strings.ContainsAny(id, " \n") {
		return "", fmt.Errorf("reading the boot id: exit %d: %q", code, textcut.Head(id, 100))
	}
	return id, nil
}

func (s SSH) poll() time.Duration {
	if s.Poll > 0 {
		return s.Poll
	}
	return 2 * time.Second
}

// Reboot implements host.Power. The request runs in the background after a second so the
// command that asks returns before the host goes down; the new boot id is what proves that
// the host went down and came back (a command that still reaches the old boot cannot be
// mistaken for the new one).
func (s SSH) Reboot(ctx context.Context) error {
	before, err := s.BootID(ctx)
	if err != nil {
		return fmt.Errorf("reboot: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = s.exec(rctx, `sudo -n /bin/sh -c '(sleep 1; /sbin/reboot || /sbin/shutdown -r now) >/dev/null 2>&1 &'`, nil, nil)
	cancel()
	if err != nil && !errors.Is(err, ErrDisconnected) {
		return fmt.Errorf("requesting the reboot: %w", err)
	}
	for {
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		id, err := s.BootID(pctx)
		pcancel()
		if err == nil && id != before {
			return nil
		}
		if err := pause.Sleep(ctx, s.poll()); err != nil {
			return fmt.Errorf("reboot: the host did not come back with a new boot id: %w", err)
		}
	}
}

// Reconnect implements host.Power.
func (s SSH) Reconnect(ctx context.Context) error {
	for {
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := s.BootID(pctx)
		pcancel()
		if err == nil {
			return nil
		}
		if err := pause.Sleep(ctx, s.poll()); err != nil {
			return fmt.Errorf("the host did not answer again: %w", err)
		}
	}
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
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

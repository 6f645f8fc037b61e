// Package localhost implements host.Host on the machine the program runs on: dlami-node-check
// judges its own node with the same engine, the same probe commands and the same job scripts a
// bake runs over SSH.
package localhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Host is this machine.
type Host struct{}

var _ host.Host = Host{}

// waitDelay bounds the wait for a command's pipes after its process group was killed.
const waitDelay = 2 * time.Second

// Query implements host.Runner: the bundle runs with /bin/sh in a process group of its own
// that is killed whole when its budget or ctx ends, so a hung tool (and the timeout(1) wrapping
// it) never keeps a boot waiting past the run's bound.
func (Host) Query(ctx context.Context, cmds []bundle.Command) (map[string]bundle.Section, error) {
	script, err := bundle.Script(cmds)
	if err != nil {
		return nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, bundle.Budget(cmds))
	defer cancel()
	out, code, err := Command(bctx, []string{"/bin/sh", "-c", script}, nil)
	if err != nil {
		if bctx.Err() != nil {
			return nil, fmt.Errorf("the command bundle did not finish in time: %w", bctx.Err())
		}
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("the command bundle exited %d: %s", code, textcut.Tail(out, 2000))
	}
	return bundle.Parse(out, cmds)
}

// Command runs argv (no shell) in its own process group with stdout and stderr together and
// env added to this process's environment; ctx's end kills the whole group.
func Command(ctx context.Context, argv []string, env []string) (string, int, error) {
	var out bytes.Buffer
	code, err := run(ctx, argv, env, &out, nil)
	return out.String(), code, err
}

// run starts argv in a process group of its own, writing the group's id to pidFile when set.
func run(ctx context.Context, argv []string, env []string, out io.Writer, pidFile *string) (int, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	if len(env) > 0 {
		cmd.Env = append(cmd.Environ(), env...)
	}
	setGroup(cmd)
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return -1, err
	}
	if pidFile != nil && *pidFile != "" {
		// The process group id is the child's pid (setGroup); Kill reads it.
		if err := os.WriteFile(*pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
			_ = cmd.Cancel()
			_ = cmd.Wait()
			return -1, fmt.Errorf("recording the job's process group: %w", err)
		}
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return -1, ctx.Err()
	case errors.As(err, &exit):
		return exit.ExitCode(), nil
	case err != nil:
		return -1, err
	}
	return 0, nil
}

// Run implements host.Runner: the job's script runs with /bin/sh in a process group of its own
// (through sudo -n when it must run as root and this process is not root).
func (Host) Run(ctx context.Context, j host.Job) (int, error) {
	argv := []string{"/bin/sh", j.Script}
	if j.AsRoot && os.Geteuid() != 0 {
		argv = append([]string{"/usr/bin/sudo", "-n"}, argv...)
	}
	w := j.Output
	if w == nil {
		w = io.Discard
	}
	code, err := run(ctx, argv, nil, w, &j.PIDFile)
	if err != nil && ctx.Err() == nil {
		return code, fmt.Errorf("%s: %w", j.Name, err)
	}
	return code, err
}

// Kill implements host.Runner: TERM to the job's process group, then KILL. A job that already
// ended, or never started, is not an error.
func (Host) Kill(ctx context.Context, j host.Job) error {
	data, err := os.ReadFile(j.PIDFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pgid <= 1 {
		return nil
	}
	return killGroup(ctx, pgid)
}

// MakeDir implements host.Files.
func (Host) MakeDir(_ context.Context, dir string) error { return os.MkdirAll(dir, 0o700) }

// MakeTempDir implements host.Files: "<parent>/<prefix>.XXXXXXXXXX", mode 0700.
func (Host) MakeTempDir(_ context.Context, parent, prefix string) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(parent, prefix+".")
}

// Upload implements host.Files.
func (Host) Upload(_ context.Context, dst string, data io.Reader) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Install implements host.Files: written beside dst and renamed into place.
func (Host) Install(_ context.Context, data []byte, dst string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// ReadFile implements host.Files.
func (Host) ReadFile(_ context.Context, path string) ([]byte, error) { return os.ReadFile(path) }

// RemoveAll implements host.Files.
func (Host) RemoveAll(_ context.Context, path string) error { return os.RemoveAll(path) }

// ErrNotABake is what the bake-only operations answer on a node.
var ErrNotABake = errors.New("not available to a node's check of itself (it changes nothing)")

// Hold implements host.Packages: a node's check changes nothing.
func (Host) Hold(context.Context, []string) error { return ErrNotABake }

// BootID implements host.Power.
func (Host) BootID(context.Context) (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b)), err
}

// Reboot implements host.Power: a node's check never reboots it.
func (Host) Reboot(context.Context) error { return ErrNotABake }

// Reconnect implements host.Power: this machine never disconnects from itself.
func (Host) Reconnect(context.Context) error { return nil }

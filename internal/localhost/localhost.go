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

// run starts argv in a process group of its own; when ctx ends, beforeKill (when set) runs
// before the group is killed.
func run(ctx context.Context, argv []string, env []string, out io.Writer, beforeKill func()) (int, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	if len(env) > 0 {
		cmd.Env = append(cmd.Environ(), env...)
	}
	setGroup(cmd, beforeKill)
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return -1, err
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

// jobArgv is the command that runs host.JobScript with args, through sudo -n when it must run
// as root and this process is not root.
func jobArgv(asRoot bool, args []string) []string {
	argv := append([]string{"/bin/sh", "-c", host.JobScript}, args...)
	if asRoot && os.Geteuid() != 0 {
		argv = append([]string{"/usr/bin/sudo", "-n"}, argv...)
	}
	return argv
}

// killBound bounds stopping a job: the job script gives its session 3 s between TERM and KILL.
const killBound = 10 * time.Second

// Run implements host.Runner with host.JobScript, as the SSH host does: the job leads a session
// of its own, and the script stops that session when this process goes away (it watches this
// process's pid). When ctx ends first the job's session is stopped before Run returns.
func (h Host) Run(ctx context.Context, j host.Job) (int, error) {
	w := j.Output
	if w == nil {
		w = io.Discard
	}
	stop := func() {
		kctx, cancel := context.WithTimeout(context.Background(), killBound)
		defer cancel()
		_ = h.Kill(kctx, j)
	}
	code, err := run(ctx, jobArgv(j.AsRoot, host.JobRunArgs(j, os.Getpid())), nil, w, stop)
	if err != nil && ctx.Err() == nil {
		return code, fmt.Errorf("%s: %w", j.Name, err)
	}
	return code, err
}

// Kill implements host.Runner with host.JobScript: TERM to the job's session, then KILL. A job
// that already ended, or never started, is not an error.
func (Host) Kill(ctx context.Context, j host.Job) error {
	out, code, err := Command(ctx, jobArgv(j.AsRoot, host.JobKillArgs(j)), nil)
	if err != nil {
		return fmt.Errorf("stopping %s: %w", j.Name, err)
	}
	if code != 0 {
		return fmt.Errorf("stopping %s: exit status %d: %s", j.Name, code, textcut.Head(strings.TrimSpace(out), 500))
	}
	return nil
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

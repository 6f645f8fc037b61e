// Package host is the typed API between a bake and the machine it bakes: what the provisioner
// (and the post-processor) may ask of a host. Package remote implements it over Packer's SSH
// communicator; tests implement it with in-memory hosts. Callers never build shell lines.
package host

import (
	"context"
	_ "embed" // the job script
	"errors"
	"io"
	"io/fs"
	"strconv"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
)

// ErrDisconnected reports that the connection dropped before a command's exit status came
// back (a reboot, a network blip).
var ErrDisconnected = errors.New("connection to the host dropped")

// Host is everything a bake asks of the build host. Its methods say what to do, never how.
type Host interface {
	Runner
	Files
	Packages
	Power
}

// Runner runs commands.
type Runner interface {
	// Query runs read-only commands in one round trip, as the login user, and returns each
	// one's section by name. Because they are read-only it may run them again after a dropped
	// connection. A missing section is an error, never a partial map.
	Query(ctx context.Context, cmds []bundle.Command) (map[string]bundle.Section, error)
	// Run runs a long job (a layer, the NCCL test) as the leader of a session of its own
	// (JobScript), streaming its
	// output, and returns its exit status. It returns an error wrapping ErrDisconnected when
	// the connection dropped before the status came back, and ctx's error when ctx ended first
	// (the job may still be running: call Kill).
	Run(ctx context.Context, j Job) (int, error)
	// Kill stops a job's whole session (TERM, then KILL: every process group in it, those
	// timeout(1) makes included), over a new connection. A job that already ended is not an
	// error.
	Kill(ctx context.Context, j Job) error
}

// Files moves files.
type Files interface {
	// MakeDir creates dir and its parents, owned by the login user, mode 0700.
	MakeDir(ctx context.Context, dir string) error
	// MakeTempDir creates a new directory with an unpredictable name inside parent (created
	// if missing), as mktemp -d does: "<parent>/<prefix>.XXXXXXXXXX", owned by the login
	// user, mode 0700. It returns the directory's path. prefix is letters, digits, '.', '_'
	// and '-'; a name another user could guess and create first is never used.
	MakeTempDir(ctx context.Context, parent, prefix string) (string, error)
	// Upload writes data to dst as the login user.
	Upload(ctx context.Context, dst string, data io.Reader) error
	// Install puts data at the absolute path dst as root, creating parent directories.
	Install(ctx context.Context, data []byte, dst string, mode fs.FileMode) error
	// ReadFile returns path's contents, read as root. When path does not exist the error
	// wraps fs.ErrNotExist; any other error means the file could not be read.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// RemoveAll removes path and everything under it as root; a missing path is not an error.
	RemoveAll(ctx context.Context, path string) error
}

// Packages changes the package manager's state.
type Packages interface {
	// Hold puts packages on apt hold.
	Hold(ctx context.Context, pkgs []string) error
}

// Power is about boots.
type Power interface {
	// BootID returns the host's boot id (/proc/sys/kernel/random/boot_id), which changes at
	// every boot.
	BootID(ctx context.Context) (string, error)
	// Reboot asks the host to reboot and returns once it answers again under a new boot id,
	// or when ctx ends.
	Reboot(ctx context.Context) error
	// Reconnect waits until the host answers again after a dropped connection, or ctx ends.
	Reconnect(ctx context.Context) error
}

// Job is a long-running remote command.
type Job struct {
	// Name is shown in messages ("layer \"slurm\"", "nccl").
	Name string
	// Script is the remote path of an uploaded script; it runs with /bin/sh.
	Script string
	// AsRoot runs the script through sudo.
	AsRoot bool
	// PIDFile is the remote path where the job records its session id, for Kill.
	PIDFile string
	// Output receives stdout and stderr together; nil discards them.
	Output io.Writer
}

// JobScript is the one script that runs and stops a job, on every host implementation (job.sh
// says how). It runs with /bin/sh -c; JobRunArgs and JobKillArgs are its arguments.
//
//go:embed job.sh
var JobScript string

// JobRunArgs are the arguments after `/bin/sh -c JobScript` that run j: $0 (a name for ps)
// then "run", the pid file, the script and the process whose end stops the job (watch; 0 means
// the SSH session the command runs under).
func JobRunArgs(j Job, watch int) []string {
	args := []string{"dlami-job", "run", j.PIDFile, j.Script}
	if watch > 0 {
		args = append(args, strconv.Itoa(watch))
	}
	return args
}

// JobKillArgs are the arguments after `/bin/sh -c JobScript` that stop j.
func JobKillArgs(j Job) []string {
	return []string{"dlami-kill", "kill", j.PIDFile}
}

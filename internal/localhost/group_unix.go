//go:build unix

package localhost

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// setGroup puts cmd in a process group of its own and makes cancellation kill the group.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// killGroup sends TERM to the process group, and KILL when it outlives a grace period.
func killGroup(ctx context.Context, pgid int) error {
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil {
		return nil // gone already
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if syscall.Kill(-pgid, 0) != nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return nil
}

//go:build unix

package localhost

import (
	"os/exec"
	"syscall"
)

// setGroup puts cmd in a process group of its own and makes cancellation kill the group, after
// beforeKill (when set) ran.
func setGroup(cmd *exec.Cmd, beforeKill func()) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if beforeKill != nil {
			beforeKill()
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

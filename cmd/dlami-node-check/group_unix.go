//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// setGroup puts cmd in a process group of its own and makes cancellation kill the group.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

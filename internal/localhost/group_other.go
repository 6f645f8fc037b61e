//go:build !unix

package localhost

import "os/exec"

// setGroup: the node check runs on Linux; elsewhere (a developer's build) the process alone is
// killed, after beforeKill (when set) ran.
func setGroup(cmd *exec.Cmd, beforeKill func()) {
	cmd.Cancel = func() error {
		if beforeKill != nil {
			beforeKill()
		}
		return cmd.Process.Kill()
	}
}

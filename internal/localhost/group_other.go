//go:build !unix

package localhost

import (
	"context"
	"os/exec"
)

// setGroup: the node check runs on Linux; elsewhere (a developer's build) the process alone is
// killed.
func setGroup(*exec.Cmd) {}

// killGroup: process groups are Unix's.
func killGroup(context.Context, int) error { return nil }

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// localRunner runs the probe's bundle on this node with /bin/sh, like probe.Local, but in a
// process group of its own that is killed whole when the run's bound ends: a hung tool (and
// the timeout(1) wrapping it) must never keep the boot waiting past --timeout.
type localRunner struct{}

var _ probe.Runner = localRunner{}

// waitDelay bounds the wait for the pipes after the group was killed.
const waitDelay = 2 * time.Second

func (localRunner) Query(ctx context.Context, cmds []bundle.Command) (map[string]bundle.Section, error) {
	script, err := bundle.Script(cmds)
	if err != nil {
		return nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, bundle.Budget(cmds))
	defer cancel()
	out, code, err := command(bctx, []string{"/bin/sh", "-c", script}, nil)
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

// command runs argv in its own process group with stdout and stderr together; ctx's end
// kills the whole group.
func command(ctx context.Context, argv []string, env []string) (string, int, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if len(env) > 0 {
		cmd.Env = append(cmd.Environ(), env...)
	}
	setGroup(cmd)
	cmd.WaitDelay = waitDelay
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return out.String(), -1, ctx.Err()
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode(), nil
	case err != nil:
		return out.String(), -1, err
	}
	return out.String(), 0, nil
}

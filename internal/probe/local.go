package probe

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Local runs the probe's commands on this machine with /bin/sh: the node check at boot reads
// its own host exactly as the bake read the build host over SSH.
type Local struct{}

var _ Runner = Local{}

// Query implements Runner. The whole bundle is bounded like the SSH one (bundle.Budget).
func (Local) Query(ctx context.Context, cmds []bundle.Command) (map[string]bundle.Section, error) {
	script, err := bundle.Script(cmds)
	if err != nil {
		return nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, bundle.Budget(cmds))
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(bctx, "/bin/sh", "-c", script)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if bctx.Err() != nil {
			return nil, fmt.Errorf("the command bundle did not finish within %s: %w", bundle.Budget(cmds), bctx.Err())
		}
		return nil, fmt.Errorf("the command bundle failed: %w: %s", err, textcut.Tail(out.String(), 2000))
	}
	return bundle.Parse(out.String(), cmds)
}

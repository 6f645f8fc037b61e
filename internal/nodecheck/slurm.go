package nodecheck

import (
	"context"
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// DrainPrefix starts the Slurm drain reason; only a node drained with it is undrained by
// ModeSlurm, as NHC undrains only what NHC drained.
const DrainPrefix = "dlami-node-check:"

// Slurm acts on this node in Slurm with scontrol: the drain a failing check asks for, and the
// resume of a node this command drained once it passes again.
type Slurm struct {
	// Scontrol is Slurm's scontrol, by absolute path.
	Scontrol string
	// Command runs argv (no shell); see Env.Command.
	Command func(ctx context.Context, argv []string, env []string) (out string, code int, err error)
	// Hostname is the node's host name.
	Hostname func() (string, error)
}

// node is this node's Slurm name: the short host name.
func (s Slurm) node() (string, error) {
	h, err := s.Hostname()
	if err != nil {
		return "", fmt.Errorf("the host name: %w", err)
	}
	short, _, _ := strings.Cut(strings.TrimSpace(h), ".")
	if short == "" || strings.ContainsAny(short, " \t\n=") {
		return "", fmt.Errorf("the host name %q is not a Slurm node name", h)
	}
	return short, nil
}

// Drain drains the node in Slurm with the failed ids as the reason.
func (s Slurm) Drain(ctx context.Context, failed []string) (string, error) {
	node, err := s.node()
	if err == nil {
		reason := DrainPrefix + " " + strings.Join(failed, ",")
		var out string
		var code int
		out, code, err = s.Command(ctx, []string{s.Scontrol, "update", "nodename=" + node, "state=drain", "reason=" + reason}, nil)
		if err == nil && code != 0 {
			err = fmt.Errorf("%s exited %d: %s", s.Scontrol, code, textcut.Head(oneLine(out), 300))
		}
		if err == nil {
			return fmt.Sprintf("drained Slurm node %s: reason %q", node, reason), nil
		}
	}
	return "could not drain the node in Slurm: " + err.Error(), err
}

// Resume resumes the node when it is drained with this command's reason (and only then: a
// drain an administrator or another check set stays).
func (s Slurm) Resume(ctx context.Context) string {
	node, err := s.node()
	if err != nil {
		return "could not look at the Slurm node: " + err.Error()
	}
	out, code, err := s.Command(ctx, []string{s.Scontrol, "-o", "show", "node", node}, nil)
	if err != nil || code != 0 {
		return fmt.Sprintf("could not read Slurm node %s (exit %d, %v): left as it is", node, code, err)
	}
	state, reason := nodeField(out, "State"), nodeField(out, "Reason")
	if !strings.Contains(state, "DRAIN") || !strings.HasPrefix(reason, DrainPrefix) {
		return ""
	}
	out, code, err = s.Command(ctx, []string{s.Scontrol, "update", "nodename=" + node, "state=resume"}, nil)
	if err != nil || code != 0 {
		return fmt.Sprintf("could not resume Slurm node %s (exit %d, %v): %s", node, code, err, textcut.Head(oneLine(out), 200))
	}
	return fmt.Sprintf("resumed Slurm node %s: it passes again (it was drained with %q)", node, reason)
}

// nodeField reads KEY=value from `scontrol -o show node`: values run to the next " Key=";
// Reason, which may hold spaces, runs to the end or to its " [user@time]" suffix.
func nodeField(out, key string) string {
	i := strings.Index(" "+out, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := out[i+len(key)+1:]
	if key == "Reason" {
		if j := strings.Index(v, " ["); j >= 0 {
			v = v[:j]
		}
		return strings.TrimSpace(v)
	}
	if j := strings.IndexAny(v, " \n"); j >= 0 {
		v = v[:j]
	}
	return v
}

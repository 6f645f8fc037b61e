package nodecheck

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// DrainPrefix starts the reason of every drain this command sets, before the failed check
// ids: `sinfo -R` shows the first 20 characters of a reason by default, so the ids must come
// right after a short marker. The marker is how a later run knows the drain is its own: only
// a drain whose reason starts with it is ever resumed or rewritten (NHC does the same with
// "NHC: ").
const DrainPrefix = "dlami: "

// legacyDrainPrefix started the reason before DrainPrefix: a node drained by an older
// dlami-node-check is still this command's to resume.
const legacyDrainPrefix = "dlami-node-check:"

// SlurmNodeNameEnv is the variable slurmd sets for its HealthCheckProgram to the node's Slurm
// name (SchedMD slurm src/slurmd/slurmd/slurmd.c, run_script_health_check: the program's
// environment holds SLURMD_NODENAME and nothing else).
const SlurmNodeNameEnv = "SLURMD_NODENAME"

// Slurm acts on this node in Slurm with scontrol: the drain a failing check asks for, and the
// resume of a node this command drained once it passes again. It reads the node first and
// never touches a drain it did not set: an operator's drain keeps its reason, and only the
// operator resumes it.
type Slurm struct {
	// Scontrol is Slurm's scontrol, by absolute path.
	Scontrol string
	// Command runs argv (no shell); see Env.Command.
	Command func(ctx context.Context, argv []string, env []string) (out string, code int, err error)
	// Hostname is the node's host name.
	Hostname func() (string, error)
	// Getenv reads this process's environment (SLURMD_NODENAME); nil reads nothing.
	Getenv func(key string) string
	// Simulated marks the drain of a --simulate-failure run: its reason says so
	// (SimulatedDrainReason).
	Simulated bool
}

// DrainReason is the reason a failing check drains the node with: DrainPrefix, then the
// failed check ids.
func DrainReason(failed []string) string {
	return DrainPrefix + strings.Join(failed, ",")
}

// SimulatedDrainReason is the reason of a drain a --simulate-failure run sets: DrainPrefix (the
// drain is this command's, resumed by its next passing run), "simulated", then the ids, e.g.
// "dlami: simulated gpu" (the 20 characters `sinfo -R` shows).
func SimulatedDrainReason(failed []string) string {
	return DrainPrefix + "simulated " + strings.Join(failed, ",")
}

// slurmNodeNameRE is what this command passes to scontrol as a node name: a host name. A
// comma or brackets would make it a host list, and scontrol would act on other nodes.
var slurmNodeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// node is this node's Slurm name and where it came from: SLURMD_NODENAME when slurmd runs the
// command (a node's Slurm name may differ from its host name), else the short host name (the
// boot unit: systemd sets no such variable).
func (s Slurm) node() (name, from string, err error) {
	if s.Getenv != nil {
		if v := s.Getenv(SlurmNodeNameEnv); v != "" {
			if !slurmNodeNameRE.MatchString(v) {
				return "", "", fmt.Errorf("%s=%q is not a Slurm node name (letters, digits, '.', '_', '-')", SlurmNodeNameEnv, v)
			}
			return v, SlurmNodeNameEnv, nil
		}
	}
	h, err := s.Hostname()
	if err != nil {
		return "", "", fmt.Errorf("the host name (no %s in the environment): %w", SlurmNodeNameEnv, err)
	}
	short, _, _ := strings.Cut(strings.TrimSpace(h), ".")
	if !slurmNodeNameRE.MatchString(short) {
		return "", "", fmt.Errorf("the host name %q is not a Slurm node name (and no %s in the environment)", h, SlurmNodeNameEnv)
	}
	return short, "the short host name", nil
}

// read reads the node's state and reason from the controller.
func (s Slurm) read(ctx context.Context, node string) (SlurmNode, error) {
	argv := []string{s.Scontrol, "-o", "show", "node", node}
	out, code, err := s.Command(ctx, argv, nil)
	switch {
	case err != nil:
		return SlurmNode{}, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	case code != 0:
		return SlurmNode{}, fmt.Errorf("%s exited %d: %s", strings.Join(argv, " "), code, textcut.Head(oneLine(out), 300))
	}
	n, err := ParseSlurmNode(out, node)
	if err != nil {
		return SlurmNode{}, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return n, nil
}

// DrainOutcome is what a Drain found and did.
type DrainOutcome struct {
	// Note says it, one line.
	Note string
	// Node is the node's Slurm name ("" when it could not be named).
	Node string
	// Before is the node as read before the drain.
	Before SlurmNode
	// OperatorHold is true when the node was already drained (or failed) with a reason this
	// command did not set: an operator holds it, and it was left as it is.
	OperatorHold bool
}

// Drain drains the node with DrainReason(failed), after reading it: a node drained by the
// operator (or by another check) is left as it is, reason and all (OperatorHold); a node this
// command drained gets the new ids as its reason. err is nil when the node ends up drained
// (by this run, an earlier one or the operator).
func (s Slurm) Drain(ctx context.Context, failed []string) (DrainOutcome, error) {
	node, from, err := s.node()
	if err != nil {
		return DrainOutcome{Note: "could not drain the node in Slurm: " + err.Error()}, err
	}
	d := DrainOutcome{Node: node}
	cur, err := s.read(ctx, node)
	if err != nil {
		err = fmt.Errorf("reading Slurm node %s (named by %s) before draining it: %w", node, from, err)
		d.Note = "could not drain the node in Slurm: " + err.Error() + " (nothing changed)"
		return d, err
	}
	d.Before = cur
	reason := DrainReason(failed)
	if s.Simulated {
		reason = SimulatedDrainReason(failed)
	}
	switch {
	case cur.HeldByOperator():
		d.OperatorHold = true
		how := "drained"
		if !cur.Drained() {
			how = "set DOWN"
		}
		d.Note = fmt.Sprintf("Slurm node %s is %s by the operator (state %s, reason %q%s): left as it is; this run failed %s",
			node, how, cur.State, cur.Reason, cur.setBy(), strings.Join(failed, ","))
		return d, nil
	case cur.Drained() && cur.Reason == reason:
		d.Note = fmt.Sprintf("Slurm node %s stays drained with reason %q", node, reason)
		return d, nil
	}
	argv := []string{s.Scontrol, "update", "nodename=" + node, "state=drain", "reason=" + reason}
	out, code, err := s.Command(ctx, argv, nil)
	if err == nil && code != 0 {
		err = fmt.Errorf("%s exited %d: %s", s.Scontrol, code, textcut.Head(oneLine(out), 300))
	}
	if err != nil {
		d.Note = "could not drain the node in Slurm: " + err.Error()
		return d, err
	}
	if cur.Drained() {
		d.Note = fmt.Sprintf("Slurm node %s (named by %s) stays drained, reason now %q (was %q)", node, from, reason, cur.Reason)
		return d, nil
	}
	d.Note = fmt.Sprintf("drained Slurm node %s (named by %s; it was %s): reason %q", node, from, cur.State, reason)
	return d, nil
}

// Read reads the node named node from the controller (`scontrol -o show node NODE`).
func (s Slurm) Read(ctx context.Context, node string) (SlurmNode, error) {
	return s.read(ctx, node)
}

// Resume resumes the node when this command drained it (and only then: a drain an operator or
// another check set stays, and the note says so). "" when there was nothing to do.
func (s Slurm) Resume(ctx context.Context) string {
	node, from, err := s.node()
	if err != nil {
		return "could not look at the Slurm node: " + err.Error()
	}
	cur, err := s.read(ctx, node)
	if err != nil {
		return fmt.Sprintf("could not read Slurm node %s (named by %s): %v: left as it is", node, from, err)
	}
	switch {
	case !cur.Drained():
		return ""
	case !cur.DrainedByCheck():
		return fmt.Sprintf("Slurm node %s stays drained: drained by the operator (state %s, reason %q%s); the node check resumes only the drains it set",
			node, cur.State, cur.Reason, cur.setBy())
	}
	out, code, err := s.Command(ctx, []string{s.Scontrol, "update", "nodename=" + node, "state=resume"}, nil)
	if err != nil || code != 0 {
		return fmt.Sprintf("could not resume Slurm node %s (exit %d, %v): %s", node, code, err, textcut.Head(oneLine(out), 200))
	}
	return fmt.Sprintf("resumed Slurm node %s (named by %s): it passes again (it was drained with %q)", node, from, cur.Reason)
}

// SlurmNode is one node as `scontrol -o show node NAME` shows it.
type SlurmNode struct {
	Name string
	// State is the state with its flags, e.g. IDLE+DRAIN, MIXED+DRAIN, DOWN+NOT_RESPONDING.
	State string
	// Reason is the reason without Slurm's " [user@time]" suffix; "" when none.
	Reason string
	// ReasonSetBy is that suffix's user@time; "" when none.
	ReasonSetBy string
}

// Drained reports whether the node is drained (DRAIN, DRAINING and DRAINED in Slurm's words)
// or failed by an operator (FAIL, FAILING): out of service until someone resumes it.
func (n SlurmNode) Drained() bool {
	return n.hasFlag("DRAIN", "DRAINING", "DRAINED", "FAIL", "FAILING")
}

// HeldByOperator reports whether someone other than the node check holds the node out of
// service: drained or failed with a reason the node check did not set, or set DOWN with a
// reason by a user other than Slurm itself (an operator's `scontrol update state=down
// reason=...`, "[root@...]"). A DOWN that slurmctld set ("Not responding [slurm@...]") is not a
// hold: the node returns to service when slurmd registers again, so the node check drains it.
func (n SlurmNode) HeldByOperator() bool {
	if n.DrainedByCheck() {
		return false
	}
	if n.Drained() {
		return true
	}
	user, _, _ := strings.Cut(n.ReasonSetBy, "@")
	return n.hasFlag("DOWN") && n.Reason != "" && user != "" && user != slurmUser
}

// slurmUser is the SlurmUser that slurmctld signs its own reasons with ("Not responding
// [slurm@...]"): the Debian and ParallelCluster default.
const slurmUser = "slurm"

// hasFlag reports whether the node's state carries one of flags ("DOWN", "DRAIN"), '*' (not
// responding) aside.
func (n SlurmNode) hasFlag(flags ...string) bool {
	for _, f := range strings.Split(n.State, "+") {
		if slices.Contains(flags, strings.TrimSuffix(f, "*")) {
			return true
		}
	}
	return false
}

// HasJobs reports whether Slurm shows jobs on the node: allocated or mixed (some of its CPUs
// allocated), or completing (a job's epilog still running). A drained node with jobs is
// DRAINING in Slurm's words; one without is DRAINED, which is what AWS ParallelCluster waits
// for before it replaces a node (slurm_resources.py is_drained: DRAIN with IDLE or DOWN, and not
// COMPLETING).
func (n SlurmNode) HasJobs() bool {
	return n.hasFlag("ALLOCATED", "ALLOC", "MIXED", "COMPLETING", "DRAINING")
}

// DrainedByCheck reports whether the node's reason is one this command set (DrainPrefix).
func (n SlurmNode) DrainedByCheck() bool {
	return strings.HasPrefix(n.Reason, DrainPrefix) || strings.HasPrefix(n.Reason, legacyDrainPrefix)
}

func (n SlurmNode) setBy() string {
	if n.ReasonSetBy == "" {
		return ""
	}
	return ", set by " + n.ReasonSetBy
}

// reasonSetByRE is the " [user@time]" scontrol appends to the first line of a reason
// (slurm src/api/node_info.c, slurm_sprint_node_table), e.g. " [root@2026-10-05T12:00:00]".
var reasonSetByRE = regexp.MustCompile(` \[([^\[\]@\s]+@[0-9][0-9T:/ -]*[0-9])\]`)

// ParseSlurmNode reads node's record from `scontrol -o show node NODE`: one line starting
// "NodeName=NODE ", fields "Key=value" separated by spaces; the Reason runs to its
// " [user@time]" (it may hold spaces and anything else), and only the fields before it are
// read as fields. Any other line (a warning scontrol printed) is ignored. A missing record
// or State is an error: the caller must not act on a node it could not read.
func ParseSlurmNode(out, node string) (SlurmNode, error) {
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "NodeName="+node+" ") {
			line = strings.TrimRight(l, " \r")
			break
		}
	}
	if line == "" {
		return SlurmNode{}, fmt.Errorf("no record of node %s in: %s", node, textcut.Head(oneLine(out), 200))
	}
	n := SlurmNode{Name: node}
	fields := line
	if i := strings.Index(line, " Reason="); i >= 0 {
		fields = line[:i]
		rest := line[i+len(" Reason="):]
		if m := reasonSetByRE.FindStringSubmatchIndex(rest); m != nil {
			n.Reason, n.ReasonSetBy = rest[:m[0]], rest[m[2]:m[3]]
		} else {
			n.Reason = rest
		}
		n.Reason = strings.TrimSpace(n.Reason)
	}
	for _, f := range strings.Fields(fields) {
		if v, ok := strings.CutPrefix(f, "State="); ok {
			n.State = v
		}
	}
	if n.State == "" {
		return SlurmNode{}, errors.New("the record of node " + node + " has no State")
	}
	return n, nil
}

package checks

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

func init() {
	register(Entry{
		ID: result.NodeCheck, Phase: PhaseNode, Family: "node", Order: 600, Judge: judgeNodeCheck,
		Doc:   "(first-boot verification only) the node check installed by `node_check` passes on the verification instance; when it fails only `efa-devices` (it judges every instance as a fleet node, whose launch template must attach EFA) on an instance this verification launched without EFA (`efa = \"none\"`), it warns",
		Reads: "`dlami-node-check --mode report --json`",
	})
}

// judgeNodeCheck turns the image's own node check's JSON report into the node-check entry, its
// checks as evidence. A node check that fails fails (but for efa-devices alone on an instance
// this launch attached no EFA to: a warning); one that cannot run or answers nothing readable
// fails too.
func judgeNodeCheck(f facts.Run, t Target) result.Check {
	n := f.NodeCheck
	c := result.Check{ID: result.NodeCheck, Basis: "bill of materials", Expected: "the image's node check passes (dlami-node-check --mode report)"}
	switch {
	case n.Absent:
		c.Status, c.Message = result.Skip, "not run: the image has no node check (the provisioner's node_check block installs it)"
		return c
	case n.TimedOut:
		c.Status, c.Actual, c.Message = result.Fail, "timed out", "the node check did not answer within its timeout"
		return c
	case n.ExitCode != 0 && n.ExitCode != 1:
		c.Status, c.Actual, c.Message = result.Fail, fmt.Sprintf("exit %d", n.ExitCode), "the node check could not run (sudo -n, a missing file?): "+textcut.Head(n.Output, 500)
		c.Evidence = textcut.Head(n.Output, 2000)
		return c
	case n.Unreadable != "":
		c.Status, c.Actual = result.Fail, "unreadable"
		c.Message = fmt.Sprintf("the node check exited %d without a readable JSON report: %s", n.ExitCode, n.Unreadable)
		c.Evidence = textcut.Head(n.Output, 2000)
		return c
	}
	c.Evidence = n.Table
	if n.Result == "pass" && n.ExitCode == 0 {
		c.Status, c.Actual = result.Pass, fmt.Sprintf("pass (%d checks)", len(n.Checks))
		return c
	}
	c.Status, c.Actual = result.Fail, "fail: "+strings.Join(n.Failed, ", ")
	if why := t.efaUnattached(); why != "" && len(n.Failed) == 1 && n.Failed[0] == result.EFADevices {
		// The node check judges every instance as a fleet node, whose launch template can
		// attach EFA; this verification's own launch attached none on purpose (efa = "none", or
		// a node EC2 gave none, which the test across nodes names), so that one failure is
		// this launch's, not the image's: a warning, never a pass.
		c.Status = result.Warn
		c.Message = "the node check fails efa-devices only, as it does on any fleet node without EFA; not judged here: " + why +
			" (a fleet's launch template must declare the EFA network interfaces; a fleet without EFA sets expect.efa_count = -1 or node_check.skip_checks = [\"efa-devices\"])"
		return c
	}
	c.Message = "the node check that every node runs at boot fails on this instance: " + strings.Join(n.Failed, ", ")
	for _, id := range n.Failed {
		if fc, ok := result.Find(n.Checks, id); ok && fc.Message != "" {
			c.Message += "; " + id + ": " + textcut.Head(fc.Message, 300)
			break
		}
	}
	return c
}

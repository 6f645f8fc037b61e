package checks

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/imexctl"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

func init() {
	register(Entry{
		ID: result.IMEXDomain, Phase: PhaseMultiNode, Family: "gpu", Order: 655, Judge: judgeIMEXAcrossTrays,
		Doc: "with `nodes` of 2 or more on a multi-node NVLink type where imex resolves to `host`, the verification forms the IMEX domain across its trays as a Slurm prolog does " +
			"(every node's private address, in the same order, as every node's /etc/nvidia-imex/nodes_config.cfg, then `systemctl restart nvidia-imex` on every node) " +
			"and reads every node's view until all are healthy, a node's service has failed, or 60 s: " +
			"every node's nvidia-imex active and its view UP, listing exactly the nodes written, every node READY and every pair CONNECTED (ParallelCluster's rule); " +
			"a tray that never joins is named with its instance and address, and the all-reduce over multi-node NVLink (nccl-mnnvl) then does not run; " +
			"with `imex = \"dra\"` not judged (the EKS DRA driver forms the domain), with `imex = \"off\"` skipped",
		Reads: "as root on every node: `/etc/nvidia-imex/nodes_config.cfg` written, `systemctl restart nvidia-imex`; then `systemctl is-active nvidia-imex` and `nvidia-imex-ctl -N -j` on every node",
	})
}

// judgeIMEXAcrossTrays judges the IMEX domain the verification formed across its trays.
func judgeIMEXAcrossTrays(f facts.Run, t Target) result.Check {
	mn := f.MultiNode
	x := mn.IMEXDomain
	const id = result.IMEXDomain
	const expected = "every tray's nvidia-imex active with the list of all the trays; every view UP, every node READY, every pair CONNECTED"
	basis, gate, gated := t.acrossTrays(mn, id, expected, "(the trays share no IMEX domain)")
	mode, modeBasis := t.IMEXMode()
	switch {
	case gated:
		return gate
	case mode == settings.IMEXDRA:
		return check(id, result.Warn, modeBasis, expected, "not judged",
			"not judged: imex = \"dra\": the EKS DRA driver's ComputeDomain forms the domain across the trays, which a verification outside Kubernetes does not run; set imex = \"host\" where the host's nvidia-imex owns IMEX (Slurm, ParallelCluster, PCS)", "")
	case mode != settings.IMEXHost:
		return check(id, result.Skip, modeBasis, "not judged", "imex = \"off\"", "skipped: imex = \"off\"", "")
	case mn.Problem != "":
		return check(id, result.Error, basis, expected, "could not run", "the multi-node test could not run: "+mn.Problem, "")
	case !x.Ran:
		return check(id, result.Error, basis, expected, "not brought up", "the IMEX domain across the trays was not brought up: "+cmp.Or(x.NotRun, "the test ended before it"), "")
	case x.Problem != "":
		return check(id, result.Error, basis, expected, "not brought up", "the IMEX domain across the trays could not be brought up: "+x.Problem, "")
	}
	if x.Healthy() {
		return check(id, result.Pass, basis, expected, fmt.Sprintf("domain UP on all %d trays, every pair CONNECTED", len(x.Nodes)),
			fmt.Sprintf("every tray sees the domain of %s UP (waited %s)", strings.Join(x.Addresses, ", "), x.Waited.Round(100*time.Millisecond)), "")
	}
	problems, ev := imexTrayProblems(mn)
	lead := "the IMEX domain across the trays did not come up"
	if culprits := imexCulprits(mn); len(culprits) > 0 {
		lead = fmt.Sprintf("%s never joined the IMEX domain across the trays", strings.Join(culprits, " and "))
	}
	if x.TimedOut {
		lead += fmt.Sprintf(" within %s", x.Bound)
	}
	actual := fmt.Sprintf("%d of %d trays see the domain healthy", healthyViews(x), len(x.Nodes))
	return check(id, result.Fail, basis, expected, actual,
		lead+": "+strings.Join(problems, "; ")+"; without the domain NCCL cannot share GPU memory across the trays (multi-node NVLink jobs fail); every node needs the same nodes_config.cfg, its nvidia-imex running (matching the driver), and TCP "+
			"50000 open between the trays (the security group's rule for its own members)", ev)
}

// imexTrayProblems says, node by node, what went wrong: its configuration, its service, and its
// view of the domain; ev is the views' evidence.
func imexTrayProblems(mn facts.MultiNodeRun) (problems []string, evidence string) {
	x := mn.IMEXDomain
	var ev []string
	for i, n := range x.Nodes {
		who := imexNodeName(mn, i)
		var p []string
		switch {
		case n.Problem != "":
			p = append(p, "could not be configured: "+n.Problem)
		case n.RestartExit != 0:
			p = append(p, fmt.Sprintf("`systemctl restart nvidia-imex` exited %d%s", n.RestartExit, quotedOutput(n.RestartOutput)))
		}
		switch {
		case !n.Active.OK():
			p = append(p, "whether its nvidia-imex runs could not be read: "+n.Active.Problem)
		case n.Active.Value == "failed":
			p = append(p, "its nvidia-imex failed (see `journalctl -u nvidia-imex` and /var/log/nvidia-imex.log: an IMEX package that does not match the driver is the usual cause)")
		case n.Active.Value != "active":
			p = append(p, "its nvidia-imex is "+n.Active.Value)
		case !n.View.OK():
			p = append(p, "its view of the domain could not be read: "+n.View.Problem)
		default:
			v := n.View.Value
			if vp := append(v.Mismatches(x.Addresses), v.Problems()...); len(vp) > 0 {
				p = append(p, "it sees "+firstFew(vp, 4))
			}
		}
		if len(p) > 0 {
			problems = append(problems, who+": "+strings.Join(p, "; "))
		}
		if n.View.Evidence != "" {
			ev = append(ev, who+":\n"+textcut.Tail(n.View.Evidence, 800))
		}
	}
	return problems, strings.Join(ev, "\n")
}

// imexCulprits names the trays that never joined: a tray whose own service is not running or
// could not be configured, and a tray every other readable view sees as not READY or not
// CONNECTED to it. Two trays that each see the other down, both running, name neither: the
// fault lies between them.
func imexCulprits(mn facts.MultiNodeRun) []string {
	x := mn.IMEXDomain
	var out []string
	for k, n := range x.Nodes {
		if n.Problem != "" || n.Active.OK() && n.Active.Value != "active" {
			out = append(out, imexNodeName(mn, k))
			continue
		}
		seen, down := 0, 0
		for i, o := range x.Nodes {
			if i == k || !o.View.OK() {
				continue
			}
			seen++
			if !sees(o.View.Value, k, i) {
				down++
			}
		}
		// Three trays or more: the others agreeing names it. Two trays that each see the other
		// down name neither (the fault lies between them), unless its own view is unreadable.
		if seen > 0 && down == seen && (len(x.Nodes) > 2 || !n.View.OK()) {
			out = append(out, imexNodeName(mn, k))
		}
	}
	return out
}

// sees reports whether view (node from's) shows node k READY and from connected to it.
func sees(view imexctl.Domain, k, from int) bool {
	for _, n := range view.Nodes {
		if n.Index != k {
			continue
		}
		if n.Status != imexctl.NodeReady {
			return false
		}
		for _, m := range view.Nodes {
			if m.Index != from {
				continue
			}
			for _, c := range m.Connections {
				if c.To == k {
					return c.Status == imexctl.ConnConnected
				}
			}
		}
		return false
	}
	return false
}

func healthyViews(x facts.IMEXDomainRun) int {
	n := 0
	for _, node := range x.Nodes {
		if node.Healthy(x.Addresses) {
			n++
		}
	}
	return n
}

// imexNodeName names node i of the test, as the other multi-node checks do.
func imexNodeName(mn facts.MultiNodeRun, i int) string {
	if i < len(mn.Nodes) {
		return nodeName(i, mn.Nodes[i])
	}
	addr := "?"
	if i < len(mn.IMEXDomain.Addresses) {
		addr = mn.IMEXDomain.Addresses[i]
	}
	return fmt.Sprintf("node %d (?, %s)", i+1, addr)
}

// quotedOutput is ": “out”" for a command's output, "" for none.
func quotedOutput(out string) string {
	if out = strings.TrimSpace(out); out == "" {
		return ""
	}
	return fmt.Sprintf(": %q", textcut.Head(out, 300))
}

// firstFew joins the first n items, saying how many more there are.
func firstFew(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

package checks

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

func init() {
	register(Entry{
		ID: result.NCCLMNNVL, Phase: PhaseMultiNode, Family: "nccl", Order: 660, Judge: judgeNCCLMNNVL,
		Doc: "with `nodes` of 2 or more on a multi-node NVLink type (an UltraServer tray such as p6e-gb200.36xlarge: `expect.multi_node_nvlink`, else the profile) the all-reduce across the nodes runs a second time with `NCCL_MNNVL_ENABLE=1` (the first, judged by nccl-multinode, runs with `NCCL_MNNVL_ENABLE=0` there so that it goes over EFA): " +
			"it ran to completion with correct data (`0 OK`) and carried the traffic between the nodes over multi-node NVLink (`via P2P/MNNVL`); a node that connected over the network instead (`via NET/…`: EFA or sockets, NCCL's silent fallback when the fabric or the clique does not hold) fails naming the node and the fallback, and NCCL refusing MNNVL (`MNNVL … is available but not working`: IMEX or its channel) fails saying so; " +
			"not applicable on other types or with fewer than 2 nodes",
		Reads: "`all_reduce_perf` output of the second run across nodes (`NCCL_DEBUG=INFO`, `NCCL_MNNVL_ENABLE=1`)",
	})
}

// MNNVLEnvKey is NCCL's switch of multi-node NVLink: 0 off, 1 required, 2 (its default) on when
// every rank's fabric is Completed with the same ClusterUUID and CliqueId (NVIDIA/nccl
// src/init.cc NCCL_PARAM(MNNVLEnable, "MNNVL_ENABLE", 2), src/mnnvl.cc ncclMnnvlCheck;
// shared/docs/grace-blackwell.md 1.5). The verification sets it on both runs of a multi-node
// NVLink type, over any multi_node.env value: 1 on nccl-mnnvl's run, 0 on nccl-multinode's so
// that its traffic goes over EFA as that check requires.
const MNNVLEnvKey = "NCCL_MNNVL_ENABLE"

// mnnvlTransport is the connection path of NCCL's P2P transport across trays ("via
// P2P/MNNVL/read"), as internal/parse/nccltests names it.
const mnnvlTransport = "P2P/MNNVL"

// mnnvlRefusals are what NCCL prints when MNNVL_ENABLE=1 meets a system where it cannot work:
// ncclMnnvlCheck (src/mnnvl.cc) when the fabric handles cannot be allocated or imported (IMEX
// or its channel), and NCCL before 2.23 (src/init.cc checkMNNVL) whenever MNNVL is unsupported.
var mnnvlRefusals = []string{"is available but not working on this system", "MNNVL is not supported on this system"}

// judgeNCCLMNNVL judges the all-reduce across nodes with NCCL_MNNVL_ENABLE=1.
func judgeNCCLMNNVL(f facts.Run, t Target) result.Check {
	mn := f.MultiNode
	const id = result.NCCLMNNVL
	const expected = "0 OK, every node connected to the others over P2P/MNNVL (multi-node NVLink), none over the network"
	basis, gate, gated := t.acrossTrays(mn, id, expected, "(the nodes meet over EFA only: nccl-multinode judges that)")
	run := mn.MNNVL
	switch {
	case gated:
		return gate
	case mn.Problem != "":
		return check(id, result.Error, basis, expected, "could not run", "the multi-node NCCL test could not run: "+mn.Problem, textcut.Tail(mn.NCCL.Tail, ncclEvidenceMax))
	case run.NotRun != "":
		return check(id, result.Skip, basis, "", "", "not run: "+run.NotRun, "")
	case run.Problem != "":
		return check(id, result.Error, basis, expected, "could not run", "the all-reduce over multi-node NVLink could not run: "+run.Problem, textcut.Tail(run.Tail, ncclEvidenceMax))
	}
	var fails, warns, ev []string
	if i := slices.IndexFunc(mnnvlRefusals, func(s string) bool { return strings.Contains(run.Tail, s) }); i >= 0 {
		fails = append(fails, fmt.Sprintf("NCCL refused multi-node NVLink (%q): the trays share a clique but a fabric memory handle could not be shared between them; check the IMEX domain (nvidia-imex-ctl -N) and channel 0 (/dev/nvidia-caps-imex-channels)", mnnvlRefusals[i]))
		ev = append(ev, refusalLine(run.Tail, mnnvlRefusals[i]))
	}
	if c, done := ncclNotJudged(id, run, basis, expected); done {
		fails = append(fails, "the all-reduce over multi-node NVLink "+strings.TrimPrefix(c.Message, "the NCCL test "))
		ev = append(ev, c.Evidence)
		return check(id, result.Fail, basis, expected, c.Actual, strings.Join(fails, "; "), ncclJoinEvidence(ev))
	}
	corr := ncclCorrectness(run, t.MultiNode.NCCLSettings())
	switch corr.Status {
	case result.Fail, result.Error:
		fails = append(fails, corr.Message)
		ev = append(ev, corr.Evidence)
	case result.Warn:
		warns = append(warns, corr.Message)
	}
	res := run.Result
	tr := res.Transport
	for i, n := range mn.Nodes {
		who := nodeName(i, n)
		if n.HostName == "" {
			fails = append(fails, who+": its host name could not be read, so its NCCL lines cannot be told from the others' (fail closed)")
			continue
		}
		short := ncclHostName(n.HostName)
		k := slices.IndexFunc(res.Hosts, func(h facts.NCCLHost) bool { return ncclHostName(h.Name) == short })
		if k < 0 {
			fails = append(fails, fmt.Sprintf("%s printed no NCCL line as %s: its ranks did not start, or NCCL_DEBUG=INFO did not reach them", who, short))
			continue
		}
		h := res.Hosts[k]
		switch {
		case h.Socket:
			fails = append(fails, who+" fell back to the network over sockets (NET/Socket) instead of multi-node NVLink")
			ev = append(ev, h.SocketLine)
		case h.NetPaths:
			fails = append(fails, fmt.Sprintf("%s fell back to the network (%s) instead of multi-node NVLink: NCCL found no MNNVL clique spanning the nodes (a fabric not Completed, or trays in different cliques or UltraServers)", who, netFallback(h)))
		}
	}
	has := slices.Contains(tr.DataTransports, mnnvlTransport)
	switch {
	case len(tr.DataTransports) == 0:
		fails = append(fails, "NCCL printed no connection line (\"via ...\"): which transport carried the data cannot be told (NCCL_DEBUG=INFO did not reach the ranks, or NCCL failed before connecting)")
	case !has:
		fails = append(fails, "no connection used P2P/MNNVL: the data went over "+tr.DataTransport())
	}
	ev = append(ev, tr.DataLines...)
	actual := cmp.Or(tr.DataTransport(), "no connection line")
	evs := ncclJoinEvidence(ev)
	switch {
	case len(fails) > 0:
		return check(id, result.Fail, basis, expected, actual, strings.Join(fails, "; "), evs)
	case len(warns) > 0:
		return check(id, result.Warn, basis, expected, actual, strings.Join(warns, "; "), evs)
	}
	return check(id, result.Pass, basis, expected, fmt.Sprintf("%d nodes, %s", len(mn.Nodes), actual), "", evs)
}

// netFallback names the network a node's ranks connected over.
func netFallback(h facts.NCCLHost) string {
	if slices.ContainsFunc(h.Networks, isOFINetwork) {
		return "EFA, NET/Libfabric"
	}
	return "NET/" + cmp.Or(strings.Join(h.Networks, "+"), "?")
}

// refusalLine is the first line of out holding s.
func refusalLine(out, s string) string {
	for l := range strings.Lines(out) {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// acrossTrays is where the checks of a test across trays of one NVLink domain (nccl-mnnvl,
// imex-domain) stop before judging: the test across the nodes did not run, or no setting or
// profile says whether the type's NVLink spans trays (a warning naming the setting), or it does
// not (not applicable: notApplicable says what judges those nodes instead). gated is true with
// the check to report; basis is where the answer came from.
func (t Target) acrossTrays(mn facts.MultiNodeRun, id, expected, notApplicable string) (basis string, c result.Check, gated bool) {
	want, basis, known := t.MultiNodeNVLink()
	switch {
	case mn.NotRun != "":
		return basis, check(id, result.Skip, "", "", "", "not run: "+mn.NotRun, ""), true
	case !known:
		return basis, check(id, result.Warn, "", expected, "not judged",
			fmt.Sprintf("not judged: no setting and no profile of %s say whether its NVLink spans trays; set expect.multi_node_nvlink", cmp.Or(t.InstanceType, "this instance type")), ""), true
	case !want:
		return basis, check(id, result.Skip, basis, "", "not applicable", "not applicable: "+basis+" says the GPUs' NVLink does not span trays "+notApplicable, ""), true
	}
	return basis, result.Check{}, false
}

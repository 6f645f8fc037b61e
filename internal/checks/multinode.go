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
		ID: result.NCCLMultiNode, Phase: PhaseMultiNode, Family: "nccl", Order: 650, Judge: judgeNCCLMultiNode,
		Doc:   "with `nodes` of 2 or more, the all-reduce across the nodes ran to completion with correct data (`Out of bounds values : 0 OK`, no `#wrong`); every node's ranks used aws-ofi-nccl over EFA with GPUDirect RDMA (`via NET/Libfabric/…/GDRDMA`; a socket fallback or a connection without GDRDMA fails, naming the node), aws-ofi-nccl found as many NICs on each node as its launch attached EFA interfaces, each node ran its share of the ranks (a node's lines are told by its host name up to the first dot, as NCCL prints it: fully qualified host names match; a node that printed no line fails), no node logged an Xid during the run, the run ended within `multi_node.timeout` (a stall fails, and every rank on every node is stopped), and the inter-node busbw at the largest size reached `multi_node.busbw_floor_gbps` or the type's published 2-node figure (else it warns)",
		Reads: "`all_reduce_perf` output of the run across nodes (`NCCL_DEBUG=INFO`), each node's kernel log around it",
	})
}

// MultiNodeExpect is what the multi-node check compares against.
type MultiNodeExpect struct {
	// BusBWFloorGBps is the floor at the largest size (0 = none: warn); FloorBasis where it
	// comes from; FloorBytes the smallest largest size the floor holds at (0 = any).
	BusBWFloorGBps float64
	FloorBasis     string
	FloorBytes     int64
}

// MultiNodeExpect resolves the multi-node floor: multi_node.busbw_floor_gbps, else the
// instance type's published 2-node figure for a test on 2 nodes.
func (t Target) MultiNodeExpect() MultiNodeExpect {
	if t.MultiNode.BusBWFloorGBps > 0 {
		return MultiNodeExpect{BusBWFloorGBps: t.MultiNode.BusBWFloorGBps, FloorBasis: BasisSetting}
	}
	if p := t.Profile; p != nil && p.TwoNodeBusBWFloorGBps > 0 && t.MultiNode.Nodes == 2 {
		return MultiNodeExpect{BusBWFloorGBps: p.TwoNodeBusBWFloorGBps, FloorBasis: t.profileName(), FloorBytes: p.TwoNodeFloorBytes}
	}
	return MultiNodeExpect{}
}

// judgeNCCLMultiNode judges the NCCL test across nodes: every finding names its node.
func judgeNCCLMultiNode(f facts.Run, t Target) result.Check {
	mn := f.MultiNode
	const id = result.NCCLMultiNode
	expected := "0 OK on every rank, NET/Libfabric with GDRDMA on every node, no Xid, busbw at the floor"
	switch {
	case mn.NotRun != "":
		return check(id, result.Skip, "", "", "", "not run: "+mn.NotRun, "")
	case mn.Problem != "":
		return check(id, result.Error, "", expected, "could not run", "the multi-node NCCL test could not run: "+mn.Problem, textcut.Tail(mn.NCCL.Tail, ncclEvidenceMax))
	}
	run := mn.NCCL
	j := multiNodeJudging{mn: mn, t: t}
	if c, done := ncclNotJudged(id, run, BasisRule, expected); done {
		c.ID = id
		if run.TimedOut {
			c.Message = "the multi-node NCCL test stalled: " + c.Message + "; " + stallHint(t)
		}
		j.fails = append(j.fails, c.Message)
		j.evidence = append(j.evidence, c.Evidence)
		j.nodesAfter()
		if run.TimedOut && j.allStopped() {
			j.fails = append(j.fails, fmt.Sprintf("its processes were stopped on all %d nodes (none left)", len(mn.Nodes)))
		}
		return j.verdict(c.Actual, expected)
	}
	corr := ncclCorrectness(run, t.MultiNode.NCCLSettings())
	switch corr.Status {
	case result.Fail:
		j.fails = append(j.fails, corr.Message)
		j.evidence = append(j.evidence, corr.Evidence)
	case result.Warn:
		j.warns = append(j.warns, corr.Message)
	}
	j.transport()
	j.nodesAfter()
	bw := j.busBW()
	actual := fmt.Sprintf("%d nodes × %s ranks, %s", len(mn.Nodes), cmp.Or(run.Ranks, "?"), bw)
	return j.verdict(actual, expected)
}

// multiNodeJudging collects the findings of one multi-node run.
type multiNodeJudging struct {
	mn                     facts.MultiNodeRun
	t                      Target
	fails, warns, evidence []string
}

func (j *multiNodeJudging) verdict(actual, expected string) result.Check {
	ev := ncclJoinEvidence(j.evidence)
	switch {
	case len(j.fails) > 0:
		return check(result.NCCLMultiNode, result.Fail, BasisRule, expected, actual, strings.Join(j.fails, "; "), ev)
	case len(j.warns) > 0:
		return check(result.NCCLMultiNode, result.Warn, BasisRule, expected, actual, strings.Join(j.warns, "; "), ev)
	}
	return check(result.NCCLMultiNode, result.Pass, BasisRule, expected, actual, "", ev)
}

// nodeName names a node in a message: "node 2 (i-0abc…, 10.0.1.6)".
func nodeName(i int, n facts.MultiNodeNode) string {
	return fmt.Sprintf("node %d (%s, %s)", i+1, cmp.Or(n.InstanceID, "?"), cmp.Or(n.Address, "?"))
}

// transport judges each node's own NCCL lines.
func (j *multiNodeJudging) transport() {
	res := j.mn.NCCL.Result
	names := map[string]int{}
	dup := map[int]bool{}
	for i, n := range j.mn.Nodes {
		if n.HostName == "" {
			j.fails = append(j.fails, nodeName(i, n)+": its host name could not be read, so its NCCL lines cannot be told from the others' (fail closed)")
			continue
		}
		short := ncclHostName(n.HostName)
		if k, seen := names[short]; seen {
			j.fails = append(j.fails, fmt.Sprintf("%s (%q) and %s (%q) both appear in NCCL's lines as %q: their NCCL lines cannot be told apart", nodeName(k, j.mn.Nodes[k]), j.mn.Nodes[k].HostName, nodeName(i, n), n.HostName, short))
			dup[i], dup[k] = true, true
			continue
		}
		names[short] = i
	}
	perNode := 0
	fmt.Sscanf(j.mn.NCCL.Ranks, "%d", &perNode)
	for i, n := range j.mn.Nodes {
		if n.HostName == "" || dup[i] {
			continue
		}
		who := nodeName(i, n)
		short := ncclHostName(n.HostName)
		k := slices.IndexFunc(res.Hosts, func(h facts.NCCLHost) bool { return ncclHostName(h.Name) == short })
		if k < 0 {
			as := short
			if short != n.HostName {
				as = fmt.Sprintf("%s (its host name %s up to the first dot, as NCCL prints it)", short, n.HostName)
			}
			j.fails = append(j.fails, fmt.Sprintf("%s printed no NCCL line as %s: its ranks did not start, or NCCL_DEBUG=INFO did not reach them", who, as))
			continue
		}
		h := res.Hosts[k]
		noEFA := ""
		if n.EFA == 0 {
			noEFA = " (its launch attached no EFA interface)"
		}
		switch {
		case h.Socket:
			j.fails = append(j.fails, fmt.Sprintf("%s fell back to sockets (NET/Socket)%s: its traffic between nodes went over TCP at a fraction of EFA's bandwidth", who, noEFA))
			j.evidence = append(j.evidence, h.SocketLine)
		case !h.OFIPlugin:
			j.fails = append(j.fails, fmt.Sprintf("%s: aws-ofi-nccl did not load (no NET/OFI line)%s", who, noEFA))
		case !slices.ContainsFunc(h.Networks, isOFINetwork):
			j.fails = append(j.fails, fmt.Sprintf("%s used network %s, not aws-ofi-nccl's Libfabric", who, cmp.Or(strings.Join(h.Networks, "+"), "(none printed)")))
		case !h.NetPaths:
			j.fails = append(j.fails, fmt.Sprintf("%s printed no connection over the network (no \"via NET/\" line): its ranks never connected to the other nodes", who))
		case h.NoGDRDMALine != "" || !h.GDRDMA:
			j.fails = append(j.fails, fmt.Sprintf("%s connected without GPUDirect RDMA (a \"via NET/\" path without /GDRDMA): the data was staged through host memory (nvidia-peermem or DMA-BUF missing)", who))
			j.evidence = append(j.evidence, h.NoGDRDMALine)
		}
		switch {
		case h.NICs == nil:
			j.warns = append(j.warns, fmt.Sprintf("%s: aws-ofi-nccl did not print how many NICs it found (\"found N nics\"), so the count is not judged", who))
		case *h.NICs != n.EFA:
			j.fails = append(j.fails, fmt.Sprintf("%s: aws-ofi-nccl found %d NICs, its launch attached %d EFA interfaces", who, *h.NICs, n.EFA))
		}
		if perNode > 0 && len(h.Ranks) != perNode {
			j.fails = append(j.fails, fmt.Sprintf("%s completed NCCL init for %d ranks, want %d", who, len(h.Ranks), perNode))
		}
	}
	if want := perNode * len(j.mn.Nodes); perNode > 0 && res.NRanks != 0 && res.NRanks != want {
		j.fails = append(j.fails, fmt.Sprintf("the communicator had %d ranks, want %d (%d nodes × %d)", res.NRanks, want, len(j.mn.Nodes), perNode))
	}
}

// ncclHostName is a host name as NCCL prints it at the head of its lines: cut at the first dot
// (src/debug.cc caches it with getHostName(hostname, 1024, '.'), which stops at the first
// delimiter), so a node whose kernel host name is
// "ip-10-0-1-5.ec2.internal" prints "ip-10-0-1-5:pid:tid". Both sides of the comparison go
// through it: a log that does print a full name matches too.
func ncclHostName(name string) string {
	short, _, _ := strings.Cut(strings.TrimSpace(name), ".")
	return short
}

func isOFINetwork(n string) bool { return n == "Libfabric" || n == "AWS Libfabric" }

// nodesAfter judges what each node showed after the run: an Xid logged during it, and
// processes of the test left running.
func (j *multiNodeJudging) nodesAfter() {
	for i, n := range j.mn.Nodes {
		who := nodeName(i, n)
		if n.Mark == nil {
			j.fails = append(j.fails, who+": its kernel log was not read before the test, so an Xid during it cannot be told from an earlier one (fail closed)")
		} else if c := xidSince(n.KernelLog, n.KernelJournal, *n.Mark, j.t); c.Status == result.Fail || c.Status == result.Error {
			j.fails = append(j.fails, who+": "+c.Message)
			j.evidence = append(j.evidence, c.Evidence)
		}
		switch {
		case n.StopProblem != "":
			j.fails = append(j.fails, who+": the test's processes could not be stopped: "+n.StopProblem)
		case n.Left > 0:
			j.fails = append(j.fails, fmt.Sprintf("%s: %d of the test's processes were still running after they were killed", who, n.Left))
		}
	}
}

// allStopped reports whether every node was looked at after the stop and showed nothing left.
func (j *multiNodeJudging) allStopped() bool {
	for _, n := range j.mn.Nodes {
		if n.Left != 0 || n.StopProblem != "" {
			return false
		}
	}
	return len(j.mn.Nodes) > 0
}

// busBW judges the inter-node bus bandwidth at the largest size; it returns the figure for
// the check's actual value.
func (j *multiNodeJudging) busBW() string {
	res := j.mn.NCCL.Result
	x := j.t.MultiNodeExpect()
	l := res.Largest
	if l == nil || l.OutOfPlace.BusBW == nil {
		j.fails = append(j.fails, "the test printed no busbw at its largest size: there is no bandwidth to judge")
		return "no busbw"
	}
	bw := *l.OutOfPlace.BusBW
	actual := fmt.Sprintf("busbw %s GB/s at %s", ncclNum(bw), ncclSize(l.SizeBytes))
	j.evidence = append(j.evidence, l.Line)
	switch {
	case x.BusBWFloorGBps <= 0:
		j.warns = append(j.warns, fmt.Sprintf("busbw not judged: no published %d-node figure for %s; set multi_node.busbw_floor_gbps (2 × p5.48xlarge reach about 440 GB/s at 2 GiB)", len(j.mn.Nodes), cmp.Or(j.t.InstanceType, "this instance type")))
	case x.FloorBytes > 0 && l.SizeBytes < x.FloorBytes:
		j.warns = append(j.warns, fmt.Sprintf("busbw not judged: the type's published figure is at %s and the test stopped at %s; raise multi_node.max_bytes or set multi_node.busbw_floor_gbps", ncclSize(x.FloorBytes), ncclSize(l.SizeBytes)))
	case bw < x.BusBWFloorGBps:
		j.fails = append(j.fails, fmt.Sprintf("inter-node busbw %s GB/s is below the floor of %s GB/s (%s): EFA devices missing or slow, a placement far apart, or a fallback on some connections", ncclNum(bw), ncclNum(x.BusBWFloorGBps), x.FloorBasis))
	}
	return actual
}

// stallHint says what stalls a collective across nodes.
func stallHint(t Target) string {
	groups := "the verification's security groups"
	if len(t.Launch.SecurityGroups) > 0 {
		groups = strings.Join(t.Launch.SecurityGroups, ", ")
	}
	return "a collective across nodes that never finishes is most often EFA traffic the security groups do not let through: " + groups + " must allow all traffic to and from the group itself, inbound and outbound"
}

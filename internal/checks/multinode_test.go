package checks

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// twoNodeLog is a 2-node p5.48xlarge run as nccl-tests 2.19 and NCCL 2.27 print it under mpirun
// --tag-output (the shape of the awsome-distributed-training runs), with edit applied to
// each node's lines: its hosts are a and b, 8 ranks each, found nics 32.
func twoNodeLog(busbw string, edit func(host string, line string) string) string {
	var b strings.Builder
	b.WriteString("@@DLAMI-NCCL BINARY /usr/local/cuda-13.2/efa/test-cuda-13.2/all_reduce_perf\n@@DLAMI-NCCL RANKS 8\n@@DLAMI-NCCL NODES 2\n")
	b.WriteString("[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8 maxBytes 2147483648 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0\n")
	for n, host := range []string{"ip-10-0-1-5", "ip-10-0-1-6"} {
		for r := n * 8; r < n*8+8; r++ {
			lines := []string{
				"NET/OFI Initializing aws-ofi-nccl 1.16.3",
				"NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)",
				"Using network Libfabric",
				fmt.Sprintf("Channel 00/0 : %d[%d] -> %d[%d] [send] via NET/Libfabric/%d/GDRDMA", r, r%8, (r+8)%16, r%8, r%8),
				fmt.Sprintf("ncclCommInitRankConfig comm 0x55 rank %d nranks 16 cudaDev %d nvmlDev %d busId 53000 commId 0x9f - Init COMPLETE", r, r%8, r%8),
			}
			for _, l := range lines {
				line := fmt.Sprintf("[1,%d]<stdout>:%s:%d:%d [%d] NCCL INFO %s", r, host, 100+r, 100+r, r%8, l)
				if edit != nil {
					line = edit(host, line)
				}
				if line != "" {
					b.WriteString(line + "\n")
				}
			}
		}
	}
	b.WriteString("[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong \n")
	b.WriteString("[1,0]<stdout>:#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         \n")
	b.WriteString("[1,0]<stdout>:  1073741824     268435456     float     sum      -1   6426.3  167.09  313.29      0   6426.1  167.09  313.29      0\n")
	fmt.Fprintf(&b, "[1,0]<stdout>:  2147483648     536870912     float     sum      -1   9197.5  233.49  %s      0   9195.2  233.54  %s      0\n", busbw, busbw)
	b.WriteString("[1,0]<stdout>:# Out of bounds values : 0 OK\n[1,0]<stdout>:# Avg bus bandwidth    : 52.9753\n")
	return b.String()
}

func twoNodes(t *testing.T, log string, code int, timedOut bool) facts.MultiNodeRun {
	t.Helper()
	mark := facts.Mark{Position: probe.ReadKernelLog(healthyLog, "boot-1").End(), During: "during the multi-node NCCL test"}
	node := func(id, addr, host string) facts.MultiNodeNode {
		return facts.MultiNodeNode{InstanceID: id, Address: addr, InstanceType: "p5.48xlarge", HostName: host, EFA: 32,
			Mark: &mark, KernelLog: facts.Read(probe.ReadKernelLog(healthyLog, "boot-1"), ""), KernelJournal: journalOf(t), Left: 0}
	}
	return facts.MultiNodeRun{Setting: "nodes = 2",
		Nodes: []facts.MultiNodeNode{node("i-0aaa", "10.0.1.5", "ip-10-0-1-5"), node("i-0bbb", "10.0.1.6", "ip-10-0-1-6")},
		NCCL:  probe.ParseNCCLRun(log, code, timedOut, 10*time.Minute)}
}

func p5Target(floor float64) Target {
	p, _ := profile.Lookup("p5.48xlarge")
	return Target{InstanceType: "p5.48xlarge", Profile: &p, Checks: settings.Checks{MultiNode: settings.MultiNode{Nodes: 2, BusBWFloorGBps: floor}},
		Launch: Launch{Known: true, EFA: 32, SecurityGroups: []string{"sg-0efa"}}}
}

func TestJudgeNCCLMultiNode(t *testing.T) {
	dropNode2 := func(pat string) func(string, string) string {
		return func(host, l string) string {
			if host == "ip-10-0-1-6" && strings.Contains(l, pat) {
				return ""
			}
			return l
		}
	}
	onNode2 := func(from, to string) func(string, string) string {
		return func(host, l string) string {
			if host == "ip-10-0-1-6" {
				return strings.ReplaceAll(l, from, to)
			}
			return l
		}
	}
	xidOn2 := func(mn *facts.MultiNodeRun) {
		log := healthyLog + "\n[ 9000.000001] NVRM: Xid (PCI:0000:62:00): 79, pid=4242, name=all_reduce_perf, GPU has fallen off the bus."
		mn.Nodes[1].KernelLog = facts.Read(probe.ReadKernelLog(log, "boot-1"), "")
	}
	tests := []struct {
		name     string
		log      string
		code     int
		timedOut bool
		floor    float64
		change   func(*facts.MultiNodeRun)
		want     result.Status
		says     []string
	}{
		{name: "healthy: the published p5 figure judges", log: twoNodeLog("437.79", nil), want: result.Pass},
		{name: "below the published figure", log: twoNodeLog("120.5", nil), want: result.Fail, says: []string{"below the floor of 350 GB/s"}},
		{name: "the setting's floor", log: twoNodeLog("437.79", nil), floor: 450, want: result.Fail, says: []string{"below the floor of 450"}},
		{name: "node 2 fell back to sockets", log: twoNodeLog("437.79", onNode2("Using network Libfabric", "Using network Socket")), want: result.Fail,
			says: []string{"node 2 (i-0bbb, 10.0.1.6) fell back to sockets"}},
		{name: "node 2 without GDRDMA", log: twoNodeLog("437.79", onNode2("/GDRDMA", "")), want: result.Fail,
			says: []string{"node 2 (i-0bbb, 10.0.1.6) connected without GPUDirect RDMA"}},
		{name: "node 2 found 16 nics of 32", log: twoNodeLog("437.79", onNode2("found 32 nics", "found 16 nics")), want: result.Fail,
			says: []string{"node 2 (i-0bbb, 10.0.1.6): aws-ofi-nccl found 16 NICs, its launch attached 32"}},
		{name: "node 2's ranks never started", log: twoNodeLog("437.79", dropNode2("")), want: result.Fail,
			says: []string{"node 2 (i-0bbb, 10.0.1.6) printed no NCCL line"}},
		{name: "node 2 ran 7 ranks", log: twoNodeLog("437.79", func(host, l string) string {
			if host == "ip-10-0-1-6" && strings.Contains(l, "rank 15 ") {
				return ""
			}
			return l
		}), want: result.Fail, says: []string{"completed NCCL init for 7 ranks, want 8"}},
		{name: "an Xid on node 2 during the run", log: twoNodeLog("437.79", nil), change: xidOn2, want: result.Fail,
			says: []string{"node 2 (i-0bbb, 10.0.1.6): ", "Xid 79"}},
		{name: "stalled: names the security group", log: twoNodeLog("437.79", nil)[:400], code: 124, timedOut: true, want: result.Fail,
			says: []string{"stalled", "sg-0efa must allow all traffic to and from the group itself", "stopped on all 2 nodes (none left)"}},
		{name: "a rank left running on node 2", log: twoNodeLog("437.79", nil), change: func(mn *facts.MultiNodeRun) { mn.Nodes[1].Left = 3 },
			want: result.Fail, says: []string{"node 2 (i-0bbb, 10.0.1.6): 3 of the test's processes were still running"}},
		{name: "host name unreadable: fail closed", log: twoNodeLog("437.79", nil), change: func(mn *facts.MultiNodeRun) { mn.Nodes[0].HostName = "" },
			want: result.Fail, says: []string{"node 1 (i-0aaa, 10.0.1.5): its host name could not be read"}},
		{name: "no kernel log mark: fail closed", log: twoNodeLog("437.79", nil), change: func(mn *facts.MultiNodeRun) { mn.Nodes[1].Mark = nil },
			want: result.Fail, says: []string{"node 2", "was not read before the test"}},
		{name: "wrong values", log: strings.Replace(twoNodeLog("437.79", nil), "0 OK", "3 FAILED", 1), code: 1, want: result.Fail, says: []string{"wrong values"}},
		{name: "no figure for the type: warns", log: twoNodeLog("437.79", nil), change: nil, want: result.Warn, says: []string{"set multi_node.busbw_floor_gbps"}},
		{name: "not run", change: func(mn *facts.MultiNodeRun) { mn.NotRun = "node 2 failed its first-boot verification (gpu)" }, want: result.Skip,
			says: []string{"not run: node 2 failed"}},
		{name: "could not run", change: func(mn *facts.MultiNodeRun) { mn.Problem = "installing the test's key on node 2: connection refused" }, want: result.Error,
			says: []string{"could not run: installing the test's key"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mn := twoNodes(t, tc.log, tc.code, tc.timedOut)
			if tc.change != nil {
				tc.change(&mn)
			}
			tg := p5Target(tc.floor)
			if tc.name == "no figure for the type: warns" {
				tg.Profile, tg.InstanceType = nil, "p5en.48xlarge"
			}
			cs := JudgePhase(PhaseMultiNode, facts.Run{MultiNode: mn}, tg)
			if len(cs) != 3 || cs[0].ID != result.NCCLMultiNode || cs[1].ID != result.IMEXDomain || cs[2].ID != result.NCCLMNNVL {
				t.Fatalf("checks %+v", cs)
			}
			c := cs[0]
			if c.Status != tc.want {
				t.Errorf("status %s, want %s: %s", c.Status, tc.want, c.Message)
			}
			for _, s := range tc.says {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message lacks %q: %s", s, c.Message)
				}
			}
		})
	}
}

// Nodes whose kernel host names are fully qualified (custom DHCP options, Active Directory):
// NCCL prints each name cut at its first dot, so the judge compares the names the same way.
// Both forms pass a healthy run; a node that printed nothing still fails, under either form.
func TestJudgeNCCLMultiNodeHostNames(t *testing.T) {
	silentNode2 := func(host, l string) string {
		if host == "ip-10-0-1-6" {
			return ""
		}
		return l
	}
	tests := []struct {
		name         string
		hosts        [2]string
		log          string
		want         result.Status
		says, absent []string
	}{
		{name: "short names", hosts: [2]string{"ip-10-0-1-5", "ip-10-0-1-6"}, log: twoNodeLog("437.79", nil), want: result.Pass},
		{name: "fully qualified names", hosts: [2]string{"ip-10-0-1-5.ec2.internal", "ip-10-0-1-6.ec2.internal"}, log: twoNodeLog("437.79", nil), want: result.Pass},
		{name: "one of each", hosts: [2]string{"ip-10-0-1-5.corp.example.com", "ip-10-0-1-6"}, log: twoNodeLog("437.79", nil), want: result.Pass},
		{name: "a log that prints the full name", hosts: [2]string{"ip-10-0-1-5.ec2.internal", "ip-10-0-1-6.ec2.internal"},
			log: strings.ReplaceAll(twoNodeLog("437.79", nil), "<stdout>:ip-10-0-1-6:", "<stdout>:ip-10-0-1-6.ec2.internal:"), want: result.Pass},
		{name: "fully qualified, node 2 printed nothing", hosts: [2]string{"ip-10-0-1-5.ec2.internal", "ip-10-0-1-6.ec2.internal"},
			log: twoNodeLog("437.79", silentNode2), want: result.Fail,
			says:   []string{"node 2 (i-0bbb, 10.0.1.6) printed no NCCL line as ip-10-0-1-6 (its host name ip-10-0-1-6.ec2.internal up to the first dot"},
			absent: []string{"node 1 (i-0aaa"}},
		{name: "short, node 2 printed nothing", hosts: [2]string{"ip-10-0-1-5", "ip-10-0-1-6"}, log: twoNodeLog("437.79", silentNode2), want: result.Fail,
			says: []string{"node 2 (i-0bbb, 10.0.1.6) printed no NCCL line as ip-10-0-1-6:"}},
		{name: "two names alike up to the dot cannot be told apart", hosts: [2]string{"node.a.example.com", "node.b.example.com"},
			log: twoNodeLog("437.79", nil), want: result.Fail, says: []string{"both appear in NCCL's lines as \"node\""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mn := twoNodes(t, tc.log, 0, false)
			mn.Nodes[0].HostName, mn.Nodes[1].HostName = tc.hosts[0], tc.hosts[1]
			c := judgeNCCLMultiNode(facts.Run{MultiNode: mn}, p5Target(0))
			if c.Status != tc.want {
				t.Errorf("status %s, want %s: %s", c.Status, tc.want, c.Message)
			}
			for _, s := range tc.says {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message lacks %q: %s", s, c.Message)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(c.Message, s) {
					t.Errorf("message names %q: %s", s, c.Message)
				}
			}
		})
	}
}

// The real 2 × p4d.24xlarge log (Kubernetes pods nccl-tests-efa-16-worker-0/1) with the pods'
// fully qualified names as their kernel host names: the same verdict as with the short names.
func TestJudgeNCCLMultiNodeRealP4dLogFQDN(t *testing.T) {
	log := "@@DLAMI-NCCL RANKS 8\n@@DLAMI-NCCL NODES 2\n" + fixture.Read(t, "p4d-2node-efa-nccl2.9.9-mpi-tagged.txt")
	p, _ := profile.Lookup("p4d.24xlarge")
	tg := Target{InstanceType: "p4d.24xlarge", Profile: &p, Checks: settings.Checks{MultiNode: settings.MultiNode{Nodes: 2}}}
	for _, suffix := range []string{"", ".nccl-tests-efa-16-worker.default.svc.cluster.local"} {
		mn := twoNodes(t, log, 0, false)
		mn.Nodes[0].HostName, mn.Nodes[1].HostName = "nccl-tests-efa-16-worker-0"+suffix, "nccl-tests-efa-16-worker-1"+suffix
		mn.Nodes[0].EFA, mn.Nodes[1].EFA = 4, 4
		c := judgeNCCLMultiNode(facts.Run{MultiNode: mn}, tg)
		if c.Status != result.Warn || strings.Contains(c.Message, "printed no NCCL line") {
			t.Errorf("suffix %q: %s: %s", suffix, c.Status, c.Message)
		}
	}
}

// The real 2 × p4d.24xlarge log: this aws-ofi-nccl prints no NIC count and p4d has no published
// 2-node figure, so the check warns on both rather than passing what it did not judge.
func TestJudgeNCCLMultiNodeRealP4dLog(t *testing.T) {
	log := "@@DLAMI-NCCL RANKS 8\n@@DLAMI-NCCL NODES 2\n" + fixture.Read(t, "p4d-2node-efa-nccl2.9.9-mpi-tagged.txt")
	mn := twoNodes(t, log, 0, false)
	mn.Nodes[0].HostName, mn.Nodes[1].HostName = "nccl-tests-efa-16-worker-0", "nccl-tests-efa-16-worker-1"
	mn.Nodes[0].EFA, mn.Nodes[1].EFA = 4, 4
	p, _ := profile.Lookup("p4d.24xlarge")
	tg := Target{InstanceType: "p4d.24xlarge", Profile: &p, Checks: settings.Checks{MultiNode: settings.MultiNode{Nodes: 2}}}
	c := judgeNCCLMultiNode(facts.Run{MultiNode: mn}, tg)
	if c.Status != result.Warn || !strings.Contains(c.Message, "did not print how many NICs") || !strings.Contains(c.Message, "set multi_node.busbw_floor_gbps") {
		t.Errorf("%s: %s", c.Status, c.Message)
	}
	if !strings.Contains(c.Actual, "busbw 43.81 GB/s at 4 GiB") {
		t.Errorf("actual %q", c.Actual)
	}
}

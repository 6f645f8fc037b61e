package checks

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// mnnvlLog is a 2-tray p6e-gb200.36xlarge run with NCCL_MNNVL_ENABLE=1 as NCCL 2.27 prints it
// under mpirun --tag-output: 4 ranks per tray, the connections between the trays "via
// P2P/MNNVL/read" (NVIDIA/nccl src/transport/p2p.cc names the MNNVL flavour of its P2P
// transport; the project's parser test has the path), with edit applied to each tray's lines.
func mnnvlLog(edit func(host, line string) string) string {
	var b strings.Builder
	b.WriteString("@@DLAMI-NCCL BINARY /usr/local/cuda-13.0/efa/test-cuda-13.0/all_reduce_perf\n@@DLAMI-NCCL RANKS 4\n@@DLAMI-NCCL NODES 2\n")
	b.WriteString("[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8 maxBytes 2147483648 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0\n")
	for n, host := range []string{"ip-10-0-1-5", "ip-10-0-1-6"} {
		for r := n * 4; r < n*4+4; r++ {
			lines := []string{
				"NET/OFI Initializing aws-ofi-nccl 1.16.3",
				"NET/OFI Selected provider is efa, fabric is efa-direct (found 4 nics)",
				"Using network Libfabric",
				"MNNVL 1 cliqueId fba cliqueSize 8 cliqueRank " + fmt.Sprint(r),
				fmt.Sprintf("Channel 00/0 : %d[%d] -> %d[%d] via P2P/MNNVL/read", r, r%4, (r+4)%8, r%4),
				fmt.Sprintf("ncclCommInitRankConfig comm 0x55 rank %d nranks 8 cudaDev %d nvmlDev %d busId 8000 commId 0x9f - Init COMPLETE", r, r%4, r%4),
			}
			for _, l := range lines {
				line := fmt.Sprintf("[1,%d]<stdout>:%s:%d:%d [%d] NCCL INFO %s", r, host, 100+r, 100+r, r%4, l)
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
	b.WriteString("[1,0]<stdout>:  2147483648     536870912     float     sum      -1   4197.5  511.60  895.30      0   4195.2  511.90  895.83      0\n")
	b.WriteString("[1,0]<stdout>:# Out of bounds values : 0 OK\n[1,0]<stdout>:# Avg bus bandwidth    : 52.9753\n")
	return b.String()
}

func gb200Target(nodes int) Target {
	p, _ := profile.Lookup("p6e-gb200.36xlarge")
	return Target{InstanceType: "p6e-gb200.36xlarge", Profile: &p, Checks: settings.Checks{MultiNode: settings.MultiNode{Nodes: nodes}},
		Launch: Launch{Known: true, EFA: 4, SecurityGroups: []string{"sg-0efa"}}}
}

func TestJudgeNCCLMNNVL(t *testing.T) {
	onNode2 := func(from, to string) func(string, string) string {
		return func(host, l string) string {
			if host == "ip-10-0-1-6" {
				return strings.ReplaceAll(l, from, to)
			}
			return l
		}
	}
	everywhere := func(from, to string) func(string, string) string {
		return func(_, l string) string { return strings.ReplaceAll(l, from, to) }
	}
	p5, _ := profile.Lookup("p5.48xlarge")
	no, yes := false, true
	tests := []struct {
		name   string
		log    string
		code   int
		target func(*Target)
		change func(*facts.MultiNodeRun)
		want   result.Status
		says   []string
	}{
		{name: "healthy: P2P/MNNVL between the trays", log: mnnvlLog(nil), want: result.Pass},
		{name: "fell back to EFA on every tray", log: mnnvlLog(everywhere("via P2P/MNNVL/read", "[send] via NET/Libfabric/0/GDRDMA")), want: result.Fail,
			says: []string{"node 1 (i-0aaa, 10.0.1.5) fell back to the network (EFA, NET/Libfabric)", "node 2 (i-0bbb, 10.0.1.6) fell back", "no connection used P2P/MNNVL: the data went over NET/Libfabric"}},
		{name: "tray 2 fell back to EFA", log: mnnvlLog(onNode2("via P2P/MNNVL/read", "[send] via NET/Libfabric/0/GDRDMA")), want: result.Fail,
			says: []string{"node 2 (i-0bbb, 10.0.1.6) fell back to the network (EFA, NET/Libfabric)"}},
		{name: "tray 2 over sockets", log: mnnvlLog(onNode2("via P2P/MNNVL/read", "[send] via NET/Socket/0")), want: result.Fail,
			says: []string{"node 2 (i-0bbb, 10.0.1.6) fell back to the network over sockets"}},
		{name: "NCCL refused MNNVL (IMEX)", code: 1,
			log:  mnnvlLog(nil)[:300] + "[1,0]<stdout>:ip-10-0-1-5:100:100 [0] transport/nvls.cc:0 NCCL WARN MNNVL (cliqueSize 8) is available but not working on this system. Check the IMEX configuration (nvidia-imex-ctl -N). Set NCCL_MNNVL_ENABLE=0 to ignore this issue.\n",
			want: result.Fail, says: []string{"NCCL refused multi-node NVLink", "nvidia-imex-ctl -N"}},
		{name: "wrong values", log: strings.Replace(mnnvlLog(nil), "0 OK", "3 FAILED", 1), code: 1, want: result.Fail, says: []string{"wrong values"}},
		{name: "no connection line", log: mnnvlLog(everywhere("via P2P/MNNVL/read", "")), want: result.Fail, says: []string{"NCCL printed no connection line"}},
		{name: "an H100 pair: not applicable", log: mnnvlLog(nil), target: func(tg *Target) { tg.Profile, tg.InstanceType = &p5, "p5.48xlarge" },
			want: result.Skip, says: []string{"not applicable", "does not span trays"}},
		{name: "the setting says no", log: mnnvlLog(nil), target: func(tg *Target) { tg.Expect.MultiNodeNVLink = &no }, want: result.Skip, says: []string{"not applicable: setting"}},
		{name: "the setting says yes on an unknown type", log: mnnvlLog(nil), target: func(tg *Target) {
			tg.Profile, tg.InstanceType, tg.Expect.MultiNodeNVLink = nil, "p6e-gb300.36xlarge", &yes
		}, want: result.Pass},
		{name: "unknown type: warns naming the setting", log: mnnvlLog(nil), target: func(tg *Target) { tg.Profile, tg.InstanceType = nil, "p6e-gb300.36xlarge" },
			want: result.Warn, says: []string{"set expect.multi_node_nvlink"}},
		{name: "not run: a node failed", change: func(mn *facts.MultiNodeRun) { mn.NotRun = "node 2 failed its first-boot verification (nvlink-fabric)" },
			want: result.Skip, says: []string{"not run: node 2 failed"}},
		{name: "the second run could not run", change: func(mn *facts.MultiNodeRun) { mn.MNNVL.Problem = "connection lost" }, want: result.Error,
			says: []string{"could not run: connection lost"}},
		{name: "stalled", log: mnnvlLog(nil)[:400], code: 124, want: result.Fail, says: []string{"did not finish: stopped by its timeout"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mn := twoNodes(t, "", 0, false)
			for i := range mn.Nodes {
				mn.Nodes[i].InstanceType, mn.Nodes[i].EFA = "p6e-gb200.36xlarge", 4
			}
			mn.MNNVL = probe.ParseNCCLRun(tc.log, tc.code, tc.code == 124, 10*time.Minute)
			if tc.change != nil {
				tc.change(&mn)
			}
			tg := gb200Target(2)
			if tc.target != nil {
				tc.target(&tg)
			}
			var c result.Check
			for _, x := range JudgePhase(PhaseMultiNode, facts.Run{MultiNode: mn}, tg) {
				if x.ID == result.NCCLMNNVL {
					c = x
				}
			}
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

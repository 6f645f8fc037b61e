package engine

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// gb200Log is what the multi-node script prints on 2 × p6e-gb200.36xlarge: 4 ranks a tray,
// each tray's connections to the other via path, busbw at 2 GiB.
func gb200Log(path string) string {
	var b strings.Builder
	b.WriteString("@@DLAMI-NCCL BINARY /usr/local/cuda-13.0/efa/test-cuda-13.0/all_reduce_perf\n@@DLAMI-NCCL RANKS 4\n@@DLAMI-NCCL NODES 2\n")
	for n, h := range []string{"ip-10-0-1-5", "ip-10-0-1-6"} {
		for r := n * 4; r < n*4+4; r++ {
			for _, l := range []string{"NET/OFI Selected provider is efa, fabric is efa-direct (found 4 nics)", "Using network Libfabric",
				fmt.Sprintf("Channel 00/0 : %d[%d] -> %d[%d] %s", r, r%4, (r+4)%8, r%4, path),
				fmt.Sprintf("ncclCommInitRankConfig comm 0x55 rank %d nranks 8 cudaDev %d nvmlDev %d busId 8000 commId 0x9f - Init COMPLETE", r, r%4, r%4)} {
				fmt.Fprintf(&b, "[1,%d]<stdout>:%s:%d:%d [%d] NCCL INFO %s\n", r, h, 100+r, 100+r, r%4, l)
			}
		}
	}
	b.WriteString("[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong \n")
	b.WriteString("[1,0]<stdout>:  2147483648     536870912     float     sum      -1   9197.5  233.49  180.20      0   9195.2  233.54  180.20      0\n")
	b.WriteString("[1,0]<stdout>:# Out of bounds values : 0 OK\n[1,0]<stdout>:# Avg bus bandwidth    : 52.9753\n")
	return b.String()
}

var mnnvlValueRE = regexp.MustCompile(`(?m)^env_key_1='?NCCL_MNNVL_ENABLE'?\nenv_value_1='?([0-9])'?$`)

// On a multi-node NVLink type the all-reduce runs twice, over EFA with MNNVL off, then with
// NCCL_MNNVL_ENABLE=1; nccl-mnnvl judges the second run's transport: P2P/MNNVL passes, a fallback
// onto EFA fails. On a p5 there is no second run.
func TestMultiNodeMNNVL(t *testing.T) {
	for _, tc := range []struct {
		name, typ, mnnvlPath string
		runs                 []string
		want                 result.Status
		says                 string
	}{
		{"healthy GB200 pair", "p6e-gb200.36xlarge", "via P2P/MNNVL/read", []string{"0", "1"}, result.Pass, ""},
		{"MNNVL falls back to EFA", "p6e-gb200.36xlarge", "[send] via NET/Libfabric/0/GDRDMA", []string{"0", "1"}, result.Fail, "fell back to the network (EFA, NET/Libfabric)"},
		{"a p5 pair: one run", "p5.48xlarge", "", []string{""}, result.Skip, "does not span trays"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hosts, _ := twoFakeNodes(t, nil)
			var runs []string
			hosts[0].jobs["nccl-multinode.sh"] = func(_ context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error) {
				v := ""
				if m := mnnvlValueRE.FindStringSubmatch(string(h.files[j.Script])); m != nil {
					v = m[1]
				}
				runs = append(runs, v)
				if v == "1" {
					io.WriteString(w, gb200Log(tc.mnnvlPath))
				} else {
					io.WriteString(w, gb200Log("[send] via NET/Libfabric/0/GDRDMA"))
				}
				return 0, nil
			}
			o := multiNodeOptions(t, hosts, 0)
			for i := range o.Nodes {
				o.Nodes[i].InstanceType, o.Nodes[i].EFA = tc.typ, 4
			}
			o.Common.Launch.EFA = 4
			o.Launch = &report.Launch{InstanceType: tc.typ}
			_ = MultiNode(context.Background(), &recordingUI{}, o)
			if strings.Join(runs, ",") != strings.Join(tc.runs, ",") {
				t.Errorf("runs with NCCL_MNNVL_ENABLE %q, want %q", runs, tc.runs)
			}
			r := readMultiNodeReport(t, o.ReportDir)
			var c result.Check
			for _, x := range r.Checks {
				if x.ID == result.NCCLMNNVL {
					c = x
				}
			}
			if c.Status != tc.want || !strings.Contains(c.Message, tc.says) {
				t.Errorf("nccl-mnnvl %s (%s), want %s saying %q", c.Status, c.Message, tc.want, tc.says)
			}
		})
	}
}

// The caller tags the AMI verified by its nodes only when both runs passed: a GB200 pair whose
// second run fell back to EFA is no pass, even where warn_checks makes nccl-mnnvl a warning.
func TestMultiNodeMNNVLOutcome(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		warn       bool
		want       result.Status
	}{
		{"both pass", "via P2P/MNNVL/read", false, result.Pass},
		{"nccl-mnnvl fails", "[send] via NET/Libfabric/0/GDRDMA", false, result.Fail},
		{"nccl-mnnvl only warned", "[send] via NET/Libfabric/0/GDRDMA", true, result.Warn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs []string
			_, _, o := gb200Pair(t, &runs, tc.path)
			if tc.warn {
				o.Checks.Warn, o.Checks.WarnSetting = []string{result.NCCLMNNVL}, "warn_checks"
			}
			var outcome result.Status
			o.Outcome = &outcome
			_ = MultiNode(context.Background(), &recordingUI{}, o)
			if outcome != tc.want {
				t.Errorf("outcome %q, want %q", outcome, tc.want)
			}
		})
	}
}

package engine

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// imexPairView is `nvidia-imex-ctl -N -j` of the domain of 10.0.1.5 and 10.0.1.6 (the shape of
// ParallelCluster's example, internal/parse/imexctl/testdata): the domain's status, node 2's
// status and every connection to node 2 (node 1 is READY and connected to itself).
func imexPairView(domain, node2, toNode2 string) string {
	conn := func(to int, st string) string {
		return fmt.Sprintf(`"%d":{"host":"10.0.1.%d","status":"%s","changed":true}`, to, 5+to, st)
	}
	node := func(i int, st, to1, to2 string) string {
		return fmt.Sprintf(`"%d":{"status":"%s","host":"10.0.1.%d","connections":{%s,%s},"changed":true,"version":"595.91.07"}`, i, st, 5+i, conn(0, to1), conn(1, to2))
	}
	return fmt.Sprintf(`{"nodes":{%s,%s},"timestamp":"8/8/2025 17:38:02.641","status":"%s"}`,
		node(0, "READY", "CONNECTED", toNode2), node(1, node2, toNode2, toNode2), domain)
}

// gb200Pair is two fake GB200 trays whose all-reduce runs record NCCL_MNNVL_ENABLE, each run
// connecting the trays over mnnvlPath when it is 1, over EFA otherwise.
func gb200Pair(t *testing.T, runs *[]string, mnnvlPath string) ([]*fakeHost, *[]string, MultiNodeOptions) {
	hosts, calls := twoFakeNodes(t, nil)
	hosts[0].jobs["nccl-multinode.sh"] = func(_ context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error) {
		v := ""
		if m := mnnvlValueRE.FindStringSubmatch(string(h.files[j.Script])); m != nil {
			v = m[1]
		}
		*runs = append(*runs, v)
		if v == "1" {
			io.WriteString(w, gb200Log(mnnvlPath))
		} else {
			io.WriteString(w, gb200Log("[send] via NET/Libfabric/0/GDRDMA"))
		}
		return 0, nil
	}
	o := multiNodeOptions(t, hosts, 0)
	for i := range o.Nodes {
		o.Nodes[i].InstanceType, o.Nodes[i].EFA = "p6e-gb200.36xlarge", 4
	}
	o.Common.Launch.EFA = 4
	o.Checks.MultiNode.BusBWFloorGBps = 100
	o.Launch = &report.Launch{InstanceType: "p6e-gb200.36xlarge"}
	return hosts, calls, o
}

// The verification forms the IMEX domain across its GB200 trays before the run over MNNVL: a
// healthy domain passes imex-domain; a tray whose nvidia-imex fails is named, and the run over
// MNNVL does not start; a domain that never comes up fails at the bound; with imex = "dra" it
// is not judged (a warning) and with skip_checks naming it the run goes on without it.
func TestMultiNodeIMEXDomain(t *testing.T) {
	defer func(p, b time.Duration) { imexDomainPoll, imexDomainBound = p, b }(imexDomainPoll, imexDomainBound)
	imexDomainPoll, imexDomainBound = time.Millisecond, 50*time.Millisecond
	trayFails := func(hosts []*fakeHost) {
		second := hosts[1].jobs["imex-nodes.sh"]
		hosts[1].jobs["imex-nodes.sh"] = func(ctx context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error) {
			_, _ = second(ctx, h, j, io.Discard)
			h.hostOut["host.imex_active"] = fakeSection{out: "failed", code: 3}
			h.hostOut["host.imex_ctl"] = fakeSection{out: "nvidia-imex-ctl not run: nvidia-imex is not active", code: 3}
			io.WriteString(w, "@@DLAMI-IMEXNODES RESTART 1\nJob for nvidia-imex.service failed because the control process exited with error code.\n@@DLAMI-IMEXNODES ACTIVE failed\n")
			return 0, nil
		}
		first := hosts[0].jobs["imex-nodes.sh"]
		hosts[0].jobs["imex-nodes.sh"] = func(ctx context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error) {
			code, err := first(ctx, h, j, w)
			h.hostOut["host.imex_ctl"] = fakeSection{out: imexPairView("DEGRADED", "UNAVAILABLE", "NEVER_CONNECTED")}
			return code, err
		}
	}
	neverUp := func(hosts []*fakeHost) {
		for _, h := range hosts {
			first := h.jobs["imex-nodes.sh"]
			h.jobs["imex-nodes.sh"] = func(ctx context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error) {
				code, err := first(ctx, h, j, w)
				h.hostOut["host.imex_ctl"] = fakeSection{out: imexPairView("DOWN", "UNAVAILABLE", "INVALID")}
				return code, err
			}
		}
	}
	for _, tc := range []struct {
		name      string
		tweak     func([]*fakeHost)
		imex      settings.IMEX
		skip      bool
		runs      string
		imexJobs  int
		domain    result.Status
		says      string
		mnnvl     result.Status
		mnnvlSays string
		outcome   result.Status
	}{
		{"healthy", nil, settings.IMEXUnset, false, "0,1", 2, result.Pass, "10.0.1.5, 10.0.1.6 UP", result.Pass, "", result.Pass},
		{"tray 2 never joins", trayFails, settings.IMEXUnset, false, "0", 2, result.Fail,
			"node 2 (i-0node2, 10.0.1.6) never joined the IMEX domain across the trays: node 1 (i-0node1, 10.0.1.5): it sees domain state DEGRADED", result.Skip,
			"not run: the IMEX domain across the trays did not come up (imex-domain)", result.Fail},
		{"never up", neverUp, settings.IMEXUnset, false, "0", 2, result.Fail, "the IMEX domain across the trays did not come up within 50ms: ", result.Skip, "did not come up", result.Fail},
		{"imex dra", nil, settings.IMEXDRA, false, "0", 0, result.Warn, `not judged: imex = "dra"`, result.Skip, `not run: imex = "dra"`, result.Pass},
		{"skip_checks", trayFails, settings.IMEXUnset, true, "0,1", 0, result.Skip, "skip_checks names imex-domain", result.Pass, "", result.Pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs []string
			hosts, calls, o := gb200Pair(t, &runs, "via P2P/MNNVL/read")
			if tc.tweak != nil {
				tc.tweak(hosts)
			}
			o.Checks.IMEX = tc.imex
			if tc.skip {
				o.Checks.Skip = []string{result.IMEXDomain}
			}
			var outcome result.Status
			o.Outcome = &outcome
			_ = MultiNode(context.Background(), &recordingUI{}, o)
			if got := strings.Join(runs, ","); got != tc.runs {
				t.Errorf("runs with NCCL_MNNVL_ENABLE %q, want %q", got, tc.runs)
			}
			if n := strings.Count(strings.Join(*calls, " "), ":imex-nodes"); n != tc.imexJobs {
				t.Errorf("%d IMEX node list jobs, want %d (%v)", n, tc.imexJobs, *calls)
			}
			r := readMultiNodeReport(t, o.ReportDir)
			for _, want := range []struct {
				id   string
				st   result.Status
				says string
			}{{result.IMEXDomain, tc.domain, tc.says}, {result.NCCLMNNVL, tc.mnnvl, tc.mnnvlSays}} {
				var c result.Check
				for _, x := range r.Checks {
					if x.ID == want.id {
						c = x
					}
				}
				if c.Status != want.st || !strings.Contains(c.Message, want.says) {
					t.Errorf("%s %s (%s), want %s saying %q", want.id, c.Status, c.Message, want.st, want.says)
				}
			}
			if outcome != tc.outcome {
				t.Errorf("outcome %s, want %s", outcome, tc.outcome)
			}
		})
	}
}

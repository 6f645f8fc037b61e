package checks

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/efapkgs"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/lsmod"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/rdmastat"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func readFixture(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The markers of the job scripts' own lines (package probe's).
const (
	efaMarkerT  = "@@DLAMI-EFA"
	dcgmMarkerT = "@@DLAMI-DCGM"
)

// The real fabtests table of aws-cdi-sdk's install guide, as the client prints it.
const pingTable = "../parse/pingpong/testdata/efa_test-aws-cdi-sdk-install-guide.txt"

// efaOutput renders the traffic script's output for devices; broken[d] replaces a device's
// client output and exit status.
func efaOutput(t *testing.T, devices []string, broken map[string]struct {
	out string
	rc  int
}) string {
	table := readFixture(t, pingTable)
	var b strings.Builder
	for _, d := range devices {
		out, rc, src := table, 0, 0
		if x, ok := broken[d]; ok {
			out, rc, src = x.out, x.rc, x.rc
		}
		fmt.Fprintf(&b, "%s BEGIN %s\n%s\n%s END %s %d %d\n", efaMarkerT, d, out, efaMarkerT, d, rc, src)
	}
	return b.String()
}

func stats(t *testing.T, drops int) facts.Fact[[]rdmastat.Link] {
	text := fmt.Sprintf("link rdmap0s31/1 tx_bytes 10 rx_bytes 10 rx_drops %d retrans_timeout_events 0\n", drops)
	l, err := rdmastat.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return facts.Read(l, text)
}

func TestEFATraffic(t *testing.T) {
	devs := []string{"rdmap0s31", "rdmap16s27", "rdmap32s27", "rdmap48s27", "rdmap64s27", "rdmap80s27", "rdmap96s27", "rdmap112s27"}
	judge := func(out string, o settings.EFATraffic, before, after facts.Fact[[]rdmastat.Link]) result.Check {
		t.Helper()
		pp, err := probe.ParseEFATraffic(out)
		if err != nil {
			t.Fatal(err)
		}
		return judgeEFATraffic(facts.Run{EFATraffic: facts.EFATraffic{Tested: devs, Devices: pp, StatsBefore: before, StatsAfter: after}},
			Target{Checks: settings.Checks{Function: settings.Function{EFATraffic: o}}})
	}
	floor := settings.EFATraffic{MinBandwidthMBps: 1000}
	tests := []struct {
		name    string
		out     string
		o       settings.EFATraffic
		after   int
		status  result.Status
		mention string
	}{
		{"every device carries traffic", efaOutput(t, devs, nil), floor, 0, result.Pass, ""},
		{"no floor: figures reported, warned", efaOutput(t, devs, nil), settings.EFATraffic{}, 0, result.Warn, "efa_traffic.min_bandwidth_mbps"},
		{"below the floor", efaOutput(t, devs, nil), settings.EFATraffic{MinBandwidthMBps: 5000}, 0, result.Fail, "rdmap0s31: 2359 MB/s, below"},
		{"one device errors", efaOutput(t, devs, map[string]struct {
			out string
			rc  int
		}{"rdmap48s27": {"fi_av_insert(): common/shared.c:1063, ret=-22 (Invalid argument)", 1}}), floor, 0, result.Fail, "rdmap48s27: the ping-pong failed"},
		{"one device hangs", efaOutput(t, devs, map[string]struct {
			out string
			rc  int
		}{"rdmap96s27": {"", 124}}), floor, 0, result.Fail, "rdmap96s27: the ping-pong hung"},
		{"one device missing from the output", efaOutput(t, devs[:7], nil), floor, 0, result.Fail, "rdmap112s27: no result"},
		{"rx_drops grew", efaOutput(t, devs, nil), floor, 3, result.Warn, "rx_drops"},
	}
	for _, tt := range tests {
		c := judge(tt.out, tt.o, stats(t, 0), stats(t, tt.after))
		if c.Status != tt.status || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
	if c := judge(efaOutput(t, devs, nil), floor, stats(t, 0), stats(t, 0)); c.Status != result.Pass {
		t.Errorf("healthy: %s %s", c.Status, c.Message)
	}
	if c := judgeEFATraffic(facts.Run{EFATraffic: facts.EFATraffic{NotRun: "the efa-devices check failed"}}, Target{}); c.Status != result.Skip || !strings.Contains(c.Message, "efa-devices") {
		t.Errorf("not run: %s %s", c.Status, c.Message)
	}
	if c := judgeEFATraffic(facts.Run{EFATraffic: facts.EFATraffic{Tested: devs, Problem: "the EFA traffic test did not finish within its bound"}}, Target{}); c.Status != result.Fail {
		t.Errorf("could not run: %s %s", c.Status, c.Message)
	}
}

func TestJudgeGPUDirectRDMA(t *testing.T) {
	ok := readFixture(t, ncclFixtures+"/synthetic-p6b200-1node-ok.txt")
	viaNet := strings.ReplaceAll(ok, "via P2P/CUMEM/read", "via NET/Libfabric/0/GDRDMA")
	staged := strings.ReplaceAll(ok, "via P2P/CUMEM/read", "via NET/Libfabric/0")
	in, err := efapkgs.Parse(readFixture(t, "../parse/efapkgs/testdata/efa_installed_packages-1.50.0-mixed-synth.txt"))
	if err != nil {
		t.Fatal(err)
	}
	mods := func(names ...string) facts.Fact[lsmod.Set] {
		text := "Module                  Size  Used by\n"
		for _, n := range names {
			text += n + "  16384  0\n"
		}
		s, err := lsmod.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		return facts.Read(s, text)
	}
	rec := facts.Read(in, "")
	floor := settings.GDR{BusBWFloorGBps: 100}
	tests := []struct {
		name    string
		out     string
		o       settings.GDR
		loaded  facts.Fact[lsmod.Set]
		status  result.Status
		mention string
	}{
		{"GDRDMA over the network", viaNet, floor, mods("efa_nv_peermem", "efa"), result.Pass, ""},
		{"no floor", viaNet, settings.GDR{}, mods("efa_nv_peermem"), result.Warn, "gpudirect_rdma.busbw_floor_gbps"},
		{"staged through host memory", staged, floor, mods("efa_nv_peermem"), result.Fail, "without GDRDMA"},
		{"NVLink used: no network", ok, floor, mods("efa_nv_peermem"), result.Fail, "no channel went over the network"},
		{"peer-memory module missing", viaNet, floor, mods("efa"), result.Fail, "efa_nv_peermem module is not loaded"},
		{"below floor", viaNet, settings.GDR{BusBWFloorGBps: 5000}, mods("efa_nv_peermem"), result.Fail, "below gpudirect_rdma.busbw_floor_gbps"},
	}
	for _, tt := range tests {
		run := probe.ParseNCCLRun(tt.out, 0, false, time.Minute)
		c := judgeGPUDirectRDMA(facts.Run{GDR: run, Host: facts.Host{EFAInstaller: rec, Loaded: tt.loaded}},
			Target{Checks: settings.Checks{Function: settings.Function{GDR: tt.o}}})
		if c.Status != tt.status || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
	if o := (settings.NCCL{Env: map[string]string{"FI_LOG_LEVEL": "warn"}}).ForcedNetwork(); o.Env["NCCL_P2P_DISABLE"] != "1" || o.Env["FI_LOG_LEVEL"] != "warn" || o.Transport != settings.TransportEFA {
		t.Errorf("GDR options: %+v", o)
	}
}

func FuzzJudgeEFATraffic(f *testing.F) {
	f.Add(efaMarkerT + " BEGIN rdmap0s31\nbytes #sent #ack total time MB/sec usec/xfer Mxfers/sec\n64k 10 =10 1.2m 0.00s 717.02 91.40 0.01\n" + efaMarkerT + " END rdmap0s31 0 0\n")
	f.Add(efaMarkerT + " BEGIN rdmap0s31\n")
	f.Add(efaMarkerT + " ERROR x")
	f.Fuzz(func(t *testing.T, s string) {
		pp, err := probe.ParseEFATraffic(s)
		if err != nil {
			return
		}
		for _, p := range pp {
			// A device read as working carried at least one table.
			if p.OK() && len(p.Value.Client) == 0 {
				t.Fatalf("a device without a table read as working: %+v", p)
			}
		}
	})
}

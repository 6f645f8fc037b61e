package checks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpuhealth"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvlink"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// sample renders one nvidia-smi health reading of n GPUs with gen/width per GPU and the clock
// reasons given, and parses it as the probe does.
func sample(t *testing.T, n int, gen, width func(i int) int, reasons func(i int) [4]string) facts.Fact[[]gpuhealth.GPU] {
	t.Helper()
	var b strings.Builder
	b.WriteString(healthHeader)
	for i := range n {
		r := [4]string{"Not Active", "Not Active", "Not Active", "Not Active"}
		if reasons != nil {
			r = reasons(i)
		}
		fmt.Fprintf(&b, "%d, 00000000:%02x:00.0, Enabled, Enabled, 0, [N/A], No, No, %d, 5, %d, 16, %s, %s, %s, %s\n", i, 0x51+i, gen(i), width(i), r[0], r[1], r[2], r[3])
	}
	gpus, err := gpuhealth.Parse(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return facts.Read(gpus, b.String())
}

func TestJudgePCIeLinkUnderLoad(t *testing.T) {
	full := func(int) int { return 16 }
	gen5 := func(int) int { return 5 }
	idle := func(int) int { return 1 }
	x8on3 := func(i int) int {
		if i == 3 {
			return 8
		}
		return 16
	}
	tests := []struct {
		name    string
		load    facts.Load
		status  result.Status
		mention string
	}{
		{"max under load", facts.Load{Ran: true, Samples: []facts.Fact[[]gpuhealth.GPU]{sample(t, 8, idle, full, nil), sample(t, 8, gen5, full, nil)}}, result.Pass, ""},
		{"gen 1 only while idle (the first sample), max later", facts.Load{Ran: true, Samples: []facts.Fact[[]gpuhealth.GPU]{sample(t, 8, idle, full, nil), sample(t, 8, gen5, full, nil)}}, result.Pass, ""},
		{"x8 under load", facts.Load{Ran: true, Samples: []facts.Fact[[]gpuhealth.GPU]{sample(t, 8, gen5, x8on3, nil), sample(t, 8, gen5, x8on3, nil)}}, result.Fail, "GPU 3 at x8 of x16"},
		{"gen below max under load", facts.Load{Ran: true, Samples: []facts.Fact[[]gpuhealth.GPU]{sample(t, 8, func(i int) int { return 4 }, full, nil)}}, result.Warn, "gen 4 of 5"},
		{"no load: not judged", facts.Load{NotRun: "nccl.skip = true"}, result.Warn, "nccl.skip = true"},
		{"a test shorter than one reading: not judged", facts.Load{Ran: true}, result.Warn, "lengthen the test"},
		{"load without a readable sample", facts.Load{Ran: true, Samples: []facts.Fact[[]gpuhealth.GPU]{facts.Unread[[]gpuhealth.GPU]("host.gpu_health: timed out", "")}}, result.Fail, "timed out"},
	}
	for _, tt := range tests {
		c := judgePCIeLink(facts.Run{Load: tt.load}, profiled(t, "p5.48xlarge"))
		if c.Status != tt.status || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
}

func TestJudgeGPUClocksUnderLoad(t *testing.T) {
	gen5, full := func(int) int { return 5 }, func(int) int { return 16 }
	reason := func(gpu, which int) func(int) [4]string {
		return func(i int) [4]string {
			r := [4]string{"Not Active", "Not Active", "Not Active", "Not Active"}
			if i == gpu {
				r[which] = "Active"
			}
			return r
		}
	}
	for _, tt := range []struct {
		name    string
		which   int
		status  result.Status
		mention string
	}{
		{"hardware slowdown", 0, result.Fail, "GPU 6: hardware slowdown"},
		{"thermal slowdown", 1, result.Fail, "GPU 6: hardware thermal slowdown"},
		{"power brake", 2, result.Fail, "GPU 6: power-brake slowdown"},
		{"software power cap is not a fault", 3, result.Pass, ""},
	} {
		c := judgeGPUClocks(facts.Run{Load: facts.Load{Ran: true, Samples: []facts.Fact[[]gpuhealth.GPU]{sample(t, 8, gen5, full, reason(6, tt.which))}}}, Target{})
		if c.Status != tt.status || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
}

func counters(t *testing.T, crc, replay int) facts.Fact[[]nvlink.Counters] {
	t.Helper()
	text := fmt.Sprintf("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: Replay Errors: %d\n\t Link 0: Recovery Errors: 0\n\t Link 0: CRC Errors: %d\n", replay, crc)
	c, err := nvlink.ParseErrors(text)
	if err != nil {
		t.Fatal(err)
	}
	return facts.Read(c, text)
}

func TestNVLinkDuring(t *testing.T) {
	pass := result.Check{ID: result.NVLink, Status: result.Pass}
	if c := nvlinkDuring(pass, counters(t, 0, 0), counters(t, 0, 0), "during the NCCL test", Target{}); c.Status != result.Pass {
		t.Errorf("nothing grew: %s: %s", c.Status, c.Message)
	}
	if c := nvlinkDuring(pass, counters(t, 0, 0), counters(t, 7, 0), "during the NCCL test", Target{}); c.Status != result.Fail || !strings.Contains(c.Message, "CRC") || !strings.Contains(c.Message, "during the NCCL test") {
		t.Errorf("CRC grew: %s: %s", c.Status, c.Message)
	}
	if c := nvlinkDuring(pass, counters(t, 0, 0), counters(t, 0, 40), "during the NCCL test", Target{}); c.Status != result.Warn || !strings.Contains(c.Message, "Replay") {
		t.Errorf("replay burst: %s: %s", c.Status, c.Message)
	}
	if c := nvlinkDuring(pass, counters(t, 0, 0), facts.Unread[[]nvlink.Counters]("host.nvlink_errors: timed out", ""), "during the NCCL test", Target{}); c.Status != result.Fail {
		t.Errorf("unreadable after: %s", c.Status)
	}
	skip := result.Check{ID: result.NVLink, Status: result.Skip}
	if c := nvlinkDuring(skip, facts.Unread[[]nvlink.Counters]("none", ""), facts.Unread[[]nvlink.Counters]("none", ""), "during the NCCL test", Target{}); c.Status != result.Skip {
		t.Errorf("no NVLink host: %s", c.Status)
	}
}

func TestNVLinkCounterClass(t *testing.T) {
	for name, want := range map[string]result.Status{
		"Replay Errors": result.Warn, "Recovery Errors": result.Warn, "CRC Errors": result.Fail,
		"Tx packets": result.Pass, "Rx bytes": result.Pass, "FEC Errors - 0": result.Pass,
		"Malformed packet Errors": result.Fail, "Rx Errors": result.Fail, "Local link integrity Errors": result.Fail,
		"Effective Errors": result.Fail, "Link recovery failed events": result.Fail,
		"Link recovery successful events": result.Warn, "Symbol Errors": result.Warn, "Tx discards": result.Warn,
	} {
		if got := nvlinkCounterClass(name); got != want {
			t.Errorf("%q: %s, want %s", name, got, want)
		}
	}
}

// gpuCounters is nvidia-smi nvlink -e for GPUs first..first+n-1, two links each, no errors.
func gpuCounters(t *testing.T, first, n int) facts.Fact[[]nvlink.Counters] {
	t.Helper()
	var b strings.Builder
	for i := first; i < first+n; i++ {
		fmt.Fprintf(&b, "GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-%d)\n", i, i)
		for l := range 2 {
			fmt.Fprintf(&b, "\t Link %d: Replay Errors: 0\n\t Link %d: Recovery Errors: 0\n\t Link %d: CRC Errors: 0\n", l, l, l)
		}
	}
	c, err := nvlink.ParseErrors(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return facts.Read(c, b.String())
}

// The counters read around the NCCL test must cover every GPU the host has: a reading that
// lists 1 of 8 GPUs, before or after, leaves seven GPUs' links unjudged.
func TestNVLinkDuringGPUCount(t *testing.T) {
	p5 := profiled(t, "p5.48xlarge")
	pass := result.Check{ID: result.NVLink, Status: result.Pass}
	all, one := gpuCounters(t, 0, 8), gpuCounters(t, 0, 1)
	for _, tt := range []struct {
		name          string
		before, after facts.Fact[[]facts.NVLinkCounters]
		want          result.Status
		mention       []string
	}{
		{"8 of 8 before and after", all, all, result.Pass, nil},
		{"1 of 8 before and after", one, one, result.Fail, []string{"lists 1 of 8 GPUs before the step", "lists 1 of 8 GPUs after the step"}},
		{"1 of 8 before", one, all, result.Fail, []string{"lists 1 of 8 GPUs before the step"}},
		{"1 of 8 after", all, one, result.Fail, []string{"lists 1 of 8 GPUs after the step"}},
		{"another single GPU after", one, gpuCounters(t, 7, 1), result.Fail, []string{"lists 1 of 8 GPUs before the step", "lists 1 of 8 GPUs after the step"}},
	} {
		c := nvlinkDuring(pass, tt.before, tt.after, "during the NCCL test", p5)
		if c.Status != tt.want {
			t.Errorf("%s: %s: %s", tt.name, c.Status, c.Message)
		}
		for _, m := range tt.mention {
			if !strings.Contains(c.Message, m) {
				t.Errorf("%s: message %q lacks %q", tt.name, c.Message, m)
			}
		}
	}
}

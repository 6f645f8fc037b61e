package xid

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

// summary renders events as "79@0000:a1:00" ("S" prefix for SXid) for compact comparison.
func summary(events []Event) []string {
	var out []string
	for _, e := range events {
		p := ""
		if e.SXid {
			p = "S"
		}
		out = append(out, fmt.Sprintf("%s%d@%s", p, e.Xid, e.PCI))
	}
	return out
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestParseTestdata(t *testing.T) {
	tests := []struct {
		file     string
		want     []string
		unparsed int
	}{
		{"dmesg-T-xid79-fallen-off-bus-multiline.txt", []string{"79@0000:a1:00"}, 0},
		{"dmesg-xid79-old-format-no-pid-with-aer.txt", []string{"79@0000:02:00"}, 0},
		{"dmesg-T-xid119-gsp-timeout-rpc-history.txt", repeat("119@0000:9b:00", 5), 0},
		{"dmesg-T-xid43-xid31-xid94-vm-h100.txt", []string{"43@0000:00:05", "43@0000:00:05", "31@0000:00:07", "94@0000:00:08"}, 0},
		{"dmesg-ctime-xid13-xid109-peermem.txt", []string{"13@0000:cb:00", "13@0000:cb:00", "13@0000:cb:00", "109@0000:cb:00"}, 0},
		{"dmesg-decode-iso-xid13-xid43.txt", append(repeat("13@0000:38:00", 16), "43@0000:38:00"), 0},
		{"dmesg-xid31-ce-xid62-xid45-series.txt", append([]string{"31@0000:0a:00", "62@0000:0a:00"}, repeat("45@0000:0a:00", 8)...), 0},
		{"syslog-xid48-dbe-xid64-page-retirement.txt", []string{"48@0000:07:00", "64@0000:07:00"}, 0},
		{"xid63-row-remapper-a100-p4de-bare-line.txt", []string{"63@0000:10:1c"}, 0},
		{"xid74-nvlink-fatal-7-registers-documented.txt", []string{"74@0003:00:00"}, 0},
		{"dmesg-sxid-xid79-nvswitch-fatal.txt", []string{"79@0000:91:00", "S20034@0000:06:00.0", "S20034@0000:05:00.0", "S20034@0000:07:00.0"}, 0},
		{"dmesg-mixed-real-lines-catalog-sample.txt", []string{"13@0000:cb:00", "43@0000:00:05", "31@0000:00:07", "62@0000:0a:00", "45@0000:0a:00", "48@0000:07:00", "64@0000:07:00", "63@0000:10:1c", "74@0003:00:00", "94@0000:00:08", "109@0000:cb:00", "119@0000:9b:00", "79@0000:02:00"}, 0},
		{"synthetic-injections-and-154.txt", []string{"74@0000:b9:00", "79@0000:1e:00", "154@0000:1e:00", "S12028@0000:05:00.0", "13@0000:02:00", "999@0000:1e:00", "S20009@0000:06:00.0"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			events, unparsed := Parse(fixture.Read(t, tt.file))
			if got := summary(events); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events = %v\nwant     %v", got, tt.want)
			}
			if len(unparsed) != tt.unparsed {
				t.Errorf("unparsed = %q, want %d lines", unparsed, tt.unparsed)
			}
			for _, e := range events {
				if !strings.Contains(e.Line, "Xid") || e.Severity.Class == "" || e.Severity.Action == "" {
					t.Errorf("event %+v lacks line or severity", e)
				}
			}
		})
	}
}

func TestParseFields(t *testing.T) {
	events, _ := Parse(fixture.Read(t, "dmesg-T-xid79-fallen-off-bus-multiline.txt"))
	e := events[0]
	if e.PID != "'<unknown>'" || e.Process != "<unknown>" || e.Message != "GPU has fallen off the bus." {
		t.Errorf("fields = %+v", e)
	}
	if e.Severity.Class != "bus" || e.Severity.Action != ActionRetire {
		t.Errorf("severity = %+v", e.Severity)
	}
	events, _ = Parse(fixture.Read(t, "xid63-row-remapper-a100-p4de-bare-line.txt"))
	if events[0].PID != "1896" || !strings.HasPrefix(events[0].Message, "Row Remapper") {
		t.Errorf("pid without name: %+v", events[0])
	}
	events, _ = Parse(fixture.Read(t, "dmesg-xid79-old-format-no-pid-with-aer.txt"))
	if events[0].PID != "" || events[0].Message != "GPU has fallen off the bus." {
		t.Errorf("old format: %+v", events[0])
	}
	events, _ = Parse(fixture.Read(t, "dmesg-sxid-xid79-nvswitch-fatal.txt"))
	if events[1].Switch != "nvidia-nvswitch1" || events[1].Severity.Action != ActionResetGPU || events[3].Severity.Action != ActionInvestigate {
		t.Errorf("sxid: %+v / %+v", events[1], events[3])
	}
}

func TestClassify(t *testing.T) {
	const (
		reset154  = "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
		back154   = "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"
		none154   = "GPU recovery action changed to 0x0 (None)"
		reboot154 = "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
		drain154  = "GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)"
		p2p154    = "GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)"
	)
	tests := []struct {
		name       string
		e          Event
		mnemonic   string
		resolution string
		class      string
		action     Action
	}{
		{"13 app fault", Event{Xid: 13}, "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY", "RESTART_APP", "application", ActionRestartApp},
		{"31 page fault", Event{Xid: 31}, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "RESTART_APP", "application", ActionRestartApp},
		{"43 ignore", Event{Xid: 43}, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "IGNORE", "application", ActionMonitor},
		{"45 workflow", Event{Xid: 45}, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "WORKFLOW_XID_45", "application", ActionInvestigate},
		{"48 DBE", Event{Xid: 48}, "ROBUST_CHANNEL_GPU_ECC_DBE", "WORKFLOW_XID_48", "memory", ActionResetGPU},
		{"54 aux power", Event{Xid: 54}, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "CHECK_MECHANICALS", "power", ActionRetire},
		{"61 unused", Event{Xid: 61}, "PMU_BREAKPOINT", "CONTACT_SUPPORT", "firmware", ActionInvestigate},
		{"63 remap event", Event{Xid: 63}, "INFOROM_DRAM_RETIREMENT_EVENT", "IGNORE", "memory", ActionMonitor},
		{"64 remap failure", Event{Xid: 64}, "INFOROM_DRAM_RETIREMENT_FAILURE", "RESET_GPU", "memory", ActionResetGPU},
		{"74 nvlink", Event{Xid: 74}, "NVLINK_ERROR", "WORKFLOW_NVLINK_ERR", "nvlink", ActionResetGPU},
		{"78 vgpu", Event{Xid: 78}, "VGPU_START_ERROR", "UPDATE_SWFW", "driver", ActionInvestigate},
		{"79 off the bus", Event{Xid: 79}, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM", "bus", ActionRetire},
		{"92 SBE rate", Event{Xid: 92}, "EXCESSIVE_SBE_INTERRUPTS", "IGNORE", "memory", ActionMonitor},
		{"94 contained", Event{Xid: 94}, "ROBUST_CHANNEL_CONTAINED_ERROR", "RESTART_APP", "memory", ActionRestartApp},
		{"95 uncontained", Event{Xid: 95}, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "RESET_GPU", "memory", ActionResetGPU},
		{"109 ctxsw timeout", Event{Xid: 109}, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "RESET_GPU", "timeout", ActionResetGPU},
		{"119 GSP RPC timeout", Event{Xid: 119}, "GSP_RPC_TIMEOUT", "RESET_GPU", "firmware", ActionResetGPU},
		{"121 C2C corrected", Event{Xid: 121}, "C2C_ERROR", "IGNORE", "nvlink", ActionMonitor},
		{"144 NVLink5 SAW", Event{Xid: 144}, "NVLINK_SAW_ERROR", "WORKFLOW_NVLINK5_ERR", "nvlink", ActionResetGPU},
		{"145 NVLink5 RLW", Event{Xid: 145}, "NVLINK_RLW_ERROR", "WORKFLOW_NVLINK5_ERR", "nvlink", ActionResetGPU},
		{"149 NVLink5 NETIR", Event{Xid: 149}, "NVLINK_NETIR_ERROR", "WORKFLOW_NVLINK5_ERR", "nvlink", ActionResetGPU},
		{"150 NVLink5 MSE", Event{Xid: 150}, "NVLINK_MSE_ERROR", "WORKFLOW_NVLINK5_ERR", "nvlink", ActionResetGPU},
		{"151 key rotation", Event{Xid: 151}, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "RESTART_VM", "security", ActionResetGPU},
		{"154 reset required", Event{Xid: 154, Message: reset154}, "GPU_RECOVERY_ACTION_CHANGED", "XID_154", "recovery", ActionResetGPU},
		{"154 back to none keeps the reset", Event{Xid: 154, Message: back154}, "GPU_RECOVERY_ACTION_CHANGED", "XID_154", "recovery", ActionResetGPU},
		{"154 none", Event{Xid: 154, Message: none154}, "GPU_RECOVERY_ACTION_CHANGED", "XID_154", "recovery", ActionMonitor},
		{"154 node reboot", Event{Xid: 154, Message: reboot154}, "GPU_RECOVERY_ACTION_CHANGED", "XID_154", "recovery", ActionResetGPU},
		{"154 drain and reset", Event{Xid: 154, Message: drain154}, "GPU_RECOVERY_ACTION_CHANGED", "XID_154", "recovery", ActionResetGPU},
		{"154 drain p2p", Event{Xid: 154, Message: p2p154}, "GPU_RECOVERY_ACTION_CHANGED", "XID_154", "recovery", ActionInvestigate},
		{"154 unreadable message", Event{Xid: 154, Message: "garbled"}, "GPU_RECOVERY_ACTION_CHANGED", "XID_154", "recovery", ActionInvestigate},
		{"154 unknown state", Event{Xid: 154, Message: "GPU recovery action changed from 0x0 (None) to 0x7 (System Reboot Required)"}, "GPU_RECOVERY_ACTION_CHANGED", "XID_154", "recovery", ActionInvestigate},
		{"154 state in a bare message", Event{Xid: 154, Message: "0x0 (NONE)"}, "GPU_RECOVERY_ACTION_CHANGED", "XID_154", "recovery", ActionMonitor},
		{"159 CHI non-data", Event{Xid: 159}, "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHECK_UVM", "nvlink", ActionResetGPU},
		{"167 no bucket published", Event{Xid: 167}, "PCIE_FATAL_TIMEOUT", "NONE_PUBLISHED", "bus", ActionInvestigate},
		{"172 no bucket published", Event{Xid: 172}, "UNCORRECTABLE_SRAM_ERROR", "NONE_PUBLISHED", "memory", ActionInvestigate},
		{"SXid fatal", Event{Xid: 20034, SXid: true, Message: "Fatal, Link 48 LTSSM Fault Up"}, "", "", "nvswitch", ActionResetGPU},
		{"SXid non-fatal", Event{Xid: 12028, SXid: true, Message: "Non-fatal, Link 44 egress"}, "", "", "nvswitch", ActionMonitor},
		{"SXid unstated", Event{Xid: 20034, SXid: true, Message: "Link 48 LTSSM Fault Up"}, "", "", "nvswitch", ActionInvestigate},
		// An SXid number that is also a catalog Xid number is still judged as an SXid.
		{"SXid with a catalog number", Event{Xid: 79, SXid: true, Message: "Non-fatal, Link 1"}, "", "", "nvswitch", ActionMonitor},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Classify(tt.e)
			if s.Mnemonic != tt.mnemonic || s.Resolution != tt.resolution || s.Class != tt.class || s.Action != tt.action {
				t.Errorf("Classify(%d sxid=%v %q) = %+v\nwant mnemonic %q, resolution %q, class %s, action %s",
					tt.e.Xid, tt.e.SXid, tt.e.Message, s, tt.mnemonic, tt.resolution, tt.class, tt.action)
			}
			if s.Name == "" {
				t.Errorf("Classify(%d) has no name: %+v", tt.e.Xid, s)
			}
		})
	}
}

// An Xid the catalog does not list must never pass for harmless.
func TestClassifyUnlistedFailsClosed(t *testing.T) {
	for _, n := range []int{0, 173, 999, 22013, 999999} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			want := Severity{Name: "unlisted Xid", Class: "unknown", Action: ActionInvestigate}
			if got := Classify(Event{Xid: n, Message: "GPU recovery action changed to 0x0 (None)"}); got != want {
				t.Errorf("Classify(%d) = %+v, want %+v", n, got, want)
			}
		})
	}
}

func TestClassifyNames(t *testing.T) {
	tests := []struct {
		xid  int
		want string
	}{
		{79, "GPU has fallen off the bus"},
		{31, "GPU memory page fault"},
		{61, "PMU_BREAKPOINT (listed by NVIDIA as unused on current GPUs)"},
		{14, "ROBUST_CHANNEL_FAKE_ERROR (listed by NVIDIA as unused on current GPUs)"},
	}
	for _, tt := range tests {
		if got := Classify(Event{Xid: tt.xid}).Name; got != tt.want {
			t.Errorf("Classify(%d).Name = %q, want %q", tt.xid, got, tt.want)
		}
	}
}

// The real captures' lines, one file: every event gets the bucket and action of its Xid.
func TestClassifyRealLines(t *testing.T) {
	events, unparsed := Parse(fixture.Read(t, "dmesg-mixed-real-lines-catalog-sample.txt"))
	if len(unparsed) != 0 {
		t.Errorf("unparsed = %q", unparsed)
	}
	type judged struct {
		xid        int
		resolution string
		action     Action
	}
	want := []judged{
		{13, "RESTART_APP", ActionRestartApp},
		{43, "IGNORE", ActionMonitor},
		{31, "RESTART_APP", ActionRestartApp},
		{62, "RESET_GPU", ActionResetGPU},
		{45, "WORKFLOW_XID_45", ActionInvestigate},
		{48, "WORKFLOW_XID_48", ActionResetGPU},
		{64, "RESET_GPU", ActionResetGPU},
		{63, "IGNORE", ActionMonitor},
		{74, "WORKFLOW_NVLINK_ERR", ActionResetGPU},
		{94, "RESTART_APP", ActionRestartApp},
		{109, "RESET_GPU", ActionResetGPU},
		{119, "RESET_GPU", ActionResetGPU},
		{79, "RESTART_BM", ActionRetire},
	}
	var got []judged
	for _, e := range events {
		got = append(got, judged{e.Xid, e.Severity.Resolution, e.Severity.Action})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("judged = %v\nwant     %v", got, want)
	}
}

func TestParseCleanLog(t *testing.T) {
	clean := "[    5.1] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  595.91.07\n[    6.2] efa 0000:10:00.0: Setup irq:0x3f\n[    7.0] nvidia-fabricmanager: started\n"
	events, unparsed := Parse(clean)
	if len(events) != 0 || len(unparsed) != 0 {
		t.Errorf("clean log gave %v, %q", events, unparsed)
	}
}

func FuzzParse(f *testing.F) {
	fixture.SeedFuzz(f, ".txt")
	f.Fuzz(func(t *testing.T, s string) {
		events, unparsed := Parse(s)
		// Every line that claims to be an Xid report is either an event or unparsed.
		claims := 0
		for _, line := range strings.Split(s, "\n") {
			if mentions(strings.TrimRight(line, "\r \t")) {
				claims++
			}
		}
		if len(events)+len(unparsed) != claims {
			t.Fatalf("%d claiming lines, %d events + %d unparsed", claims, len(events), len(unparsed))
		}
		for _, e := range events {
			if e.Xid < 0 || e.PCI == "" {
				t.Fatalf("bad event %+v", e)
			}
		}
	})
}

func BenchmarkParse(b *testing.B) {
	one := fixture.Read(b, "dmesg-T-xid119-gsp-timeout-rpc-history.txt")
	text := strings.Repeat(one, 200) // ~8,000 lines, 1,000 Xid events
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Parse(text)
	}
}

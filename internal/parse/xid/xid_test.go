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
	tests := []struct {
		e      Event
		class  string
		action Action
	}{
		{Event{Xid: 31}, "application", ActionRestartApp},
		{Event{Xid: 13}, "application", ActionRestartApp},
		{Event{Xid: 48}, "memory", ActionResetGPU},
		{Event{Xid: 63}, "memory", ActionResetGPU},
		{Event{Xid: 64}, "memory", ActionRetire},
		{Event{Xid: 92}, "memory", ActionMonitor},
		{Event{Xid: 94}, "memory", ActionRestartApp},
		{Event{Xid: 95}, "memory", ActionResetGPU},
		{Event{Xid: 74}, "nvlink", ActionResetGPU},
		{Event{Xid: 79}, "bus", ActionRetire},
		{Event{Xid: 61}, "firmware", ActionResetGPU},
		{Event{Xid: 119}, "firmware", ActionResetGPU},
		{Event{Xid: 120}, "firmware", ActionResetGPU},
		{Event{Xid: 145}, "nvlink", ActionResetGPU},
		{Event{Xid: 154, Message: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"}, "recovery", ActionResetGPU},
		{Event{Xid: 154, Message: "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"}, "recovery", ActionResetGPU},
		{Event{Xid: 154, Message: "GPU recovery action changed to 0x0 (None)"}, "recovery", ActionMonitor},
		{Event{Xid: 12345}, "unknown", ActionInvestigate},
		{Event{Xid: 20034, SXid: true, Message: "Fatal, Link 48 LTSSM Fault Up"}, "nvswitch", ActionResetGPU},
		{Event{Xid: 12028, SXid: true, Message: "Non-fatal, Link 44 egress"}, "nvswitch", ActionMonitor},
	}
	for _, tt := range tests {
		s := Classify(tt.e)
		if s.Class != tt.class || s.Action != tt.action {
			t.Errorf("Classify(%d sxid=%v %q) = %+v, want %s / %s", tt.e.Xid, tt.e.SXid, tt.e.Message, s, tt.class, tt.action)
		}
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

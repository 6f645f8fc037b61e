package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/layer"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
)

// A bake records the instance it ran on and how long that had run when provisioning ended,
// from the host's uptime at the start (a layer's reboot does not reset it), in the JSON and
// Markdown reports, the JUnit properties and the last UI line; what it cannot read, it says.
func TestBakeRecordsItsBuildInstance(t *testing.T) {
	base := time.Date(2026, 11, 12, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		builder  string // Packer's build.ID
		id, up   fakeSection
		known    bool
		wantID   string
		lastLine string
	}{
		{"the builder's id first", "i-0fedcba9876543210", fakeSection{out: "i-0123456789abcdef0\n"}, fakeSection{out: "600.25 4000.10\n"}, true, "i-0fedcba9876543210",
			"dlami: build instance i-0fedcba9876543210 (p6-b200.48xlarge) ran 10m"},
		{"read", "", fakeSection{out: "i-0123456789abcdef0\n"}, fakeSection{out: "600.25 4000.10\n"}, true, "i-0123456789abcdef0",
			"dlami: build instance i-0123456789abcdef0 (p6-b200.48xlarge) ran 10m"},
		{"no uptime", "", fakeSection{out: "i-0123456789abcdef0\n"}, fakeSection{out: "cat: /proc/uptime: Permission denied", code: 1}, false, "i-0123456789abcdef0",
			"dlami: build instance i-0123456789abcdef0 (p6-b200.48xlarge): its time up to the end of provisioning is unknown (/proc/uptime: "},
		{"no id", "", fakeSection{out: "iid-datasource-none\n"}, fakeSection{out: "60.00 1.00\n"}, true, "",
			"dlami: build instance (p6-b200.48xlarge) ran 1m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost(t)
			h.hostOut["host.instance_id"], h.hostOut["host.uptime"] = tc.id, tc.up
			opt := options(t, layer.Spec{Name: "drivers", Reboot: true})
			opt.InstanceType = "p5.48xlarge" // the host's own answer (product_name) wins
			opt.BuildInstanceID = tc.builder
			// The bake's clock: base at its first reading, then a second per reading.
			var ticks time.Duration
			opt.Now = func() time.Time { ticks += time.Second; return base.Add(ticks - time.Second) }
			ui := &recordingUI{}
			if err := Run(context.Background(), h, ui, opt); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(opt.ReportDir, report.JSONFile))
			if err != nil {
				t.Fatal(err)
			}
			var r report.Report
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatal(err)
			}
			bi := r.BuildInstance
			if bi == nil {
				t.Fatalf("no build_instance in the report:\n%s", data)
			}
			source := ""
			switch {
			case tc.builder != "":
				source = report.IDFromBuilder
			case tc.wantID != "":
				source = report.IDFromHost
			}
			if bi.InstanceID != tc.wantID || bi.InstanceIDSource != source || bi.InstanceType != "p6-b200.48xlarge" || bi.Known != tc.known || bi.Basis != report.BuildInstanceBasis {
				t.Errorf("build_instance %+v", bi)
			}
			if tc.known {
				up, _ := time.ParseDuration(strings.Fields(tc.up.out)[0] + "s")
				// Booted at the bake's clock when it read the uptime, less the uptime; counted
				// to the report's finished_at.
				if bi.BootedAt == nil || bi.BootedAt.After(base.Add(-up+10*time.Second)) || bi.BootedAt.Before(base.Add(-up)) {
					t.Errorf("booted_at %v, want about %v", bi.BootedAt, base.Add(-up))
				}
				if want := r.FinishedAt.Sub(*bi.BootedAt).Seconds(); bi.Seconds != want || bi.Seconds < up.Seconds() {
					t.Errorf("seconds %v, want %v (finished_at − booted_at)", bi.Seconds, want)
				}
			} else if bi.BootedAt != nil || bi.Seconds != 0 || !strings.Contains(bi.Unknown, "exited 1") {
				t.Errorf("unread uptime: %+v", bi)
			}
			md, err := os.ReadFile(filepath.Join(opt.ReportDir, report.MarkdownFile))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(md), "**Build instance time:** "+strings.TrimPrefix(tc.lastLine, "dlami: ")) {
				t.Errorf("the Markdown report does not carry the build instance's time:\n%s", md)
			}
			ju, err := os.ReadFile(filepath.Join(opt.ReportDir, report.JUnitFile))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(ju), `<property name="build_instance" value="`+strings.TrimPrefix(tc.lastLine, "dlami: ")) ||
				strings.Contains(string(ju), `name="build_instance_seconds"`) != tc.known {
				t.Errorf("the JUnit report's properties:\n%s", ju)
			}
			out := strings.TrimRight(ui.String(), "\n")
			last := out[strings.LastIndex(out, "\n")+1:]
			if !strings.HasPrefix(last, tc.lastLine) || !strings.Contains(last, "provisioning") {
				t.Errorf("last UI line %q, want it to start %q", last, tc.lastLine)
			}
		})
	}
}

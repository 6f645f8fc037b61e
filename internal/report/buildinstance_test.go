package report

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// The instance time a report carries is in its Markdown and JUnit renderings; a report
// without it renders neither.
func TestInstanceTimeInTheReports(t *testing.T) {
	booted := time.Date(2026, 11, 12, 7, 50, 0, 0, time.UTC)
	usd := 46.09
	base := Report{Checks: []result.Check{{ID: "kernel", Status: result.Pass}}}
	with := base
	with.BuildInstance = &BuildInstance{InstanceID: "i-0123456789abcdef0", InstanceType: "p5.48xlarge", BootedAt: &booted, Known: true, Seconds: 2472.4, Basis: BuildInstanceBasis}
	with.Cost = &Cost{Build: CostPhase{Known: true, Instances: []CostInstance{{InstanceType: "p5.48xlarge"}}, InstanceSeconds: 2472},
		Verification:    CostPhase{Known: true, Instances: []CostInstance{{InstanceType: "p5.48xlarge", StillRunning: true, InstanceID: "i-1"}}, InstanceSeconds: 543},
		InstanceSeconds: 3015, USD: &usd}
	for _, tc := range []struct {
		r    Report
		want bool
	}{{base, false}, {with, true}} {
		n, err := Normalize(tc.r)
		if err != nil {
			t.Fatal(err)
		}
		md := Markdown(n)
		for _, s := range []string{
			"**Build instance time:** build instance i-0123456789abcdef0 (p5.48xlarge) ran 41m12s up to the end of provisioning (from the host's boot",
			"**Instance time of the run (dlami-cost.json):** instance time: build 1 × p5.48xlarge 41m12s; verification 1 × p5.48xlarge 9m3s (i-1 still running: counted until now); total 50m15s, $46.09",
		} {
			if strings.Contains(md, s) != tc.want {
				t.Errorf("Markdown has %q: %v, want %v:\n%s", s, !tc.want, tc.want, md)
			}
		}
		ju, err := JUnit(n)
		if err != nil {
			t.Fatal(err)
		}
		var doc junitSuites
		if err := xml.Unmarshal(ju, &doc); err != nil {
			t.Fatalf("JUnit does not parse: %v\n%s", err, ju)
		}
		props := map[string]string{}
		for _, p := range doc.Suites[0].Properties {
			props[p.Name] = p.Value
		}
		got := props["build_instance_seconds"] == "2472" && props["instance_seconds"] == "3015" && props["instance_usd"] == "46.09" &&
			strings.HasPrefix(props["build_instance"], "build instance i-0123456789abcdef0") && strings.HasPrefix(props["instance_time"], "instance time: build 1 × p5.48xlarge")
		if got != tc.want || (!tc.want && len(props) != 1) {
			t.Errorf("JUnit properties %v (want instance time: %v)", props, tc.want)
		}
	}
	// A build instance whose uptime was unread says so.
	bi := BuildInstance{InstanceType: "g6.xlarge", Unknown: "/proc/uptime: host.uptime: exited 1", Basis: BuildInstanceBasis}
	if got, want := bi.Summary(), "build instance (g6.xlarge): its time up to the end of provisioning is unknown (/proc/uptime: host.uptime: exited 1)"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
}

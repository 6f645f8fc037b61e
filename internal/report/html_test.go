package report

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func f64(v float64) *float64 { return &v }

// sweep is an nccl-tests table from 8 B to 8 GiB (-b 8 -e 8G -f 2): 31 message sizes, busbw
// rising to bw.
func sweep(bw float64) []result.NCCLPoint {
	var out []result.NCCLPoint
	for size, i := int64(8), 0; size <= 8<<30; size, i = size*2, i+1 {
		v := bw * float64(i+1) / 31
		out = append(out, result.NCCLPoint{SizeBytes: size, BusBWGBps: f64(v), InPlaceBusBWGBps: f64(v)})
	}
	return out
}

func htmlOf(t *testing.T, r Report) string {
	t.Helper()
	n, err := Normalize(r)
	if err != nil {
		t.Fatal(err)
	}
	out, err := HTML(n)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

var (
	checkRowRe = regexp.MustCompile(`<tr class="check st-([a-z]+)" data-check="([^"]+)"`)
	pointRe    = regexp.MustCompile(`<circle class="point" data-size="(\d+)"`)
	curveRe    = regexp.MustCompile(`<g class="curve" data-name="([^"]*)"`)
	floorRe    = regexp.MustCompile(`<line class="floor" data-gbps="([^"]+)"`)
)

func TestHTML(t *testing.T) {
	start := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	twoNodes := Report{Result: ResultPass, BuildName: "verify", Checks: []result.Check{{ID: result.NCCLMultiNode, Status: result.Pass}},
		NCCL: &result.NCCLFigures{Points: sweep(90)},
		Launch: &Launch{InstanceType: "p5.48xlarge", Nodes: []LaunchNode{
			{InstanceID: "i-0aaa", NCCL: &result.NCCLFigures{Points: sweep(480), BusBWFloorGBps: f64(400)}},
			{InstanceID: "i-0bbb", NCCL: &result.NCCLFigures{Points: sweep(470), BusBWFloorGBps: f64(400)}},
		}}}
	tests := []struct {
		name        string
		r           Report
		verdict     string
		firstChecks []string // the first rows, in order
		curves      []int    // points per curve, in document order
		floors      []string
		contains    []string
		absent      []string
	}{
		{
			name:        "failing bake: failing checks first, the floor drawn",
			r:           sample(),
			verdict:     "fail",
			firstChecks: []string{"holds", "layer:slurm", "memlock", "kernel"},
			curves:      []int{0},
			contains:    []string{"&lt;script&gt;alert(1)&lt;/script&gt; &amp; co", "<details><summary>evidence</summary>", "FAIL: the bake failed (holds, layer:slurm)"},
			absent:      []string{"<script>alert(1)</script>"},
		},
		{
			name: "passing bake with its curve, floor and timeline",
			r: Report{Result: ResultPass, BuildName: "bake", InstanceType: "p5.48xlarge", StartedAt: start, FinishedAt: start.Add(40 * time.Minute),
				Checks: []result.Check{
					{ID: result.Kernel, Status: result.Pass, DurationMS: 2000},
					{ID: result.LayerPrefix + "slurm", Status: result.Pass, DurationMS: 120000},
					{ID: result.GPU, Status: result.Pass, DurationMS: 9000},
					{ID: result.NCCLBusBW, Status: result.Pass, DurationMS: 95000},
					{ID: result.DCGM, Status: result.Pass, DurationMS: 300000},
				},
				NCCL:          &result.NCCLFigures{Points: sweep(480), BusBWFloorGBps: f64(400), Seconds: 95},
				BuildInstance: &BuildInstance{InstanceID: "i-0b", InstanceType: "p5.48xlarge", Known: true, Seconds: 2400, Basis: BuildInstanceBasis}},
			verdict:  "pass",
			curves:   []int{31},
			floors:   []string{"400"},
			contains: []string{`data-phase="build"`, `data-phase="layers"`, `data-phase="host suite"`, `data-phase="NCCL"`, `data-phase="deeper tests"`, `<b id="gpu-minutes">40.0</b>`, "Not measured: snapshot"},
		},
		{
			name:     "two-node verification: one curve per node, and the test across them",
			r:        twoNodes,
			verdict:  "pass",
			curves:   []int{31, 31, 31},
			floors:   []string{"400"},
			contains: []string{`data-name="node 1 (i-0aaa)"`, `data-name="node 2 (i-0bbb)"`, "across 2 nodes"},
		},
		{
			name: "rebake: what changed",
			r: Report{Result: ResultPass, Checks: []result.Check{{ID: result.Kernel, Status: result.Pass}},
				Changes: &result.Changes{Previous: "golden of 2026-10-02", Compared: 12, Items: []result.Change{{Component: "kernel", Before: "7.0.0-1014-aws", After: "7.0.0-1015-aws"}}}},
			verdict:  "pass",
			contains: []string{`<tr class="change" data-component="kernel">`, "7.0.0-1015-aws", "No NCCL test ran"},
		},
		{
			name:    "cancelled bake is not green",
			r:       Report{Result: ResultCancelled, Error: "cancelled during layer x"},
			verdict: "fail",
			curves:  nil,
		},
		{
			name:    "deferred bake is not a pass",
			r:       Report{Result: ResultDeferred, Checks: []result.Check{{ID: result.Kernel, Status: result.Pass}, {ID: result.GPU, Status: result.Skip}}},
			verdict: "warn",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := htmlOf(t, tt.r)
			if m := regexp.MustCompile(`id="verdict" class="verdict ([a-z]+)"`).FindStringSubmatch(out); m == nil || m[1] != tt.verdict {
				t.Errorf("verdict class %v, want %s", m, tt.verdict)
			}
			n, _ := Normalize(tt.r)
			rows := checkRowRe.FindAllStringSubmatch(out, -1)
			if len(rows) != len(n.Checks) {
				t.Errorf("%d check rows, want %d", len(rows), len(n.Checks))
			}
			for i, id := range tt.firstChecks {
				if i >= len(rows) || rows[i][2] != id {
					t.Errorf("row %d = %v, want %s", i, rows[min(i, len(rows)-1)], id)
				}
			}
			// No passing row before a failing one.
			seenOK := false
			for _, row := range rows {
				failing := row[1] == "fail" || row[1] == "error"
				if failing && seenOK {
					t.Errorf("failing check %s after a check that did not fail", row[2])
				}
				seenOK = seenOK || !failing
			}
			var got []int
			parts := curveRe.Split(out, -1)
			for _, part := range parts[1:] {
				part, _, _ = strings.Cut(part, "</g>")
				got = append(got, len(pointRe.FindAllString(part, -1)))
			}
			if tt.curves != nil && !slices.Equal(got, tt.curves) {
				t.Errorf("points per curve %v, want %v", got, tt.curves)
			}
			var floors []string
			for _, m := range floorRe.FindAllStringSubmatch(out, -1) {
				floors = append(floors, m[1])
			}
			if strings.Join(floors, ",") != strings.Join(tt.floors, ",") {
				t.Errorf("floors %v, want %v", floors, tt.floors)
			}
			for _, s := range tt.contains {
				if !strings.Contains(out, s) {
					t.Errorf("missing %q", s)
				}
			}
			for _, s := range tt.absent {
				if strings.Contains(out, s) {
					t.Errorf("contains %q", s)
				}
			}
			selfContained(t, out)
		})
	}
}

// selfContained fails when the page would load anything: a script, a stylesheet, an image or
// a font from elsewhere.
func selfContained(t *testing.T, out string) {
	t.Helper()
	for _, bad := range []string{"<script", "<link", "<iframe", "<img", "@import", "url(", "src=", "https://"} {
		if strings.Contains(strings.ToLower(out), bad) {
			t.Errorf("the page is not self-contained: it contains %q", bad)
		}
	}
	// html/template writes ZgotmplZ where it refused a value in a URL, CSS or attribute
	// context: a colour or a bar width the page would lose.
	if strings.Contains(out, "ZgotmplZ") {
		t.Error("html/template refused a value (ZgotmplZ in the page)")
	}
	if strings.Count(out, "http://") != strings.Count(out, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Error("the page names an http:// address other than the SVG namespace")
	}
}

// Write writes the HTML report beside the others, redacted like them.
func TestWriteHTML(t *testing.T) {
	dir := t.TempDir()
	r := sample()
	r.Checks[0].Evidence = "token=s3cr3t-value-123"
	paths, err := Write(dir, r, "s3cr3t-value-123")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 4 || filepath.Base(paths[3]) != HTMLFile {
		t.Fatalf("paths %v, want the HTML report fourth", paths)
	}
	data, err := os.ReadFile(filepath.Join(dir, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "s3cr3t-value-123") || !strings.Contains(string(data), "token=&lt;sensitive&gt;") {
		t.Error("the HTML report is not redacted")
	}
}

// A verification's timeline: the build and the verification from EC2's times, this instance's
// phases inside the verification, GPU minutes counted once.
func TestTimelineOfAVerification(t *testing.T) {
	r := Report{Launch: &Launch{InstanceType: "p5.48xlarge"}, InstanceType: "p5.48xlarge",
		Checks: []result.Check{{ID: result.FirstBootKernel, Status: result.Pass, DurationMS: 3000}, {ID: result.GPU, Status: result.Pass, DurationMS: 60000}},
		Cost: &Cost{
			Build:        CostPhase{Known: true, InstanceSeconds: 600, Instances: []CostInstance{{InstanceType: "c7i.8xlarge", Seconds: 600}}},
			Verification: CostPhase{Known: true, InstanceSeconds: 1200, Instances: []CostInstance{{InstanceType: "p5.48xlarge", Seconds: 600}, {InstanceType: "p5.48xlarge", Seconds: 600}}},
			MultiNode:    &CostPhase{Known: true, InstanceSeconds: 240, Instances: []CostInstance{{InstanceType: "p5.48xlarge", Seconds: 120}, {InstanceType: "p5.48xlarge", Seconds: 120}}},
		}}
	phases, note := Timeline(r)
	var got []string
	gpu := 0.0
	for _, p := range phases {
		got = append(got, fmt.Sprintf("%s %v %v", p.Phase, p.Seconds, p.Part))
		if !p.Part {
			gpu += p.GPUSeconds
		}
	}
	want := []string{"build 600 false", "verification 1200 false", "first-boot guard 3 true", "host suite 60 true", "NCCL across nodes 240 true"}
	if !slices.Equal(got, want) {
		t.Errorf("timeline %q, want %q", got, want)
	}
	if gpu != 1200 || note != "" {
		t.Errorf("GPU seconds %v (want 1200: the CPU build instance costs none), note %q", gpu, note)
	}
	// Before the instances are gone: no verification row, and the note says why.
	r.Cost = nil
	if phases, note := Timeline(r); len(phases) != 2 || phases[0].Part || !strings.Contains(note, "verification") {
		t.Errorf("timeline %+v, note %q", phases, note)
	}
}

func TestGPUInstanceType(t *testing.T) {
	for typ, want := range map[string]bool{"p5.48xlarge": true, "p6-b200.48xlarge": true, "g6e.xlarge": true, "P4d.24xlarge": true,
		"c7i.8xlarge": false, "m7i.large": false, "": false, "p": false, "pp.x": false, "trn1.32xlarge": false} {
		if got := GPUInstanceType(typ); got != want {
			t.Errorf("GPUInstanceType(%q) = %v, want %v", typ, got, want)
		}
	}
}

// Whatever a check's text holds, the page has no markup of its own making from it.
func FuzzHTMLEscapes(f *testing.F) {
	f.Add("<script>alert(1)</script>", `"><svg onload=x>`, "javascript:x")
	f.Add("</pre></details><img src=x>", "&amp;", "\x00\x1b[31m")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		r := Report{BuildName: a, Error: b, Checks: []result.Check{{ID: "site:" + c, Status: result.Fail, Expected: a, Actual: b, Message: c, Evidence: a + b + c}},
			Manifest: map[string]string{a: b}, Changes: &result.Changes{Previous: c, Items: []result.Change{{Component: a, Before: b, After: c}}}}
		out := htmlOf(t, r)
		low := strings.ToLower(out)
		for _, bad := range []string{"<script", "<img", "<iframe", "<svg onload"} {
			if strings.Contains(low, bad) {
				t.Fatalf("unescaped %q in the page", bad)
			}
		}
	})
}

func TestNCCLOf(t *testing.T) {
	dir := t.TempDir()
	if NCCLOf(dir) != nil {
		t.Error("figures from a folder without a report")
	}
	r := Report{Result: ResultPass, Checks: []result.Check{{ID: result.Kernel, Status: result.Pass}}, NCCL: &result.NCCLFigures{Points: sweep(100)}}
	if _, err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	if got := NCCLOf(dir); got == nil || len(got.Points) != 31 {
		t.Errorf("NCCLOf = %+v, want the 31 points written", got)
	}
}

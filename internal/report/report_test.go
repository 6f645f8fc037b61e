package report

import (
	"encoding/json"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func sample() Report {
	start := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	return Report{
		PluginVersion:      "0.1.0-dev",
		BuildName:          "amazon-ebs.dlami",
		StartedAt:          start,
		FinishedAt:         start.Add(17*time.Minute + 3*time.Second),
		InstanceType:       "p6-b200.48xlarge",
		InstanceTypeSource: "imds",
		Stage:              `layer "slurm"`,
		Checks: []result.Check{
			{ID: result.Kernel, Status: result.Pass, Expected: "7.0.0-1014-aws", Actual: "7.0.0-1014-aws", Message: `after layer "slurm": running kernel 7.0.0-1014-aws`, Evidence: "drift: none", DurationMS: 12},
			{ID: result.Holds, Status: result.Fail, Expected: "25 guarded packages held", Actual: "24 of 25 held; 1 problem(s)",
				Message:  `after layer "slurm": linux-image-7.0.0-1014-aws: held → not held`,
				Evidence: "drift (1):\n  [hold] linux-image-7.0.0-1014-aws: held → not held\n<script>alert(1)</script> & co", DurationMS: 40},
			{ID: result.GDRCopy, Status: result.Skip, Expected: "gdrdrv loaded", Actual: "not applicable", Message: "no GPUDirect on this type"},
			{ID: result.Memlock, Status: result.Warn, Expected: "unlimited", Actual: "a|b `x` *y* ~~z~~", Message: "ulimit -l in the SSH shell only"},
			{ID: result.LayerPrefix + "slurm", Status: result.Fail, Basis: "rule", Expected: "exit 0", Actual: "exit 100", ExitCode: &exit100, DurationMS: 83400, Evidence: "E: Unable to locate package slurmd"},
			{ID: result.LayerPrefix + "enroot", Status: result.Skip, Expected: "exit 0", Actual: "not run"},
		},
		Drift:    []result.Drift{{Kind: guard.DriftHold, Package: "linux-image-7.0.0-1014-aws", Before: "held", After: "not held"}},
		Manifest: map[string]string{"nvidia_driver": "595.91.07", "kernel": "7.0.0-1014-aws", "efa_installer": "1.50.0"},
		NCCL:     &result.NCCLFigures{BusBWGBps: &busbw, LargestSizeBytes: 1073741824, BusBWPlacement: "out-of-place", Network: "Libfabric"},
	}
}

var (
	exit100 = 100
	busbw   = 711.2
)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from %s (run go test -update after checking the change):\n--- got\n%s", name, p, got)
	}
}

func TestGolden(t *testing.T) {
	r, err := Normalize(sample())
	if err != nil {
		t.Fatal(err)
	}
	js, err := JSON(r)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "report.json", js)
	ju, err := JUnit(r)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "report.junit.xml", ju)
	golden(t, "report.md", []byte(Markdown(r)))
	golden(t, "table.txt", []byte(Table(r.Checks)))
}

func TestNormalizeResult(t *testing.T) {
	pass := result.Check{ID: "a", Status: result.Pass}
	fail := result.Check{ID: "b", Status: result.Fail}
	tests := []struct {
		name   string
		in     Report
		want   string
		failed []string
	}{
		{"all pass", Report{Checks: []result.Check{pass}}, ResultPass, []string{}},
		{"a failed check overrides pass", Report{Result: ResultPass, Checks: []result.Check{pass, fail}}, ResultFail, []string{"b"}},
		{"failed layer", Report{Checks: []result.Check{pass, {ID: "layer:x", Status: result.Fail}}}, ResultFail, []string{"layer:x"}},
		{"an error fails", Report{Checks: []result.Check{pass, {ID: "stage:reboot", Status: result.Error}}}, ResultFail, []string{"stage:reboot"}},
		{"nothing judged", Report{}, ResultFail, []string{"bake:fail"}},
		{"explicit pass, nothing judged", Report{Result: ResultPass}, ResultPass, []string{}},
		{"explicit fail", Report{Result: ResultFail, Checks: []result.Check{pass}}, ResultFail, []string{"bake:fail"}},
		{"cancelled", Report{Result: ResultCancelled, Checks: []result.Check{pass}}, ResultCancelled, []string{"bake:cancelled"}},
		{"error with a failed check", Report{Result: ResultError, Checks: []result.Check{fail}}, ResultError, []string{"b"}},
	}
	for _, tt := range tests {
		n, err := Normalize(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if n.Result != tt.want || !reflect.DeepEqual(n.FailedChecks, tt.failed) {
			t.Errorf("%s: result %q failed %q, want %q %q", tt.name, n.Result, n.FailedChecks, tt.want, tt.failed)
		}
	}
	if _, err := Normalize(Report{Result: "ok"}); err == nil {
		t.Error("accepted result \"ok\"")
	}
	// The entry that makes a non-pass machine-readable says why.
	n, _ := Normalize(Report{Result: ResultCancelled, Error: "context canceled"})
	if c := n.Checks[len(n.Checks)-1]; c.ID != "bake:cancelled" || c.Status != result.Error || c.Message != "context canceled" {
		t.Errorf("cancel entry: %+v", c)
	}
}

func TestJSONHasNoNullLists(t *testing.T) {
	n, err := Normalize(Report{})
	if err != nil {
		t.Fatal(err)
	}
	js, err := JSON(n)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["layers"]; ok {
		t.Error("schema 2 has no layers array: layers are check entries")
	}
	if _, ok := m["launch"]; ok {
		t.Error("a bake's report has no launch object")
	}
	for k, want := range map[string]string{"drift": "[]", "manifest": "{}", "nccl": "null", "schema_version": "3", "deferred_checks": "[]"} {
		if string(m[k]) != want {
			t.Errorf("%s = %s, want %s", k, m[k], want)
		}
	}
}

// A first phase whose validation was deferred is "deferred", never "pass", and a failure in
// it is still "fail".
func TestDeferredResult(t *testing.T) {
	deferred := func(extra ...result.Check) Report {
		cs := []result.Check{{ID: "holds", Status: result.Pass, Basis: "baseline"}, {ID: "gpu", Status: result.Skip, Message: "deferred"}}
		return Report{Result: ResultDeferred, DeferredChecks: []string{"gpu"}, Checks: append(cs, extra...)}
	}
	n, err := Normalize(deferred())
	if err != nil {
		t.Fatal(err)
	}
	if n.Result != ResultDeferred || len(n.FailedChecks) != 0 || len(n.Checks) != 2 {
		t.Errorf("deferred: result %q failed %v checks %d; want deferred with no bake: entry", n.Result, n.FailedChecks, len(n.Checks))
	}
	if md := Markdown(n); !strings.Contains(md, "validation deferred") || strings.Contains(md, "bake passed\n") || !strings.Contains(md, "complete_validation = true") {
		t.Errorf("markdown of a deferred bake:\n%s", md)
	}
	ju, err := JUnit(n)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ju), `name="result" value="deferred"`) || !strings.Contains(string(ju), `name="deferred_checks" value="gpu"`) {
		t.Errorf("junit of a deferred bake:\n%s", ju)
	}
	n, _ = Normalize(deferred(result.Check{ID: "packages", Status: result.Fail}))
	if n.Result != ResultFail || !reflect.DeepEqual(n.FailedChecks, []string{"packages"}) {
		t.Errorf("deferred with a failed check: %q %v, want fail", n.Result, n.FailedChecks)
	}
	n, _ = Normalize(Report{Launch: &Launch{InstanceType: "p6-b200.48xlarge"}, Checks: []result.Check{{ID: "gpu", Status: result.Pass, Basis: "setting"}}})
	if n.Launch == nil || n.Launch.Refused == nil {
		t.Errorf("launch %+v: refused must be [] not null", n.Launch)
	}
}

func TestJUnitParsesAndCounts(t *testing.T) {
	r, _ := Normalize(sample())
	r.Checks = append(r.Checks, result.Check{ID: "stage:reboot", Status: result.Error, Message: "the host did not come back"})
	r.Checks = append(r.Checks, result.Check{ID: "weird", Status: "bogus", Evidence: "ctrl \x00\x1b[31m chars ]]> end"})
	b, err := JUnit(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Errors   int `xml:"errors,attr"`
			Skipped  int `xml:"skipped,attr"`
			Cases    []struct {
				Name       string    `xml:"name,attr"`
				Failure    *struct{} `xml:"failure"`
				Error      *struct{} `xml:"error"`
				Skipped    *struct{} `xml:"skipped"`
				SystemOut  string    `xml:"system-out"`
				Properties []struct {
					Name  string `xml:"name,attr"`
					Value string `xml:"value,attr"`
				} `xml:"properties>property"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("JUnit does not parse: %v\n%s", err, b)
	}
	if len(doc.Suites) != 1 {
		t.Fatalf("%d testsuites, want 1", len(doc.Suites))
	}
	s := doc.Suites[0]
	failures, skipped := 0, 0
	for _, c := range s.Cases {
		if c.Failure != nil {
			failures++
		}
		if c.Skipped != nil {
			skipped++
		}
	}
	errs := 0
	for _, c := range s.Cases {
		if c.Error != nil {
			errs++
		}
	}
	// holds and layer:slurm failed, the unknown status counts as a failure (never a pass), the
	// stage error is an <error>; gdrcopy and layer:enroot were skipped.
	if s.Tests != 8 || len(s.Cases) != 8 || s.Failures != 3 || failures != 3 || s.Errors != 1 || errs != 1 || s.Skipped != 2 || skipped != 2 {
		t.Errorf("tests %d cases %d failures %d/%d errors %d/%d skipped %d/%d", s.Tests, len(s.Cases), s.Failures, failures, s.Errors, errs, s.Skipped, skipped)
	}
	last := s.Cases[len(s.Cases)-1]
	if !strings.Contains(last.SystemOut, "chars ]]> end") || !strings.Contains(last.SystemOut, "ctrl \uFFFD\uFFFD[31m") {
		t.Errorf("CDATA end or control characters mangled: %q", last.SystemOut)
	}
	// A warning passes but says so.
	if w := s.Cases[3]; w.Name != "memlock" || len(w.Properties) == 0 || w.Properties[0].Value != "warn" {
		t.Errorf("warn case: %+v", w)
	}
	if !strings.Contains(s.Cases[1].SystemOut, "<script>alert(1)</script> & co") {
		t.Errorf("evidence lost in system-out: %q", s.Cases[1].SystemOut)
	}
}

func TestMarkdownEscapes(t *testing.T) {
	r, _ := Normalize(sample())
	md := Markdown(r)
	var row string
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "| memlock |") {
			row = l
		}
	}
	if !strings.Contains(row, `a\|b`) {
		t.Fatalf("memlock row %q does not escape |", row)
	}
	if n := strings.Count(row, "|") - strings.Count(row, `\|`); n != 5 {
		t.Errorf("memlock row %q has %d cell separators, want 5", row, n)
	}
	for _, bad := range []string{"<script>", "~~z~~", "*y*"} {
		if strings.Contains(md, bad) {
			t.Errorf("Markdown contains unescaped %q", bad)
		}
	}
	if !strings.Contains(md, "&lt;script&gt;") {
		t.Error("evidence HTML not escaped")
	}
}

func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "reports")
	paths, err := Write(dir, sample())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, JSONFile), filepath.Join(dir, JUnitFile), filepath.Join(dir, MarkdownFile), filepath.Join(dir, HTMLFile)}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("paths %v", paths)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 4 {
		t.Errorf("%d files in %s, want 4 (temp files left?)", len(ents), dir)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	var got Report
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Result != ResultFail || !reflect.DeepEqual(got.FailedChecks, []string{"holds", "layer:slurm"}) || got.SchemaVersion != SchemaVersion || got.Drift[0].Kind != guard.DriftHold || *got.NCCL.BusBWGBps != 711.2 {
		t.Errorf("round trip: result %q failed %v schema %d", got.Result, got.FailedChecks, got.SchemaVersion)
	}

	// A report that cannot be rendered writes nothing and leaves the previous one whole.
	bad := sample()
	bad.Result = "ok"
	if _, err := Write(dir, bad); err == nil {
		t.Fatal("Write accepted result \"ok\"")
	}
	after, _ := os.ReadFile(paths[0])
	if string(after) != string(b) {
		t.Error("a failed Write changed the previous report")
	}
	ents, _ = os.ReadDir(dir)
	if len(ents) != 4 {
		t.Errorf("%d files after a failed Write", len(ents))
	}

	file := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(file, sample()); err == nil {
		t.Error("Write into a file path succeeded")
	}
}

func TestTable(t *testing.T) {
	out := Table([]result.Check{
		{ID: "kernel", Status: result.Pass, Expected: "7.0.0-1014-aws", Actual: "7.0.0-1014-aws"},
		{ID: "nccl-busbw", Status: result.Fail, Expected: ">= 750 GB/s", Actual: strings.Repeat("x", 100) + "\nsecond line"},
	})
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	runeIndex := func(s, sub string) int {
		if i := strings.Index(s, sub); i >= 0 {
			return len([]rune(s[:i]))
		}
		return -1
	}
	col := runeIndex(lines[0], "STATUS")
	for _, l := range lines[1:] {
		if got := runeIndex(l, "PASS") + runeIndex(l, "FAIL") + 1; got != col {
			t.Errorf("status not aligned at column %d: %q", col, l)
		}
	}
	if !strings.Contains(out, "…") || strings.Contains(out, "second line") {
		t.Errorf("long value not cut:\n%s", out)
	}
}

func BenchmarkWrite(b *testing.B) {
	dir := b.TempDir()
	r := sample()
	for b.Loop() {
		if _, err := Write(dir, r); err != nil {
			b.Fatal(err)
		}
	}
}

// Secrets never reach a report: layer output, evidence, messages, the error and the manifest
// are redacted in all three files, and a set leaves no temporary file behind.
func TestWriteRedactsSecrets(t *testing.T) {
	const secret = "s3cr3t-token-value"
	r := Report{Result: "fail", Error: "layer failed: curl -H 'Authorization: " + secret + "'",
		Checks: []result.Check{
			{ID: "layer:private", Status: result.Fail, Evidence: "fetching https://user:" + secret + "@repo.example/\nE: 401", Message: "exit 1"},
			{ID: "nccl-correctness", Status: result.Pass, Actual: "ok", Basis: "rule", Expected: "x", Message: "env " + secret},
		},
		Manifest: map[string]string{"note": secret}}
	dir := t.TempDir()
	paths, err := Write(dir, r, secret, "ab")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) || !strings.Contains(string(b), "sensitive") {
			t.Errorf("%s: secret not redacted:\n%s", p, b)
		}
		if strings.Contains(string(b), "<sensitive>b") {
			t.Errorf("%s: a two-letter value was treated as a secret", p)
		}
	}
	if b, _ := os.ReadFile(paths[0]); !strings.Contains(string(b), "https://user:"+Redacted+"@repo.example/") {
		t.Errorf("JSON evidence: %s", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 {
		t.Errorf("%d files in the report folder, want the four reports", len(entries))
	}
}

// A --simulate-failure report says so in each of its three files.
func TestSimulatedInEveryFile(t *testing.T) {
	r, err := Normalize(Report{BuildName: "golden", Simulated: "gpu", Checks: []result.Check{{ID: "gpu", Status: result.Fail, Message: "SIMULATED failure (dlami-node-check --simulate-failure gpu)"}},
		Evidence: &Evidence{Path: "/var/lib/dlami-node-check/evidence/b.tar.gz", Problems: []string{"could not upload"}}, Replacement: &Replacement{Engine: "asg", Requested: true, Message: "marked Unhealthy"}})
	if err != nil {
		t.Fatal(err)
	}
	js, err := JSON(r)
	if err != nil || !strings.Contains(string(js), `"simulated": "gpu"`) {
		t.Errorf("JSON: %v\n%s", err, js)
	}
	ju, err := JUnit(r)
	if err != nil || !strings.Contains(string(ju), `name="dlami: golden (SIMULATED failure of gpu)"`) {
		t.Errorf("JUnit: %v\n%s", err, ju)
	}
	md := Markdown(r)
	for _, want := range []string{"**SIMULATED**: `gpu` failed on purpose", "| simulated | gpu |", "| evidence | /var/lib/dlami-node-check/evidence/b.tar.gz |", "| evidence problems | could not upload |", "| replacement (asg) | marked Unhealthy |"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	page, err := HTML(r)
	if err != nil || !strings.Contains(string(page), "<b>SIMULATED:</b> <code>gpu</code> failed on purpose") {
		t.Errorf("HTML: %v\n%s", err, page)
	}
	// A real report has none of it.
	r.Simulated, r.Evidence, r.Replacement = "", nil, nil
	if md := Markdown(r); strings.Contains(md, "**SIMULATED**") || strings.Contains(md, "| simulated") {
		t.Errorf("a real report says simulated:\n%s", md)
	}
}

package dcgmdiag

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

func TestParseTestdata(t *testing.T) {
	for _, tt := range []struct {
		file            string
		format          int
		version, driver string
		tests           int
		worst           Outcome
	}{
		{"dcgm4.2.3-r1-GB10-software-fail-persistence.json", 4, "4.2.3", "580.82.09", 1, Fail},
		{"derived-dcgm4-r3-8xGPU-diagnostic-test-issue215.json", 4, "", "", 1, Pass},
		{"derived-dcgm3.3.1-r3-T400-all-skip-issue139.json", 3, "", "", 5, Skip},
		{"dcgm3-gcm-test-deployment-fail-warn.json", 3, "", "", 9, Fail},
	} {
		t.Run(tt.file, func(t *testing.T) {
			r, err := Parse(fixture.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if r.Format != tt.format || r.Version != tt.version || r.DriverVersion != tt.driver || len(r.Tests) != tt.tests || r.Worst() != tt.worst {
				t.Errorf("got format %d, version %q, driver %q, %d tests, worst %v", r.Format, r.Version, r.DriverVersion, len(r.Tests), r.Worst())
			}
		})
	}
}

func TestParseDetails(t *testing.T) {
	r, _ := Parse(fixture.Read(t, "dcgm4.2.3-r1-GB10-software-fail-persistence.json"))
	sw, ok := r.Test("Software")
	if !ok || sw.Category != "Deployment" || sw.Summary != Fail || sw.RawSummary != "Fail" || len(sw.Results) != 1 {
		t.Fatalf("software = %+v", sw)
	}
	res := sw.Results[0]
	if res.Entity != "GPU" || res.EntityID != 0 || res.Outcome != Fail || len(res.Warnings) != 1 {
		t.Fatalf("result = %+v", res)
	}
	if w := res.Warnings[0]; w.ErrorID != 29 || w.Category != 8 || w.Severity != 5 || !strings.HasPrefix(w.Text, "Persistence Mode: Persistence mode for GPU 0 is disabled.") {
		t.Errorf("warning = %+v", w)
	}
	if len(sw.SummaryInfo) != 1 || !strings.Contains(sw.SummaryInfo[0], "SRAM Threshold") {
		t.Errorf("summary info = %q", sw.SummaryInfo)
	}

	r, _ = Parse(fixture.Read(t, "derived-dcgm4-r3-8xGPU-diagnostic-test-issue215.json"))
	d := r.Tests[0]
	if d.Name != "diagnostic" || len(d.Results) != 8 || d.Results[7].EntityID != 7 || len(d.Results[0].Info) != 3 || d.Results[3].Info != nil {
		t.Errorf("diagnostic = %+v", d)
	}

	r, _ = Parse(fixture.Read(t, "derived-dcgm3.3.1-r3-T400-all-skip-issue139.json"))
	for _, tst := range r.Tests {
		if tst.Summary != Skip || len(tst.Results) != 1 || tst.Results[0].EntityID != 0 || tst.Results[0].Entity != "GPU" {
			t.Errorf("3.x test = %+v", tst)
		}
	}

	r, _ = Parse(fixture.Read(t, "dcgm3-gcm-test-deployment-fail-warn.json"))
	if pm, _ := r.Test("Persistence Mode"); pm.Summary != Fail || pm.Results[0].EntityID != -1 {
		t.Errorf("Persistence Mode = %+v", pm)
	}
	if ev, _ := r.Test("Environment Variables"); ev.Summary != Warn {
		t.Errorf("Environment Variables = %+v", ev)
	}
}

func TestParseVariants(t *testing.T) {
	// 3.x result with gpu_ids list, warning string and info string; banner before the JSON.
	r, err := Parse("Successfully ran diagnostic for group.\n" + `{"DCGM GPU Diagnostic": {"version": "3.3.9", "test_categories": [{"category": "Hardware", "tests": [
		{"name": "GPU Memory", "results": [{"gpu_ids": "0,1", "status": "FAIL", "warning": "DBE on GPU 1", "error_id": 38, "info": "ran"}]},
		{"name": "Memtest", "results": [{"gpu_id": "0", "status": "Not Run"}, {"gpu_id": "1", "status": "Inconclusive"}]}]}]}}`)
	if err != nil {
		t.Fatal(err)
	}
	m := r.Tests[0]
	if len(m.Results) != 2 || m.Results[1].EntityID != 1 || m.Summary != Fail || m.Results[0].Warnings[0] != (Message{Text: "DBE on GPU 1", ErrorID: 38, Category: -1, Severity: -1}) || m.Results[0].Info[0] != "ran" {
		t.Errorf("GPU Memory = %+v", m)
	}
	if mt := r.Tests[1]; mt.Summary != Unknown || mt.Results[0].Outcome != NotRun || r.Version != "3.3.9" {
		t.Errorf("Memtest = %+v", mt)
	}
	// A 4.x summary that reads better than a result is held to the result.
	r, err = Parse(`{"DCGM Diagnostic": {"test_categories": [{"category": "Integration", "tests": [{"name": "pcie",
		"results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 3, "status": "Fail"}], "test_summary": {"status": "Pass"}}]}]}}`)
	if err != nil || r.Tests[0].Summary != Fail || r.Tests[0].RawSummary != "Pass" {
		t.Errorf("summary better than its result: %+v, %v", r, err)
	}
	for _, w := range []string{"pass", "PASS", "Skipped", "not_run", "Warning"} {
		if ParseOutcome(w) == Unknown {
			t.Errorf("ParseOutcome(%q) = Unknown", w)
		}
	}
	for _, w := range []string{"", "ok", "passed?", "Inconclusive"} {
		if o := ParseOutcome(w); o == Pass {
			t.Errorf("ParseOutcome(%q) = Pass", w)
		}
	}
}

func TestCouldNotRun(t *testing.T) {
	for _, tt := range []struct{ name, in, reason string }{
		{"runtime_error", fixture.Read(t, "derived-dcgm4-runtime-error-paused.json"), "paused"},
		{"hostengine down", fixture.Read(t, "derived-text-hostengine-not-running.txt"), "Host engine connection invalid"},
		{"empty", "", "no output"},
		{"no tests", `{"DCGM Diagnostic": {"test_categories": []}}`, "no test"},
		{"3.x runtime_error", `{"DCGM GPU Diagnostic": {"runtime_error": "Error: DCGM_ST_NVVS_ERROR"}}`, "DCGM_ST_NVVS_ERROR"},
		{"banner and broken json", "Error: x {oops", "Error: x"},
		{"not found", "bash: dcgmi: command not found\n", "command not found"},
	} {
		_, err := Parse(tt.in)
		if !IsCouldNotRun(err) || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("%s: error %v, want CouldNotRun mentioning %q", tt.name, err, tt.reason)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"broken json", `{"DCGM Diagnostic": {`, "not a JSON document"},
		{"other document", `{"nvidia": 1}`, "neither"},
		{"trailing", `{"DCGM Diagnostic": {"test_categories": [{"category": "c", "tests": [{"name": "t", "results": [{"status": "Pass"}]}]}]}} extra`, "after the JSON"},
		{"no status", `{"DCGM Diagnostic": {"test_categories": [{"category": "c", "tests": [{"name": "t", "results": [{"entity_id": 0}]}]}]}}`, "without a status"},
		{"no name", `{"DCGM Diagnostic": {"test_categories": [{"category": "c", "tests": [{"results": [{"status": "Pass"}]}]}]}}`, "without a name"},
		{"empty test", `{"DCGM Diagnostic": {"test_categories": [{"category": "c", "tests": [{"name": "t", "results": []}]}]}}`, "no result"},
		{"bad id", `{"DCGM GPU Diagnostic": {"test_categories": [{"category": "c", "tests": [{"name": "t", "results": [{"gpu_id": "x", "status": "Pass"}]}]}]}}`, "entity id"},
		{"bad categories", `{"DCGM Diagnostic": {"test_categories": 7}}`, "test_categories"},
	} {
		_, err := Parse(tt.in)
		if err == nil || IsCouldNotRun(err) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want a parse error mentioning %q", tt.name, err, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	fixture.SeedFuzz(f, ".json")
	fixture.SeedFuzz(f, ".txt")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			return
		}
		if len(r.Tests) == 0 {
			t.Fatal("no error but no tests")
		}
		for _, tst := range r.Tests {
			for _, res := range tst.Results {
				if res.Outcome > tst.Summary {
					t.Fatalf("summary %v better than result %v", tst.Summary, res.Outcome)
				}
				if res.Outcome == Pass && ParseOutcome(res.RawStatus) != Pass {
					t.Fatalf("pass without a pass word: %q", res.RawStatus)
				}
			}
		}
	})
}

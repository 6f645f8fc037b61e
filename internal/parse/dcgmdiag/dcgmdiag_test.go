package dcgmdiag

import (
	"errors"
	"reflect"
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
		if r.Worst() == Pass {
			for _, tst := range r.Tests {
				if tst.SummaryWorse() || tst.Summary != Pass {
					t.Fatalf("worst Pass with test %+v", tst)
				}
			}
		}
		for _, id := range r.GPUs() {
			if id < 0 {
				t.Fatalf("negative GPU id in %v", r.GPUs())
			}
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

// TestVersionAndCoverage: DCGM 3.x's top-level version, driver and GPU list, DCGM 4.x's
// metadata and entity_groups, and the GPUs each test covered.
func TestVersionAndCoverage(t *testing.T) {
	for _, tt := range []struct {
		file            string
		version, driver string
		gpus, pcieGPUs  []int
	}{
		{"derived-dcgm3.3.9-r2-8xA100-top-level-version.json", "3.3.9", "535.129.03", []int{0, 1, 2, 3, 4, 5, 6, 7}, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"derived-dcgm3.3.9-r2-A100-covers-1-gpu.json", "3.3.9", "535.129.03", []int{0}, []int{0}},
		{"dcgm4.2.3-r1-GB10-software-fail-persistence.json", "4.2.3", "580.82.09", []int{0}, nil},
		{"derived-dcgm4-r3-8xGPU-diagnostic-test-issue215.json", "", "", []int{0, 1, 2, 3, 4, 5, 6, 7}, nil},
		{"dcgm3-gcm-test-deployment-fail-warn.json", "", "", nil, nil},
	} {
		t.Run(tt.file, func(t *testing.T) {
			r, err := Parse(fixture.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if r.Version != tt.version || r.DriverVersion != tt.driver || !reflect.DeepEqual(r.GPUs(), tt.gpus) {
				t.Errorf("version %q, driver %q, GPUs %v", r.Version, r.DriverVersion, r.GPUs())
			}
			if p, ok := r.Test("PCIe"); ok && !reflect.DeepEqual(p.GPUs(), tt.pcieGPUs) {
				t.Errorf("PCIe covers %v", p.GPUs())
			}
		})
	}
	r, _ := Parse(fixture.Read(t, "derived-dcgm3.3.9-r2-8xA100-top-level-version.json"))
	if e := r.Entities[7]; e != (Entity{Group: "GPU", ID: 7, DeviceID: "20b0", Serial: "1322921056183"}) || len(r.Entities) != 8 {
		t.Errorf("3.x entities %+v", r.Entities)
	}
	if d, _ := r.Test("Denylist"); d.GPUs() != nil || d.Summary != Pass {
		t.Errorf("a Deployment test names GPUs: %+v", d)
	}
	r, _ = Parse(fixture.Read(t, "dcgm4.2.3-r1-GB10-software-fail-persistence.json"))
	if len(r.Entities) != 1 || r.Entities[0] != (Entity{Group: "GPU", ID: 0, DeviceID: "2e12", Serial: "<<<NOT_SUPPORTED>>>"}) {
		t.Errorf("4.x entities %+v", r.Entities)
	}
}

// TestSummaryWorse: per-GPU results all Pass, the test_summary Fail with an error of no GPU:
// the test fails, and SummaryWorse says why the results alone would have passed it.
func TestSummaryWorse(t *testing.T) {
	r, err := Parse(fixture.Read(t, "derived-dcgm4-r3-8xGPU-results-pass-summary-fail.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := r.Tests[0]
	if d.Summary != Fail || d.WorstResult() != Pass || !d.SummaryWorse() || r.Worst() != Fail || len(d.Results) != 8 {
		t.Fatalf("summary %v, worst result %v, summary worse %v", d.Summary, d.WorstResult(), d.SummaryWorse())
	}
	if w := d.SummaryWarnings; len(w) != 1 || w[0].ErrorID != 44 || w[0].Category != 16 || w[0].Severity != 4 || !strings.Contains(w[0].Text, "internal error") {
		t.Errorf("summary warnings %+v", w)
	}
	ok, _ := Parse(fixture.Read(t, "derived-dcgm4-r3-8xGPU-diagnostic-test-issue215.json"))
	if ok.Tests[0].SummaryWorse() || (Test{Summary: Fail}).SummaryWorse() {
		t.Error("SummaryWorse on a summary that agrees with its results, or on a test with no result")
	}
}

func TestExitStatus(t *testing.T) {
	for _, tt := range []struct {
		status          int
		name            string
		failed, isolate bool
	}{
		{0, "DCGM_ST_OK", false, false},
		{226, "DCGM_ST_NVVS_ERROR", true, false}, // the GB10 run of dcgm4.2.3-r1-GB10-software-fail-persistence.json exited 226
		{205, "DCGM_ST_NVVS_ISOLATE_ERROR", true, true},
		{203, "DCGM_ST_NVVS_KILLED", false, false},
		{202, "DCGM_ST_PAUSED", false, false},
		{235, "DCGM_ST_CONNECTION_NOT_VALID", false, false},
		{254, "(dcgmi: command-line parse error)", false, false},
		{1, "", false, false},
		{-1, "", false, false},
		{300, "", false, false},
	} {
		e := ExitStatus(tt.status)
		if e.Name != tt.name || e.TestFailed != tt.failed || e.Isolate != tt.isolate || e.Status != tt.status {
			t.Errorf("ExitStatus(%d) = %+v", tt.status, e)
		}
	}
	if s := ExitStatus(226).String(); s != "exit 226 (DCGM_ST_NVVS_ERROR)" {
		t.Errorf("String = %q", s)
	}
	if s := ExitStatus(1).String(); s != "exit 1" {
		t.Errorf("String = %q", s)
	}
}

func TestDeploymentWarnings3x(t *testing.T) {
	// DCGM 3.x's Deployment results put the message under "warnings" inside each object
	// (dcgmi/Diag.cpp HelperJsonAddBasicTests, v3.3.9), with the GPU the error names.
	r, err := Parse(`{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [{"name": "Persistence Mode", "results": [
		{"gpu_id": 3, "status": "Fail", "warnings": [{"error_category": 3, "error_id": 29, "error_severity": 5, "warnings": "Persistence mode for GPU 3 is disabled."}]}]}]}]},
		"version": "3.3.9"}`)
	if err != nil {
		t.Fatal(err)
	}
	res := r.Tests[0].Results[0]
	if res.EntityID != 3 || len(res.Warnings) != 1 || res.Warnings[0].Text != "Persistence mode for GPU 3 is disabled." || res.Warnings[0].ErrorID != 29 || r.Version != "3.3.9" {
		t.Errorf("result %+v, version %q", res, r.Version)
	}
	_, err = Parse(`{"iterations": [{"DCGM GPU Diagnostic": {}}], "Overall Result": "Pass"}`)
	if err == nil || IsCouldNotRun(err) || !strings.Contains(err.Error(), "iterations") {
		t.Errorf("iterations document: %v", err)
	}
	var c *CouldNotRun
	_, err = Parse(`{"DCGM Diagnostic": {"runtime_error": "Error: NVVS failed", "error_code": 8, "version": "4.6.0"}}`)
	if !errors.As(err, &c) || c.Code != 8 {
		t.Errorf("runtime error code: %v", err)
	}
}

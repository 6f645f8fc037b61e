package checks

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/migmode"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// dcgmFixture reads a dcgmi diag document of internal/parse/dcgmdiag/testdata.
func dcgmFixture(t *testing.T, name string) string {
	t.Helper()
	return readFixture(t, "../parse/dcgmdiag/testdata/"+name)
}

// dcgmRun renders the DCGM script's output around dcgmi's: the document, then the script's
// EXIT line with dcgmi's status (none when rc < 0) and its STDERR section, as dcgm.sh prints
// them.
func dcgmRun(doc string, rc int) string {
	out := doc + "\n"
	if rc >= 0 {
		out += fmt.Sprintf("%s EXIT %d\n", dcgmMarkerT, rc)
	}
	return out + dcgmMarkerT + " STDERR\n"
}

// judgeDCGMOutput judges the DCGM script's output at level, as the probe reads it, against t.
func judgeDCGMOutput(out string, level settings.DCGMLevel, timedOut bool, t Target) result.Check {
	f, missing := probe.ParseDCGMRun(out, level)
	t.Function.DCGMLevel = level
	return judgeDCGM(facts.Run{DCGM: facts.DCGMRun{Result: f, Missing: missing, TimedOut: timedOut}}, t)
}

// profiled is the Target of an instance type with its built-in profile.
func profiled(t *testing.T, typ string) Target {
	t.Helper()
	p, ok := profile.Lookup(typ)
	if !ok {
		t.Fatalf("no profile %s", typ)
	}
	return Target{InstanceType: typ, InstanceTypeSource: "product_name", Profile: &p}
}

// gpuCount is a Target without a profile whose expect.gpu_count is n.
func gpuCount(n int) Target {
	return Target{Checks: settings.Checks{Expect: settings.Expectations{GPUCount: n}}}
}

func TestJudgeDCGM(t *testing.T) {
	eight := gpuCount(8)
	p4d := profiled(t, "p4d.24xlarge")
	tests := []struct {
		name    string
		out     string
		target  Target
		status  result.Status
		mention string
	}{
		{"all pass, exit 0", dcgmRun(dcgmFixture(t, "derived-dcgm4-r3-8xGPU-diagnostic-test-issue215.json"), 0), eight, result.Pass, ""},
		{"a failed test", dcgmRun(dcgmFixture(t, "dcgm4.2.3-r1-GB10-software-fail-persistence.json"), 226), gpuCount(1), result.Fail, "software"},
		{"all skipped: could not run", dcgmRun(dcgmFixture(t, "derived-dcgm3.3.1-r3-T400-all-skip-issue139.json"), 0), gpuCount(1), result.Error, "could not run"},
		{"runtime error: could not run", dcgmRun(dcgmFixture(t, "derived-dcgm4-runtime-error-paused.json"), 226), eight, result.Error, "could not run"},
		{"host engine down: could not run", dcgmFixture(t, "derived-text-hostengine-not-running.txt"), eight, result.Error, "could not run"},
		{"dcgmi missing", dcgmMarkerT + " MISSING dcgmi is not installed at /usr/bin/dcgmi\n", eight, result.Fail, "dcgm_level = 0"},
		{"timed out", "", eight, result.Error, "did not finish"},
		// Issue 28: every result says Pass, the test_summary says Fail (an error of no GPU).
		{"results pass, summary fails", dcgmRun(dcgmFixture(t, "derived-dcgm4-r3-8xGPU-results-pass-summary-fail.json"), 226), eight, result.Fail, "There was an internal error during the test"},
		// Issue 28: the script's EXIT line is read.
		{"all pass but dcgmi exited 226 (DCGM_ST_NVVS_ERROR)", dcgmRun(dcgmFixture(t, "derived-dcgm4-r3-8xGPU-diagnostic-test-issue215.json"), 226), eight, result.Fail, "DCGM_ST_NVVS_ERROR"},
		{"all pass but dcgmi exited 205 (isolate)", dcgmRun(dcgmFixture(t, "derived-dcgm4-r3-8xGPU-diagnostic-test-issue215.json"), 205), eight, result.Fail, "retire"},
		{"all pass but dcgmi exited 227 (requires root)", dcgmRun(dcgmFixture(t, "derived-dcgm4-r3-8xGPU-diagnostic-test-issue215.json"), 227), eight, result.Error, "DCGM_ST_REQUIRES_ROOT"},
		{"all pass but no exit status", dcgmRun(dcgmFixture(t, "derived-dcgm4-r3-8xGPU-diagnostic-test-issue215.json"), -1), eight, result.Error, "exit status"},
		// Issue 28: results that cover 1 of 8 GPUs.
		{"DCGM 3.x, every GPU of a p4d", dcgmRun(dcgmFixture(t, "derived-dcgm3.3.9-r2-8xA100-top-level-version.json"), 0), p4d, result.Pass, ""},
		{"DCGM 3.x, 1 of a p4d's 8 GPUs", dcgmRun(dcgmFixture(t, "derived-dcgm3.3.9-r2-A100-covers-1-gpu.json"), 0), p4d, result.Fail, "1 of 8 GPUs"},
		{"no expected GPU count", dcgmRun(dcgmFixture(t, "derived-dcgm4-r3-8xGPU-diagnostic-test-issue215.json"), 0), Target{}, result.Warn, "expect.gpu_count"},
	}
	for _, tt := range tests {
		c := judgeDCGMOutput(tt.out, 2, tt.name == "timed out", tt.target)
		if c.Status != tt.status || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
	if c := judgeDCGMOutput(dcgmRun(dcgmFixture(t, "derived-dcgm3.3.9-r2-8xA100-top-level-version.json"), 0), 2, false, p4d); !strings.Contains(c.Actual, "DCGM 3.3.9") {
		t.Errorf("DCGM 3.x version: %q", c.Actual)
	}
	if c := judgeDCGM(facts.Run{}, Target{}); c.Status != result.Skip {
		t.Errorf("level 0: %s", c.Status)
	}
}

// A test whose results cover fewer GPUs than the run covered fails, whatever it says.
func TestJudgeDCGMTestCoverage(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal([]byte(dcgmFixture(t, "derived-dcgm3.3.9-r2-8xA100-top-level-version.json")), &doc); err != nil {
		t.Fatal(err)
	}
	// The Integration category's PCIe test names GPUs 0-7: drop GPU 5's result.
	cats := doc["DCGM GPU Diagnostic"].(map[string]any)["test_categories"].([]any)
	pcie := cats[1].(map[string]any)["tests"].([]any)[0].(map[string]any)
	results := pcie["results"].([]any)
	pcie["results"] = append(results[:5:5], results[6:]...)
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	c := judgeDCGMOutput(dcgmRun(string(b), 0), 2, false, profiled(t, "p4d.24xlarge"))
	if c.Status != result.Fail || !strings.Contains(c.Message, "GPU 5") {
		t.Errorf("PCIe without GPU 5: %s %q: %s", c.Status, c.Actual, c.Message)
	}
}

func FuzzJudgeDCGM(f *testing.F) {
	f.Add(`{"DCGM Diagnostic": {"test_categories": []}}`)
	f.Add(dcgmMarkerT + " ERROR dcgmi is not installed\n")
	f.Add(dcgmMarkerT + " STARTED nv-hostengine\n{}\n" + dcgmMarkerT + " STDERR\nboom\n")
	f.Add(`{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory", "results": [{"entity_group": "GPU", "entity_id": 0, "status": "Pass"}], "test_summary": {"status": "Pass"}}]}]}}` + "\n" + dcgmMarkerT + " EXIT 0\n")
	f.Fuzz(func(t *testing.T, s string) {
		c := judgeDCGMOutput(s, 2, false, gpuCount(1))
		if c.Status == result.Pass && (!strings.Contains(strings.ToLower(s), "pass") || !strings.Contains(s, dcgmMarkerT+" EXIT 0")) {
			t.Fatalf("a run without a passed result and exit 0 judged pass: %q", s)
		}
	})
}

// dcgmi diag does not run under MIG: proven MIG mode skips the check naming why; MIG off, or a
// MIG mode that could not be read, leaves the run judged as usual.
func TestJudgeDCGMUnderMIG(t *testing.T) {
	out := dcgmRun(dcgmFixture(t, "dcgm4.2.3-r1-GB10-software-fail-persistence.json"), 226)
	f, missing := probe.ParseDCGMRun(out, 2)
	tg := gpuCount(1)
	tg.Function.DCGMLevel = 2
	for _, c := range []struct {
		name string
		mig  facts.Fact[[]migmode.GPU]
		want result.Status
		msg  string
	}{
		{"MIG enabled", facts.Read([]migmode.GPU{{Index: 0, Enabled: true, Raw: "Enabled"}}, "0, Enabled"), result.Skip, "MIG is enabled on GPU [0]"},
		{"MIG disabled", facts.Read([]migmode.GPU{{Index: 0, Raw: "Disabled"}}, "0, Disabled"), result.Fail, "software"},
		{"MIG unreadable", facts.Unread[[]migmode.GPU]("exit 2", ""), result.Fail, "software"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := judgeDCGM(facts.Run{Host: facts.Host{MIG: c.mig}, DCGM: facts.DCGMRun{Result: f, Missing: missing}}, tg)
			if got.Status != c.want || !strings.Contains(got.Message, c.msg) {
				t.Errorf("%s: %s", got.Status, got.Message)
			}
		})
	}
}

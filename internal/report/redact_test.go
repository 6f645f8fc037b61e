package report

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// A secret that happens to be a word of the report's own vocabulary ("fail", "pass", "error",
// a check id, an instance type) never rewrites a verdict: result, statuses, ids and kinds stay
// as they are, and the same word in a message or in evidence is still redacted.
func TestRedactKeepsVerdicts(t *testing.T) {
	exit := 1
	r, err := Normalize(Report{
		Result: ResultFail, InstanceType: "p5.48xlarge", InstanceTypeSource: "configured", Stage: `layer "efa"`,
		Checks: []result.Check{
			{ID: "layer:efa", Status: result.Fail, Message: "the layer printed fail and pass", Evidence: "efa fail", ExitCode: &exit},
			{ID: "nccl-transport", Status: result.Pass, Basis: "rule", Expected: "efa", Actual: "efa"},
			{ID: "xid", Status: result.Error, Message: "error reading the journal"},
		},
		Drift:          []result.Drift{{Kind: "package-version", Package: "efa", Before: "pass", After: "fail"}},
		DeferredChecks: []string{"nccl-busbw"},
		NCCL:           &result.NCCLFigures{BusBWPlacement: "out-of-place", Network: "Libfabric"},
		Launch:         &Launch{InstanceType: "p5.48xlarge", Refused: []LaunchRefusal{{InstanceType: "p5e.48xlarge", Code: "InsufficientInstanceCapacity", Message: "no p5e.48xlarge capacity"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Redact(r, []string{"fail", "pass", "error", "layer:efa", "p5.48xlarge", "p5e.48xlarge", "InsufficientInstanceCapacity", "package-version", "out-of-place", "nccl-busbw"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Result != ResultFail || !slices.Equal(got.FailedChecks, []string{"layer:efa", "xid"}) || got.InstanceType != "p5.48xlarge" {
		t.Errorf("result %q, failed %v, type %q", got.Result, got.FailedChecks, got.InstanceType)
	}
	for i, c := range got.Checks {
		if c.ID != r.Checks[i].ID || c.Status != r.Checks[i].Status || c.Basis != r.Checks[i].Basis {
			t.Errorf("check %d: %+v, want id, status and basis of %+v", i, c, r.Checks[i])
		}
	}
	if got.Drift[0].Kind != "package-version" || got.Launch.Refused[0].Code != "InsufficientInstanceCapacity" ||
		got.Launch.InstanceType != "p5.48xlarge" || got.NCCL.BusBWPlacement != "out-of-place" || got.DeferredChecks[0] != "nccl-busbw" {
		t.Errorf("kinds and codes changed: %+v %+v %+v %v", got.Drift, got.Launch, got.NCCL, got.DeferredChecks)
	}
	if m := got.Checks[0].Message; m != "the layer printed "+Redacted+" and "+Redacted {
		t.Errorf("message %q: the secret words in free text must still go", m)
	}
	if d := got.Drift[0]; d.Before != Redacted || d.After != Redacted {
		t.Errorf("drift values %+v: want them redacted", d)
	}
	if m := got.Launch.Refused[0].Message; strings.Contains(m, "p5e.48xlarge") {
		t.Errorf("EC2's message %q: want the secret redacted", m)
	}
}

// Every verbatim path is a field the report has: a renamed field would otherwise quietly lose
// its protection.
func TestVerbatimPathsExist(t *testing.T) {
	exit, nics := 0, 1
	r, err := Normalize(Report{Result: ResultPass, HeldByPlugin: []string{"x"}, DeferredChecks: []string{"x"},
		Checks: []result.Check{{ID: "x", Status: result.Pass, Basis: "rule", ExitCode: &exit}}, Drift: []result.Drift{{Kind: "x"}},
		NCCL:   &result.NCCLFigures{NICs: &nics},
		Launch: &Launch{SubnetID: "s", MarketType: "m", CapacityReservationID: "c", Refused: []LaunchRefusal{{SubnetID: "s"}}}})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(r)
	var doc any
	_ = json.Unmarshal(data, &doc)
	paths := map[string]bool{}
	var walk func(v any, path string)
	walk = func(v any, path string) {
		paths[path] = true
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e, path)
			}
		case map[string]any:
			for k, e := range x {
				walk(e, strings.TrimPrefix(path+"."+k, "."))
			}
		}
	}
	walk(doc, "")
	for p := range verbatim {
		if !paths[p] {
			t.Errorf("verbatim path %q is not in the report", p)
		}
	}
}

package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	validator "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// shippedSchema is the schema the repository publishes (schema/, written by `make generate`).
var shippedSchema = filepath.Join("..", "..", "schema", "dlami-report.schema.json")

// compiledSchema compiles the report's generated schema with an independent validator,
// formats (date-time) asserted.
func compiledSchema(t *testing.T) *validator.Schema {
	t.Helper()
	return compileSchema(t, "the report's", JSONSchema, SchemaID)
}

// compileSchema compiles a generated schema (what names it in a failure) under its id.
func compileSchema(t *testing.T, what string, schema func() ([]byte, error), id string) *validator.Schema {
	t.Helper()
	js, err := schema()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := validator.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	c := validator.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(id, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(id)
	if err != nil {
		t.Fatalf("%s schema does not compile: %v", what, err)
	}
	return s
}

func validateJSON(s *validator.Schema, js []byte) error {
	v, err := validator.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// TestJSONSchemaIsCurrent: the committed schema is what the types generate (`make
// check-generate` fails CI on the same difference).
func TestJSONSchemaIsCurrent(t *testing.T) {
	want, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(shippedSchema)
	if err != nil {
		t.Fatalf("%v: run `make generate`", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what the report types generate: run `make generate` and commit it", shippedSchema)
	}
}

// TestReportsMatchTheSchema: every kind of report Write produces validates.
func TestReportsMatchTheSchema(t *testing.T) {
	s := compiledSchema(t)
	exit0 := 0
	deferred := sample()
	deferred.Result, deferred.DeferredChecks = ResultDeferred, []string{result.GPU, result.NCCLCorrectness}
	deferred.Checks = []result.Check{{ID: result.Kernel, Status: result.Pass, Basis: "baseline", Expected: "k", Actual: "k"}}
	verify := sample()
	verify.Launch = &Launch{InstanceType: "p5e.48xlarge", SubnetID: "subnet-1", MarketType: "capacity-block", CapacityReservationID: "cr-1",
		Refused: []LaunchRefusal{{InstanceType: "p5.48xlarge", SubnetID: "subnet-1", Code: "InsufficientInstanceCapacity", Message: "no capacity"}}}
	verify.HeldByPlugin = []string{"linux-aws"}
	verify.Checks = append(verify.Checks, result.Check{ID: result.LayerPrefix + "x", Status: result.Pass, Basis: "rule", ExitCode: &exit0})
	cancelled := Report{Result: ResultCancelled, Error: "the bake stopped during layer \"slurm\"", StartedAt: time.Now()}
	noNCCLNumbers := sample()
	noNCCLNumbers.NCCL.BusBWGBps = nil
	for name, r := range map[string]Report{
		"a failed bake":                     sample(),
		"an empty report":                   {},
		"a deferred first phase":            deferred,
		"a verification after refusals":     verify,
		"a cancelled bake":                  cancelled,
		"an NCCL run without a busbw value": noNCCLNumbers,
		"launch without refusals":           {Launch: &Launch{InstanceType: "p5.48xlarge"}, Checks: []result.Check{{ID: "x", Status: result.Pass}}},
		"an error with a drift entry":       {Result: ResultError, Drift: []result.Drift{{Kind: "kernel", Package: "running kernel", Before: "a", After: "b"}}},
	} {
		t.Run(name, func(t *testing.T) {
			n, err := Normalize(r)
			if err != nil {
				t.Fatal(err)
			}
			js, err := JSON(n)
			if err != nil {
				t.Fatal(err)
			}
			if err := validateJSON(s, js); err != nil {
				t.Errorf("the schema refuses the report:\n%v\n%s", err, js)
			}
		})
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "report.json.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if err := validateJSON(s, golden); err != nil {
		t.Errorf("testdata/report.json.golden: %v", err)
	}
}

// TestSchemaRefusesBrokenReports: what a reader must not get past the schema.
func TestSchemaRefusesBrokenReports(t *testing.T) {
	s := compiledSchema(t)
	n, err := Normalize(sample())
	if err != nil {
		t.Fatal(err)
	}
	good, err := JSON(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := validateJSON(s, good); err != nil {
		t.Fatalf("the unchanged sample fails: %v", err)
	}
	tests := []struct {
		name   string
		change func(m map[string]any)
	}{
		{"an unknown result", func(m map[string]any) { m["result"] = "passed" }},
		{"an unknown status", func(m map[string]any) { m["checks"].([]any)[0].(map[string]any)["status"] = "ok" }},
		{"another schema version", func(m map[string]any) { m["schema_version"] = 2 }},
		{"a null list", func(m map[string]any) { m["drift"] = nil }},
		{"a null manifest", func(m map[string]any) { m["manifest"] = nil }},
		{"failed_checks missing", func(m map[string]any) { delete(m, "failed_checks") }},
		{"a field the report does not have", func(m map[string]any) { m["layers"] = []any{} }},
		{"a time that is not RFC 3339", func(m map[string]any) { m["started_at"] = "yesterday" }},
		{"a busbw that is not a number", func(m map[string]any) { m["nccl"].(map[string]any)["busbw_gbps"] = "fast" }},
		{"a check without an id", func(m map[string]any) { delete(m["checks"].([]any)[0].(map[string]any), "id") }},
		{"a drift entry without its kind", func(m map[string]any) { delete(m["drift"].([]any)[0].(map[string]any), "kind") }},
		{"a manifest value that is not a string", func(m map[string]any) { m["manifest"].(map[string]any)["kernel"] = 7 }},
		{"a fractional duration", func(m map[string]any) { m["checks"].([]any)[0].(map[string]any)["duration_ms"] = 1.5 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(good, &m); err != nil {
				t.Fatal(err)
			}
			tt.change(m)
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := validateJSON(s, b); err == nil {
				t.Errorf("the schema accepts a report with %s:\n%s", tt.name, b)
			} else if strings.TrimSpace(err.Error()) == "" {
				t.Errorf("a refusal without a reason")
			}
		})
	}
}

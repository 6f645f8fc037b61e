package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	validator "github.com/santhosh-tekuri/jsonschema/v6"
)

func compiledCostSchema(t *testing.T) *validator.Schema {
	t.Helper()
	return compileSchema(t, "the cost file's", CostJSONSchema, CostSchemaID)
}

// The committed schema of dlami-cost.json is what the types generate.
func TestCostJSONSchemaIsCurrent(t *testing.T) {
	want, err := CostJSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "schema", "dlami-cost.schema.json"))
	if err != nil {
		t.Fatalf("%v: run `make generate`", err)
	}
	if !bytes.Equal(got, want) {
		t.Error("schema/dlami-cost.schema.json is not what the cost types generate: run `make generate` and commit it")
	}
}

// What WriteCost writes validates, a known phase and an unknown one alike; a file that breaks
// the format does not.
func TestCostFilesMatchTheSchema(t *testing.T) {
	s := compiledCostSchema(t)
	launched := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	ended := launched.Add(41*time.Minute + 12*time.Second)
	hourly, usd := 55.04, 37.79
	for name, c := range map[string]Cost{
		"priced": {BuildName: "golden", PluginVersion: "0.1.0", GeneratedAt: launched,
			Build: CostPhase{Known: true, InstanceSeconds: 2472, USD: &usd, Instances: []CostInstance{{InstanceID: "i-1", InstanceType: "p5.48xlarge",
				Region: "us-east-1", LaunchTime: &launched, EndTime: &ended, Seconds: 2472, HourlyUSD: &hourly, USD: &usd}}},
			Verification: CostPhase{Known: true, InstanceSeconds: 60, Instances: []CostInstance{{InstanceID: "i-2", InstanceType: "p5.48xlarge",
				Region: "us-east-1", LaunchTime: &launched, StillRunning: true, Seconds: 60}}},
			MultiNode:       &CostPhase{Known: true, InstanceSeconds: 20, Instances: []CostInstance{{InstanceID: "i-2", InstanceType: "p5.48xlarge", Region: "us-east-1", Seconds: 20}}},
			InstanceSeconds: 2532, Price: "On-Demand list price", USD: &usd},
		"unknown": {GeneratedAt: launched, Build: CostPhase{Unknown: "the AMI has no SourceInstanceId"}, Price: "not looked up (price_lookup = false)"},
	} {
		path, err := WriteCost(t.TempDir(), c)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(path) != CostFileName || bytes.Contains(data, []byte("null")) {
			t.Errorf("%s: %s:\n%s", name, path, data)
		}
		if err := validateJSON(s, data); err != nil {
			t.Errorf("%s: %v\n%s", name, err, data)
		}
	}
	for name, doc := range map[string]string{
		"old version":      `{"schema_version":0,"build_name":"","plugin_version":"","generated_at":"2026-12-01T20:00:00Z","build":{"known":false,"instances":[],"instance_seconds":0},"verification":{"known":false,"instances":[],"instance_seconds":0},"instance_seconds":0,"price":""}`,
		"seconds a string": `{"schema_version":1,"build_name":"","plugin_version":"","generated_at":"2026-12-01T20:00:00Z","build":{"known":true,"instances":[],"instance_seconds":"60"},"verification":{"known":false,"instances":[],"instance_seconds":0},"instance_seconds":0,"price":""}`,
		"no build":         `{"schema_version":1,"build_name":"","plugin_version":"","generated_at":"2026-12-01T20:00:00Z","verification":{"known":false,"instances":[],"instance_seconds":0},"instance_seconds":0,"price":""}`,
	} {
		if err := validateJSON(s, []byte(doc)); err == nil {
			t.Errorf("%s: validates", name)
		}
	}
}

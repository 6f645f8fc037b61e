package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	validator "github.com/santhosh-tekuri/jsonschema/v6"

	dlamireport "github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// The JSON Schema the repository ships for dlami-report.json (make generate writes it from
// the report types); every report a scenario writes is validated against it where the tests
// read it.
var reportSchema = sync.OnceValues(func() (*validator.Schema, error) {
	path := filepath.Join("..", "..", "schema", "dlami-report.schema.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: run `make generate`", err)
	}
	doc, err := validator.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c := validator.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("dlami-report.schema.json", doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, err := c.Compile("dlami-report.schema.json")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
})

// costSchemaProblem says how a dlami-cost.json breaks schema/dlami-cost.schema.json, the
// schema the repository ships for it, or "".
func costSchemaProblem(cost []byte) string {
	path := filepath.Join("..", "..", "schema", "dlami-cost.schema.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error() + ": run `make generate`"
	}
	doc, err := validator.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return path + ": " + err.Error()
	}
	c := validator.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("dlami-cost.schema.json", doc); err != nil {
		return path + ": " + err.Error()
	}
	s, err := c.Compile("dlami-cost.schema.json")
	if err != nil {
		return path + ": " + err.Error()
	}
	v, err := validator.UnmarshalJSON(bytes.NewReader(cost))
	if err == nil {
		err = s.Validate(v)
	}
	if err != nil {
		return "dlami-cost.json does not match " + path + ": " + err.Error()
	}
	return ""
}

// schemaProblem says how a dlami-report.json breaks schema/dlami-report.schema.json, or "".
func schemaProblem(report []byte) string {
	s, err := reportSchema()
	if err != nil {
		return "the report's JSON Schema: " + err.Error()
	}
	v, err := validator.UnmarshalJSON(bytes.NewReader(report))
	if err == nil {
		err = s.Validate(v)
	}
	if err != nil {
		return "dlami-report.json does not match schema/dlami-report.schema.json: " + err.Error()
	}
	return ""
}

// reportSchemaProblems validates a scenario's dlami-report.json, when it wrote one.
func reportSchemaProblems(out string) []string {
	b, err := os.ReadFile(filepath.Join(out, "dlami-report.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil // compare says whether the scenario should have written one
	}
	if err != nil {
		return []string{err.Error()}
	}
	if p := schemaProblem(b); p != "" {
		return []string{p}
	}
	return nil
}

// TestSchemaProblem: the check the scenarios' reports go through passes a report the plugin
// writes and names what is wrong with one it would not.
func TestSchemaProblem(t *testing.T) {
	n, err := dlamireport.Normalize(dlamireport.Report{Checks: []result.Check{{ID: result.GPU, Status: result.Pass, Basis: "setting"}}})
	if err != nil {
		t.Fatal(err)
	}
	good, err := dlamireport.JSON(n)
	if err != nil {
		t.Fatal(err)
	}
	if p := schemaProblem(good); p != "" {
		t.Fatalf("a report the plugin writes: %s\n%s", p, good)
	}
	bad := bytes.Replace(good, []byte(`"status": "pass"`), []byte(`"status": "green"`), 1)
	if bytes.Equal(bad, good) {
		t.Fatalf("the report has no check status to change:\n%s", good)
	}
	if p := schemaProblem(bad); !strings.Contains(p, "does not match") {
		t.Errorf("an unknown status: schemaProblem = %q", p)
	}
	dir := t.TempDir()
	if p := reportSchemaProblems(dir); p != nil {
		t.Errorf("no report: %q, want nothing (compare judges a missing report)", p)
	}
	if err := os.WriteFile(filepath.Join(dir, "dlami-report.json"), []byte(`{"result": "pass"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if p := reportSchemaProblems(dir); len(p) != 1 {
		t.Errorf("a partial report: %q, want one problem", p)
	}
}

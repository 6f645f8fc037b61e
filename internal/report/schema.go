package report

import (
	"fmt"
	"reflect"

	"github.com/dlami-bake/packer-plugin-dlami/internal/jsonschema"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// The JSON Schema of dlami-report.json, generated from the Report type by `make generate`
// (check-generate fails CI when the committed file differs from what this writes).
//go:generate go run ./schemagen -o ../../schema/dlami-report.schema.json

// SchemaID is the $id of the report's JSON Schema: where the repository publishes it.
const SchemaID = "https://raw.githubusercontent.com/dlami-bake/packer-plugin-dlami/main/schema/dlami-report.schema.json"

// Results are every overall result a report can carry.
var Results = []string{ResultPass, ResultFail, ResultCancelled, ResultError, ResultDeferred}

// Statuses are every status a check entry can carry.
var Statuses = []result.Status{result.Pass, result.Fail, result.Warn, result.Skip, result.Error}

// JSONSchema returns the JSON Schema (draft 2020-12) of the JSON report Write produces: the
// Report type as encoding/json writes it after Normalize (lists and the manifest never null),
// schema_version fixed to SchemaVersion, result and every check's status restricted to their
// values.
func JSONSchema() ([]byte, error) {
	results := make([]any, len(Results))
	for i, r := range Results {
		results[i] = r
	}
	statuses := make([]any, len(Statuses))
	for i, s := range Statuses {
		statuses[i] = string(s)
	}
	report := reflect.TypeFor[Report]()
	return jsonschema.Generate(report, jsonschema.Options{
		ID:    SchemaID,
		Title: fmt.Sprintf("dlami-report.json, schema version %d", SchemaVersion),
		Description: "The JSON report of a dlami bake, first-boot verification or node check " +
			"(dlami-report.json), generated from the Go types in internal/report. What each field " +
			"means: internal/report/SCHEMA.md.",
		Enums: map[string][]any{
			report.String() + ".Result":               results,
			reflect.TypeFor[result.Status]().String(): statuses,
		},
		Consts: map[string]any{
			report.String() + ".SchemaVersion": SchemaVersion,
		},
		NonNullCollections: true,
	})
}

package report

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/secretfilter"
)

// Redacted replaces a secret wherever it appears in a report.
const Redacted = secretfilter.Redacted

// verbatim are the report's fields (JSON paths, arrays left out: "checks.status" is every
// check's status) whose values are never redacted: enums (result, statuses, kinds), ids (of
// checks, of failed checks, of deferred ones), times and versions. They are the plugin's own
// words, not text a secret could have reached, and a secret that happens to equal one ("fail",
// "efa", a package name) must not rewrite a verdict: a CI reporter keys on them.
var verbatim = map[string]bool{
	"schema_version": true, "plugin_version": true, "build_name": true, "started_at": true, "finished_at": true,
	"result": true, "failed_checks": true, "instance_type": true, "instance_type_source": true, "stage": true,
	"deferred_checks": true, "held_by_plugin": true,
	"checks.id": true, "checks.status": true, "checks.basis": true, "checks.duration_ms": true, "checks.exit_code": true,
	"drift.kind":           true,
	"nccl.busbw_placement": true, "nccl.exit_code": true, "nccl.timed_out": true,
	"launch.instance_type": true, "launch.subnet_id": true, "launch.market_type": true, "launch.capacity_reservation_id": true,
	"launch.refused.instance_type": true, "launch.refused.subnet_id": true, "launch.refused.code": true,
}

// Redact returns r with every occurrence of each secret (secretfilter's rules: values of at
// least secretfilter.MinLength characters, each line of a multi-line one) replaced by
// Redacted, in every string the report holds (messages, evidence, expected and actual values,
// layer output tails, the error, the manifest, the NCCL figures) except the verbatim fields.
func Redact(r Report, secrets []string) (Report, error) {
	f := secretfilter.New(secrets...)
	if f.Empty() {
		return r, nil
	}
	// The report is its JSON document (SCHEMA.md): walking that form reaches every string.
	data, err := json.Marshal(r)
	if err != nil {
		return r, fmt.Errorf("report: redacting: %w", err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return r, fmt.Errorf("report: redacting: %w", err)
	}
	doc = redactValue(doc, "", f)
	if data, err = json.Marshal(doc); err != nil {
		return r, fmt.Errorf("report: redacting: %w", err)
	}
	var out Report
	if err := json.Unmarshal(data, &out); err != nil {
		return r, fmt.Errorf("report: redacting: %w", err)
	}
	return out, nil
}

// redactValue redacts v, found at path (object keys joined by ".", arrays left out).
func redactValue(v any, path string, f *secretfilter.Filter) any {
	if verbatim[path] {
		return v
	}
	switch x := v.(type) {
	case string:
		return f.String(x)
	case []any:
		for i := range x {
			x[i] = redactValue(x[i], path, f)
		}
	case map[string]any:
		for k := range x {
			x[k] = redactValue(x[k], strings.TrimPrefix(path+"."+k, "."), f)
		}
	}
	return v
}

package report

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Redacted replaces a secret wherever it appears in a report.
const Redacted = "<sensitive>"

// minSecret is the shortest value treated as a secret: shorter ones ("1", "true") would blank
// out unrelated text, and are not credentials.
const minSecret = 4

// Redact returns r with every occurrence of each secret (layer environment values, nccl.env
// values, repository passwords) replaced by Redacted, in every string the report holds:
// messages, evidence, layer output tails, the error, the manifest, the NCCL figures.
func Redact(r Report, secrets []string) (Report, error) {
	var keep []string
	for _, s := range secrets {
		if len(s) >= minSecret {
			keep = append(keep, s)
		}
	}
	if len(keep) == 0 {
		return r, nil
	}
	// Longest first, so a secret that contains another is replaced whole.
	sort.Slice(keep, func(i, j int) bool { return len(keep[i]) > len(keep[j]) })
	// The report is its JSON document (SCHEMA.md): walking that form reaches every string.
	data, err := json.Marshal(r)
	if err != nil {
		return r, fmt.Errorf("report: redacting: %w", err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return r, fmt.Errorf("report: redacting: %w", err)
	}
	doc = redactValue(doc, keep)
	if data, err = json.Marshal(doc); err != nil {
		return r, fmt.Errorf("report: redacting: %w", err)
	}
	var out Report
	if err := json.Unmarshal(data, &out); err != nil {
		return r, fmt.Errorf("report: redacting: %w", err)
	}
	return out, nil
}

func redactValue(v any, secrets []string) any {
	switch x := v.(type) {
	case string:
		for _, s := range secrets {
			x = strings.ReplaceAll(x, s, Redacted)
		}
		return x
	case []any:
		for i := range x {
			x[i] = redactValue(x[i], secrets)
		}
	case map[string]any:
		for k := range x {
			x[k] = redactValue(x[k], secrets)
		}
	}
	return v
}

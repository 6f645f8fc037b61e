package checks

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/constraint"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// evidenceMax bounds one fact's raw output quoted as evidence (the probe cuts each to it).
const evidenceMax = 2000

// evidence joins the raw evidence of several facts.
func evidence(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "\n")
}

// check builds a result; a pass must carry the basis it was judged against.
func check(id string, st result.Status, basis, expected, actual, msg, ev string) result.Check {
	return result.Check{ID: id, Status: st, Basis: basis, Expected: expected, Actual: actual, Message: msg, Evidence: ev}
}

// pinned checks actual against a version setting. It returns ok=true when no pin is set. A
// setting that does not parse fails: a typo must not disable the check.
func pinned(setting, actual string) (ok bool, msg string) {
	if strings.TrimSpace(setting) == "" {
		return true, ""
	}
	c, err := constraint.Parse(setting)
	if err != nil {
		return false, fmt.Sprintf("bad expected version setting: %v", err)
	}
	match, err := c.Check(actual)
	if err != nil {
		return false, err.Error()
	}
	if !match {
		return false, fmt.Sprintf("%s does not satisfy %q", actual, c.String())
	}
	return true, ""
}

// modelMatches reports whether the nvidia-smi name contains model as a whole word,
// case-insensitively: "B200" matches "NVIDIA B200", "L4" does not match "NVIDIA L40S".
func modelMatches(name, model string) bool {
	n, m := strings.ToLower(name), strings.ToLower(strings.TrimSpace(model))
	if m == "" {
		return true
	}
	for i := 0; ; {
		j := strings.Index(n[i:], m)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(m)
		if (start == 0 || !alnum(n[start-1])) && (end == len(n) || !alnum(n[end])) {
			return true
		}
		i = start + 1
	}
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

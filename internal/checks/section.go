package checks

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/constraint"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// evidenceMax bounds one section's output quoted as evidence.
const evidenceMax = 2000

// get returns a section and, when it cannot be trusted, why.
func get(sections map[string]bundle.Section, name string) (bundle.Section, string) {
	s, ok := sections[name]
	switch {
	case !ok:
		return s, fmt.Sprintf("%s: no output (the command did not run)", name)
	case s.TimedOut:
		return s, fmt.Sprintf("%s: timed out", name)
	case s.ExitCode == 127:
		return s, fmt.Sprintf("%s: command not found (exit 127): %s", name, textcut.Head(firstLine(s.Output), 200))
	case s.ExitCode != 0:
		return s, fmt.Sprintf("%s: exited %d", name, s.ExitCode)
	}
	return s, ""
}

// evidence renders raw output of some sections, bounded, with the tool path that answered.
func evidence(sections map[string]bundle.Section, names ...string) string {
	var b strings.Builder
	for _, n := range names {
		s, ok := sections[n]
		if !ok {
			fmt.Fprintf(&b, "[%s: no output]\n", n)
			continue
		}
		status := fmt.Sprintf("exit %d", s.ExitCode)
		if s.TimedOut {
			status = "timed out"
		}
		if s.Tool != "" {
			status += ", " + s.Tool
		}
		fmt.Fprintf(&b, "[%s: %s]\n%s\n", n, status, textcut.HeadNote(strings.TrimRight(s.Output, "\n"), evidenceMax))
	}
	return strings.TrimRight(b.String(), "\n")
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

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

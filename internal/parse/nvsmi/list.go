package nvsmi

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Listed is one line of `nvidia-smi -L`: "GPU 0: NVIDIA B200 (UUID: GPU-…)". MIG devices'
// indented lines ("  MIG 1g.10gb Device 0: (UUID: MIG-…)") are not GPUs and are skipped.
type Listed struct {
	Index int
	Name  string
	UUID  string
}

var listLine = regexp.MustCompile(`^GPU (\d+): (.*) \(UUID: ([^)\s]+)\)$`)

// ParseL reads `nvidia-smi -L`. Every non-empty line must be a GPU line or a MIG device line;
// anything else (an NVML error, "No devices were found", a shell's "not found") fails, and so
// does an empty list: the list is what a container sees, and nothing is never a reading.
func ParseL(text string) ([]Listed, error) {
	var out []Listed
	seen := map[string]bool{}
	for n, raw := range strings.Split(text, "\n") {
		line := strings.TrimRight(raw, " \t\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "MIG ") && line != strings.TrimSpace(line) {
			continue
		}
		m := listLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("nvidia-smi -L: line %d: not a GPU line: %q", n+1, cut(line))
		}
		idx, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi -L: line %d: index %q", n+1, m[1])
		}
		if seen[m[3]] {
			return nil, fmt.Errorf("nvidia-smi -L: %s listed twice", m[3])
		}
		seen[m[3]] = true
		out = append(out, Listed{Index: idx, Name: m[2], UUID: m[3]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("nvidia-smi -L: no GPU listed")
	}
	return out, nil
}

func cut(s string) string {
	if len(s) > 200 {
		return s[:200]
	}
	return s
}

// Package migmode parses `nvidia-smi --query-gpu=index,mig.mode.current --format=csv,noheader`:
// whether each GPU runs in MIG mode. dcgmi diag does not run under MIG (the dcgm check skips
// it, naming why: aws-parallelcluster-cookbook PR 3183 skips DCGM when MIG is on).
package migmode

import (
	"fmt"
	"strconv"
	"strings"
)

// Query is the --query-gpu field list Parse reads, in this order.
const Query = "index,mig.mode.current"

// GPU is one GPU's current MIG mode.
type GPU struct {
	Index int
	// Enabled is true for "Enabled"; false for "Disabled" and for a GPU without MIG
	// ("[N/A]", "N/A", "[Not Supported]").
	Enabled bool
	// Raw is what nvidia-smi printed.
	Raw string
}

// Parse reads the query's output. A value other than Enabled, Disabled or a "not available"
// form is an error: an unknown word never reads as "MIG off".
func Parse(text string) ([]GPU, error) {
	var out []GPU
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		idx, mode, ok := strings.Cut(line, ",")
		if !ok {
			return nil, fmt.Errorf("line %d %q: want \"index, mig.mode.current\"", n+1, line)
		}
		i, err := strconv.Atoi(strings.TrimSpace(idx))
		if err != nil || i < 0 {
			return nil, fmt.Errorf("line %d %q: bad GPU index", n+1, line)
		}
		raw := strings.TrimSpace(mode)
		g := GPU{Index: i, Raw: raw}
		switch strings.Trim(raw, "[]") {
		case "Enabled":
			g.Enabled = true
		case "Disabled", "N/A", "Not Supported":
		default:
			return nil, fmt.Errorf("line %d %q: mig.mode.current %q is not Enabled, Disabled or N/A", n+1, line, raw)
		}
		out = append(out, g)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no GPU listed")
	}
	return out, nil
}

// Enabled lists the GPUs in MIG mode.
func Enabled(gpus []GPU) []int {
	var on []int
	for _, g := range gpus {
		if g.Enabled {
			on = append(on, g.Index)
		}
	}
	return on
}

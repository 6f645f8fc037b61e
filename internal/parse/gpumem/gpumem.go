// Package gpumem parses `nvidia-smi --query-gpu=index,memory.total --format=csv,noheader,nounits`:
// each GPU's total framebuffer memory in MiB, which the gpu check compares with the per-GPU
// memory EC2's DescribeInstanceTypes gives for the instance type.
package gpumem

import (
	"fmt"
	"strconv"
	"strings"
)

// Query is the --query-gpu field list Parse reads, in this order.
const Query = "index,memory.total"

// GPU is one GPU's memory.total.
type GPU struct {
	Index    int
	TotalMiB int
}

// Parse reads the query's output. Every non-blank line must be "<index>, <MiB>" (a trailing
// " MiB" is accepted, for output without nounits); anything else, or no GPU at all, is an
// error: an unreadable figure never reads as a small one.
func Parse(text string) ([]GPU, error) {
	var out []GPU
	seen := map[int]bool{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		idx, mem, ok := strings.Cut(line, ",")
		if !ok {
			return nil, fmt.Errorf("line %d %q: want \"index, memory.total\"", n+1, line)
		}
		i, err := strconv.Atoi(strings.TrimSpace(idx))
		if err != nil || i < 0 {
			return nil, fmt.Errorf("line %d %q: bad GPU index", n+1, line)
		}
		mem = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(mem), "MiB"))
		m, err := strconv.Atoi(mem)
		if err != nil || m <= 0 {
			return nil, fmt.Errorf("line %d %q: memory.total is not a positive MiB figure (%q)", n+1, line, mem)
		}
		if seen[i] {
			return nil, fmt.Errorf("line %d %q: GPU %d listed twice", n+1, line, i)
		}
		seen[i] = true
		out = append(out, GPU{Index: i, TotalMiB: m})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no GPU listed")
	}
	return out, nil
}

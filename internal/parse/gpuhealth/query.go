package gpuhealth

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// QueryReport is what ParseQuery reads from `nvidia-smi -q`: the GPUs' health fields, typed
// as the CSV query types them, with the count of GPUs the driver attached.
type QueryReport struct {
	// Attached is the "Attached GPUs" header: the GPUs NVML enumerated, listed or not; -1
	// when the output has no such line.
	Attached int
	GPUs     []GPU
	// Handles are "Unable to determine the device handle for GPU..." lines in the output.
	Handles []nvsmi.HandleError
}

// Incomplete returns a *nvsmi.MissingGPUsError when fewer GPU blocks than Attached GPUs were
// printed, or nvidia-smi named a GPU it could not open; else nil.
func (r QueryReport) Incomplete() error {
	idx := make([]int, len(r.GPUs))
	for i := range r.GPUs {
		idx[i] = i
	}
	if r.Attached > len(r.GPUs) && r.Attached <= 1<<12 {
		// The blocks carry no index: call the missing ones len..Attached-1.
		var gaps []int
		for i := len(r.GPUs); i < r.Attached; i++ {
			gaps = append(gaps, i)
		}
		return &nvsmi.MissingGPUsError{Tool: "nvidia-smi -q", Listed: idx, Gaps: gaps, Handles: r.Handles}
	}
	return nvsmi.Incomplete("nvidia-smi -q", idx, r.Handles, 0)
}

var (
	qGPUHeader = regexp.MustCompile(`^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$`)
	qWidth     = regexp.MustCompile(`^(\d{1,3})x$`)
)

// qNode is one "key : value" (or "key" section) line of a GPU block, with the keys of the
// sections it sits in.
type qNode struct {
	line  int
	path  []string
	value string
	leaf  bool
}

// ParseQuery reads `nvidia-smi -q` (R470 and later layouts): per GPU block, in order (the
// index is the block's position, as nvidia-smi lists them by index), the product name and
// architecture, persistence and ECC mode, the volatile uncorrectable ECC count (the sum of
// the "Uncorrectable" counters under ECC Errors > Volatile), the pending page retirement, the
// row remapper's pending and failure flags, the PCIe link generation and width (current and
// max) and the hardware clock slowdowns. A field the block does not print stays
// KindNotQueried; "N/A" and NVML's error strings keep their Kind. Output with no GPU block is
// an error; ParseQuery does not judge completeness (see QueryReport.Incomplete).
func ParseQuery(text string) (QueryReport, error) {
	const tool = "nvidia-smi -q"
	r := QueryReport{Attached: -1}
	var blocks [][]qNode
	var headers []string
	var stack []struct {
		indent int
		key    string
	}
	first := ""
	for n, raw := range strings.Split(text, "\n") {
		raw = strings.TrimRight(raw, "\r")
		line := strings.TrimSpace(raw)
		if line == "" {
			continue
		}
		if first == "" {
			first = line
		}
		if h, ok := nvsmi.ParseHandleError(line); ok {
			r.Handles = append(r.Handles, h)
			continue
		}
		indent := len(raw) - len(strings.TrimLeft(raw, " \t"))
		if indent == 0 {
			if m := qGPUHeader.FindStringSubmatch(line); m != nil {
				blocks = append(blocks, nil)
				headers = append(headers, m[1])
				stack = stack[:0]
				continue
			}
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "Attached GPUs" {
				a, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil || a < 0 {
					return QueryReport{}, fmt.Errorf("%s: line %d: Attached GPUs %q is not a count", tool, n+1, textcut.Head(v, 40))
				}
				r.Attached = a
			}
			if len(blocks) > 0 {
				// A line at the margin after a block ends it (a trailing message).
				blocks = append(blocks, nil)
				headers = append(headers, "")
				stack = stack[:0]
			}
			continue
		}
		if len(blocks) == 0 || headers[len(headers)-1] == "" {
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		key, val, hasColon := strings.Cut(line, ":")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		path := make([]string, 0, len(stack)+1)
		for _, s := range stack {
			path = append(path, s.key)
		}
		path = append(path, key)
		b := &blocks[len(blocks)-1]
		if len(*b) < 4096 {
			*b = append(*b, qNode{line: n + 1, path: path, value: val, leaf: hasColon})
		}
		stack = append(stack, struct {
			indent int
			key    string
		}{indent, key})
	}
	for i, b := range blocks {
		if headers[i] == "" {
			continue
		}
		g, err := gpuFromQuery(len(r.GPUs), headers[i], b)
		if err != nil {
			return QueryReport{}, fmt.Errorf("%s: GPU %s: %w", tool, headers[i], err)
		}
		r.GPUs = append(r.GPUs, g)
	}
	if len(r.GPUs) == 0 && len(r.Handles) == 0 {
		if first == "" {
			return QueryReport{}, errors.New(tool + ": empty output")
		}
		return QueryReport{}, fmt.Errorf("%s: no GPU block: %q", tool, textcut.Head(first, 160))
	}
	return r, nil
}

// at is the "key : value" line whose path is path (case-insensitive), if any; section lines
// (a key alone) never match.
func at(b []qNode, path ...string) (qNode, bool) {
	for _, nd := range b {
		if !nd.leaf || len(nd.path) != len(path) {
			continue
		}
		match := true
		for i := range path {
			if !strings.EqualFold(nd.path[i], path[i]) {
				match = false
				break
			}
		}
		if match {
			return nd, true
		}
	}
	return qNode{}, false
}

// firstOf is the first of several paths present.
func firstOf(b []qNode, paths ...[]string) (qNode, bool) {
	for _, p := range paths {
		if nd, ok := at(b, p...); ok {
			return nd, true
		}
	}
	return qNode{}, false
}

func gpuFromQuery(index int, busID string, b []qNode) (GPU, error) {
	g := GPU{Index: index, BusID: busID}
	if nd, ok := at(b, "Product Name"); ok {
		g.Name = textcut.Head(nd.value, 80)
	}
	if nd, ok := at(b, "Product Architecture"); ok {
		g.Architecture = textcut.Head(nd.value, 40)
	}
	flagAt := func(dst *Flag, v vocab, field string, paths ...[]string) error {
		nd, ok := firstOf(b, paths...)
		if !ok {
			return nil
		}
		f, err := parseFlag(nd.value, v)
		if err != nil {
			return fmt.Errorf("line %d: %s: %w", nd.line, field, err)
		}
		*dst = f
		return nil
	}
	countAt := func(dst *Count, field string, trim func(string) string, paths ...[]string) error {
		nd, ok := firstOf(b, paths...)
		if !ok {
			return nil
		}
		v := nd.value
		if trim != nil {
			v = trim(v)
		}
		c, err := parseCount(v)
		if err != nil {
			return fmt.Errorf("line %d: %s: %w", nd.line, field, err)
		}
		c.Raw = nd.value
		*dst = c
		return nil
	}
	width := func(s string) string {
		if m := qWidth.FindStringSubmatch(s); m != nil {
			return m[1]
		}
		return s
	}
	reasons := func(leaf ...string) [][]string {
		var out [][]string
		for _, section := range []string{"Clocks Event Reasons", "Clocks Throttle Reasons"} {
			out = append(out, append([]string{section}, leaf...))
		}
		return out
	}
	link := func(what, which string) []string { return []string{"PCI", "GPU Link Info", what, which} }
	for _, err := range []error{
		flagAt(&g.Persistence, enabled, "Persistence Mode", []string{"Persistence Mode"}),
		flagAt(&g.ECCMode, enabled, "ECC Mode Current", []string{"ECC Mode", "Current"}),
		flagAt(&g.RetiredPagesPending, yes, "Retired Pages Pending", []string{"Retired Pages", "Pending Page Blacklist"},
			[]string{"Retired Pages", "Pending Page Retirement"}, []string{"Retired Pages", "Pending"}, []string{"Retired Pages"}),
		flagAt(&g.RemappedRowsPending, yes, "Remapped Rows Pending", []string{"Remapped Rows", "Pending"}, []string{"Remapped Rows"}),
		flagAt(&g.RemappedRowsFailure, yes, "Remapping Failure Occurred", []string{"Remapped Rows", "Remapping Failure Occurred"}, []string{"Remapped Rows"}),
		countAt(&g.PCIeGenCurrent, "PCIe Generation Current", nil, link("PCIe Generation", "Current")),
		countAt(&g.PCIeGenMax, "PCIe Generation Max", nil, link("PCIe Generation", "Max")),
		countAt(&g.PCIeWidthCurrent, "Link Width Current", width, link("Link Width", "Current")),
		countAt(&g.PCIeWidthMax, "Link Width Max", width, link("Link Width", "Max")),
		flagAt(&g.HWSlowdown, active, "HW Slowdown", reasons("HW Slowdown")...),
		flagAt(&g.HWThermalSlowdown, active, "HW Thermal Slowdown", append(reasons("HW Slowdown", "HW Thermal Slowdown"), reasons("HW Thermal Slowdown")...)...),
		flagAt(&g.HWPowerBrakeSlowdown, active, "HW Power Brake Slowdown", append(reasons("HW Slowdown", "HW Power Brake Slowdown"), reasons("HW Power Brake Slowdown")...)...),
		flagAt(&g.SWPowerCap, active, "SW Power Cap", reasons("SW Power Cap")...),
	} {
		if err != nil {
			return GPU{}, err
		}
	}
	ecc, err := volatileUncorrectable(b)
	if err != nil {
		return GPU{}, err
	}
	g.ECCUncorrectedVolatile = ecc
	return g, nil
}

// volatileUncorrectable sums the uncorrectable counters under ECC Errors > Volatile: "SRAM
// Uncorrectable", "SRAM Uncorrectable Parity", "SRAM Uncorrectable SEC-DED", "DRAM
// Uncorrectable" (R510 and later), or "Double Bit > Total" (older layouts). A counter that is
// not a number makes the sum that counter's Kind (the worst kind when several are not).
func volatileUncorrectable(b []qNode) (Count, error) {
	var sum Count
	seen := false
	for _, nd := range b {
		if !nd.leaf || len(nd.path) < 3 || !strings.EqualFold(nd.path[0], "ECC Errors") || !strings.EqualFold(nd.path[1], "Volatile") {
			continue
		}
		leaf := strings.ToLower(nd.path[len(nd.path)-1])
		double := len(nd.path) == 4 && strings.EqualFold(nd.path[2], "Double Bit") && leaf == "total"
		if !strings.Contains(leaf, "uncorrectable") && !double {
			continue
		}
		c, err := parseCount(nd.value)
		if err != nil {
			return Count{}, fmt.Errorf("line %d: ECC Errors > Volatile > %s: %w", nd.line, textcut.Head(nd.path[len(nd.path)-1], 40), err)
		}
		if !seen {
			sum, seen = c, true
			continue
		}
		switch {
		case sum.Known && c.Known:
			sum.N += c.N
			sum.Raw = strconv.FormatUint(sum.N, 10)
		case sum.Known:
			sum = c
		case !c.Known && kindRank(c.Kind) > kindRank(sum.Kind):
			sum = c
		}
	}
	return sum, nil
}

// kindRank orders the "no value" kinds from least to most alarming, for a sum of several.
func kindRank(k Kind) int {
	switch k {
	case KindValue:
		return 0
	case KindNotApplicable:
		return 1
	case KindNotSupported:
		return 2
	case KindNoPermission:
		return 3
	case KindOtherError:
		return 4
	case KindUnknownError:
		return 5
	case KindGPULost:
		return 6
	}
	return 0
}

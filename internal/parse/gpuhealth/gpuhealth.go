// Package gpuhealth parses the per-GPU health fields of `nvidia-smi --query-gpu=<Query>
// --format=csv`, each column read by the name its header line gives it: persistence and ECC mode, uncorrected ECC errors, memory repairs
// pending or failed, the PCIe link against its maximum, and the hardware clock slowdowns.
//
// Every value is typed and keeps its text: a Flag or a Count is known (true/false, a number)
// or unknown ("[N/A]", "[Not Supported]", "[Unknown Error]"...), never a zero that reads as
// healthy. Its Kind says which kind of "no value" nvidia-smi printed, so a judge can tell a
// field this GPU generation does not have ("[N/A]" for retired pages on an H100) from one the
// driver failed to read ("[Unknown Error]", "[GPU is lost]"). Text that is neither is an
// error, and so is output that lists no GPU or says a GPU could not be read at all.
package gpuhealth

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Query is the --query-gpu field list the probe asks for and Parse reads: the one owner of it.
// Parse reads the columns by the names of the header line, so a field added here leaves
// output from the shorter list readable (the new field KindNotQueried). Drivers before R535 name clocks_event_reasons "clocks_throttle_reasons"
// (LegacyQuery); R535 and later accept both names, and both parse the same.
const Query = "index,pci.bus_id,persistence_mode,ecc.mode.current,ecc.errors.uncorrected.volatile.total," +
	"retired_pages.pending,remapped_rows.pending,remapped_rows.failure," +
	"pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max," +
	"clocks_event_reasons.hw_slowdown,clocks_event_reasons.hw_thermal_slowdown," +
	"clocks_event_reasons.hw_power_brake_slowdown,clocks_event_reasons.sw_power_cap"

// LegacyQuery is Query with the pre-R535 names of the clock reasons.
var LegacyQuery = strings.ReplaceAll(Query, "clocks_event_reasons.", "clocks_throttle_reasons.")

// Fields splits a query list ("a,b,c") into its field names.
func Fields(query string) []string {
	var out []string
	for _, f := range strings.Split(query, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// State is what a Flag knows.
type State int8

const (
	Unknown State = iota // the field is unavailable ("[N/A]", "[Not Supported]", ...) or was not queried
	False
	True
)

func (s State) String() string {
	switch s {
	case False:
		return "false"
	case True:
		return "true"
	}
	return "unknown"
}

// Kind is what kind of text nvidia-smi printed in a field: a value, or one of its ways of
// saying it has none. nvidia-smi prints NVML's error string in brackets in CSV ("[Unknown
// Error]") and bare in `nvidia-smi -q` ("Unknown Error"); both read the same.
type Kind int8

const (
	// KindNotQueried: the query did not ask for the field (Raw is "").
	KindNotQueried Kind = iota
	// KindValue: a value (a number, or one of the field's two words).
	KindValue
	// KindNotApplicable: "[N/A]" or "N/A": nvidia-smi has no value for this GPU in its present
	// configuration. Normal where the field does not exist on the GPU's generation (retired
	// pages from Ampere on, the per-GPU fabric state before Hopper) or while a feature is off
	// (ECC counts with ECC disabled); a missing reading wherever the field is required.
	KindNotApplicable
	// KindNotSupported: "[Not Supported]": NVML_ERROR_NOT_SUPPORTED, the GPU or driver does not
	// implement the field.
	KindNotSupported
	// KindUnknownError: "[Unknown Error]": NVML_ERROR_UNKNOWN, the driver failed to read it.
	KindUnknownError
	// KindGPULost: "[GPU is lost]": NVML_ERROR_GPU_IS_LOST, the GPU fell off the bus.
	KindGPULost
	// KindNoPermission: "[Insufficient Permissions]": NVML_ERROR_NO_PERMISSION.
	KindNoPermission
	// KindOtherError: any other bracketed NVML error string ("[Timeout]", "[GPU requires
	// reset]", "[Driver Not Loaded]"...), kept in Raw.
	KindOtherError
)

func (k Kind) String() string {
	switch k {
	case KindNotQueried:
		return "not queried"
	case KindValue:
		return "value"
	case KindNotApplicable:
		return "N/A"
	case KindNotSupported:
		return "not supported"
	case KindUnknownError:
		return "unknown error"
	case KindGPULost:
		return "GPU is lost"
	case KindNoPermission:
		return "insufficient permissions"
	}
	return "error"
}

// ReadFailed reports the kinds that say the driver tried and failed to read the field
// (unknown error, GPU lost, no permission, another NVML error): never a healthy reading,
// whatever the GPU generation.
func (k Kind) ReadFailed() bool {
	return k == KindUnknownError || k == KindGPULost || k == KindNoPermission || k == KindOtherError
}

// KindOf classifies a value nvidia-smi printed (in any of its outputs): KindValue for a
// value, else which "no value" it is.
func KindOf(raw string) Kind { return kindOf(raw) }

// kindOf classifies a field's text.
func kindOf(raw string) Kind {
	t := strings.TrimSpace(raw)
	if t == "" {
		return KindNotQueried
	}
	inner := t
	bracketed := len(t) >= 2 && t[0] == '[' && t[len(t)-1] == ']'
	if bracketed {
		inner = strings.TrimSpace(t[1 : len(t)-1])
	}
	switch strings.ToLower(inner) {
	case "n/a":
		return KindNotApplicable
	case "not supported":
		return KindNotSupported
	case "unknown error":
		return KindUnknownError
	case "gpu is lost":
		return KindGPULost
	case "insufficient permissions":
		return KindNoPermission
	}
	if bracketed {
		return KindOtherError
	}
	return KindValue
}

// Flag is a two-valued field (Enabled/Disabled, Yes/No, Active/Not Active) as nvidia-smi
// printed it.
type Flag struct {
	State State
	// Kind is KindValue for a known true or false, else the kind of "no value" printed.
	Kind Kind
	// Raw is the text nvidia-smi printed; "" when the query did not ask for the field.
	Raw string
}

func (f Flag) String() string { return f.State.String() + "(" + f.Raw + ")" }

// Known reports whether the flag is true or false (not Unknown).
func (f Flag) Known() bool { return f.State != Unknown }

// IsTrue reports a known true: enabled, pending, failed, active.
func (f Flag) IsTrue() bool { return f.State == True }

// IsFalse reports a known false.
func (f Flag) IsFalse() bool { return f.State == False }

// Count is a non-negative integer field.
type Count struct {
	Known bool
	N     uint64
	// Kind is KindValue when Known, else the kind of "no value" printed.
	Kind Kind
	// Raw is the text nvidia-smi printed; "" when the query did not ask for the field.
	Raw string
}

// GPU is one row of the query.
type GPU struct {
	Index int
	// BusID is as printed ("00000000:53:00.0").
	BusID string
	// Name is the product name ("NVIDIA A100-SXM4-40GB") when the output has it (nvidia-smi
	// -q, or a query with "name"); "" otherwise.
	Name string
	// Architecture is `nvidia-smi -q`'s "Product Architecture" ("Ampere", "Hopper",
	// "Blackwell", "Ada Lovelace"); "" when the output has none (the CSV query cannot ask).
	Architecture string

	Persistence Flag // persistence_mode: Enabled/Disabled
	ECCMode     Flag // ecc.mode.current: Enabled/Disabled

	// ECCUncorrectedVolatile is ecc.errors.uncorrected.volatile.total: since the driver loaded.
	ECCUncorrectedVolatile Count

	RetiredPagesPending Flag // retired_pages.pending (pre-Ampere page retirement): Yes/No
	RemappedRowsPending Flag // remapped_rows.pending (Ampere and later): Yes/No, a reset is due
	RemappedRowsFailure Flag // remapped_rows.failure: Yes/No, the GPU could not remap a row

	// PCIe link: the current generation and width may drop while the GPU idles; the maxima are
	// what GPU and slot allow together.
	PCIeGenCurrent, PCIeGenMax     Count
	PCIeWidthCurrent, PCIeWidthMax Count

	HWSlowdown           Flag // clocks_event_reasons.hw_slowdown: Active/Not Active
	HWThermalSlowdown    Flag // clocks_event_reasons.hw_thermal_slowdown
	HWPowerBrakeSlowdown Flag // clocks_event_reasons.hw_power_brake_slowdown
	SWPowerCap           Flag // clocks_event_reasons.sw_power_cap

	// Other holds the raw values of queried fields this package does not type, by field name.
	Other map[string]string
}

// vocabulary of each two-valued field: the text for true, the text for false.
type vocab struct{ t, f string }

var (
	enabled = vocab{"Enabled", "Disabled"}
	yes     = vocab{"Yes", "No"}
	active  = vocab{"Active", "Not Active"}
)

// setter stores one cell into g.
type setter func(g *GPU, raw string) error

func flag(dst func(*GPU) *Flag, v vocab) setter {
	return func(g *GPU, raw string) error {
		f, err := parseFlag(raw, v)
		*dst(g) = f
		return err
	}
}

func count(dst func(*GPU) *Count) setter {
	return func(g *GPU, raw string) error {
		c, err := parseCount(raw)
		*dst(g) = c
		return err
	}
}

// columns maps each field this package types (under its current name) to its setter.
var columns = map[string]setter{
	"persistence_mode":                             flag(func(g *GPU) *Flag { return &g.Persistence }, enabled),
	"ecc.mode.current":                             flag(func(g *GPU) *Flag { return &g.ECCMode }, enabled),
	"ecc.errors.uncorrected.volatile.total":        count(func(g *GPU) *Count { return &g.ECCUncorrectedVolatile }),
	"retired_pages.pending":                        flag(func(g *GPU) *Flag { return &g.RetiredPagesPending }, yes),
	"remapped_rows.pending":                        flag(func(g *GPU) *Flag { return &g.RemappedRowsPending }, yes),
	"remapped_rows.failure":                        flag(func(g *GPU) *Flag { return &g.RemappedRowsFailure }, yes),
	"pcie.link.gen.current":                        count(func(g *GPU) *Count { return &g.PCIeGenCurrent }),
	"pcie.link.gen.gpucurrent":                     count(func(g *GPU) *Count { return &g.PCIeGenCurrent }),
	"pcie.link.gen.max":                            count(func(g *GPU) *Count { return &g.PCIeGenMax }),
	"pcie.link.width.current":                      count(func(g *GPU) *Count { return &g.PCIeWidthCurrent }),
	"pcie.link.width.max":                          count(func(g *GPU) *Count { return &g.PCIeWidthMax }),
	"clocks_event_reasons.hw_slowdown":             flag(func(g *GPU) *Flag { return &g.HWSlowdown }, active),
	"clocks_event_reasons.hw_thermal_slowdown":     flag(func(g *GPU) *Flag { return &g.HWThermalSlowdown }, active),
	"clocks_event_reasons.hw_power_brake_slowdown": flag(func(g *GPU) *Flag { return &g.HWPowerBrakeSlowdown }, active),
	"clocks_event_reasons.sw_power_cap":            flag(func(g *GPU) *Flag { return &g.SWPowerCap }, active),
}

// canonical maps a field's other names to the one columns uses.
func canonical(field string) string {
	field = strings.ToLower(strings.TrimSpace(field))
	if rest, ok := strings.CutPrefix(field, "clocks_throttle_reasons."); ok {
		return "clocks_event_reasons." + rest
	}
	switch field {
	case "gpu_bus_id":
		return "pci.bus_id"
	case "gpu_name":
		return "name"
	}
	return field
}

// Parse reads the output of `nvidia-smi --query-gpu=` Query (or LegacyQuery) `--format=csv`:
// the header line nvidia-smi prints first names the columns, and each is read by its name, so
// output from a query with fewer fields (an older probe, a fixture) parses, its missing fields
// KindNotQueried. Output without the header line is an error: the probe asks for it.
func Parse(text string) ([]GPU, error) {
	r, err := parseReport(text, Fields(Query), true)
	if err != nil {
		return nil, err
	}
	if err := r.Incomplete(); err != nil {
		return nil, err
	}
	return r.GPUs, nil
}

// ParseFields reads the output of a --query-gpu whose field list was fields. With its header
// line (--format=csv) the columns are read by name: the header may name fewer of the fields
// (those left out stay KindNotQueried), never one the list does not hold, and must name
// "index". Without it (--format=csv,noheader) the columns are read by position, in the order
// of fields, which must then hold "index". A list nvidia-smi left incomplete (a GPU it could
// not open, a row with no readable field, a gap in the indexes) is a *nvsmi.MissingGPUsError:
// see ParseReport for the GPUs it did list.
func ParseFields(text string, fields []string) ([]GPU, error) {
	r, err := ParseReport(text, fields)
	if err != nil {
		return nil, err
	}
	if err := r.Incomplete(); err != nil {
		return nil, err
	}
	return r.GPUs, nil
}

// Report is a --query-gpu output with what it says about GPUs it could not list.
type Report struct {
	// GPUs are the rows read, in the order listed.
	GPUs []GPU
	// Handles are nvidia-smi's "Unable to determine the device handle for GPU..." lines
	// (present when the probe keeps stderr with stdout).
	Handles []nvsmi.HandleError
	// UnreadableRows counts rows in which every field, the index too, was an NVML error.
	UnreadableRows int
}

// Gaps are the indexes missing below the highest one listed.
func (r Report) Gaps() []int { return nvsmi.IndexGaps(r.indexes()) }

// Incomplete returns a *nvsmi.MissingGPUsError when the report shows GPUs it could not list,
// else nil. It cannot see a GPU missing after the highest index: compare len(GPUs) with the
// expected GPU count for that.
func (r Report) Incomplete() error {
	return nvsmi.Incomplete("nvidia-smi --query-gpu", r.indexes(), r.Handles, r.UnreadableRows)
}

func (r Report) indexes() []int {
	out := make([]int, len(r.GPUs))
	for i, g := range r.GPUs {
		out[i] = g.Index
	}
	return out
}

// ParseReport reads the output of a --query-gpu whose field list was fields (see ParseFields),
// keeping the GPUs it lists beside the signs of GPUs it could not list. It fails on text that
// is not such a list, and when it lists nothing at all.
func ParseReport(text string, fields []string) (Report, error) {
	return parseReport(text, fields, false)
}

// parseReport is ParseReport; needHeader refuses output without its header line.
func parseReport(text string, fields []string, needHeader bool) (Report, error) {
	const tool = "nvidia-smi --query-gpu"
	asked := map[string]bool{}
	for _, f := range fields {
		asked[canonical(f)] = true
	}
	var (
		r       Report
		seen    = map[int]bool{}
		columns []string // the canonical name of each column; nil until the first line
		names   []string // each column's name as printed (the header) or asked
		indexAt = -1
	)
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" {
			continue
		}
		if h, ok := nvsmi.ParseHandleError(line); ok {
			r.Handles = append(r.Handles, h)
			continue
		}
		cells := strings.Split(line, ",")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if columns == nil {
			var err error
			if columns, names, err = header(cells, asked); err != nil {
				return Report{}, fmt.Errorf("%s: line %d: %w", tool, n+1, err)
			}
			if columns != nil {
				indexAt = slices.Index(columns, "index")
				continue
			}
			if needHeader {
				return Report{}, fmt.Errorf("%s: line %d: no header line naming the fields (the query asks --format=csv for one): %q", tool, n+1, textcut.Head(line, 160))
			}
			// No header (--format=csv,noheader): the columns are the asked fields, in order.
			for _, f := range fields {
				columns, names = append(columns, canonical(f)), append(names, f)
			}
			if indexAt = slices.Index(columns, "index"); indexAt < 0 {
				return Report{}, fmt.Errorf("%s: the field list has no \"index\"", tool)
			}
		}
		if len(cells) != len(columns) {
			return Report{}, fmt.Errorf("%s: line %d: want %d fields (%s), got %d: %q",
				tool, n+1, len(columns), textcut.Head(strings.Join(names, ","), 60), len(cells), textcut.Head(line, 160))
		}
		if k := kindOf(cells[indexAt]); k != KindValue {
			if allUnavailable(cells) {
				r.UnreadableRows++
				continue
			}
		}
		g := GPU{Index: -1}
		for i, raw := range cells {
			if err := g.set(columns[i], names[i], raw); err != nil {
				return Report{}, fmt.Errorf("%s: line %d: %s: %w", tool, n+1, textcut.Head(names[i], 60), err)
			}
		}
		if seen[g.Index] {
			return Report{}, fmt.Errorf("%s: line %d: GPU index %d listed twice", tool, n+1, g.Index)
		}
		seen[g.Index] = true
		r.GPUs = append(r.GPUs, g)
	}
	if len(r.GPUs) == 0 && len(r.Handles) == 0 && r.UnreadableRows == 0 {
		return Report{}, errors.New(tool + ": no GPU listed")
	}
	return r, nil
}

// allUnavailable reports a row whose every cell is one of nvidia-smi's "no value" texts.
func allUnavailable(cells []string) bool {
	for _, c := range cells {
		if !unavailable(c) {
			return false
		}
	}
	return true
}

// Missing returns the indexes 0..want-1 that gpus does not list: the judge's comparison with
// the expected GPU count (profile, expect.gpu_count or the PCI bus).
func Missing(gpus []GPU, want int) []int {
	have := map[int]bool{}
	for _, g := range gpus {
		have[g.Index] = true
	}
	var out []int
	for i := 0; i < want && i <= 1<<12; i++ {
		if !have[i] {
			out = append(out, i)
		}
	}
	return out
}

func (g *GPU) set(canon, field, raw string) error {
	switch canon {
	case "index":
		idx, err := strconv.Atoi(raw)
		if err != nil || idx < 0 || idx > 1<<16 {
			return fmt.Errorf("%q is not a GPU index", textcut.Head(raw, 40))
		}
		g.Index = idx
		return nil
	case "name":
		g.Name = raw
		return nil
	case "pci.bus_id":
		if raw == "" || unavailable(raw) {
			return fmt.Errorf("no bus ID (%q)", textcut.Head(raw, 40))
		}
		g.BusID = raw
		return nil
	}
	if s, ok := columns[canon]; ok {
		return s(g, raw)
	}
	if g.Other == nil {
		g.Other = map[string]string{}
	}
	g.Other[field] = raw
	return nil
}

// header reads cells as the header line nvidia-smi prints with --format=csv: the fields' names,
// with a " [unit]" suffix where they have one. It returns nil columns when cells are not a
// header (no cell names a field that was asked for, as on a row of values), and an error for a
// header that names a field twice, one the query did not ask for, or no "index".
func header(cells []string, asked map[string]bool) (columns, names []string, err error) {
	named := false
	for _, c := range cells {
		if asked[canonical(stripUnit(c))] {
			named = true
			break
		}
	}
	if !named {
		return nil, nil, nil
	}
	seen := map[string]bool{}
	for i, c := range cells {
		name := stripUnit(c)
		canon := canonical(name)
		switch {
		case !asked[canon]:
			return nil, nil, fmt.Errorf("header field %d is %q, a field the query did not ask for", i+1, textcut.Head(c, 60))
		case seen[canon]:
			return nil, nil, fmt.Errorf("header names %q twice", textcut.Head(c, 60))
		}
		seen[canon] = true
		columns, names = append(columns, canon), append(names, name)
	}
	if !seen["index"] {
		return nil, nil, errors.New("the header names no \"index\" field")
	}
	return columns, names, nil
}

// stripUnit drops the " [MiB]" nvidia-smi appends to a header field that has a unit.
func stripUnit(s string) string {
	if i := strings.Index(s, " ["); i > 0 && strings.HasSuffix(s, "]") {
		return s[:i]
	}
	return s
}

// unavailable reports nvidia-smi's ways of printing a value it cannot give: "[N/A]",
// "[Not Supported]", "[Unknown Error]", "[Insufficient Permissions]", "[GPU is lost]"... in
// brackets (CSV) or not ("N/A").
func unavailable(raw string) bool {
	k := kindOf(raw)
	return k != KindValue && k != KindNotQueried
}

func parseFlag(raw string, v vocab) (Flag, error) {
	switch {
	case strings.EqualFold(raw, v.t):
		return Flag{State: True, Kind: KindValue, Raw: raw}, nil
	case strings.EqualFold(raw, v.f):
		return Flag{State: False, Kind: KindValue, Raw: raw}, nil
	case unavailable(raw):
		return Flag{State: Unknown, Kind: kindOf(raw), Raw: raw}, nil
	}
	return Flag{Raw: raw}, fmt.Errorf("%q is neither %q nor %q", textcut.Head(raw, 40), v.t, v.f)
}

func parseCount(raw string) (Count, error) {
	if unavailable(raw) {
		return Count{Kind: kindOf(raw), Raw: raw}, nil
	}
	n, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return Count{Raw: raw}, fmt.Errorf("%q is not a count", textcut.Head(raw, 40))
	}
	return Count{Known: true, N: n, Kind: KindValue, Raw: raw}, nil
}

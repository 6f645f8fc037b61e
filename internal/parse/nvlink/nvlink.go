// Package nvlink parses what nvidia-smi says about NVLink: the per-link speed of
// `nvidia-smi nvlink -s`, the per-link error counters of `nvidia-smi nvlink -e` (with Delta
// between two snapshots), and the GPU fabric state in the "Fabric" sections of `nvidia-smi -q`.
//
// Output with no GPU in it is an error, so a driver message never reads as a healthy fabric.
// Values the driver could not give ("N/A", "[Unknown Error]") stay apart from numbers
// (LinkCounters.Unreadable, FabricKind), and a fabric state a GPU generation does not have
// ("N/A" on an A100) is FabricNotApplicable, not a failed registration.
package nvlink

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpuhealth"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// GPU names a GPU as the nvlink subcommands head its block:
// "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)".
type GPU struct {
	Index int
	Name  string
	UUID  string // "" when the header has none
	// Notes are the block's lines that are neither a link nor blank: an NVML message ("Unable
	// to retrieve NVLink information as all links are inActive") or an elision ("[...]").
	Notes []string
}

// Link is one line of `nvidia-smi nvlink -s`.
type Link struct {
	Index int
	// Active is false for "<inactive>" and for a speed of 0.
	Active bool
	// GBps is the per-direction speed in GB/s (26.562 on H100, 53.125 on B200); 0 when inactive.
	GBps float64
	Raw  string // the text after "Link N:"
}

// Status is one GPU of `nvidia-smi nvlink -s`.
type Status struct {
	GPU
	Links []Link
}

// Inactive lists the links that are down ("<inactive>" or a speed of 0).
func (s Status) Inactive() []int {
	var out []int
	for _, l := range s.Links {
		if !l.Active {
			out = append(out, l.Index)
		}
	}
	return out
}

// ActiveLinks counts the links that are up.
func (s Status) ActiveLinks() int {
	n := 0
	for _, l := range s.Links {
		if l.Active {
			n++
		}
	}
	return n
}

var (
	gpuHeader = regexp.MustCompile(`^GPU (\d+): (.*?)(?: \(UUID: ([^)]*)\))?$`)
	linkLine  = regexp.MustCompile(`^Link (\d+):\s*(.*)$`)
	speed     = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?) GB/s$`)
)

// block is one "GPU N:" block's header and its non-blank lines, trimmed.
type block struct {
	gpu   GPU
	lines []numbered
}

type numbered struct {
	n    int
	text string
}

// blocks splits text into GPU blocks. Text before the first GPU header is ignored unless no
// header follows, when the first such line is the error.
func blocks(tool, text string) ([]block, error) {
	var out []block
	first := ""
	seen := map[int]bool{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" {
			continue
		}
		if m := gpuHeader.FindStringSubmatch(line); m != nil {
			idx, err := strconv.Atoi(m[1])
			if err != nil || idx > 1<<16 {
				return nil, fmt.Errorf("%s: line %d: GPU index %q", tool, n+1, textcut.Head(m[1], 20))
			}
			if seen[idx] {
				return nil, fmt.Errorf("%s: line %d: GPU %d listed twice", tool, n+1, idx)
			}
			seen[idx] = true
			out = append(out, block{gpu: GPU{Index: idx, Name: strings.TrimSpace(m[2]), UUID: m[3]}})
			continue
		}
		if len(out) == 0 {
			if first == "" {
				first = line
			}
			continue
		}
		b := &out[len(out)-1]
		b.lines = append(b.lines, numbered{n + 1, line})
	}
	if len(out) == 0 {
		if first == "" {
			return nil, fmt.Errorf("%s: empty output", tool)
		}
		return nil, fmt.Errorf("%s: no GPU listed: %q", tool, textcut.Head(first, 160))
	}
	return out, nil
}

// ParseStatus reads `nvidia-smi nvlink -s` (--status).
func ParseStatus(text string) ([]Status, error) {
	const tool = "nvidia-smi nvlink -s"
	bs, err := blocks(tool, text)
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(bs))
	for _, b := range bs {
		s := Status{GPU: b.gpu}
		seen := map[int]bool{}
		for _, l := range b.lines {
			m := linkLine.FindStringSubmatch(l.text)
			if m == nil {
				s.Notes = append(s.Notes, textcut.Head(l.text, 200))
				continue
			}
			link, err := parseLinkIndex(m[1])
			if err != nil {
				return nil, fmt.Errorf("%s: line %d: %w", tool, l.n, err)
			}
			if seen[link] {
				return nil, fmt.Errorf("%s: line %d: GPU %d link %d listed twice", tool, l.n, s.Index, link)
			}
			seen[link] = true
			lk := Link{Index: link, Raw: m[2]}
			switch v := strings.TrimSpace(m[2]); {
			case strings.EqualFold(v, "<inactive>"):
			case speed.MatchString(v):
				lk.GBps, _ = strconv.ParseFloat(speed.FindStringSubmatch(v)[1], 64)
				lk.Active = lk.GBps > 0
			default:
				return nil, fmt.Errorf("%s: line %d: GPU %d link %d: %q is neither a speed nor <inactive>", tool, l.n, s.Index, link, textcut.Head(v, 60))
			}
			s.Links = append(s.Links, lk)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseLinkIndex(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n > 1024 {
		return 0, fmt.Errorf("link index %q", textcut.Head(s, 20))
	}
	return n, nil
}

// LinkCounters is one link's counters of `nvidia-smi nvlink -e`.
type LinkCounters struct {
	Index int
	// Counts are the integer counters by the name nvidia-smi prints: "Replay Errors",
	// "Recovery Errors", "CRC Errors" before Blackwell; "Malformed packet Errors", "Rx Errors",
	// "Link recovery failed events", "Symbol Errors", "FEC Errors - 0"... on Blackwell drivers.
	Counts map[string]uint64
	// Other are the values that are not counts, by name: "Effective BER: 15e-255", "N/A".
	Other map[string]string
	// Unreadable are the values of Other that say the driver gave no value ("N/A",
	// "[Unknown Error]", "Not Supported"...): counters nobody can compare.
	Unreadable map[string]string
}

// Counters is one GPU of `nvidia-smi nvlink -e`.
type Counters struct {
	GPU
	Links []LinkCounters
}

// ParseErrors reads `nvidia-smi nvlink -e` (--errorcounters): lines "Link N: <name>: <value>"
// under each GPU header, whatever the counter names.
func ParseErrors(text string) ([]Counters, error) {
	const tool = "nvidia-smi nvlink -e"
	bs, err := blocks(tool, text)
	if err != nil {
		return nil, err
	}
	out := make([]Counters, 0, len(bs))
	for _, b := range bs {
		c := Counters{GPU: b.gpu}
		byLink := map[int]int{}
		for _, l := range b.lines {
			m := linkLine.FindStringSubmatch(l.text)
			if m == nil {
				c.Notes = append(c.Notes, textcut.Head(l.text, 200))
				continue
			}
			link, err := parseLinkIndex(m[1])
			if err != nil {
				return nil, fmt.Errorf("%s: line %d: %w", tool, l.n, err)
			}
			i := strings.LastIndex(m[2], ":")
			if i <= 0 {
				return nil, fmt.Errorf("%s: line %d: GPU %d link %d: want \"<counter>: <value>\", got %q", tool, l.n, c.Index, link, textcut.Head(m[2], 80))
			}
			name, val := strings.TrimSpace(m[2][:i]), strings.TrimSpace(m[2][i+1:])
			if name == "" || val == "" {
				return nil, fmt.Errorf("%s: line %d: GPU %d link %d: empty counter name or value: %q", tool, l.n, c.Index, link, textcut.Head(m[2], 80))
			}
			k, ok := byLink[link]
			if !ok {
				k = len(c.Links)
				byLink[link] = k
				c.Links = append(c.Links, LinkCounters{Index: link, Counts: map[string]uint64{}, Other: map[string]string{}, Unreadable: map[string]string{}})
			}
			lc := &c.Links[k]
			if _, dup := lc.Counts[name]; dup {
				return nil, fmt.Errorf("%s: line %d: GPU %d link %d: %q listed twice", tool, l.n, c.Index, link, textcut.Head(name, 60))
			}
			if _, dup := lc.Other[name]; dup {
				return nil, fmt.Errorf("%s: line %d: GPU %d link %d: %q listed twice", tool, l.n, c.Index, link, textcut.Head(name, 60))
			}
			if n, err := strconv.ParseUint(val, 10, 64); err == nil {
				lc.Counts[name] = n
			} else {
				lc.Other[name] = textcut.Head(val, 60)
				if gpuhealth.KindOf(val) != gpuhealth.KindValue {
					lc.Unreadable[name] = textcut.Head(val, 60)
				}
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// CounterRef names one counter of one link of one GPU, with the text it read.
type CounterRef struct {
	GPU, Link int
	Counter   string
	Raw       string
}

func (c CounterRef) String() string {
	return fmt.Sprintf("GPU %d link %d %s: %s", c.GPU, c.Link, c.Counter, c.Raw)
}

// Unreadable lists, in GPU, link and counter order, the counters whose value the driver
// could not give: counters that cannot prove a link clean. A judge of the counters around a
// test reads them in both snapshots: a counter unreadable before or after is not judged.
func Unreadable(cs []Counters) []CounterRef {
	var out []CounterRef
	for _, g := range cs {
		for _, l := range g.Links {
			for _, name := range slices.Sorted(maps.Keys(l.Unreadable)) {
				out = append(out, CounterRef{GPU: g.Index, Link: l.Index, Counter: name, Raw: l.Unreadable[name]})
			}
		}
	}
	return out
}

// Readable counts the integer counters of all links: zero on an NVLink host means nothing
// was read that could show an error.
func Readable(cs []Counters) int {
	n := 0
	for _, g := range cs {
		for _, l := range g.Links {
			n += len(l.Counts)
		}
	}
	return n
}

// Change is a counter that grew between two snapshots.
type Change struct {
	GPU, Link     int
	Counter       string
	Before, After uint64
}

// Increase is After - Before.
func (c Change) Increase() uint64 { return c.After - c.Before }

func (c Change) String() string {
	return fmt.Sprintf("GPU %d link %d %s +%d (%d -> %d)", c.GPU, c.Link, c.Counter, c.Increase(), c.Before, c.After)
}

// Delta returns the counters that grew from before to after, in after's GPU and link order
// and by counter name. It fails when
// the two do not describe the same GPUs, links and counters (a GPU gone, a UUID changed, a
// counter missing) or a counter went down (reset between the snapshots): a difference it
// cannot compute is never reported as no change.
func Delta(before, after []Counters) ([]Change, error) {
	if len(before) != len(after) {
		return nil, fmt.Errorf("nvlink delta: %d GPUs before, %d after", len(before), len(after))
	}
	prev := map[int]Counters{}
	for _, g := range before {
		prev[g.Index] = g
	}
	var out []Change
	for _, a := range after {
		b, ok := prev[a.Index]
		if !ok {
			return nil, fmt.Errorf("nvlink delta: GPU %d was not in the first snapshot", a.Index)
		}
		if b.UUID != a.UUID {
			return nil, fmt.Errorf("nvlink delta: GPU %d was %q, is %q", a.Index, textcut.Head(b.UUID, 60), textcut.Head(a.UUID, 60))
		}
		if len(b.Links) != len(a.Links) {
			return nil, fmt.Errorf("nvlink delta: GPU %d had %d links, has %d", a.Index, len(b.Links), len(a.Links))
		}
		links := map[int]LinkCounters{}
		for _, l := range b.Links {
			links[l.Index] = l
		}
		for _, al := range a.Links {
			bl, ok := links[al.Index]
			if !ok {
				return nil, fmt.Errorf("nvlink delta: GPU %d link %d was not in the first snapshot", a.Index, al.Index)
			}
			if len(bl.Counts) != len(al.Counts) {
				return nil, fmt.Errorf("nvlink delta: GPU %d link %d had %d counters, has %d", a.Index, al.Index, len(bl.Counts), len(al.Counts))
			}
			for _, name := range slices.Sorted(maps.Keys(al.Counts)) {
				bv, ok := bl.Counts[name]
				av := al.Counts[name]
				switch {
				case !ok:
					return nil, fmt.Errorf("nvlink delta: GPU %d link %d: %q was not in the first snapshot", a.Index, al.Index, textcut.Head(name, 60))
				case av < bv:
					return nil, fmt.Errorf("nvlink delta: GPU %d link %d: %q went from %d to %d (reset?)", a.Index, al.Index, textcut.Head(name, 60), bv, av)
				case av > bv:
					out = append(out, Change{GPU: a.Index, Link: al.Index, Counter: name, Before: bv, After: av})
				}
			}
		}
	}
	return out, nil
}

// FabricKind is what a GPU's Fabric section says about its NVSwitch fabric registration.
type FabricKind int8

const (
	// FabricRegistered: State "Completed", Status "Success".
	FabricRegistered FabricKind = iota + 1
	// FabricNotApplicable: State "N/A": the GPU has no fabric registration. Every A100 prints
	// this, NVSwitch or not, and so does a Hopper GPU off an NVSwitch fabric (GH200, H100
	// NVL): not a failure; judge Fabric Manager and the NVLink link state instead.
	FabricNotApplicable
	// FabricNotSupported: State "Not Supported" (the manual's value for GPUs without it).
	FabricNotSupported
	// FabricPending: State "Not Started" or "In Progress": Fabric Manager has not finished.
	FabricPending
	// FabricFailed: State "Completed" with a Status other than "Success" (an NVML error
	// name): the registration failed.
	FabricFailed
	// FabricUnreadable: anything else ("Unknown Error", "GPU is lost", unexpected text).
	FabricUnreadable
	// FabricAbsent: no Fabric section at all (drivers before R535).
	FabricAbsent
)

func (k FabricKind) String() string {
	switch k {
	case FabricRegistered:
		return "registered"
	case FabricNotApplicable:
		return "not applicable"
	case FabricNotSupported:
		return "not supported"
	case FabricPending:
		return "pending"
	case FabricFailed:
		return "failed"
	case FabricUnreadable:
		return "unreadable"
	case FabricAbsent:
		return "absent"
	}
	return "unknown"
}

// Fabric is one GPU's "Fabric" section of `nvidia-smi -q` (R535 and later): whether the
// fabric manager has registered the GPU with the NVSwitch fabric.
type Fabric struct {
	// BusID is the GPU block's header ("00000000:53:00.0").
	BusID string
	// ProductName and Architecture are the block's "Product Name" and "Product
	// Architecture" ("Ampere", "Hopper", "Blackwell"); "" when absent.
	ProductName, Architecture string
	// State is "Completed" once registered ("Not Started", "In Progress"; "N/A" without NVSwitch).
	State string
	// Status is the registration's result: "Success" or an NVML error name; "N/A" before completion.
	Status string
	// Kind classifies State and Status.
	Kind FabricKind
	// CliqueID and ClusterUUID are printed by R550 and later; "" when absent.
	CliqueID, ClusterUUID string
	// Health holds the "Health" subsection (R550+): "Bandwidth" and, on later drivers, route and
	// recovery flags; nil when absent.
	Health map[string]string
	// GUID is the GPU block's "GPU Fabric GUID" (R570+ on NVSwitch systems); "" when absent.
	GUID string
}

// Registered reports State "Completed" with Status "Success".
func (f Fabric) Registered() bool { return f.State == "Completed" && f.Status == "Success" }

// IDKind is what a Fabric section's CliqueId or ClusterUUID says (R550 and later).
type IDKind int8

const (
	// IDAbsent: the field is not printed (drivers before R550).
	IDAbsent IDKind = iota
	// IDZero: "0", "00000000-0000-0000-0000-000000000000": the GPU belongs to no multi-node
	// NVLink domain. Healthy on a single-node NVSwitch board (H100, H200, B200: "On H100
	// (non-MNNVL) NVML may report state=COMPLETED with a zeroed cluster UUID",
	// meta-pytorch/torchcomms PR 1385); a fabric that never registered on a GB200 tray
	// (Azure/azhpc-images PR 506). Facts: shared/docs/grace-blackwell.md 1.4.
	IDZero
	// IDSet: a value other than zeros: the GPU's clique, or its NVLink domain's cluster.
	IDSet
	// IDUnreadable: "N/A", "Not Supported", an error in brackets, or text that is neither a
	// number nor a UUID.
	IDUnreadable
)

func (k IDKind) String() string {
	switch k {
	case IDAbsent:
		return "absent"
	case IDZero:
		return "zero"
	case IDSet:
		return "set"
	}
	return "unreadable"
}

// ClassifyID classifies a CliqueId ("4026", "0") or ClusterUUID
// ("9c6f5af3-…", "00000000-0000-0000-0000-000000000000").
func ClassifyID(raw string) IDKind {
	s := strings.TrimSpace(raw)
	if s == "" {
		return IDAbsent
	}
	if gpuhealth.KindOf(s) != gpuhealth.KindValue {
		return IDUnreadable
	}
	zero := true
	for _, c := range strings.ReplaceAll(s, "-", "") {
		switch {
		case c == '0':
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
			zero = false
		default:
			return IDUnreadable
		}
	}
	if strings.Trim(s, "-") == "" {
		return IDUnreadable
	}
	if zero {
		return IDZero
	}
	return IDSet
}

// Clique classifies the GPU's CliqueId.
func (f Fabric) Clique() IDKind { return ClassifyID(f.CliqueID) }

// Cluster classifies the GPU's ClusterUUID.
func (f Fabric) Cluster() IDKind { return ClassifyID(f.ClusterUUID) }

// HealthSummary is the Health subsection's "Summary" ("Healthy", "Unhealthy", "Limited
// Capacity", "Not Supported" on drivers that print it); "" when the driver prints none.
func (f Fabric) HealthSummary() string { return f.Health["Summary"] }

// fabricKind classifies a Fabric section's State and Status.
func fabricKind(present bool, state, status string) FabricKind {
	if !present {
		return FabricAbsent
	}
	switch st := strings.ToLower(strings.Trim(strings.TrimSpace(state), "[]")); st {
	case "completed":
		if status == "Success" {
			return FabricRegistered
		}
		if gpuhealth.KindOf(status) == gpuhealth.KindValue {
			return FabricFailed
		}
		return FabricUnreadable
	case "n/a":
		return FabricNotApplicable
	case "not supported":
		return FabricNotSupported
	case "not started", "in progress":
		return FabricPending
	}
	return FabricUnreadable
}

// FabricReport is ParseFabricReport's reading of `nvidia-smi -q`.
type FabricReport struct {
	// Attached is the "Attached GPUs" header; -1 when absent.
	Attached int
	GPUs     []Fabric
	// Handles are "Unable to determine the device handle for GPU..." lines.
	Handles []nvsmi.HandleError
}

// Incomplete returns a *nvsmi.MissingGPUsError when fewer GPU blocks than Attached GPUs were
// printed or nvidia-smi named a GPU it could not open; else nil.
func (r FabricReport) Incomplete() error {
	idx := make([]int, len(r.GPUs))
	for i := range r.GPUs {
		idx[i] = i
	}
	if r.Attached > len(r.GPUs) && r.Attached <= 1<<12 {
		var gaps []int
		for i := len(r.GPUs); i < r.Attached; i++ {
			gaps = append(gaps, i)
		}
		return &nvsmi.MissingGPUsError{Tool: "nvidia-smi -q", Listed: idx, Gaps: gaps, Handles: r.Handles}
	}
	return nvsmi.Incomplete("nvidia-smi -q", idx, r.Handles, 0)
}

var qGPUHeader = regexp.MustCompile(`^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$`)

// ParseFabric reads the Fabric section of every GPU block of `nvidia-smi -q`. A GPU block
// without one (a driver before R535), one without State or Status, text with no GPU block,
// and a list shorter than its "Attached GPUs" header or naming a GPU nvidia-smi could not
// open are errors. A State of "N/A" (an A100) is read, with Kind FabricNotApplicable.
func ParseFabric(text string) ([]Fabric, error) {
	r, err := ParseFabricReport(text)
	if err != nil {
		return nil, err
	}
	for _, f := range r.GPUs {
		if f.Kind == FabricAbsent {
			return nil, fmt.Errorf("nvidia-smi -q: GPU %s has no Fabric section (driver older than R535?)", f.BusID)
		}
	}
	if err := r.Incomplete(); err != nil {
		return nil, err
	}
	return r.GPUs, nil
}

// ParseFabricReport reads what ParseFabric reads, keeping a GPU block without a Fabric
// section (Kind FabricAbsent) and leaving completeness to FabricReport.Incomplete.
func ParseFabricReport(text string) (FabricReport, error) {
	const tool = "nvidia-smi -q"
	r := FabricReport{Attached: -1}
	var cur *Fabric
	inGPU, inFabric, inHealth := false, false, false
	hasFabric := false
	first := ""
	finish := func() error {
		if !inGPU {
			return nil
		}
		if hasFabric && (cur.State == "" || cur.Status == "") {
			return fmt.Errorf("%s: GPU %s: Fabric section without State or Status", tool, cur.BusID)
		}
		cur.Kind = fabricKind(hasFabric, cur.State, cur.Status)
		return nil
	}
	for _, raw := range strings.Split(text, "\n") {
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
				if err := finish(); err != nil {
					return FabricReport{}, err
				}
				r.GPUs = append(r.GPUs, Fabric{BusID: m[1]})
				cur = &r.GPUs[len(r.GPUs)-1]
				inGPU, inFabric, inHealth, hasFabric = true, false, false, false
				continue
			}
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "Attached GPUs" {
				a, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil || a < 0 {
					return FabricReport{}, fmt.Errorf("%s: Attached GPUs %q is not a count", tool, textcut.Head(v, 40))
				}
				r.Attached = a
			}
			if inGPU {
				if err := finish(); err != nil {
					return FabricReport{}, err
				}
				inGPU = false
			}
			continue
		}
		if !inGPU {
			continue
		}
		key, val, hasColon := strings.Cut(line, ":")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch {
		case indent <= 4:
			inFabric, inHealth = false, false
			switch {
			case !hasColon && key == "Fabric":
				if hasFabric {
					return FabricReport{}, fmt.Errorf("%s: GPU %s has two Fabric sections", tool, cur.BusID)
				}
				inFabric, hasFabric = true, true
			case hasColon && key == "GPU Fabric GUID":
				cur.GUID = textcut.Head(val, 60)
			case hasColon && key == "Product Name":
				cur.ProductName = textcut.Head(val, 80)
			case hasColon && key == "Product Architecture":
				cur.Architecture = textcut.Head(val, 40)
			}
		case inFabric && indent <= 8:
			inHealth = false
			if !hasColon {
				inHealth = key == "Health"
				if inHealth && cur.Health == nil {
					cur.Health = map[string]string{}
				}
				continue
			}
			switch key {
			case "State":
				cur.State = textcut.Head(val, 60)
			case "Status":
				cur.Status = textcut.Head(val, 60)
			case "CliqueId":
				cur.CliqueID = textcut.Head(val, 60)
			case "ClusterUUID":
				cur.ClusterUUID = textcut.Head(val, 60)
			}
		case inHealth && hasColon:
			if len(cur.Health) < 32 {
				cur.Health[textcut.Head(key, 60)] = textcut.Head(val, 60)
			}
		}
	}
	if err := finish(); err != nil {
		return FabricReport{}, err
	}
	if len(r.GPUs) == 0 && len(r.Handles) == 0 {
		if first == "" {
			return FabricReport{}, errors.New(tool + ": empty output")
		}
		return FabricReport{}, fmt.Errorf("%s: no GPU block: %q", tool, textcut.Head(first, 160))
	}
	return r, nil
}

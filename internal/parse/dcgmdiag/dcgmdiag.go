// Package dcgmdiag parses the JSON of `dcgmi diag -r <level> -j`: per test, per GPU, what DCGM
// concluded (Pass, Fail, Warn, Skip, Not Run) and what it said about it.
//
// It reads both document shapes: DCGM 3.x ("DCGM GPU Diagnostic", results keyed by "gpu_id",
// "version", "Driver Version Detected", "GPU Device IDs" and "GPU Device Serials" beside it at
// the top level) and DCGM 4.x ("DCGM Diagnostic", results keyed by entity, a per-test
// "test_summary", top-level "metadata" and "entity_groups"). When the diagnostic did not run
// (a "runtime_error" in the JSON, text instead of JSON, a document with no test result) Parse
// returns a *CouldNotRun error: a distinct outcome, never a pass.
//
// A judge reads Test.Summary, never the results alone: DCGM 4.x reports errors that belong to
// no GPU only in the test_summary, so a test whose every result says Pass can still have
// failed (Test.SummaryWorse). Report.GPUs and Test.GPUs say which GPUs the run and each test
// covered, to compare with the expected GPU count. dcgmi's exit status (which the JSON does
// not carry) is read with ExitStatus.
package dcgmdiag

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Outcome is DCGM's verdict on one result or test.
type Outcome int

// The outcomes, from best to worst as Worst ranks them.
const (
	Pass Outcome = iota
	Skip
	NotRun
	Warn
	Unknown // a status word this package does not know: never read as a pass
	Fail
)

func (o Outcome) String() string {
	switch o {
	case Pass:
		return "Pass"
	case Skip:
		return "Skip"
	case NotRun:
		return "Not Run"
	case Warn:
		return "Warn"
	case Fail:
		return "Fail"
	}
	return "Unknown"
}

// ParseOutcome maps DCGM's status word (any case) to an Outcome; an unknown word is Unknown.
func ParseOutcome(s string) Outcome {
	switch strings.ToLower(strings.Join(strings.Fields(strings.ReplaceAll(s, "_", " ")), " ")) {
	case "pass":
		return Pass
	case "fail":
		return Fail
	case "warn", "warning":
		return Warn
	case "skip", "skipped":
		return Skip
	case "not run", "notrun":
		return NotRun
	}
	return Unknown
}

// Message is a warning DCGM attached to a result.
type Message struct {
	Text string
	// ErrorID is DCGM's error code (dcgmError_t, e.g. 29 DCGM_FR_PERSISTENCE_MODE); -1 when absent
	// (DCGM 3.x often gives none). Category and Severity likewise.
	ErrorID, Category, Severity int
}

// Result is one entity's result of one test.
type Result struct {
	// Entity is the entity group ("GPU"; "CPU" for CPU tests); "GPU" in DCGM 3.x documents.
	Entity string
	// EntityID is the GPU (or CPU) id; -1 when the document names none.
	EntityID  int
	Outcome   Outcome
	RawStatus string
	Warnings  []Message
	Info      []string
}

// Test is one test ("software", "pcie", "memory"...; "PCIe", "GPU Memory"... in DCGM 3.x).
type Test struct {
	Category string
	Name     string
	// Summary is DCGM 4.x's test_summary status, else the worst of the results.
	Summary    Outcome
	RawSummary string
	// SummaryInfo and SummaryWarnings are the test_summary's messages (DCGM 4.x).
	SummaryInfo     []string
	SummaryWarnings []Message
	Results         []Result
}

// WorstResult is the worst Outcome of the test's results; Pass when it has none.
func (t Test) WorstResult() Outcome {
	w := Pass
	for _, r := range t.Results {
		if r.Outcome > w {
			w = r.Outcome
		}
	}
	return w
}

// SummaryWorse reports a test_summary worse than every result: DCGM concluded on something
// no result carries (an error of no GPU, in SummaryWarnings). Such a test never passes.
func (t Test) SummaryWorse() bool { return len(t.Results) > 0 && t.Summary > t.WorstResult() }

// GPUs are the distinct GPU ids the test's results name, sorted; nil when they name none
// (DCGM 3.x's Deployment tests).
func (t Test) GPUs() []int {
	seen := map[int]bool{}
	var out []int
	for _, r := range t.Results {
		if r.Entity == "GPU" && r.EntityID >= 0 && !seen[r.EntityID] {
			seen[r.EntityID] = true
			out = append(out, r.EntityID)
		}
	}
	slices.Sort(out)
	return out
}

// Entity is one entity the run covered: DCGM 4.x's entity_groups, or DCGM 3.x's "GPU Device
// IDs" (with "GPU Device Serials").
type Entity struct {
	// Group is the entity group ("GPU", "CPU").
	Group string
	// ID is the entity id (the DCGM GPU id); -1 when the document names none.
	ID int
	// DeviceID is the PCI device id ("20b0" on A100, "2e12" on GB10); Serial the board serial.
	DeviceID, Serial string
}

// Report is a parsed diagnostic run.
type Report struct {
	// Format is 3 or 4: the document shape.
	Format int
	// Version is the DCGM version and DriverVersion the driver DCGM detected, "" when absent.
	Version, DriverVersion string
	// Entities are the entities the run covered, as the document lists them; nil when it
	// lists none (DCGM 4.x before entity_groups, 3.x documents cut short).
	Entities []Entity
	Tests    []Test
}

// GPUs are the ids of the GPU entities the run covered, sorted: from Entities, else the GPUs
// the results name. A judge compares their number with the expected GPU count: results that
// cover 1 of 8 GPUs are not a pass of the other 7.
func (r Report) GPUs() []int {
	seen := map[int]bool{}
	var out []int
	add := func(id int) {
		if id >= 0 && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, e := range r.Entities {
		if e.Group == "GPU" {
			add(e.ID)
		}
	}
	if len(out) == 0 {
		for _, t := range r.Tests {
			for _, id := range t.GPUs() {
				add(id)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Worst is the worst Summary of all tests.
func (r Report) Worst() Outcome {
	w := Pass
	for _, t := range r.Tests {
		if t.Summary > w {
			w = t.Summary
		}
	}
	return w
}

// Test returns the test named name (case-insensitive), if present.
func (r Report) Test(name string) (Test, bool) {
	for _, t := range r.Tests {
		if strings.EqualFold(t.Name, name) {
			return t, true
		}
	}
	return Test{}, false
}

// CouldNotRun is the error Parse returns when the output shows the diagnostic did not run.
type CouldNotRun struct {
	// Reason is DCGM's own message (its runtime_error, or the text it printed), shortened.
	Reason string
	// Code is the document's "error_code" (nvvs prints one beside runtime_error); 0 when
	// absent.
	Code int
}

func (e *CouldNotRun) Error() string { return "dcgmi diag could not run: " + e.Reason }

const (
	key3 = "DCGM GPU Diagnostic"
	key4 = "DCGM Diagnostic"
)

// Parse reads the stdout of `dcgmi diag -j`. Text before the JSON document (a banner line) is
// ignored; text after it is an error.
func Parse(text string) (Report, error) {
	start := strings.IndexByte(text, '{')
	if start < 0 {
		return Report{}, couldNotRun(text)
	}
	dec := json.NewDecoder(strings.NewReader(text[start:]))
	dec.UseNumber()
	var doc map[string]json.RawMessage
	if err := dec.Decode(&doc); err != nil {
		if strings.TrimSpace(text[:start]) != "" {
			return Report{}, couldNotRun(text)
		}
		return Report{}, fmt.Errorf("dcgmi diag: output is not a JSON document: %v: %q", err, textcut.Head(strings.TrimSpace(text), 160))
	}
	if rest := strings.TrimSpace(text[start+int(dec.InputOffset()):]); rest != "" {
		return Report{}, fmt.Errorf("dcgmi diag: text after the JSON document: %q", textcut.Head(rest, 160))
	}
	var r Report
	body, ok := doc[key4]
	r.Format = 4
	if !ok {
		body, ok = doc[key3]
		r.Format = 3
	}
	if !ok {
		if _, iter := doc["iterations"]; iter {
			return Report{}, errors.New("dcgmi diag: a document of several --iterations runs: run the diagnostic once per document")
		}
		return Report{}, fmt.Errorf("dcgmi diag: JSON has neither %q nor %q: keys %q", key4, key3, textcut.Head(strings.Join(sortedKeys(doc), ", "), 160))
	}
	var top struct {
		Categories   []category      `json:"test_categories"`
		RuntimeError json.RawMessage `json:"runtime_error"`
		ErrorCode    json.RawMessage `json:"error_code"`
		Version      string          `json:"version"`
		Driver       string          `json:"Driver Version Detected"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		return Report{}, fmt.Errorf("dcgmi diag: %q: %w", "test_categories", err)
	}
	if len(top.RuntimeError) > 0 && string(top.RuntimeError) != "null" {
		code := intOf(top.ErrorCode)
		if code == -1 {
			code = 0
		}
		return Report{}, &CouldNotRun{Reason: textcut.Head(strings.TrimSpace(stringOf(top.RuntimeError)), 300), Code: code}
	}
	r.Version, r.DriverVersion = top.Version, top.Driver
	// DCGM 3.x writes the version, the driver and the GPUs beside its body, at the top level.
	if r.Version == "" {
		r.Version = textcut.Head(stringOf(doc["version"]), 40)
	}
	if r.DriverVersion == "" {
		r.DriverVersion = textcut.Head(stringOf(doc["Driver Version Detected"]), 40)
	}
	r.Entities = entitiesOf(doc)
	if m, ok := doc["metadata"]; ok {
		var meta struct {
			Version string `json:"version"`
			Driver  string `json:"Driver Version Detected"`
		}
		if err := json.Unmarshal(m, &meta); err == nil {
			if meta.Version != "" {
				r.Version = meta.Version
			}
			if meta.Driver != "" {
				r.DriverVersion = meta.Driver
			}
		}
	}
	for _, c := range top.Categories {
		for _, t := range c.Tests {
			test, err := t.convert(c.Category)
			if err != nil {
				return Report{}, err
			}
			r.Tests = append(r.Tests, test)
		}
	}
	if len(r.Tests) == 0 {
		return Report{}, &CouldNotRun{Reason: "the JSON document lists no test"}
	}
	return r, nil
}

// entitiesOf reads DCGM 4.x's entity_groups, else DCGM 3.x's "GPU Device IDs" (an array,
// one per GPU in id order) and "GPU Device Serials" (an object keyed by GPU id). Anything
// that is not of that shape yields no entity: Report.GPUs then falls back to the results.
func entitiesOf(doc map[string]json.RawMessage) []Entity {
	var out []Entity
	if raw, ok := doc["entity_groups"]; ok {
		var groups []struct {
			Group    string `json:"entity_group"`
			Entities []struct {
				ID       json.RawMessage `json:"entity_id"`
				DeviceID string          `json:"device_id"`
				Serial   string          `json:"serial_num"`
			} `json:"entities"`
		}
		if json.Unmarshal(raw, &groups) == nil {
			for _, g := range groups {
				for _, e := range g.Entities {
					if len(out) >= 1<<12 {
						return out
					}
					out = append(out, Entity{Group: textcut.Head(g.Group, 20), ID: intOf(e.ID), DeviceID: textcut.Head(e.DeviceID, 20), Serial: textcut.Head(e.Serial, 60)})
				}
			}
		}
		return out
	}
	var ids []string
	if json.Unmarshal(doc["GPU Device IDs"], &ids) != nil {
		return nil
	}
	var serials map[string]string
	_ = json.Unmarshal(doc["GPU Device Serials"], &serials)
	for i, id := range ids {
		if i >= 1<<12 {
			break
		}
		out = append(out, Entity{Group: "GPU", ID: i, DeviceID: textcut.Head(id, 20), Serial: textcut.Head(serials[strconv.Itoa(i)], 60)})
	}
	return out
}

// couldNotRun quotes the end of what dcgmi printed instead of a JSON document.
func couldNotRun(text string) error {
	t := strings.TrimSpace(text)
	if t == "" {
		return &CouldNotRun{Reason: "no output"}
	}
	return &CouldNotRun{Reason: textcut.Tail(t, 300)}
}

// IsCouldNotRun reports whether err says the diagnostic did not run.
func IsCouldNotRun(err error) bool {
	var c *CouldNotRun
	return errors.As(err, &c)
}

type category struct {
	Category string     `json:"category"`
	Tests    []jsonTest `json:"tests"`
}

type jsonTest struct {
	Name    string       `json:"name"`
	Results []jsonResult `json:"results"`
	Summary *jsonResult  `json:"test_summary"`
}

type jsonResult struct {
	Status        string          `json:"status"`
	EntityGroup   string          `json:"entity_group"`
	EntityID      json.RawMessage `json:"entity_id"`
	GPUID         json.RawMessage `json:"gpu_id"`
	GPUIDs        json.RawMessage `json:"gpu_ids"`
	Warnings      json.RawMessage `json:"warnings"`
	Warning       json.RawMessage `json:"warning"`
	Info          json.RawMessage `json:"info"`
	ErrorID       json.RawMessage `json:"error_id"`
	ErrorCategory json.RawMessage `json:"error_category"`
	ErrorSeverity json.RawMessage `json:"error_severity"`
}

func (t jsonTest) convert(cat string) (Test, error) {
	if strings.TrimSpace(t.Name) == "" {
		return Test{}, fmt.Errorf("dcgmi diag: category %q: a test without a name", textcut.Head(cat, 60))
	}
	out := Test{Category: cat, Name: t.Name}
	worst, seen := Pass, false
	for _, jr := range t.Results {
		if strings.TrimSpace(jr.Status) == "" {
			return Test{}, fmt.Errorf("dcgmi diag: test %q: a result without a status", textcut.Head(t.Name, 60))
		}
		ids, err := jr.entityIDs()
		if err != nil {
			return Test{}, fmt.Errorf("dcgmi diag: test %q: %w", textcut.Head(t.Name, 60), err)
		}
		entity := jr.EntityGroup
		if entity == "" {
			entity = "GPU"
		}
		for _, id := range ids {
			res := Result{Entity: entity, EntityID: id, RawStatus: jr.Status, Outcome: ParseOutcome(jr.Status),
				Warnings: jr.warnings(), Info: stringsOf(jr.Info)}
			if res.Outcome > worst {
				worst = res.Outcome
			}
			seen = true
			out.Results = append(out.Results, res)
		}
	}
	switch {
	case t.Summary != nil && strings.TrimSpace(t.Summary.Status) != "":
		out.RawSummary = t.Summary.Status
		out.Summary = ParseOutcome(t.Summary.Status)
		out.SummaryInfo = stringsOf(t.Summary.Info)
		out.SummaryWarnings = t.Summary.warnings()
		// A summary never reads better than its worst result.
		if seen && worst > out.Summary {
			out.Summary = worst
		}
	case seen:
		out.Summary, out.RawSummary = worst, worst.String()
	default:
		return Test{}, fmt.Errorf("dcgmi diag: test %q has no result and no summary", textcut.Head(t.Name, 60))
	}
	return out, nil
}

// entityIDs is the ids a result covers: entity_id (4.x), gpu_id (3.x), the "0,1" list of
// gpu_ids (older 3.x), or [-1] when none is named.
func (jr jsonResult) entityIDs() ([]int, error) {
	for _, raw := range []json.RawMessage{jr.EntityID, jr.GPUID, jr.GPUIDs} {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		s := strings.Trim(strings.TrimSpace(string(raw)), `"`)
		var ids []int
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 0 || n > 1<<16 {
				return nil, fmt.Errorf("entity id %q is not a number", textcut.Head(s, 40))
			}
			ids = append(ids, n)
		}
		return ids, nil
	}
	return []int{-1}, nil
}

func (jr jsonResult) warnings() []Message {
	var out []Message
	for _, raw := range []json.RawMessage{jr.Warnings, jr.Warning} {
		if len(raw) == 0 {
			continue
		}
		var objs []struct {
			Warning string `json:"warning"`
			// DCGM 3.x's Deployment tests put the text under "warnings" in each object.
			Warnings string          `json:"warnings"`
			ErrorID  json.RawMessage `json:"error_id"`
			Category json.RawMessage `json:"error_category"`
			Severity json.RawMessage `json:"error_severity"`
		}
		if json.Unmarshal(raw, &objs) == nil {
			for _, o := range objs {
				text := o.Warning
				if text == "" {
					text = o.Warnings
				}
				out = append(out, Message{Text: textcut.Head(text, 1000), ErrorID: intOf(o.ErrorID), Category: intOf(o.Category), Severity: intOf(o.Severity)})
			}
			continue
		}
		for _, s := range stringsOf(raw) {
			out = append(out, Message{Text: s, ErrorID: intOf(jr.ErrorID), Category: intOf(jr.ErrorCategory), Severity: intOf(jr.ErrorSeverity)})
		}
	}
	return out
}

// stringsOf reads a JSON string or array of strings, shortened; anything else is nil.
func stringsOf(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		for i := range list {
			list[i] = textcut.Head(list[i], 1000)
		}
		return list
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return []string{textcut.Head(s, 1000)}
	}
	return nil
}

func stringOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

func intOf(raw json.RawMessage) int {
	if len(raw) == 0 {
		return -1
	}
	n, err := strconv.Atoi(strings.Trim(strings.TrimSpace(string(raw)), `"`))
	if err != nil {
		return -1
	}
	return n
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

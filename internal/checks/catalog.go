//go:generate go run ./docgen -partial ../../docs-partials/internal/checks/checks.mdx -readme ../../README.md

package checks

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// Phase is when a check is judged. A bake runs guard, host, load, function and image; a
// first-boot verification first boot, host, load, function and node; a node's boot first
// boot and host, and load and function when node_check asks for them.
type Phase string

// The phases, in the order a run goes through them.
const (
	// PhaseGuard: the kernel hold guard, after each layer (judged by package guard).
	PhaseGuard Phase = "guard"
	// PhaseFirstBoot: a booted instance against the bill of materials (judged by package
	// guard).
	PhaseFirstBoot Phase = "first boot"
	// PhaseHost: the host suite, one reading of the host.
	PhaseHost Phase = "host"
	// PhaseLoad: the 1-node NCCL test and what the host shows while it runs.
	PhaseLoad Phase = "load"
	// PhaseFunction: the tests that prove the hardware works (DCGM, EFA traffic, GPUDirect
	// RDMA).
	PhaseFunction Phase = "function"
	// PhaseNode: the image's own node check, run on a verification instance.
	PhaseNode Phase = "node"
	// PhaseMultiNode: the NCCL test across a verification's nodes, after each node passed
	// its own first-boot verification.
	PhaseMultiNode Phase = "multi-node"
	// PhaseImage: the image's hygiene, the bake's last step.
	PhaseImage Phase = "image"
)

// Phases are the phases in run order.
var Phases = []Phase{PhaseGuard, PhaseFirstBoot, PhaseHost, PhaseLoad, PhaseFunction, PhaseNode, PhaseMultiNode, PhaseImage}

// A Judge decides one check from what a run read of the host and what it is compared against.
// It reads nothing itself: a fact that could not be read fails the check with the fact's
// problem and raw evidence; it never passes.
type Judge func(facts.Run, Target) result.Check

// Entry is one check of the catalog: everything the plugin knows of it is here, beside its
// judge, and the reports, the docs and the settings that name checks by id derive from it.
type Entry struct {
	// ID is the check's stable id: reports and CI tooling key on it.
	ID string
	// Phase is when it is judged; Family groups it in the docs ("gpu", "efa", "storage",
	// "kernel", "nccl", "image", "node").
	Phase  Phase
	Family string
	// Order places it in report and docs order.
	Order int
	// Reads names the facts it reads, Doc what it proves, for the docs.
	Reads, Doc string
	// Judge decides it; nil for the checks another package judges (the kernel guard's and the
	// first boot's, in package guard), which are listed here for their ids and docs.
	Judge Judge
	// Refined lists the later phases whose facts refine its verdict: the judge runs again
	// after them (nvlink and xid after the load).
	Refined []Phase
	// Required is true for the checks skip_checks and warn_checks may not name: the guard is
	// the plugin's reason to exist.
	Required bool
}

var catalog []Entry

// register adds a check to the catalog; each check's file registers its own from init.
func register(e Entry) {
	if e.ID == "" || e.Phase == "" || e.Doc == "" {
		panic(fmt.Sprintf("checks: entry %+v lacks its id, phase or doc", e))
	}
	if _, ok := Lookup(e.ID); ok {
		panic("checks: " + e.ID + " registered twice")
	}
	catalog = append(catalog, e)
	slices.SortStableFunc(catalog, func(a, b Entry) int { return a.Order - b.Order })
}

// Catalog returns every check, in report order.
func Catalog() []Entry { return slices.Clone(catalog) }

// Lookup returns the entry of id.
func Lookup(id string) (Entry, bool) {
	for _, e := range catalog {
		if e.ID == id {
			return e, true
		}
	}
	return Entry{}, false
}

// IDs lists the ids of the checks of the given phases, in report order.
func IDs(phases ...Phase) []string {
	var ids []string
	for _, e := range catalog {
		if slices.Contains(phases, e.Phase) {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// JudgePhase judges, with what the run has read so far, the checks the catalog judges after
// phase p (Judged), in report order: the engine's way into the judges. A check skip_checks
// names is reported skipped; a failure of one warn_checks names is reported as a warning.
func JudgePhase(p Phase, f facts.Run, t Target) []result.Check {
	var out []result.Check
	for _, e := range catalog {
		if e.Judge == nil || e.Phase != p && !slices.Contains(e.Refined, p) {
			continue
		}
		if t.Skips(e.ID) {
			out = append(out, skippedBySetting(e.ID, t.SkipSetting))
			continue
		}
		out = append(out, t.demote(e.Judge(f, t)))
	}
	return out
}

// Skips reports whether skip_checks names id: the engine does not run a test whose checks
// are all skipped.
func (t Target) Skips(id string) bool { return slices.Contains(t.Skip, id) }

// skippedBySetting is a check skip_checks names: reported skipped with the setting that
// skipped it, never passed.
func skippedBySetting(id, setting string) result.Check {
	return result.Check{ID: id, Status: result.Skip, Basis: BasisSetting, Expected: "not judged", Actual: "skipped",
		Message: "skipped: " + cmp.Or(setting, "skip_checks") + " names " + id}
}

// demote turns a failure of a check warn_checks names into a warning that says what failed.
func (t Target) demote(c result.Check) result.Check {
	if !slices.Contains(t.Warn, c.ID) || !c.Status.Failing() {
		return c
	}
	c.Message = fmt.Sprintf("would %s, but %s names %s: %s", c.Status, cmp.Or(t.WarnSetting, "warn_checks"), c.ID, c.Message)
	c.Status = result.Warn
	return c
}

// CheckSelection validates the ids a skip_checks or warn_checks setting names: each must be a
// check of the catalog that may be skipped or demoted, or a site check.
func CheckSelection(setting string, ids []string) []error {
	var errs []error
	seen := map[string]bool{}
	for i, id := range ids {
		e, ok := Lookup(id)
		switch {
		case !ok && !strings.HasPrefix(id, result.SitePrefix):
			errs = append(errs, fmt.Errorf("%s[%d] %q: no such check; use the ids of the docs' check table (%s) or %s<name> for a site check", setting, i, id, strings.Join(optionalIDs(), ", "), result.SitePrefix))
		case ok && e.Required:
			errs = append(errs, fmt.Errorf("%s[%d] %q: the %s checks cannot be skipped or demoted, they are the guard of the image's kernel and packages; narrow what they watch with guard.exclude instead", setting, i, id, e.Phase))
		case seen[id]:
			errs = append(errs, fmt.Errorf("%s[%d] %q: named twice", setting, i, id))
		}
		seen[id] = true
	}
	return errs
}

// optionalIDs are the checks skip_checks and warn_checks may name.
func optionalIDs() []string {
	var ids []string
	for _, e := range catalog {
		if !e.Required {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

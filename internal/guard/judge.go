package guard

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// Options tune Judge.
type Options struct {
	// PinnedKernel, when set, is the kernel release the host must run and boot next
	// (e.g. the DLAMI release notes' kernel_version, "7.0.0-1014-aws").
	PinnedKernel string
	// RequireHolds makes a guarded package that is not on hold a failure of the holds check;
	// otherwise it is a warning (the base image decides what it holds; the packages check
	// fails any change to a guarded package either way).
	RequireHolds bool
}

// CheckIDs are the IDs of the checks Judge returns, in order (the catalog of package checks
// lists them in the guard phase, in this order: a test there holds the two together).
var CheckIDs = []string{result.Kernel, result.Holds, result.Packages, result.NextBootKernel, result.DKMS}

// basisBaseline is the basis of every guard check: the snapshot taken before any layer ran.
const basisBaseline = "baseline"

// Judge compares cur with the baseline and returns five checks, in CheckIDs order:
//
//   - kernel: cur runs the baseline's kernel (and the pinned one, if any);
//   - holds: no package held in the baseline has lost its hold, and every package named in
//     Policy.Include is installed; a guarded package that is not held warns (fails with
//     RequireHolds), naming the remedy;
//   - packages: no guarded package was added, removed, changed version or left half
//     installed, held or not;
//   - next-boot-kernel: grub will boot the kernel the host runs now, as in the baseline, and
//     no kernel image was installed or removed;
//   - dkms: every DKMS module is installed for the running kernel at the baseline's version,
//     and every module modinfo found in the baseline is still there at the same version.
//
// stage names where the bake is ("the baseline was taken", `layer "slurm"`); messages read
// `after layer "slurm": ...`. Judge(base, base, ...) is the baseline's own gate: it fails on
// DKMS modules not built for the running kernel and a next-boot kernel that is not the
// running one. Every check's Evidence lists all drifts.
func Judge(base, cur Snapshot, guarded []string, stage string, opt Options) []result.Check {
	drifts := Diff(base, cur, guarded)
	all := evidence(drifts)
	by := map[string][]result.Drift{}
	for _, d := range drifts {
		by[d.Kind] = append(by[d.Kind], d)
	}
	where := "after " + stage
	if stage == "" {
		where = "at this stage"
	}
	return []result.Check{
		judgeKernel(base, cur, by, where, all, opt),
		judgeHolds(base, cur, guarded, by, where, all, opt),
		judgePackages(cur, guarded, by, where, all),
		judgeNextBoot(cur, by, where, all, opt),
		judgeDKMS(cur, by, where, all),
	}
}

func judgeKernel(base, cur Snapshot, by map[string][]result.Drift, where, all string, opt Options) result.Check {
	c := result.Check{ID: result.Kernel, Basis: basisBaseline, Expected: base.RunningKernel, Actual: orUnknown(cur.RunningKernel)}
	var prob []string
	if opt.PinnedKernel != "" {
		c.Basis, c.Expected = "setting expect.kernel", opt.PinnedKernel
		if cur.RunningKernel != opt.PinnedKernel {
			prob = append(prob, fmt.Sprintf("running %s, pinned %s", orUnknown(cur.RunningKernel), opt.PinnedKernel))
		}
	}
	if cur.RunningKernel == "" {
		prob = append(prob, "running kernel unknown")
	}
	prob = append(prob, strs(by[DriftKernel])...)
	verdict(&c, where, prob, nil, "running kernel "+orUnknown(cur.RunningKernel), all)
	return c
}

func judgeHolds(base, cur Snapshot, guarded []string, by map[string][]result.Drift, where, all string, opt Options) result.Check {
	c := result.Check{ID: result.Holds, Basis: basisBaseline, Expected: fmt.Sprintf("no hold lifted; %d guarded packages unchanged", len(guarded))}
	if opt.RequireHolds {
		c.Basis, c.Expected = "setting require_holds", fmt.Sprintf("%d guarded packages held", len(guarded))
	}
	// Lifted holds first, in the words of the drift ("held → not held").
	prob := strs(by[DriftHold])
	lifted := map[string]bool{}
	for _, d := range by[DriftHold] {
		lifted[d.Package] = true
	}
	for _, n := range Missing(cur, guarded) {
		if b, ok := base.Packages[n]; ok && b.Present() {
			continue // removed by a layer: the packages check reports it
		}
		prob = append(prob, n+": guarded (guard.include) but not installed")
	}
	if len(guarded) == 0 {
		prob = append(prob, "no guarded packages found: is this a DLAMI host, is guard.exclude too wide?")
	}
	var unheld []string
	for _, n := range Unheld(cur, guarded) {
		if !lifted[n] {
			unheld = append(unheld, n)
		}
	}
	var warn []string
	if len(unheld) > 0 {
		w := fmt.Sprintf("%d guarded packages are not on hold (%s): the image does not hold them, so a careless apt-get upgrade in a later layer or at first boot can move them; every change to them during the bake still fails the packages check. Set hold_unheld = true to hold them, or require_holds = true to fail on this",
			len(unheld), strings.Join(unheld, ", "))
		if opt.RequireHolds {
			prob = append(prob, w)
		} else {
			warn = append(warn, w)
		}
	}
	held := len(guarded) - len(Unheld(cur, guarded)) - len(Missing(cur, guarded))
	c.Actual = fmt.Sprintf("%d of %d held", held, len(guarded))
	if len(lifted) > 0 {
		c.Actual += fmt.Sprintf("; %d hold(s) lifted", len(lifted))
	}
	verdict(&c, where, prob, warn, fmt.Sprintf("no hold lifted, all %d guarded packages held", len(guarded)), all+"\n\nguarded packages:\n"+guardedEvidence(cur, guarded))
	return c
}

func judgePackages(cur Snapshot, guarded []string, by map[string][]result.Drift, where, all string) result.Check {
	c := result.Check{ID: result.Packages, Basis: basisBaseline, Expected: fmt.Sprintf("%d guarded packages unchanged", len(guarded))}
	var prob []string
	changed := map[string]bool{}
	for _, k := range []string{DriftPackageAdded, DriftPackageRemoved, DriftPackageVersion, DriftPackageState} {
		for _, d := range by[k] {
			prob = append(prob, d.String())
			changed[d.Package] = true
		}
	}
	for _, n := range guarded {
		if p, ok := cur.Packages[n]; ok && p.Present() && !p.Installed && !changed[n] {
			prob = append(prob, fmt.Sprintf("%s: dpkg status %q, not fully installed", n, p.Status))
		}
	}
	c.Actual = "unchanged"
	if len(prob) > 0 {
		c.Actual = fmt.Sprintf("%d changed", len(prob))
	}
	verdict(&c, where, prob, nil, fmt.Sprintf("%d guarded packages unchanged", len(guarded)), all)
	return c
}

func judgeNextBoot(cur Snapshot, by map[string][]result.Drift, where, all string, opt Options) result.Check {
	want, basis := cur.RunningKernel, "rule: the next boot runs the kernel the bake validated"
	if opt.PinnedKernel != "" {
		want, basis = opt.PinnedKernel, "setting expect.kernel"
	}
	c := result.Check{ID: result.NextBootKernel, Basis: basis, Expected: orUnknown(want), Actual: orUnknown(cur.NextBootKernel)}
	var prob []string
	switch {
	case cur.NextBootKernel == "":
		prob = append(prob, "next-boot kernel unknown: "+cur.NextBootSource)
	case cur.NextBootKernel != want:
		prob = append(prob, fmt.Sprintf("grub will boot %s, not %s (%s)", cur.NextBootKernel, orUnknown(want), cur.NextBootSource))
	}
	prob = append(prob, strs(by[DriftNextBoot])...)
	prob = append(prob, strs(by[DriftKernelImage])...)
	verdict(&c, where, prob, nil, "next boot "+orUnknown(cur.NextBootKernel)+" ("+cur.NextBootSource+")", all)
	return c
}

func judgeDKMS(cur Snapshot, by map[string][]result.Drift, where, all string) result.Check {
	c := result.Check{ID: result.DKMS, Basis: basisBaseline, Expected: "DKMS modules installed for " + orUnknown(cur.RunningKernel) + "; module versions unchanged"}
	var prob []string
	for _, k := range []string{DriftDKMS, DriftModuleMissing, DriftModuleVersion} {
		prob = append(prob, strs(by[k])...)
	}
	c.Actual = moduleSummary(cur)
	if len(prob) > 0 {
		c.Actual = fmt.Sprintf("%d problem(s); %s", len(prob), c.Actual)
	}
	verdict(&c, where, prob, nil, "DKMS and kernel modules unchanged", all+"\n\n"+dkmsEvidence(cur))
	return c
}

// Unjudgeable returns the five guard checks failed because the current snapshot could not
// be taken (a command failed or printed something unparseable). The evidence carries the
// command's raw output when err is a *SectionError.
func Unjudgeable(stage string, err error) []result.Check {
	msg := "after " + stage + ": could not read the host state: " + err.Error()
	if stage == "" {
		msg = "could not read the host state: " + err.Error()
	}
	ev := err.Error()
	var se *SectionError
	if errors.As(err, &se) {
		ev = fmt.Sprintf("command %s exited %d; output:\n%s", se.Section, se.ExitCode, se.Output)
	}
	out := make([]result.Check, 0, len(CheckIDs))
	for _, id := range CheckIDs {
		out = append(out, result.Check{ID: id, Status: result.Fail, Expected: "host state readable", Actual: "unreadable", Message: msg, Evidence: ev})
	}
	return out
}

// verdict fails c on any problem, else warns on any warning, else passes it.
func verdict(c *result.Check, where string, problems, warnings []string, okMsg, ev string) {
	c.Evidence = ev
	switch {
	case len(problems) > 0:
		c.Status = result.Fail
		c.Message = where + ": " + strings.Join(append(problems, warnings...), "; ")
	case len(warnings) > 0:
		c.Status = result.Warn
		c.Message = where + ": " + strings.Join(warnings, "; ")
	default:
		c.Status = result.Pass
		c.Message = where + ": " + okMsg
	}
}

func strs(ds []result.Drift) []string { return DriftStrings(ds) }

func evidence(ds []result.Drift) string {
	if len(ds) == 0 {
		return "drift: none"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "drift (%d):", len(ds))
	for _, d := range ds {
		fmt.Fprintf(&b, "\n  [%s] %s", d.Kind, d)
	}
	return b.String()
}

func guardedEvidence(s Snapshot, guarded []string) string {
	var b strings.Builder
	for _, n := range guarded {
		p, ok := s.Packages[n]
		if !ok {
			fmt.Fprintf(&b, "  %-4s %s (not known to dpkg)\n", "--", n)
			continue
		}
		fmt.Fprintf(&b, "  %-4s %s %s\n", strings.TrimSpace(p.Status), n, p.Version)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func dkmsEvidence(s Snapshot) string {
	var b strings.Builder
	if !s.DKMSAvailable {
		b.WriteString("dkms: not installed on the host (no DKMS modules)")
	} else {
		b.WriteString("dkms status:")
		if len(s.DKMS) == 0 {
			b.WriteString(" (no modules)")
		}
		for _, e := range s.DKMS {
			fmt.Fprintf(&b, "\n  %s/%s", e.Module, e.Version)
			if e.Kernel != "" {
				fmt.Fprintf(&b, ", %s, %s", e.Kernel, e.Arch)
			}
			fmt.Fprintf(&b, ": %s", e.State)
			for _, n := range e.Notes {
				fmt.Fprintf(&b, " (%s)", n)
			}
		}
		for _, w := range s.DKMSWarnings {
			fmt.Fprintf(&b, "\n  %s", w)
		}
	}
	b.WriteString("\nmodinfo -F version:")
	for _, m := range sortedKeys(s.ModuleVersions) {
		v := s.ModuleVersions[m]
		if v.Present {
			fmt.Fprintf(&b, "\n  %s: %s", m, modVersion(v))
		} else {
			fmt.Fprintf(&b, "\n  %s: %s", m, absentWord)
		}
	}
	return b.String()
}

func moduleSummary(s Snapshot) string {
	var parts []string
	for _, m := range sortedKeys(s.ModuleVersions) {
		if v := s.ModuleVersions[m]; v.Present {
			parts = append(parts, m+" "+modVersion(v))
		}
	}
	if len(parts) == 0 {
		return "no guarded modules present"
	}
	return strings.Join(parts, ", ")
}

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
}

// CheckIDs are the IDs of the checks Judge returns, in order.
var CheckIDs = result.GuardIDs

// Judge compares cur with the baseline and returns five checks, in CheckIDs order:
//
//   - kernel: cur runs the baseline's kernel (and the pinned one, if any);
//   - holds: every guarded package is present and held in cur, and no package held in the
//     baseline has lost its hold;
//   - packages: no guarded package was added, removed, changed version or left half
//     installed;
//   - next-boot-kernel: grub will boot the kernel the host runs now, as in the baseline, and
//     no kernel image was installed or removed;
//   - dkms: every DKMS module is installed for the running kernel at the baseline's version,
//     and every module modinfo found in the baseline is still there at the same version.
//
// stage names where the bake is ("baseline", `layer "slurm"`); messages read
// `after layer "slurm": ...`. Judge(base, base, ...) is the baseline's own gate: it fails
// on unheld guarded packages, DKMS modules not built for the running kernel and a next-boot
// kernel that is not the running one. Every check's Evidence lists all drifts.
func Judge(base, cur Snapshot, guarded []string, stage string, opt Options) []result.Check {
	drifts := Diff(base, cur, guarded)
	all := evidence(drifts)
	by := map[string][]Drift{}
	for _, d := range drifts {
		by[d.Kind] = append(by[d.Kind], d)
	}
	where := "after " + stage
	if stage == "" {
		where = "at this stage"
	}

	// kernel
	kernel := result.Check{ID: result.Kernel, Expected: base.RunningKernel, Actual: orUnknown(cur.RunningKernel)}
	var kprob []string
	if opt.PinnedKernel != "" {
		kernel.Expected = opt.PinnedKernel
		if cur.RunningKernel != opt.PinnedKernel {
			kprob = append(kprob, fmt.Sprintf("running %s, pinned %s", orUnknown(cur.RunningKernel), opt.PinnedKernel))
		}
	}
	if cur.RunningKernel == "" {
		kprob = append(kprob, "running kernel unknown")
	}
	kprob = append(kprob, strs(by[DriftKernel])...)
	judge(&kernel, where, kprob, "running kernel "+orUnknown(cur.RunningKernel), all)

	// holds
	unheld := Unheld(cur, guarded)
	holds := result.Check{ID: result.Holds, Expected: fmt.Sprintf("%d guarded packages held", len(guarded))}
	// Lifted holds first, in the words of the drift ("held → not held"), then guarded
	// packages that were never held.
	hprob := strs(by[DriftHold])
	for _, n := range unheld {
		switch p, ok := cur.Packages[n]; {
		case containsPrefix(hprob, n+":"):
		case ok && p.Present():
			hprob = append(hprob, n+": not held")
		default:
			hprob = append(hprob, n+": guarded but not installed")
		}
	}
	switch {
	case len(guarded) == 0:
		holds.Actual = "no guarded packages on the host"
		hprob = append(hprob, "no guarded packages found: is this a DLAMI host, is the policy's Exclude too wide?")
	case len(hprob) == 0:
		holds.Actual = fmt.Sprintf("%d held", len(guarded))
	default:
		holds.Actual = fmt.Sprintf("%d of %d held; %d problem(s)", len(guarded)-len(unheld), len(guarded), len(hprob))
	}
	judge(&holds, where, hprob, fmt.Sprintf("all %d guarded packages held", len(guarded)), all+"\n\nguarded packages:\n"+guardedEvidence(cur, guarded))

	// packages
	pkgs := result.Check{ID: result.Packages, Expected: fmt.Sprintf("%d guarded packages unchanged", len(guarded))}
	var pprob []string
	for _, k := range []string{DriftPackageAdded, DriftPackageRemoved, DriftPackageVersion, DriftPackageState} {
		pprob = append(pprob, strs(by[k])...)
	}
	for _, n := range guarded {
		if p, ok := cur.Packages[n]; ok && p.Present() && !p.Installed && !containsPrefix(pprob, n+":") {
			pprob = append(pprob, fmt.Sprintf("%s: dpkg status %q, not fully installed", n, p.Status))
		}
	}
	pkgs.Actual = "unchanged"
	if len(pprob) > 0 {
		pkgs.Actual = fmt.Sprintf("%d changed", len(pprob))
	}
	judge(&pkgs, where, pprob, fmt.Sprintf("%d guarded packages unchanged", len(guarded)), all)

	// next-boot-kernel
	want := cur.RunningKernel
	if opt.PinnedKernel != "" {
		want = opt.PinnedKernel
	}
	next := result.Check{ID: result.NextBootKernel, Expected: orUnknown(want), Actual: orUnknown(cur.NextBootKernel)}
	var nprob []string
	switch {
	case cur.NextBootKernel == "":
		nprob = append(nprob, "next-boot kernel unknown: "+cur.NextBootSource)
	case cur.NextBootKernel != want:
		nprob = append(nprob, fmt.Sprintf("grub will boot %s, not %s (%s)", cur.NextBootKernel, orUnknown(want), cur.NextBootSource))
	}
	nprob = append(nprob, strs(by[DriftNextBoot])...)
	nprob = append(nprob, strs(by[DriftKernelImage])...)
	judge(&next, where, nprob, "next boot "+orUnknown(cur.NextBootKernel)+" ("+cur.NextBootSource+")", all)

	// dkms
	dk := result.Check{ID: result.DKMS, Expected: "DKMS modules installed for " + orUnknown(cur.RunningKernel) + "; module versions unchanged"}
	var dprob []string
	for _, k := range []string{DriftDKMS, DriftModuleMissing, DriftModuleVersion} {
		dprob = append(dprob, strs(by[k])...)
	}
	dk.Actual = moduleSummary(cur)
	if len(dprob) > 0 {
		dk.Actual = fmt.Sprintf("%d problem(s); %s", len(dprob), dk.Actual)
	}
	judge(&dk, where, dprob, "DKMS and kernel modules unchanged", all+"\n\n"+dkmsEvidence(cur))
	return []result.Check{kernel, holds, pkgs, next, dk}
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

func judge(c *result.Check, where string, problems []string, okMsg, ev string) {
	c.Evidence = ev
	if len(problems) == 0 {
		c.Status = result.Pass
		c.Message = where + ": " + okMsg
		return
	}
	c.Status = result.Fail
	c.Message = where + ": " + strings.Join(problems, "; ")
}

func strs(ds []Drift) []string { return DriftStrings(ds) }

func containsPrefix(l []string, p string) bool {
	for _, s := range l {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func evidence(ds []Drift) string {
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

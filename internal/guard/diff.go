package guard

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dkms"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// Drift kinds.
const (
	DriftKernel         = "kernel"          // running kernel changed
	DriftNextBoot       = "next-boot"       // grub will boot another kernel
	DriftKernelImage    = "kernel-image"    // a /boot/vmlinuz-* appeared or went
	DriftPackageAdded   = "package-added"   // a guarded package appeared
	DriftPackageRemoved = "package-removed" // a guarded package went
	DriftPackageVersion = "package-version" // a guarded package is at another version
	DriftPackageState   = "package-state"   // a guarded package is no longer fully installed
	DriftHold           = "hold"            // a package held in the baseline is not held now
	DriftDKMS           = "dkms"            // a DKMS module is not installed for the running kernel, or changed version
	DriftModuleVersion  = "module-version"  // modinfo reports another version
	DriftModuleMissing  = "module-missing"  // modinfo no longer finds the module
)

// drift is one Drift, in field order.
func drift(kind, pkg, before, after string) result.Drift {
	return result.Drift{Kind: kind, Package: pkg, Before: before, After: after}
}

const absentWord = "(absent)"

// Diff lists every way cur has drifted from base, in a fixed order: running kernel, next-boot
// kernel, kernel images, guarded packages (added, removed, version, state), lifted holds
// (any package, guarded or not), DKMS modules, module versions. guarded should be the union
// of Guarded over both snapshots.
func Diff(base, cur Snapshot, guarded []string) []result.Drift {
	var d []result.Drift
	if base.RunningKernel != cur.RunningKernel {
		d = append(d, drift(DriftKernel, "running kernel", orAbsent(base.RunningKernel), orAbsent(cur.RunningKernel)))
	}
	if base.NextBootKernel != cur.NextBootKernel {
		d = append(d, drift(DriftNextBoot, "next-boot kernel", orUnknown(base.NextBootKernel), orUnknown(cur.NextBootKernel)))
	}
	d = append(d, imageDrift(base.InstalledKernelImages, cur.InstalledKernelImages)...)
	d = append(d, packageDrift(base, cur, guarded)...)
	d = append(d, holdDrift(base, cur)...)
	d = append(d, dkmsDrift(base, cur)...)
	d = append(d, moduleDrift(base, cur)...)
	return d
}

func orAbsent(s string) string {
	if s == "" {
		return absentWord
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

func imageDrift(base, cur []string) []result.Drift {
	var d []result.Drift
	b, c := toSet(base), toSet(cur)
	for _, k := range sortedKeys(c) {
		if !b[k] {
			d = append(d, drift(DriftKernelImage, "/boot/vmlinuz-"+k, absentWord, "installed"))
		}
	}
	for _, k := range sortedKeys(b) {
		if !c[k] {
			d = append(d, drift(DriftKernelImage, "/boot/vmlinuz-"+k, "installed", absentWord))
		}
	}
	return d
}

func pkgState(p Package, ok bool) string {
	if !ok || !p.Present() {
		return absentWord
	}
	return p.Version
}

func packageDrift(base, cur Snapshot, guarded []string) []result.Drift {
	var d []result.Drift
	for _, name := range sortedUnique(guarded) {
		b, bok := base.Packages[name]
		c, cok := cur.Packages[name]
		bp, cp := bok && b.Present(), cok && c.Present()
		switch {
		case !bp && !cp:
		case !bp:
			d = append(d, drift(DriftPackageAdded, name, absentWord, pkgState(c, cok)))
		case !cp:
			d = append(d, drift(DriftPackageRemoved, name, pkgState(b, bok), absentWord))
		case b.Version != c.Version:
			d = append(d, drift(DriftPackageVersion, name, b.Version, c.Version))
		case b.Installed && !c.Installed:
			d = append(d, drift(DriftPackageState, name, "installed ("+strings.TrimSpace(b.Status)+")", "dpkg status "+quote(c.Status)))
		}
	}
	return d
}

func holdDrift(base, cur Snapshot) []result.Drift {
	var d []result.Drift
	for _, name := range sortedKeys(base.Packages) {
		if !base.Packages[name].Held {
			continue
		}
		c, ok := cur.Packages[name]
		switch {
		case !ok:
			d = append(d, drift(DriftHold, name, "held", "not held (package gone)"))
		case !c.Held:
			d = append(d, drift(DriftHold, name, "held", "not held"))
		}
	}
	return d
}

// dkmsFor describes a module's DKMS state as one short phrase.
func dkmsFor(entries []dkms.Entry, module, kernel string) (installedVersion, phrase string) {
	var other []string
	for _, e := range entries {
		if e.Module != module {
			continue
		}
		if e.Installed(kernel) {
			return e.Version, e.Version + " installed for " + kernel
		}
		s := e.Version + " " + e.State
		if e.Kernel != "" {
			s += " for " + e.Kernel
		}
		other = append(other, s)
	}
	if len(other) == 0 {
		return "", absentWord
	}
	return "", strings.Join(other, ", ") + "; not installed for " + kernel
}

func dkmsDrift(base, cur Snapshot) []result.Drift {
	var d []result.Drift
	modules := map[string]bool{}
	for _, e := range base.DKMS {
		modules[e.Module] = true
	}
	for _, e := range cur.DKMS {
		modules[e.Module] = true
	}
	for _, m := range sortedKeys(modules) {
		bv, bphrase := dkmsFor(base.DKMS, m, base.RunningKernel)
		cv, cphrase := dkmsFor(cur.DKMS, m, cur.RunningKernel)
		if cv == "" || (bv != "" && bv != cv) {
			d = append(d, drift(DriftDKMS, "dkms "+m, bphrase, cphrase))
		}
	}
	return d
}

func moduleDrift(base, cur Snapshot) []result.Drift {
	var d []result.Drift
	for _, m := range sortedKeys(base.ModuleVersions) {
		b := base.ModuleVersions[m]
		if !b.Present {
			continue
		}
		c, ok := cur.ModuleVersions[m]
		switch {
		case !ok || !c.Present:
			d = append(d, drift(DriftModuleMissing, "module "+m, modVersion(b), absentWord))
		case b.Version != c.Version:
			d = append(d, drift(DriftModuleVersion, "module "+m, modVersion(b), modVersion(c)))
		}
	}
	return d
}

func modVersion(m Module) string {
	if m.Version == "" {
		return "(no version)"
	}
	return m.Version
}

func toSet(l []string) map[string]bool {
	s := make(map[string]bool, len(l))
	for _, v := range l {
		s[v] = true
	}
	return s
}

func sortedUnique(l []string) []string { return sortedKeys(toSet(l)) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// DriftStrings renders drifts one line each, for report.Report.Drift.
func DriftStrings(ds []result.Drift) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.String())
	}
	return out
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

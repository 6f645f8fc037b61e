package guard

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// Policy adjusts which packages the guard holds to account. Patterns are shell globs
// (path.Match syntax) matched against package names as Snapshot.Packages keys them.
type Policy struct {
	// Include adds packages. A pattern without glob characters names one package, which is
	// guarded even when it is not on the host (then the holds check fails: you asked for it).
	Include []string
	// Exclude removes packages, defaults and Include alike.
	Exclude []string
}

// Validate reports a malformed pattern.
func (p Policy) Validate() error {
	for _, list := range [][]string{p.Include, p.Exclude} {
		for _, pat := range list {
			if strings.TrimSpace(pat) == "" {
				return fmt.Errorf("guard policy: empty package pattern")
			}
			if _, err := path.Match(pat, ""); err != nil {
				return fmt.Errorf("guard policy: package pattern %q: %w", pat, err)
			}
		}
	}
	return nil
}

// DefaultPatterns are the packages guarded by default for a running kernel release. Only
// the ones present on the host are guarded. The choice:
//
//   - the running kernel's own packages (image, unsigned image, modules, modules-extra,
//     headers) and the linux-aws metas that would pull a newer kernel
//     (linux-aws*, linux-image-aws*, linux-headers-aws*, linux-modules-extra-aws*; the
//     linux-aws* glob also catches linux-aws-headers-<abi>);
//   - NVIDIA: everything whose version must match the kernel module, because a mismatch is
//     "Failed to initialize NVML: Driver/library version mismatch": driver metas (Ubuntu
//     nvidia-driver-<branch>[-server][-open], NVIDIA repo nvidia-open / cuda-drivers*),
//     kernel-module packages (nvidia-kernel-common/-source-*, nvidia-dkms-*, Ubuntu's
//     precompiled linux-modules/objects/signatures-nvidia-*), GSP firmware, the userspace
//     that talks to the module (libnvidia-compute-*, nvidia-utils-*, nvidia-compute-utils-*,
//     nvidia-headless-*), Fabric Manager, NSCQ and IMEX (nvidia-fabricmanager*,
//     libnvidia-nscq*, nvidia-imex*: unversioned names in NVIDIA's repo from 580 on,
//     -<branch> before and in Ubuntu's archive);
//   - EFA: only the kernel-module packages, efa (DKMS, "efa-gdr" on older DLAMIs) and
//     efa-nv-peermem. efa-config, efa-profile, ibverbs-providers, libfabric-aws and the
//     Open MPI packages are userspace that does not depend on the kernel; add them with
//     Policy.Include if you want them frozen too;
//   - GDRCopy: gdrdrv-dkms (the module), gdrcopy* and libgdrapi (whose ABI follows it);
//   - Lustre: lustre-client-modules-* (per-kernel modules and the -aws meta, which pulls
//     modules for a newer kernel) and lustre-client-utils, whose version must match the
//     modules.
func DefaultPatterns(runningKernel string) []string {
	pats := []string{
		"linux-aws*", "linux-image-aws*", "linux-headers-aws*", "linux-modules-extra-aws*",
		"nvidia-driver-*", "nvidia-open", "nvidia-open-*", "cuda-drivers", "cuda-drivers-*",
		"nvidia-kernel-*", "nvidia-dkms-*", "nvidia-firmware-*",
		"linux-modules-nvidia-*", "linux-objects-nvidia-*", "linux-signatures-nvidia-*",
		"libnvidia-compute-*", "nvidia-utils-*", "nvidia-compute-utils-*", "nvidia-headless-*",
		"nvidia-fabricmanager*", "libnvidia-nscq*", "nvidia-imex*",
		"efa", "efa-gdr", "efa-nv-peermem",
		"gdrdrv-dkms", "gdrcopy*", "libgdrapi",
		"lustre-client-modules-*", "lustre-client-utils",
	}
	return append(pats, kernelPackages(runningKernel)...)
}

// kernelPackages are the running kernel's own package names. They are compared as literal
// names, never as patterns, whatever characters the release string holds.
func kernelPackages(runningKernel string) []string {
	if runningKernel == "" {
		return nil
	}
	var names []string
	for _, p := range []string{"linux-image-", "linux-image-unsigned-", "linux-modules-", "linux-modules-extra-", "linux-headers-"} {
		names = append(names, p+runningKernel)
	}
	return names
}

func hasGlob(s string) bool { return strings.ContainsAny(s, `*?[\`) }

func matchAny(pats []string, name string) bool {
	for _, p := range pats {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// Guarded returns, sorted, the packages the guard watches on s: the present packages
// matching DefaultPatterns(s.RunningKernel) or p.Include, plus p.Include names without
// glob characters whether present or not, minus anything matching p.Exclude. Malformed
// patterns match nothing; check them with Policy.Validate first.
//
// To compare two snapshots, guard the union of both (Union(Guarded(base, p), Guarded(cur, p)))
// so a package that appears only later is still seen.
func Guarded(s Snapshot, p Policy) []string {
	pats := append(DefaultPatterns(""), p.Include...)
	exact := toSet(kernelPackages(s.RunningKernel))
	set := map[string]bool{}
	for name, pkg := range s.Packages {
		if pkg.Present() && (exact[name] || matchAny(pats, name)) {
			set[name] = true
		}
	}
	for _, inc := range p.Include {
		if !hasGlob(inc) {
			set[inc] = true
		}
	}
	out := make([]string, 0, len(set))
	for name := range set {
		if !matchAny(p.Exclude, name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Union merges name lists, sorted and without duplicates.
func Union(lists ...[]string) []string {
	set := map[string]bool{}
	for _, l := range lists {
		for _, n := range l {
			set[n] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Unheld returns, sorted, the guarded packages that are not on hold in s, including guarded
// packages that are not present at all.
func Unheld(s Snapshot, guarded []string) []string {
	var out []string
	for _, name := range guarded {
		if pkg, ok := s.Packages[name]; !ok || !pkg.Held || !pkg.Present() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

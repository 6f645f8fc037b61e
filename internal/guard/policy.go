package guard

import (
	"path"
	"sort"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// Rule is one pattern of the default guarded set, with the reason it is there.
type Rule struct {
	Pattern string
	Why     string
}

// DefaultRules are the packages guarded by default, whatever the host's layout: the DLAMI may
// ship the NVIDIA driver from NVIDIA's repository (unversioned 590+ names, a DKMS module),
// from Ubuntu's archive (versioned -server names, precompiled modules) or from a .run
// installer (no packages at all), and may hold everything, only the kernel metas, or nothing.
// Only packages present on the host are guarded; a package that appears later is drift.
var DefaultRules = []Rule{
	// The kernel: every version, not only the running one, so that a layer adding a second
	// kernel (or only its headers) is drift even when the next boot does not change.
	{"linux-image-*", "kernel images of any version, signed or unsigned, and the linux-image-aws meta: a new image changes what grub boots"},
	{"linux-modules-*", "kernel modules of any version (modules-extra, and Ubuntu's precompiled linux-modules-nvidia-*): they must match the kernel"},
	{"linux-headers-*", "kernel headers of any version and the linux-headers-aws meta: DKMS builds the EFA, GDRCopy and NVIDIA modules against them"},
	{"linux-*-headers-*", "flavour headers (linux-aws-headers-<abi>, the HWE linux-aws-7.0-headers-<abi>), pulled by the versioned headers"},
	{"linux-aws*", "the kernel metas (linux-aws, linux-aws-edge, linux-aws-lts-*): an upgrade of one pulls a newer kernel"},
	{"linux-objects-nvidia-*", "Ubuntu's precompiled NVIDIA module objects, built for one kernel and one driver"},
	{"linux-signatures-nvidia-*", "the signatures of Ubuntu's precompiled NVIDIA modules"},
	// NVIDIA: anything whose version must match the kernel module, or NVML fails with
	// "Driver/library version mismatch"; the unversioned names of NVIDIA's 590+ repository and
	// the -<branch>[-server] names of Ubuntu's archive alike.
	{"nvidia-*", "driver metas, DKMS and kernel-source packages, firmware, utils, persistenced, Fabric Manager, IMEX, GPUDirect Storage (nvidia-fs) and the nvidia-driver-pinning-* packages: all versioned with the kernel module"},
	{"libnvidia-*", "the userspace that talks to the kernel module (libnvidia-compute, -cfg1, -gl, -nscq, -encode, ...)"},
	{"cuda-drivers*", "the CUDA repository's driver metas, which pull a newer driver"},
	{"libnvsdm*", "NVSwitch device monitoring, versioned with the driver"},
	{"libxnvctrl*", "NV-CONTROL library, versioned with the driver"},
	{"nvlsm*", "NVLink subnet manager, versioned with the driver"},
	// EFA: only the kernel-module packages; efa-config, efa-profile, ibverbs-providers,
	// libfabric-aws and Open MPI are userspace that does not depend on the kernel (add them
	// with settings.GuardPolicy.Include to freeze them too).
	{"efa", "the EFA kernel driver (DKMS)"},
	{"efa-gdr", "the EFA kernel driver on older DLAMIs"},
	{"efa-nv-peermem", "the EFA/NVIDIA peer-memory module"},
	// GDRCopy: the module and the library whose ABI follows it.
	{"gdrdrv-dkms", "the GDRCopy kernel module (DKMS)"},
	{"gdrcopy*", "GDRCopy tools, versioned with gdrdrv"},
	{"libgdrapi", "GDRCopy's library, whose ABI follows gdrdrv"},
	// Lustre: per-kernel modules, the -aws meta that pulls modules for a newer kernel, and
	// the utilities whose version must match the modules.
	{"lustre-client-modules-*", "the Lustre client modules, built for one kernel"},
	{"lustre-client-utils", "the Lustre utilities, whose version must match the modules"},
}

// DefaultExcludes are taken out of the default patterns (not out of settings.GuardPolicy.Include).
var DefaultExcludes = []Rule{
	{"nvidia-container-*", "the NVIDIA container toolkit does not depend on the driver version and gets frequent security fixes: a layer must be able to update it"},
	{"libnvidia-container*", "the container toolkit's libraries (libnvidia-container1, libnvidia-container-tools): same reason"},
	{"nvidia-docker*", "the legacy container toolkit wrapper: same reason"},
}

func patterns(rules []Rule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.Pattern
	}
	return out
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

// packageName drops a ":arch" qualifier (Snapshot keys a second architecture "name:arch").
func packageName(key string) string {
	name, _, _ := strings.Cut(key, ":")
	return name
}

// Guarded returns, sorted, the packages the guard watches on s: the present packages that
// match DefaultRules (minus DefaultExcludes) or p.Include, plus p.Include names without glob
// characters whether present or not, minus anything matching p.Exclude. Malformed patterns
// match nothing; check them with settings.GuardPolicy.Validate first.
//
// To compare two snapshots, guard the union of both (Union(Guarded(base, p), Guarded(cur, p)))
// so a package that appears only later is still seen.
func Guarded(s Snapshot, p settings.GuardPolicy) []string {
	defaults, excluded := patterns(DefaultRules), patterns(DefaultExcludes)
	set := map[string]bool{}
	for key, pkg := range s.Packages {
		if !pkg.Present() {
			continue
		}
		name := packageName(key)
		if matchAny(p.Include, name) || (matchAny(defaults, name) && !matchAny(excluded, name)) {
			set[key] = true
		}
	}
	for _, inc := range p.Include {
		if !hasGlob(inc) {
			set[inc] = true
		}
	}
	out := make([]string, 0, len(set))
	for key := range set {
		if !matchAny(p.Exclude, packageName(key)) {
			out = append(out, key)
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

// Unheld returns, sorted, the guarded packages that are present in s but not on hold.
func Unheld(s Snapshot, guarded []string) []string {
	var out []string
	for _, name := range guarded {
		if pkg, ok := s.Packages[name]; ok && pkg.Present() && !pkg.Held {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Missing returns, sorted, the guarded packages that are not present in s (settings.GuardPolicy.Include
// names the host does not have).
func Missing(s Snapshot, guarded []string) []string {
	var out []string
	for _, name := range guarded {
		if pkg, ok := s.Packages[name]; !ok || !pkg.Present() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

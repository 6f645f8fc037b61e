package guard

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// Baked is what a bake left in the image, as its bill of materials records it: the kernel it
// validated and every guarded package with its version and hold.
type Baked struct {
	Kernel   string
	Packages map[string]BakedPackage
}

// BakedPackage is one guarded package as baked.
type BakedPackage struct {
	Version string
	Held    bool
}

// JudgeFirstBoot compares the first boot of an instance launched from the image with what was
// baked, after cloud-init and apt have settled, and returns first-boot-kernel and
// first-boot-packages:
//
//   - first-boot-kernel: the instance runs the baked kernel, and the kernel its bootloader
//     will boot next is that one too (a changed GRUB default moves the fleet on its next
//     reboot);
//   - first-boot-packages: every baked guarded package is present at its baked version with
//     its baked hold, and no guarded package appeared (a first-boot upgrade that pulled a
//     kernel, or moved the NVIDIA userspace).
//
// when names the boot in messages: "at first boot" on a verification instance, "on this boot"
// on a node.
func JudgeFirstBoot(baked Baked, cur Snapshot, p settings.GuardPolicy, when string) []result.Check {
	k := result.Check{ID: result.FirstBootKernel, Basis: "bill of materials", Expected: baked.Kernel + " running and booted next",
		Actual: fmt.Sprintf("running %s, next boot %s", orUnknown(cur.RunningKernel), orUnknown(cur.NextBootKernel))}
	var kprob []string
	if cur.RunningKernel != baked.Kernel {
		kprob = append(kprob, fmt.Sprintf("the instance runs %s, the image was baked and validated on %s", orUnknown(cur.RunningKernel), baked.Kernel))
	}
	if cur.NextBootKernel != baked.Kernel {
		kprob = append(kprob, fmt.Sprintf("its next boot would run %s (%s), not %s", orUnknown(cur.NextBootKernel), cur.NextBootSource, baked.Kernel))
	}
	verdict(&k, when, kprob, nil, "running and booting "+baked.Kernel, "")

	pk := result.Check{ID: result.FirstBootPackages, Basis: "bill of materials", Expected: fmt.Sprintf("%d guarded packages as baked", len(baked.Packages))}
	var pprob []string
	names := make([]string, 0, len(baked.Packages))
	for n := range baked.Packages {
		names = append(names, n)
	}
	sort.Strings(names)
	changed := 0
	for _, n := range names {
		want := baked.Packages[n]
		got, ok := cur.Packages[n]
		switch {
		case !ok || !got.Present():
			pprob = append(pprob, fmt.Sprintf("%s: %s → %s", n, want.Version, absentWord))
		case got.Version != want.Version:
			pprob = append(pprob, fmt.Sprintf("%s: %s → %s", n, want.Version, got.Version))
		case want.Held && !got.Held:
			pprob = append(pprob, n+": held → not held")
		case !got.Installed:
			pprob = append(pprob, fmt.Sprintf("%s: dpkg status %q, not fully installed", n, got.Status))
		default:
			continue
		}
		changed++
	}
	for _, n := range Guarded(cur, p) {
		if _, ok := baked.Packages[n]; !ok {
			pprob = append(pprob, fmt.Sprintf("%s: %s → %s", n, absentWord, cur.Packages[n].Version))
			changed++
		}
	}
	pk.Actual = "as baked"
	if changed > 0 {
		pk.Actual = fmt.Sprintf("%d changed", changed)
	}
	var ev strings.Builder
	for _, pr := range pprob {
		ev.WriteString(pr + "\n")
	}
	verdict(&pk, when, pprob, nil, fmt.Sprintf("all %d guarded packages as baked", len(baked.Packages)), strings.TrimSuffix(ev.String(), "\n"))
	if len(pprob) > 0 {
		pk.Message += " (something changed them " + when + ": an unattended upgrade, a cloud-init script, an apt timer)"
	}
	return []result.Check{k, pk}
}

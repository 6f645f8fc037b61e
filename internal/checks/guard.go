package checks

import "github.com/dlami-bake/packer-plugin-dlami/internal/result"

// The kernel hold guard's checks and the first boot's: package guard judges them (a bake's
// snapshot against its baseline after every layer, a booted instance against the bill of
// materials), so they have no judge here; they are listed for their ids, their phase and their
// docs, and no setting may skip or demote them.
func init() {
	register(Entry{
		ID: result.Kernel, Phase: PhaseGuard, Family: "kernel", Order: 100, Required: true,
		Doc:   "the running kernel equals the baseline (and `expect.kernel` when set); after a reboot, the host came back on the same kernel",
		Reads: "`uname -r`",
	})
	register(Entry{
		ID: result.Holds, Phase: PhaseGuard, Family: "kernel", Order: 110, Required: true,
		Doc:   "no layer lifted a hold, and every package `guard.include` names is installed; guarded packages the image does not hold warn (fail with `require_holds`)",
		Reads: "`dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Version}\\n'`",
	})
	register(Entry{
		ID: result.Packages, Phase: PhaseGuard, Family: "kernel", Order: 120, Required: true,
		Doc:   "no guarded package was added, removed or changed version, held or not; any kernel package of another version is drift",
		Reads: "`dpkg-query` against the baseline",
	})
	register(Entry{
		ID: result.NextBootKernel, Phase: PhaseGuard, Family: "kernel", Order: 130, Required: true,
		Doc:   "the kernel the bootloader will boot next is the running kernel, and no new kernel image was installed",
		Reads: "`/boot/grub/grubenv`, `/boot/grub/grub.cfg`, `/boot/vmlinuz-*` against the baseline",
	})
	register(Entry{
		ID: result.DKMS, Phase: PhaseGuard, Family: "kernel", Order: 140, Required: true,
		Doc:   "every DKMS module (`nvidia` too, where the driver is a DKMS module) is `installed` for the running kernel, and `nvidia`, `efa`, `gdrdrv`, `lustre` module versions did not change",
		Reads: "`dkms status`, `modinfo -F version`",
	})
	register(Entry{
		ID: result.FirstBootKernel, Phase: PhaseFirstBoot, Family: "kernel", Order: 150, Required: true,
		Doc:   "the instance runs, and will boot next, the kernel the bill of materials says the image was baked and validated on",
		Reads: "`uname -r`, `/boot/grub/grubenv`, `/boot/grub/grub.cfg` against the bill of materials",
	})
	register(Entry{
		ID: result.FirstBootPackages, Phase: PhaseFirstBoot, Family: "kernel", Order: 160, Required: true,
		Doc:   "every guarded package of the bill of materials is installed at its baked version and held where it was held; no guarded package appeared (an unattended upgrade at first boot is drift)",
		Reads: "`dpkg-query` against the bill of materials",
	})
}

// Package guard is the judging side of the kernel hold guard. It lists the read-only commands
// that describe a host's kernel, package holds, DKMS modules and kernel-module versions, turns
// their output into a Snapshot, and compares a later Snapshot with the baseline taken before
// any layer ran. It runs nothing: the provisioner sends Commands through package bundle and
// hands the sections back.
package guard

import (
	"fmt"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dpkg"
)

// Section names of the commands Commands returns.
const (
	sectionRunning    = "guard.uname"
	sectionGrubEnv    = "guard.grubenv"
	sectionGrubCfg    = "guard.grubcfg"
	sectionBootImages = "guard.vmlinuz"
	sectionPackages   = "guard.dpkg"
	sectionDKMS       = "guard.dkms"
	// sectionModinfoPrefix + module name, one section per entry of Modules.
	sectionModinfoPrefix = "guard.modinfo."
)

// BaselineDir holds the baselines on the host. One bake's baseline is keyed to its Packer run,
// so a baseline an earlier bake left in a golden image is never taken for this one's.
const BaselineDir = "/var/lib/dlami-bake"

// BaselinePath is where the bake of Packer run runUUID keeps its baseline Snapshot.
func BaselinePath(runUUID string) string {
	return BaselineDir + "/baseline-" + runUUID + ".json"
}

// Modules are the out-of-tree kernel modules whose version the guard records. Each is probed
// with modinfo for the running kernel; one that is not on the host is recorded as absent.
var Modules = []string{"nvidia", "efa", "gdrdrv", "lustre"}

// absent is what a command prints when the thing it reads does not exist on the host, so an
// empty file and a missing file stay distinguishable.
const absent = "@dlami-guard absent"

// Commands returns the read-only commands a Snapshot is built from, each tool at its absolute
// path (package hosttools). None needs root:
// grub.cfg is world-readable on Ubuntu (grub-mkconfig makes it 0444 unless it holds a
// password), /boot is listable, and dpkg, dkms and modinfo only read their databases.
func Commands() []bundle.Command {
	cmds := []bundle.Command{
		{Name: sectionRunning, Shell: `"$1" -r`, Tool: hosttools.Ptr(hosttools.Uname)},
		{Name: sectionGrubEnv, Shell: `f=/boot/grub/grubenv
if [ -e "$f" ]; then
  grep -aE '^(saved_entry|next_entry)=' "$f"; rc=$?
  [ "$rc" -le 1 ] || exit "$rc"
else
  echo '` + absent + `'
fi
exit 0`},
		// Only the default-entry lines of the header and the first linux line matter; the
		// awk stops there so a long grub.cfg is not shipped back.
		{Name: sectionGrubCfg, Shell: `f=/boot/grub/grub.cfg
if [ -e "$f" ]; then
  awk '/^[ \t]*set[ \t]+default=/ { print; next }
       /^[ \t]*(linux|linuxefi|linux16)[ \t]/ { print; exit }' "$f"
else
  echo '` + absent + `'
fi`},
		// A glob loop instead of ls: no "cannot access" noise when there is no image.
		{Name: sectionBootImages, Shell: `for f in /boot/vmlinuz-*; do [ -e "$f" ] && echo "$f"; done; exit 0`},
		{Name: sectionPackages, Shell: `"$1" ` + dpkg.QueryArgs, TimeoutSeconds: 60, Tool: hosttools.Ptr(hosttools.DpkgQuery)},
		// No dkms on the host means no DKMS modules, which is fine.
		{Name: sectionDKMS, Shell: `if [ -n "$1" ]; then "$1" status; else echo '` + absent + `'; fi`, TimeoutSeconds: 60, Tool: hosttools.Ptr(hosttools.DKMS)},
	}
	for _, m := range Modules {
		cmds = append(cmds, bundle.Command{
			Name:  sectionModinfoPrefix + m,
			Shell: fmt.Sprintf(`"$1" -F version %s`, bundle.Quote(m)),
			Tool:  hosttools.Ptr(hosttools.Modinfo),
		})
	}
	return cmds
}

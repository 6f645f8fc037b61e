// Package guard is the judging side of the kernel hold guard. A Snapshot is what a host's
// kernel, package holds, DKMS modules and kernel-module versions are (package probe reads it);
// the guard compares a later Snapshot with the baseline taken before any layer ran, and a
// first boot with the bill of materials. It runs nothing.
package guard

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

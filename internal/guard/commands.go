// Package guard is the judging side of the kernel hold guard. A Snapshot is what a host's
// kernel, package holds, DKMS modules and kernel-module versions are (package probe reads it);
// the guard compares a later Snapshot with the baseline taken before any layer ran, and a
// first boot with the bill of materials. It runs nothing.
package guard

import "github.com/dlami-bake/packer-plugin-dlami/internal/facts"

// BaselineDir is facts.BaselineDir: where the baselines live on the host.
const BaselineDir = facts.BaselineDir

// BaselinePath is facts.BaselinePath.
func BaselinePath(runUUID string) string { return facts.BaselinePath(runUUID) }

// Modules is facts.GuardedModules: the modules whose version the guard compares.
var Modules = facts.GuardedModules

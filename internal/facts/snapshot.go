package facts

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dkms"
)

// The kernel hold guard's record of a host: package probe reads it, package guard judges it
// (a later Snapshot against the baseline, a first boot against the bill of materials). It is a
// fact of the host, so it lives here, below both.

// BaselineDir holds the baselines on the host. One bake's baseline is keyed to its Packer run,
// so a baseline an earlier bake left in a golden image is never taken for this one's.
const BaselineDir = "/var/lib/dlami-bake"

// BaselinePath is where the bake of Packer run runUUID keeps its baseline Snapshot.
func BaselinePath(runUUID string) string {
	return BaselineDir + "/baseline-" + runUUID + ".json"
}

// GuardedModules are the out-of-tree kernel modules whose version a Snapshot records. Each is
// probed with modinfo for the running kernel; one that is not on the host is recorded as absent.
var GuardedModules = []string{"nvidia", "efa", "gdrdrv", "lustre"}

// SnapshotSchema is the version of the Snapshot JSON. DecodeSnapshot refuses any other, so a
// baseline written by a different plugin version is never silently misread.
const SnapshotSchema = 1

// Snapshot is what the guard knows about a host at one moment. It is stored on the host as
// the baseline (BaselinePath) and read back by later provisioners, so it is plain JSON.
type Snapshot struct {
	Schema        int    `json:"schema"`
	RunningKernel string `json:"running_kernel"`
	// NextBootKernel is the kernel release grub will boot next; empty when it could not be
	// determined. NextBootSource says how it was determined (see probe.Snapshot).
	NextBootKernel string `json:"next_boot_kernel"`
	NextBootSource string `json:"next_boot_source"`
	// InstalledKernelImages are the kernel releases with a /boot/vmlinuz-<release>, newest
	// first by Debian version ordering.
	InstalledKernelImages []string `json:"installed_kernel_images"`
	// Packages is keyed by package name; a second architecture of the same name (multiarch)
	// is keyed "name:arch".
	Packages map[string]SnapshotPackage `json:"packages"`
	// DKMSAvailable is false when the host has no dkms command (then DKMS is empty).
	DKMSAvailable  bool                      `json:"dkms_available"`
	DKMS           []dkms.Entry              `json:"dkms"`
	DKMSWarnings   []string                  `json:"dkms_warnings,omitempty"`
	ModuleVersions map[string]SnapshotModule `json:"module_versions"`
	TakenAt        time.Time                 `json:"taken_at"`
}

// SnapshotPackage is the dpkg state of one package.
type SnapshotPackage struct {
	Version string `json:"version"`
	Held    bool   `json:"held"`
	// Installed is true only for a fully installed package (status ?i?).
	Installed bool `json:"installed"`
	// Status is dpkg's three-character abbreviation ("hi ", "ii ", "rc ", "iF ").
	Status string `json:"status"`
	Arch   string `json:"arch,omitempty"`
}

// Present reports whether the package has files on the host: installed, or caught half way
// (unpacked, half-configured, ...). Not-installed and config-files-only are not present.
func (p SnapshotPackage) Present() bool {
	return len(p.Status) >= 2 && p.Status[1] != 'n' && p.Status[1] != 'c'
}

// SnapshotModule is what modinfo reported for one kernel module for the running kernel.
type SnapshotModule struct {
	Present bool   `json:"present"`
	Version string `json:"version,omitempty"`
}

// SnapshotSectionError is a command whose output could not be turned into a Snapshot. It carries the
// raw output so the failed check can show it as evidence.
type SnapshotSectionError struct {
	Section  string
	ExitCode int
	Output   string
	Err      error
}

func (e *SnapshotSectionError) Error() string {
	return fmt.Sprintf("%s (exit %d): %v", e.Section, e.ExitCode, e.Err)
}

func (e *SnapshotSectionError) Unwrap() error { return e.Err }

// Encode returns the Snapshot as indented JSON, for BaselinePath.
func (s Snapshot) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("guard: encoding snapshot: %w", err)
	}
	return append(b, '\n'), nil
}

// DecodeSnapshot reads a Snapshot written by Encode. It rejects another schema version, a
// snapshot without a running kernel or without packages, and unknown fields, so a truncated
// or foreign baseline fails the guard instead of passing it.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var s Snapshot
	if err := dec.Decode(&s); err != nil {
		return Snapshot{}, fmt.Errorf("guard: the baseline is not a snapshot: %w", err)
	}
	switch {
	case s.Schema != SnapshotSchema:
		return Snapshot{}, fmt.Errorf("guard: the baseline has schema %d, this plugin reads %d (all dlami provisioners of one build must be the same plugin version)", s.Schema, SnapshotSchema)
	case s.RunningKernel == "":
		return Snapshot{}, fmt.Errorf("guard: the baseline has no running_kernel")
	case len(s.Packages) == 0:
		return Snapshot{}, fmt.Errorf("guard: the baseline has no packages")
	}
	return s, nil
}

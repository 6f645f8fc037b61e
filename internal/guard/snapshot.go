package guard

import "github.com/dlami-bake/packer-plugin-dlami/internal/facts"

// The guard judges the snapshot record package facts owns (facts.Snapshot); these are the names
// its judging code and its callers use for it.
type (
	// Snapshot is facts.Snapshot.
	Snapshot = facts.Snapshot
	// Package is facts.SnapshotPackage.
	Package = facts.SnapshotPackage
	// Module is facts.SnapshotModule.
	Module = facts.SnapshotModule
	// SectionError is facts.SnapshotSectionError.
	SectionError = facts.SnapshotSectionError
)

// SnapshotSchema is facts.SnapshotSchema.
const SnapshotSchema = facts.SnapshotSchema

// DecodeSnapshot is facts.DecodeSnapshot.
func DecodeSnapshot(b []byte) (Snapshot, error) { return facts.DecodeSnapshot(b) }

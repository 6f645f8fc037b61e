// Package bom is the bill of materials the provisioner writes into the image
// (/etc/dlami-bake/manifest.json by default) and the post-processor reads back from an
// instance launched from the AMI: what was baked, so that what boots can be compared with it.
package bom

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// SchemaVersion of the BOM; Decode refuses any other.
const SchemaVersion = 5

// oldestSchema is the oldest bill of materials this plugin still reads (without a guard
// policy: the reader then uses its own).
const oldestSchema = 2

// DefaultPath is where the provisioner writes the BOM unless manifest_path says otherwise.
const DefaultPath = "/etc/dlami-bake/manifest.json"

// LocalFileName is the copy of the BOM the provisioner writes next to its reports.
const LocalFileName = settings.BOMLocalFileName

// BOM is the bill of materials of one bake.
type BOM struct {
	SchemaVersion int       `json:"schema_version"`
	GeneratedAt   time.Time `json:"generated_at"`
	PluginVersion string    `json:"plugin_version"`
	BuildName     string    `json:"build_name"`
	RunUUID       string    `json:"packer_run_uuid"`
	InstanceType  string    `json:"instance_type"`
	// Kernel is the kernel the bake validated; NextBootKernel what the image boots.
	Kernel         string `json:"kernel"`
	NextBootKernel string `json:"next_boot_kernel"`
	// Components are the host's component versions (checks.Manifest keys).
	Components map[string]string `json:"components"`
	// Guarded are the packages the kernel guard watched, as they were at the end of the bake.
	Guarded map[string]Package `json:"guarded"`
	// NCCL is the NCCL test's figures; nil when it did not run.
	NCCL *result.NCCLFigures `json:"nccl"`
	// GuardPolicy is the guard's include/exclude the bake used: the first boot and every node
	// are judged with it, so a package the bake excluded never fails them. Schema 2 lacked it.
	GuardPolicy *settings.GuardPolicy `json:"guard_policy,omitempty"`
	// Deferred is set when the bake deferred the host suite and the NCCL test to the
	// post-processor (defer_validation = true, a build instance without GPUs): the image is not
	// validated until a post-processor with complete_validation = true has judged them on a GPU
	// instance. A reader older than this field refuses such a BOM (unknown field), which keeps a
	// deferred image from being tagged verified without its host suite.
	Deferred *Deferred `json:"deferred_validation,omitempty"`
	// Checks are the settings the bake judged the host with, whole: its expect block, its NCCL
	// and function tests' settings and its check selection. A verification and every node
	// judge with them, each overlaying its own (settings.Checks.Overlay). The NCCL environment
	// is never written (its values may be secret and the file is world-readable). Schema 5;
	// Decode reads an older bill of materials' expect and tests into it.
	Checks *settings.Checks `json:"checks,omitempty"`
}

// Deferred records a validation the bake left to the post-processor.
type Deferred struct {
	// Checks are the check IDs not judged during the bake.
	Checks []string `json:"checks"`
	// BuildInstanceType is what the bake ran on (its DMI product name), e.g. c7i.8xlarge.
	BuildInstanceType string `json:"build_instance_type,omitempty"`
	// Reason is one line for a person: the setting and what completes it.
	Reason string `json:"reason"`
}

// Package is one guarded package's state.
type Package struct {
	Version string `json:"version"`
	Held    bool   `json:"held"`
}

// Encode renders b as indented JSON.
func (b BOM) Encode() ([]byte, error) {
	b.SchemaVersion = SchemaVersion
	out, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("bill of materials: %w", err)
	}
	return append(out, '\n'), nil
}

// Decode reads a BOM written by Encode, or by an earlier version of it (schema 2 to 4: an
// image baked by an earlier release still verifies). It refuses another schema, unknown fields
// and a BOM without a kernel or guarded packages: a post-processor must not judge a first boot
// against half a record.
func Decode(data []byte) (BOM, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var w wire
	if err := dec.Decode(&w); err != nil {
		return BOM{}, fmt.Errorf("bill of materials: not a dlami manifest: %w", err)
	}
	b := w.BOM
	switch {
	case b.SchemaVersion < oldestSchema || b.SchemaVersion > SchemaVersion:
		return BOM{}, fmt.Errorf("bill of materials: schema %d, this plugin reads %d to %d (bake and verify with the same plugin version)", b.SchemaVersion, oldestSchema, SchemaVersion)
	case b.Kernel == "":
		return BOM{}, fmt.Errorf("bill of materials: no kernel")
	case len(b.Guarded) == 0:
		return BOM{}, fmt.Errorf("bill of materials: no guarded packages")
	case b.Deferred != nil && len(b.Deferred.Checks) == 0:
		return BOM{}, fmt.Errorf("bill of materials: deferred_validation names no checks")
	case b.SchemaVersion >= checksSchema && (w.Expect != nil || w.Tests != nil):
		return BOM{}, fmt.Errorf("bill of materials: schema %d carries expect and tests in checks, not beside it", b.SchemaVersion)
	case b.SchemaVersion < checksSchema && b.Checks != nil:
		return BOM{}, fmt.Errorf("bill of materials: schema %d has no checks field (schema %d added it)", b.SchemaVersion, checksSchema)
	}
	if b.SchemaVersion < checksSchema {
		b.Checks = w.upgrade()
	}
	return b, nil
}

// checksSchema is the schema that carries the checks' settings whole (Checks).
const checksSchema = 5

// wire is a BOM as any supported schema writes it: schemas 3 and 4 carried the bake's expect
// block and (4) its tests beside each other.
type wire struct {
	BOM
	Expect *settings.Expectations `json:"expect,omitempty"`
	Tests  *tests                 `json:"tests,omitempty"`
}

// tests are schema 4's test settings and check selection.
type tests struct {
	NCCL     settings.NCCL     `json:"nccl"`
	Function settings.Function `json:"function"`
	Skip     []string          `json:"skip_checks,omitempty"`
	Warn     []string          `json:"warn_checks,omitempty"`
}

// upgrade is the settings an older bill of materials carries, as Checks: its expect block
// (schema 3 and 4) and its tests and check selection (schema 4); what it lacks is a bake's
// defaults (settings.BakeDefaults), as the release that wrote it judged with.
func (w wire) upgrade() *settings.Checks {
	c := settings.BakeDefaults()
	if w.Expect != nil {
		c.Expect = *w.Expect
	}
	if t := w.Tests; t != nil {
		c.NCCL, c.Function, c.Skip, c.Warn = t.NCCL, t.Function.Resolved(), t.Skip, t.Warn
	}
	return &c
}

package report

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/jsonschema"
)

// The JSON Schema of dlami-cost.json, generated from the Cost type by `make generate`.
//go:generate go run ./schemagen -cost -o ../../schema/dlami-cost.schema.json

// CostFileName is the file the post-processor writes into its report_dir.
const CostFileName = "dlami-cost.json"

// CostSchemaVersion is dlami-cost.json's format version.
const CostSchemaVersion = 1

// CostSchemaID is the $id of dlami-cost.json's JSON Schema: where the repository publishes it.
const CostSchemaID = "https://raw.githubusercontent.com/dlami-bake/packer-plugin-dlami/main/schema/dlami-cost.schema.json"

// Phases of a bake's instance time.
const (
	PhaseBuild        = "build"
	PhaseVerification = "verification"
	PhaseMultiNode    = "multi-node"
)

// Cost is dlami-cost.json: the instance time a bake and its first-boot verification took, per
// phase, read from EC2's own launch and termination times (never estimated), and, with the
// post-processor's price_lookup = true, the On-Demand list price of that time from the AWS
// Price List API.
type Cost struct {
	SchemaVersion int       `json:"schema_version"`
	BuildName     string    `json:"build_name"`
	PluginVersion string    `json:"plugin_version"`
	GeneratedAt   time.Time `json:"generated_at"`
	// Build is the amazon-ebs build instance the AMI was made from; Verification the
	// post-processor's instances, every node and region; MultiNode the part of Verification the
	// NCCL test across nodes took (absent without one).
	Build        CostPhase  `json:"build"`
	Verification CostPhase  `json:"verification"`
	MultiNode    *CostPhase `json:"multi_node,omitempty"`
	// InstanceSeconds is Build's and Verification's together (MultiNode is part of
	// Verification), counting only what is known.
	InstanceSeconds float64 `json:"instance_seconds"`
	// Price says how the dollars were reckoned, or why there are none.
	Price string `json:"price"`
	// USD is the On-Demand list price of InstanceSeconds, when every instance's price is
	// known.
	USD *float64 `json:"usd,omitempty"`
}

// CostPhase is the instance time of one phase.
type CostPhase struct {
	// Known is false when some of the phase's time could not be read; Unknown then says why.
	Known   bool   `json:"known"`
	Unknown string `json:"unknown,omitempty"`
	// Instances are the instances the phase ran on.
	Instances []CostInstance `json:"instances"`
	// InstanceSeconds is the sum of the instances' seconds.
	InstanceSeconds float64 `json:"instance_seconds"`
	// USD is the On-Demand list price of the phase, when every instance's price is known.
	USD *float64 `json:"usd,omitempty"`
}

// CostInstance is one instance's time in a phase.
type CostInstance struct {
	InstanceID   string `json:"instance_id"`
	InstanceType string `json:"instance_type"`
	Region       string `json:"region"`
	// LaunchTime is EC2's LaunchTime; EndTime the termination (or stop) request EC2 gives in
	// StateTransitionReason, or the moment the cleanup saw it terminated. Both absent in the
	// multi-node phase, which counts the test's time on each node; EndTime absent while it
	// still runs.
	LaunchTime *time.Time `json:"launch_time,omitempty"`
	EndTime    *time.Time `json:"end_time,omitempty"`
	// StillRunning: it ran when the post-processor read it; Seconds is up to then.
	StillRunning bool    `json:"still_running,omitempty"`
	Seconds      float64 `json:"seconds"`
	// HourlyUSD is the On-Demand list price per hour of its type in its region, USD the price
	// of Seconds (per-second billing, 60 seconds at least); absent when not looked up or not
	// found.
	HourlyUSD *float64 `json:"hourly_usd,omitempty"`
	USD       *float64 `json:"usd,omitempty"`
}

// CostJSONSchema returns the JSON Schema (draft 2020-12) of dlami-cost.json.
func CostJSONSchema() ([]byte, error) {
	cost := reflect.TypeFor[Cost]()
	return jsonschema.Generate(cost, jsonschema.Options{
		ID:    CostSchemaID,
		Title: fmt.Sprintf("dlami-cost.json, schema version %d", CostSchemaVersion),
		Description: "The instance time of a dlami bake and its first-boot verification, per phase, " +
			"from EC2's launch and termination times (dlami-cost.json, written by the dlami " +
			"post-processor into report_dir), generated from the Go types in internal/report.",
		Consts:             map[string]any{cost.String() + ".SchemaVersion": CostSchemaVersion},
		NonNullCollections: true,
	})
}

// WriteCost writes c as dir/dlami-cost.json (atomically, as the reports), its lists never
// null, and returns the path.
func WriteCost(dir string, c Cost) (string, error) {
	c = normalizeCost(c)
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, CostFileName)
	return path, WriteAtomic(path, append(data, '\n'))
}

// normalizeCost sets the schema version and makes every phase's list non-null, without
// sharing the phases with the caller's copy.
func normalizeCost(c Cost) Cost {
	c.SchemaVersion = CostSchemaVersion
	if c.MultiNode != nil {
		m := *c.MultiNode
		c.MultiNode = &m
	}
	for _, p := range []*CostPhase{&c.Build, &c.Verification, c.MultiNode} {
		if p != nil {
			p.Instances = append([]CostInstance{}, p.Instances...)
		}
	}
	return c
}

// Summary is the run's instance time in one line, as the post-processor's last UI line and
// the reports say it: "instance time: build 1 × p5.48xlarge 41m12s; verification 1 ×
// p5.48xlarge 12m3s; total 53m15s".
func (c Cost) Summary() string {
	var parts []string
	for _, ph := range []struct {
		name  string
		phase CostPhase
	}{{PhaseBuild, c.Build}, {PhaseVerification, c.Verification}} {
		if !ph.phase.Known {
			parts = append(parts, fmt.Sprintf("%s unknown (%s)", ph.name, ph.phase.Unknown))
			continue
		}
		if len(ph.phase.Instances) == 0 {
			parts = append(parts, ph.name+" none")
			continue
		}
		part := fmt.Sprintf("%s %s %s%s%s", ph.name, TypeCounts(ph.phase.Instances), costSeconds(ph.phase.InstanceSeconds), stillRunning(ph.phase.Instances), dollars(ph.phase.USD))
		if ph.name == PhaseVerification && c.MultiNode != nil {
			part += fmt.Sprintf(" (multi-node test %s%s of it)", costSeconds(c.MultiNode.InstanceSeconds), dollars(c.MultiNode.USD))
		}
		parts = append(parts, part)
	}
	total := "total " + costSeconds(c.InstanceSeconds)
	if !c.Build.Known || !c.Verification.Known {
		total += " known"
	}
	if c.USD != nil {
		total += fmt.Sprintf(", $%.2f at On-Demand list price (Capacity Blocks, reservations and Savings Plans are billed differently)", *c.USD)
	}
	return "instance time: " + strings.Join(append(parts, total), "; ")
}

// TypeCounts is "2 × p5.48xlarge" (several types joined with " + ").
func TypeCounts(instances []CostInstance) string {
	counts := map[string]int{}
	for _, ci := range instances {
		counts[ci.InstanceType]++
	}
	var out []string
	for _, t := range slices.Sorted(maps.Keys(counts)) {
		out = append(out, fmt.Sprintf("%d × %s", counts[t], t))
	}
	return strings.Join(out, " + ")
}

func costSeconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}

func dollars(usd *float64) string {
	if usd == nil {
		return ""
	}
	return fmt.Sprintf(" ($%.2f)", *usd)
}

// stillRunning names the instances that ran when they were read: their time is until then.
func stillRunning(instances []CostInstance) string {
	var ids []string
	for _, ci := range instances {
		if ci.StillRunning {
			ids = append(ids, ci.InstanceID)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return " (" + strings.Join(ids, ", ") + " still running: counted until now)"
}

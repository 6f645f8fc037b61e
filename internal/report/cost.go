package report

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
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
	c.SchemaVersion = CostSchemaVersion
	for _, p := range []*CostPhase{&c.Build, &c.Verification, c.MultiNode} {
		if p != nil && p.Instances == nil {
			p.Instances = []CostInstance{}
		}
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, CostFileName)
	return path, WriteAtomic(path, append(data, '\n'))
}

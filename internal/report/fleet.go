package report

// Evidence is what dlami-node-check kept of a failing node before it isolated it: the bundle
// on the node, its upload, and what could not be collected. A bundle that could not be written
// or uploaded never keeps the node from being isolated; Problems says what went wrong.
type Evidence struct {
	// Path is the bundle (a .tar.gz) on the node; "" when none was written.
	Path  string `json:"path,omitempty"`
	Bytes int64  `json:"bytes,omitempty"`
	// Reused is true when this run wrote no new bundle because one of the same boot and the
	// same failed checks is already kept (node-problem-detector runs the check every 10
	// minutes): Path names it.
	Reused bool `json:"reused,omitempty"`
	// Collected, Missing and Skipped name the bundle's parts: collected, not on the node (a
	// tool that is not installed, by its absolute path), or left out and why.
	Collected []string `json:"collected"`
	Missing   []string `json:"missing"`
	Skipped   []string `json:"skipped"`
	// XidLines is how many kernel log records report an Xid or SXid (dmesg and the journal).
	XidLines int `json:"xid_lines"`
	// UploadTo is where the bundle was to be uploaded (evidence s3_uri), Uploaded the object
	// it was uploaded to (s3://bucket/key); "" when not.
	UploadTo string `json:"upload_to,omitempty"`
	Uploaded string `json:"uploaded,omitempty"`
	// Removed are older bundles removed to keep the store within its bounds.
	Removed []string `json:"removed,omitempty"`
	// Problems are what could not be done (the bundle written, uploaded), one line each.
	Problems []string `json:"problems"`
}

// Replacement statuses: the request was sent and accepted; not sent because an operator holds
// the node (a drain it did not set); deferred while the node runs jobs (a later run sends it);
// not sent because the run is a drill (--simulate-failure without --simulate-failure-replace);
// not needed or not possible (no group, not in service, already unhealthy); or failed.
const (
	ReplacementRequested    = "requested"
	ReplacementOperatorHold = "operator-hold"
	ReplacementDeferred     = "deferred"
	ReplacementSimulated    = "simulated"
	ReplacementNotRequested = "not-requested"
	ReplacementFailed       = "failed"
)

// Replacement is what dlami-node-check asked of the engine that replaces the node.
type Replacement struct {
	// Engine is node_check.replace ("asg").
	Engine string `json:"engine"`
	// Requested is true when the engine accepted the request (SetInstanceHealth answered).
	Requested bool `json:"requested"`
	// Status is what became of the request (Replacement* constants): requested, or why not.
	Status string `json:"status,omitempty"`
	// InstanceID and Group are the instance and its Auto Scaling group, when known.
	InstanceID string `json:"instance_id,omitempty"`
	Group      string `json:"group,omitempty"`
	// Message says what was done or why nothing was; Problem what failed ("" when nothing).
	Message string `json:"message"`
	Problem string `json:"problem,omitempty"`
}

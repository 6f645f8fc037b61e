// Package amitags names the AMI tags the plugin reads and writes, so that the data source's
// rebake decision, the examples and the post-processor agree on one spelling.
package amitags

const (
	// SourceAMI is the DLAMI a golden AMI was baked from (the rebake decision compares it with
	// the newest DLAMI).
	SourceAMI = "dlami:source_ami"
	// Verified is "true" or "false" once the post-processor has checked the AMI's first boot.
	Verified = "dlami:verified"
	// VerifiedAt is when it did (RFC 3339, UTC).
	VerifiedAt = "dlami:verified_at"
	// VerifiedBy names the check: the plugin version and the report.
	VerifiedBy = "dlami:verified_by"
	// VerifiedInstanceType is the instance type the verification ran on: the first of the
	// post-processor's instance_types that had capacity.
	VerifiedInstanceType = "dlami:verified_instance_type"
	// VerifiedNodes is how many instances the NCCL test across nodes ran on, when the
	// verification ran one (nodes of 2 or more) and it passed.
	VerifiedNodes = "dlami:verified_nodes"
	// VerifiedIn is on a copy (ami_regions) that was not launched itself: the
	// "<region>/<ami-id>" copies whose first boot was verified, comma-separated. The copy's
	// Verified tag carries their result.
	VerifiedIn = "dlami:verified_in"
	// BuildInstanceSeconds is the build instance's time, whole seconds, from EC2's LaunchTime
	// to the termination EC2 gives (the instance the AMI names as its SourceInstanceId);
	// BuildInstanceType its type. Set by the post-processor with dlami:verified = true, when
	// EC2 gave the time.
	BuildInstanceSeconds = "dlami:build_instance_seconds"
	BuildInstanceType    = "dlami:build_instance_type"
	// VerifyInstanceSeconds is the verification's instance time, whole seconds, every node and
	// region together (the type is dlami:verified_instance_type); MultiNodeInstanceSeconds the
	// part of it the NCCL test across nodes took, every node together.
	VerifyInstanceSeconds    = "dlami:verify_instance_seconds"
	MultiNodeInstanceSeconds = "dlami:multinode_instance_seconds"
)

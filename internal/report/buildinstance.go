package report

import (
	"fmt"
	"time"
)

// BuildInstanceBasis says what BuildInstance.Seconds counts and what it leaves out.
const BuildInstanceBasis = "from the host's boot (its /proc/uptime when the bake started) to the end of provisioning; " +
	"amazon-ebs then stops the instance and registers the AMI, which is not counted, and EC2 bills from launch, shortly before the boot"

// Where BuildInstance.InstanceID came from.
const (
	// IDFromBuilder: the builder's instance id, which Packer hands provisioners as build.ID.
	IDFromBuilder = "builder"
	// IDFromHost: the host's own (cloud-init's /var/lib/cloud/data/instance-id, else IMDSv2).
	IDFromHost = "host"
)

// BuildInstance is the instance a provisioner's bake ran on (amazon-ebs's build instance) and
// how long it had run when provisioning ended.
type BuildInstance struct {
	// InstanceID is the builder's instance (Packer's build.ID), else what the host said
	// (cloud-init's instance id, else IMDSv2); InstanceIDSource says which. InstanceType is
	// what the host said (DMI product_name, else IMDSv2), else the configured type.
	InstanceID       string `json:"instance_id,omitempty"`
	InstanceIDSource string `json:"instance_id_source,omitempty"`
	InstanceType     string `json:"instance_type,omitempty"`
	// BootedAt is the bake's clock at its first read of the host less the host's uptime then.
	BootedAt *time.Time `json:"booted_at,omitempty"`
	// Known is false when the uptime could not be read; Unknown then says why.
	Known   bool   `json:"known"`
	Unknown string `json:"unknown,omitempty"`
	// Seconds is from BootedAt to the end of provisioning (the report's finished_at); Basis
	// says so.
	Seconds float64 `json:"seconds"`
	Basis   string  `json:"basis"`
}

// Summary is the build instance's time in one line: "build instance i-0abc (p5.48xlarge) ran
// 41m12s up to the end of provisioning (from the host's boot ...)".
func (bi BuildInstance) Summary() string {
	who := "build instance"
	if bi.InstanceID != "" {
		who += " " + bi.InstanceID
	}
	if bi.InstanceType != "" {
		who += " (" + bi.InstanceType + ")"
	}
	if !bi.Known {
		return fmt.Sprintf("%s: its time up to the end of provisioning is unknown (%s)", who, bi.Unknown)
	}
	return fmt.Sprintf("%s ran %s up to the end of provisioning (%s)", who, costSeconds(bi.Seconds), bi.Basis)
}

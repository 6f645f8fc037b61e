//go:generate packer-sdc mapstructure-to-hcl2 -type Config
//go:generate packer-sdc struct-markdown

package dlami

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/packer-plugin-sdk/common"
	"github.com/hashicorp/packer-plugin-sdk/template/interpolate"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// Config is the post-processor's configuration. See docs/post-processors/dlami.mdx.
type Config struct {
	common.PackerConfig `mapstructure:",squash"`
	// AWS access, with the amazon plugin's names.
	awsaccess.AccessConfig `mapstructure:",squash"`

	// The build's own region: which copy of the AMI to verify when the artifact has several
	// (`ami_regions`). Not needed when the artifact has one region or `regions` is set. The
	// copies not verified themselves are tagged with the result when every verified copy booted
	// healthy: `dlami:verified = true` and `dlami:verified_in = <region>/<ami-id>`.
	Region string `mapstructure:"region"`
	// The regions whose copies to verify (each gets its own instance). Default: `region`.
	Regions []string `mapstructure:"regions"`
	// Instance type to launch. Default: the one recorded in the bill of materials the
	// provisioner wrote (`bom_file`).
	InstanceType string `mapstructure:"instance_type"`
	// Local copy of the bill of materials the provisioner saved next to its reports, read for
	// the default instance type. Default `dlami-reports/<build name>/dlami-bom.json`.
	BOMFile string `mapstructure:"bom_file"`
	// Where the bill of materials is inside the image. Default /etc/dlami-bake/manifest.json.
	ManifestPath string `mapstructure:"manifest_path"`
	// Subnet to launch in; default the region's default VPC.
	SubnetID string `mapstructure:"subnet_id"`
	// Security groups for the instance; default a temporary group admitting SSH.
	SecurityGroupIDs []string `mapstructure:"security_group_ids"`
	// Source CIDR the temporary security group admits on port 22. Default 0.0.0.0/0.
	SSHCIDR string `mapstructure:"temporary_security_group_source_cidr"`
	// Whether the instance gets a public IP address; default the subnet's setting.
	AssociatePublicIPAddress *bool `mapstructure:"associate_public_ip_address"`
	// Instance profile name for the instance.
	IAMInstanceProfile string `mapstructure:"iam_instance_profile"`
	// `open`, `none` or `capacity-reservations-only`, as amazon-ebs. EC2 takes a preference
	// or a reservation to target, not both: leave it unset with `capacity_reservation_id` or
	// `capacity_reservation_group_arn`.
	CapacityReservationPreference string `mapstructure:"capacity_reservation_preference"`
	// Capacity Reservation (ODCR or Capacity Block for ML) to launch into.
	CapacityReservationID string `mapstructure:"capacity_reservation_id"`
	// Capacity Reservation resource group to launch into.
	CapacityReservationGroupARN string `mapstructure:"capacity_reservation_group_arn"`
	// SSH user. Default `ubuntu`.
	SSHUsername string `mapstructure:"ssh_username"`
	// Address to connect to: `public_ip`, `private_ip`, `public_dns` or `private_dns`.
	// Default: the public IP, else the private one.
	SSHInterface string `mapstructure:"ssh_interface"`
	// How long to wait for the instance to run and answer SSH. Default 30m: a p5 or p6
	// instance initialises many EFA devices and NVMe drives on its first boot and can take
	// more than 10 minutes to answer SSH.
	SSHTimeout time.Duration `mapstructure:"ssh_timeout"`
	// How long to wait for cloud-init and apt to settle before judging. Default 15m.
	SettleTimeout time.Duration `mapstructure:"settle_timeout"`
	// Timeout of each check command. Default 60s.
	CheckTimeout time.Duration `mapstructure:"check_timeout"`
	// Run the 1-node NCCL test on the instance too (it costs GPU minutes). Default false.
	NCCL bool `mapstructure:"nccl"`
	// Local directory for the reports, one subdirectory per region. Default
	// `dlami-verify/<build name>`.
	ReportDir string `mapstructure:"report_dir"`
	// What to do with the AMI when its first boot fails: `keep` (touch nothing), `tag`
	// (tag it `dlami:verified = false`, the default) or `deregister` (deregister it and delete
	// its snapshots in every region of the artifact). The build fails either way.
	OnFailure string `mapstructure:"on_failure"`
	// Tags for the instance and the temporary key pair and security group.
	RunTags map[string]string `mapstructure:"run_tags"`
	// What the host must look like, as the provisioner's `expect` block.
	Expect checks.Expectations `mapstructure:"expect"`

	ctx interpolate.Context
}

// What to do with a failed AMI.
const (
	OnFailureKeep       = "keep"
	OnFailureTag        = "tag"
	OnFailureDeregister = "deregister"
)

// Defaults this package alone owns; check_timeout, report_dir and bom_file default through
// internal/settings, which the provisioner shares.
const (
	defaultSSHUsername   = "ubuntu"
	defaultSSHTimeout    = 30 * time.Minute // see SSHTimeout: P-type first boots
	defaultSettleTimeout = 15 * time.Minute
)

// BOMFileName is the local copy of the bill of materials the provisioner writes next to its
// reports.
const BOMFileName = bom.LocalFileName

func (c *Config) prepare() (errs []error, warnings []string) {
	c.ReportDir = cmp.Or(c.ReportDir, settings.VerifyReportDir(c.PackerBuildName))
	c.BOMFile = cmp.Or(c.BOMFile, settings.BOMFile(c.PackerBuildName))
	c.ManifestPath = cmp.Or(c.ManifestPath, bom.DefaultPath)
	c.SSHUsername = cmp.Or(c.SSHUsername, defaultSSHUsername)
	c.SSHTimeout = cmp.Or(c.SSHTimeout, defaultSSHTimeout)
	c.SettleTimeout = cmp.Or(c.SettleTimeout, defaultSettleTimeout)
	c.CheckTimeout = cmp.Or(c.CheckTimeout, settings.DefaultCheckTimeout)
	c.OnFailure = cmp.Or(c.OnFailure, OnFailureTag)
	accessErrs, deprecations := c.AccessConfig.Prepare()
	errs = append(errs, accessErrs...)
	if c.Region != "" {
		if err := c.CheckRegion("region", c.Region); err != nil {
			errs = append(errs, err)
		}
	}
	for i, r := range c.Regions {
		if err := c.CheckRegion(fmt.Sprintf("regions[%d]", i), r); err != nil {
			errs = append(errs, err)
		}
	}
	switch c.OnFailure {
	case OnFailureKeep, OnFailureTag, OnFailureDeregister:
	default:
		errs = append(errs, fmt.Errorf("on_failure %q: use keep, tag or deregister", c.OnFailure))
	}
	if err := launch.CheckSSHInterface(c.SSHInterface); err != nil {
		errs = append(errs, err)
	}
	switch c.CapacityReservationPreference {
	case "", "open", "none", "capacity-reservations-only":
	default:
		errs = append(errs, fmt.Errorf("capacity_reservation_preference %q: use open, none or capacity-reservations-only", c.CapacityReservationPreference))
	}
	// EC2's CapacityReservationSpecification takes a preference or a target, and a target is
	// one reservation or one resource group; RunInstances refuses the rest.
	if c.CapacityReservationID != "" && c.CapacityReservationGroupARN != "" {
		errs = append(errs, errors.New("capacity_reservation_id and capacity_reservation_group_arn: set one"))
	}
	for _, target := range []struct{ name, v string }{{"capacity_reservation_id", c.CapacityReservationID}, {"capacity_reservation_group_arn", c.CapacityReservationGroupARN}} {
		if target.v != "" && c.CapacityReservationPreference != "" {
			errs = append(errs, fmt.Errorf("capacity_reservation_preference = %q and %s: EC2 refuses a preference together with a reservation to target; remove capacity_reservation_preference (the target alone launches into the reservation)", c.CapacityReservationPreference, target.name))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ssh_timeout", c.SSHTimeout}, {"settle_timeout", c.SettleTimeout}, {"check_timeout", c.CheckTimeout}} {
		if d.v < time.Second {
			errs = append(errs, fmt.Errorf("%s must be at least 1s, got %s", d.name, d.v))
		}
	}
	errs = append(errs, c.Expect.Validate()...)
	return errs, deprecations
}

// policy is the guard's default: the first boot is compared with what the image's bill of
// materials lists, plus any default-guarded package that appeared.
func (c *Config) policy() guard.Policy { return guard.Policy{} }

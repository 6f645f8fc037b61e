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
	// Instance types to try in order, each only when EC2 refused the one before for capacity
	// (`InsufficientInstanceCapacity`, a full reservation, `Unsupported` in the zone), e.g.
	// `["p5.48xlarge", "p5e.48xlarge"]`. The report, the UI and the AMI tag
	// `dlami:verified_instance_type` say which one verified the AMI. Set this or
	// `instance_type`, not both.
	InstanceTypes []string `mapstructure:"instance_types"`
	// Local copy of the bill of materials the provisioner saved next to its reports, read for
	// the default instance type. Default `dlami-reports/<build name>/dlami-bom.json`.
	BOMFile string `mapstructure:"bom_file"`
	// Where the bill of materials is inside the image. Default /etc/dlami-bake/manifest.json.
	ManifestPath string `mapstructure:"manifest_path"`
	// Subnet to launch in; default the region's default VPC.
	SubnetID string `mapstructure:"subnet_id"`
	// Subnets (Availability Zones) to try in order, each instance type in every subnet before
	// the next type, when EC2 has no capacity. All in one VPC unless `security_group_ids` is
	// set. Set this or `subnet_id`, not both.
	SubnetIDs []string `mapstructure:"subnet_ids"`
	// Security groups for the instance; default a temporary group admitting SSH.
	SecurityGroupIDs []string `mapstructure:"security_group_ids"`
	// Source CIDR the temporary security group admits on port 22. Default 0.0.0.0/0. Set this
	// or `temporary_security_group_source_cidrs`, not both.
	SSHCIDR string `mapstructure:"temporary_security_group_source_cidr"`
	// Source CIDRs the temporary security group admits on port 22, as amazon-ebs's setting of
	// the same name: IPv4 network addresses such as `["10.0.0.0/16", "203.0.113.7/32"]`.
	// Default `["0.0.0.0/0"]`. Neither applies with `security_group_ids`.
	SSHCIDRs []string `mapstructure:"temporary_security_group_source_cidrs"`
	// The verification instance's instance metadata service, amazon-ebs's `metadata_options`
	// block: IMDSv2 is required (`http_tokens = "required"`) unless the block says otherwise.
	MetadataOptions MetadataOptions `mapstructure:"metadata_options"`
	// User data for the verification instance, so its first boot is the fleet's (nodeadm's
	// NodeConfig, a Slurm node's slurmd configuration, a cloud-config): what a first boot does
	// with it is what the first-boot checks judge. At most 16 KiB. Set this or
	// `user_data_file`, not both.
	UserData string `mapstructure:"user_data"`
	// A file whose content is the verification instance's user data (read when the template is
	// validated; relative to the directory Packer runs in).
	UserDataFile string `mapstructure:"user_data_file"`
	// Whether the instance gets a public IP address at launch; default the subnet's setting.
	// EC2 gives none to an instance launched with several network interfaces (an EFA launch):
	// see `temporary_elastic_ip`.
	AssociatePublicIPAddress *bool `mapstructure:"associate_public_ip_address"`
	// The EFA interfaces the verification instance is launched with, in the EC2 User Guide's
	// layout for the type (primary ENA interface on network card 0, device 0; `efa-only` on
	// card 0, device 1 where card 0 takes EFA, and on device 0 of every further card; on p5 the
	// guide's 32-EFA layout): `"all"` (default: every EFA the instance type takes, read from
	// `DescribeInstanceTypes`; none on a type without EFA), `"none"`, or a count such as `"2"`.
	// EC2 attaches EFA only at launch, so this is where the EFA devices, their traffic and
	// GPUDirect RDMA are proven; the first-boot judges demand exactly the count attached. With
	// EFA attached the temporary security group also allows all traffic to and from itself, and
	// the verification runs `efa-traffic` and `gpudirect-rdma` (see `nccl`).
	EFA string `mapstructure:"efa"`
	// How many instances the verification launches, from one `RunInstances` (a partial fleet
	// is a capacity refusal: the next instance type or subnet is tried), each with the EFA
	// interfaces of `efa`, into one placement group (a temporary cluster group unless
	// `placement_group` names one). Each node's first boot is verified on its own, all at
	// once; with 2 or more, the NCCL all-reduce then runs across them (`multi_node`, check
	// `nccl-multinode`) and the AMI is tagged `dlami:verified_nodes` with the count when it
	// passed. Default 1.
	Nodes int `mapstructure:"nodes"`
	// The test across the nodes (with `nodes` of 2 or more).
	MultiNode MultiNodeConfig `mapstructure:"multi_node"`
	// An existing placement group to launch into. Set this or `temporary_placement_group`.
	PlacementGroup string `mapstructure:"placement_group"`
	// Launch into a cluster placement group made for the verification and deleted with it, as
	// EFA fleets are launched. Default false.
	TemporaryPlacementGroup bool `mapstructure:"temporary_placement_group"`
	// Associate a temporary Elastic IP with the instance's primary interface once it runs, and
	// release it afterwards: the public address of an instance launched with several network
	// interfaces, to which EC2 gives none at launch. Default: when the launch has several
	// interfaces, unless `ssh_bastion_host` is set, `ssh_interface` is `private_ip` or
	// `private_dns`, or `associate_public_ip_address = false`.
	TemporaryElasticIP *bool `mapstructure:"temporary_elastic_ip"`
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
	// `capacity-block` when `capacity_reservation_id` (or `capacity_reservation_group_arn`) is
	// a Capacity Block for ML: EC2 launches into one only with this market type. Unset is
	// on-demand (an On-Demand Capacity Reservation needs no market type).
	MarketType string `mapstructure:"market_type"`
	// SSH user. Default `ubuntu`.
	SSHUsername string `mapstructure:"ssh_username"`
	// Address to connect to: `public_ip`, `private_ip`, `public_dns` or `private_dns`.
	// Default: `private_ip` with `ssh_bastion_host`, else the public IP (an Elastic IP's, see
	// `temporary_elastic_ip`), else the private one. `session_manager` is not offered.
	SSHInterface string `mapstructure:"ssh_interface"`
	// A bastion host to reach the instance through, as amazon-ebs's setting of the same name:
	// for an instance in a private subnet, with `ssh_interface = "private_ip"` (the default
	// with a bastion).
	SSHBastionHost string `mapstructure:"ssh_bastion_host"`
	// The bastion's SSH port. Default 22.
	SSHBastionPort int `mapstructure:"ssh_bastion_port"`
	// The user on the bastion. Required with `ssh_bastion_host`.
	SSHBastionUsername string `mapstructure:"ssh_bastion_username"`
	// The private key for the bastion (a path; `~` is expanded). Set this or
	// `ssh_bastion_agent_auth`.
	SSHBastionPrivateKeyFile string `mapstructure:"ssh_bastion_private_key_file"`
	// Authenticate to the bastion with the local SSH agent (`SSH_AUTH_SOCK`). Default false.
	SSHBastionAgentAuth bool `mapstructure:"ssh_bastion_agent_auth"`
	// How long to wait for the instance to run and answer SSH. Default 30m: a p5 or p6
	// instance initialises many EFA devices and NVMe drives on its first boot and can take
	// more than 10 minutes to answer SSH.
	SSHTimeout time.Duration `mapstructure:"ssh_timeout"`
	// How long to wait for cloud-init and apt to settle before judging. Default 15m.
	SettleTimeout time.Duration `mapstructure:"settle_timeout"`
	// Timeout of each check command. Default 60s.
	CheckTimeout time.Duration `mapstructure:"check_timeout"`
	// Run the 1-node NCCL test on the instance, with DCGM's diagnostics and the bake's function
	// tests (it costs GPU minutes). Default: on when the launch attached EFA (`efa`), where the
	// test behind `gpudirect-rdma` (the all-reduce forced over the EFA devices) runs with it,
	// without DCGM; off otherwise. `nccl = false` turns it off with EFA too (`efa-traffic`
	// still runs; `gpudirect-rdma` does not).
	NCCL *bool `mapstructure:"nccl"`
	// Complete a two-phase bake: the provisioner ran with `defer_validation = true` on a build
	// instance without GPUs, and this verification runs the full host suite and the NCCL test
	// on the GPU instance, judged with the bake's `expect` block (from the bill of materials)
	// unless `expect` is set here. Without it, an image whose bill of materials says its
	// validation was deferred fails the post-processor and is never tagged verified. Needs
	// `instance_type` or `instance_types` (the bill of materials records the build instance).
	// Default false.
	CompleteValidation bool `mapstructure:"complete_validation"`
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
	Expect settings.Expectations `mapstructure:"expect"`
	// Look up the On-Demand list price of the bake's instance time (the build instance and the
	// verification's) with the AWS Price List API (`pricing:GetProducts`, at its us-east-1
	// endpoint: Linux, shared tenancy, the instance's region) and print it, put it in
	// `dlami-cost.json`, next to the times. It is the On-Demand list price: Capacity Blocks,
	// reservations, Savings Plans and Spot are billed differently. A lookup that fails is said
	// and leaves the dollars out; it never fails the build. Default false.
	PriceLookup bool `mapstructure:"price_lookup"`
	// Check ids the verification does not judge, on top of the bake's skip_checks (the bill of
	// materials carries them): each is reported `skip` naming the setting, never `pass`. The
	// guard's and the first boot's checks cannot be skipped.
	SkipChecks []string `mapstructure:"skip_checks"`
	// Check ids whose failure only warns in the verification, on top of the bake's warn_checks.
	WarnChecks []string `mapstructure:"warn_checks"`

	ctx interpolate.Context
	// userData is user_data or user_data_file's content, read by prepareLaunch.
	userData []byte
	// efa is the efa setting resolved: launch.EFAAll, 0 or a count.
	efa int
	// multi is nodes and the multi_node block resolved once, by Prepare: the test across
	// nodes runs with it, and multi.On() says whether there is one.
	multi settings.MultiNode
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
	c.CheckTimeout = settings.CheckTimeout(c.CheckTimeout)
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
	errs = append(errs, c.checkCandidates()...)
	errs = append(errs, c.prepareLaunch()...)
	errs = append(errs, c.prepareMultiNode()...)
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
	errs = append(errs, checks.CheckSelection("skip_checks", c.SkipChecks)...)
	errs = append(errs, checks.CheckSelection("warn_checks", c.WarnChecks)...)
	return errs, deprecations
}

// checkCandidates validates the settings that say what to launch and where.
func (c *Config) checkCandidates() []error {
	var errs []error
	if c.InstanceType != "" && len(c.InstanceTypes) > 0 {
		errs = append(errs, errors.New("instance_type and instance_types: set one (instance_types lists the types to try in order)"))
	}
	if c.SubnetID != "" && len(c.SubnetIDs) > 0 {
		errs = append(errs, errors.New("subnet_id and subnet_ids: set one (subnet_ids lists the subnets to try in order)"))
	}
	for _, l := range []struct {
		name string
		v    []string
	}{{"instance_types", c.InstanceTypes}, {"subnet_ids", c.SubnetIDs}} {
		seen := map[string]bool{}
		for i, v := range l.v {
			switch {
			case v == "":
				errs = append(errs, fmt.Errorf("%s[%d] is empty", l.name, i))
			case seen[v]:
				errs = append(errs, fmt.Errorf("%s[%d] %q is listed twice", l.name, i, v))
			}
			seen[v] = true
		}
	}
	switch c.MarketType {
	case "":
	case launch.MarketCapacityBlock:
		if c.CapacityReservationID == "" && c.CapacityReservationGroupARN == "" {
			errs = append(errs, errors.New(`market_type = "capacity-block" needs the Capacity Block's reservation: set capacity_reservation_id (cr-...) or capacity_reservation_group_arn`))
		}
	default:
		errs = append(errs, fmt.Errorf(`market_type %q: use "capacity-block" (a Capacity Block for ML, with capacity_reservation_id) or leave it unset (on-demand, or an On-Demand Capacity Reservation)`, c.MarketType))
	}
	if c.CapacityReservationID != "" && (len(c.InstanceTypes) > 1 || len(c.SubnetIDs) > 1) {
		errs = append(errs, errors.New("capacity_reservation_id with several instance_types or subnet_ids: a Capacity Reservation or Capacity Block holds one instance type in one Availability Zone; list one of each, or use capacity_reservation_group_arn for a group of reservations"))
	}
	if c.CompleteValidation && c.InstanceType == "" && len(c.InstanceTypes) == 0 {
		errs = append(errs, errors.New("complete_validation = true needs instance_type or instance_types: the bill of materials of a bake with defer_validation = true records its build instance (without GPUs), not the GPU instance to validate on"))
	}
	return errs
}

// candidates are the placements to try in order: every instance type in every subnet,
// instance type first. typ is the single type when instance_types is unset.
func (c *Config) candidates(typ string) []launch.Placement {
	types := c.InstanceTypes
	if len(types) == 0 {
		types = []string{typ}
	}
	subnets := c.SubnetIDs
	if len(subnets) == 0 {
		subnets = []string{c.SubnetID}
	}
	var out []launch.Placement
	for _, t := range types {
		for _, s := range subnets {
			out = append(out, launch.Placement{InstanceType: t, SubnetID: s})
		}
	}
	return out
}

// policy is the guard's default: the first boot is compared with what the image's bill of
// materials lists, plus any default-guarded package that appeared.
func (c *Config) policy() settings.GuardPolicy { return settings.GuardPolicy{} }

// Package launch starts a throwaway instance from an AMI to check its first boot, and always
// takes it down again: a temporary key pair and security group, RunInstances with the launch
// settings a user of the amazon plugin expects and the EFA interfaces of the instance type in
// the EC2 User Guide's layout (layout.go; and a client token, so that a retried launch is the
// same launch), a placement group and an Elastic IP when asked (network.go), waiting until it
// runs, and a cleanup that terminates it and deletes the
// temporaries whatever happened: across throttling and errors until a deadline, after
// cancellation, and after a call whose answer was lost, by finding what it made by its tags
// and names. It also tags and deregisters AMIs. It talks to EC2 through the typed client
// interface below; the checks are elsewhere.
package launch

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"golang.org/x/crypto/ssh"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
)

// EC2API is the part of the EC2 client launch uses.
type EC2API interface {
	CreateKeyPair(ctx context.Context, in *ec2.CreateKeyPairInput, optFns ...func(*ec2.Options)) (*ec2.CreateKeyPairOutput, error)
	DeleteKeyPair(ctx context.Context, in *ec2.DeleteKeyPairInput, optFns ...func(*ec2.Options)) (*ec2.DeleteKeyPairOutput, error)
	DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeVpcs(ctx context.Context, in *ec2.DescribeVpcsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeVpcsOutput, error)
	CreateSecurityGroup(ctx context.Context, in *ec2.CreateSecurityGroupInput, optFns ...func(*ec2.Options)) (*ec2.CreateSecurityGroupOutput, error)
	AuthorizeSecurityGroupIngress(ctx context.Context, in *ec2.AuthorizeSecurityGroupIngressInput, optFns ...func(*ec2.Options)) (*ec2.AuthorizeSecurityGroupIngressOutput, error)
	DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	DeleteSecurityGroup(ctx context.Context, in *ec2.DeleteSecurityGroupInput, optFns ...func(*ec2.Options)) (*ec2.DeleteSecurityGroupOutput, error)
	RunInstances(ctx context.Context, in *ec2.RunInstancesInput, optFns ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error)
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, optFns ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	CreateTags(ctx context.Context, in *ec2.CreateTagsInput, optFns ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
	DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
	DeregisterImage(ctx context.Context, in *ec2.DeregisterImageInput, optFns ...func(*ec2.Options)) (*ec2.DeregisterImageOutput, error)
	DeleteSnapshot(ctx context.Context, in *ec2.DeleteSnapshotInput, optFns ...func(*ec2.Options)) (*ec2.DeleteSnapshotOutput, error)
	// The network of a launch with EFA: the instance type's cards, the group's rules to and
	// from itself, the interfaces left after termination, a placement group, an Elastic IP.
	DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	AuthorizeSecurityGroupEgress(ctx context.Context, in *ec2.AuthorizeSecurityGroupEgressInput, optFns ...func(*ec2.Options)) (*ec2.AuthorizeSecurityGroupEgressOutput, error)
	DescribeNetworkInterfaces(ctx context.Context, in *ec2.DescribeNetworkInterfacesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeNetworkInterfacesOutput, error)
	DeleteNetworkInterface(ctx context.Context, in *ec2.DeleteNetworkInterfaceInput, optFns ...func(*ec2.Options)) (*ec2.DeleteNetworkInterfaceOutput, error)
	CreatePlacementGroup(ctx context.Context, in *ec2.CreatePlacementGroupInput, optFns ...func(*ec2.Options)) (*ec2.CreatePlacementGroupOutput, error)
	DeletePlacementGroup(ctx context.Context, in *ec2.DeletePlacementGroupInput, optFns ...func(*ec2.Options)) (*ec2.DeletePlacementGroupOutput, error)
	AllocateAddress(ctx context.Context, in *ec2.AllocateAddressInput, optFns ...func(*ec2.Options)) (*ec2.AllocateAddressOutput, error)
	AssociateAddress(ctx context.Context, in *ec2.AssociateAddressInput, optFns ...func(*ec2.Options)) (*ec2.AssociateAddressOutput, error)
	DisassociateAddress(ctx context.Context, in *ec2.DisassociateAddressInput, optFns ...func(*ec2.Options)) (*ec2.DisassociateAddressOutput, error)
	ReleaseAddress(ctx context.Context, in *ec2.ReleaseAddressInput, optFns ...func(*ec2.Options)) (*ec2.ReleaseAddressOutput, error)
	DescribeAddresses(ctx context.Context, in *ec2.DescribeAddressesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeAddressesOutput, error)
	// The volumes of a launch that outlived its instances.
	DescribeVolumes(ctx context.Context, in *ec2.DescribeVolumesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeVolumesOutput, error)
	DeleteVolume(ctx context.Context, in *ec2.DeleteVolumeInput, optFns ...func(*ec2.Options)) (*ec2.DeleteVolumeOutput, error)
}

// Spec is what to launch.
type Spec struct {
	ImageID      string
	InstanceType string
	// Count is how many instances one RunInstances launches (MinCount = MaxCount = Count: a
	// partial fleet is a capacity refusal, not a smaller test); 0 means 1.
	Count int
	// RequireEFA, when set, names the setting that needs EFA (`nodes = 2`): a candidate type
	// that takes no EFA interface is refused before anything is made.
	RequireEFA string
	// SubnetID, when set, places the instance (and the temporary security group's VPC);
	// otherwise the region's default VPC.
	SubnetID string
	// SecurityGroupIDs replace the temporary security group when set.
	SecurityGroupIDs         []string
	AssociatePublicIPAddress *bool
	IAMInstanceProfile       string
	// CapacityReservationPreference is "open", "none" or "capacity-reservations-only";
	// CapacityReservationID or CapacityReservationGroupARN instead targets one reservation
	// (ODCR or a Capacity Block for ML), as amazon-ebs's settings of the same names do. EC2
	// takes a preference or a target, not both.
	CapacityReservationPreference string
	CapacityReservationID         string
	CapacityReservationGroupARN   string
	// EFA is how many EFA interfaces the launch attaches, in the User Guide's layout
	// (PlanLayout): EFAAll for every one the instance type takes, 0 for none (one default
	// interface, as amazon-ebs launches), or a count. EFASetting names the setting that chose
	// it in errors and in what the judges are told (`efa = "all"`).
	EFA        int
	EFASetting string
	// PlacementGroup launches into an existing placement group; TemporaryPlacementGroup makes
	// a cluster placement group for the launch, removed with the instance.
	PlacementGroup          string
	TemporaryPlacementGroup bool
	// ElasticIP says when a temporary Elastic IP is associated with the primary interface once
	// the instance runs (and released by the cleanup): EC2 gives no public IP at launch to an
	// instance with several network interfaces.
	ElasticIP ElasticIPPolicy
	// MarketType "capacity-block" launches into the Capacity Block for ML that
	// CapacityReservationID (or CapacityReservationGroupARN) names: EC2 launches into one only
	// with InstanceMarketOptions.MarketType = capacity-block. Empty is on-demand.
	MarketType string
	// Fallbacks are tried in order after InstanceType in SubnetID, each only when EC2 refused
	// the one before for capacity (IsCapacity): instance_types and subnet_ids. Every subnet of
	// a launch with a temporary security group must be in one VPC, where the group is made.
	Fallbacks []Placement
	// SSHCIDR is the source the temporary security group admits on port 22.
	SSHCIDR string
	// SSHCIDRs are the sources the temporary security group admits on port 22, all in one
	// rule; when empty, SSHCIDR, else 0.0.0.0/0.
	SSHCIDRs []string
	// Metadata, when set, is the instance's MetadataOptions (the instance metadata service);
	// nil sends none (EC2 applies the account's defaults).
	Metadata *Metadata
	// UserData is the instance's user data, as the fleet's launch template would pass it
	// (sent base64-encoded, as RunInstances wants it).
	UserData []byte
	// Tags go on the instance and the temporaries, with RunTag and LaunchTag.
	Tags map[string]string
	// RunID names the run in RunTag (the Packer run UUID); empty means a generated id.
	RunID string
	// Poll is how often the instance's state is read, and the first backoff of every retry;
	// 0 means DefaultPoll.
	Poll time.Duration
	// CleanupTimeout bounds the cleanup, and each step of the launch; 0 means CleanupTimeout.
	CleanupTimeout time.Duration
	// CallTimeout bounds each EC2 call; 0 means CallTimeout.
	CallTimeout time.Duration
	// ProgressEvery is how often a long wait says what it waits for; 0 means
	// progress.DefaultEvery.
	ProgressEvery time.Duration
}

// patience is how s's calls are retried.
func (s Spec) patience() Patience {
	return Patience{Poll: s.Poll, Timeout: s.CleanupTimeout, CallTimeout: s.CallTimeout, ProgressEvery: s.ProgressEvery}
}

// Metadata is RunInstances' MetadataOptions: "" and 0 leave a field unsent.
type Metadata struct {
	HTTPEndpoint            string // enabled, disabled
	HTTPTokens              string // optional, required (IMDSv2 only)
	HTTPPutResponseHopLimit int32  // 1-64
	InstanceMetadataTags    string // enabled, disabled
}

// sshCIDRs are the sources the temporary security group admits.
func (s Spec) sshCIDRs() []string {
	if len(s.SSHCIDRs) > 0 {
		return s.SSHCIDRs
	}
	return []string{cmp.Or(s.SSHCIDR, "0.0.0.0/0")}
}

// ElasticIPPolicy says when a launch gets a temporary Elastic IP.
type ElasticIPPolicy int

const (
	// NoElasticIP never allocates one.
	NoElasticIP ElasticIPPolicy = iota
	// ElasticIPWhenSeveralInterfaces allocates one when the launch has several network
	// interfaces (EC2 then gives the instance no public IP), or when AssociatePublicIPAddress
	// asks for a public IP it cannot have at launch.
	ElasticIPWhenSeveralInterfaces
	// AlwaysElasticIP allocates one whatever the layout.
	AlwaysElasticIP
)

// Placement is one candidate of a launch: an instance type in a subnet ("" is the region's
// default VPC).
type Placement struct {
	InstanceType string
	SubnetID     string
}

func (p Placement) String() string {
	if p.SubnetID == "" {
		return p.InstanceType
	}
	return p.InstanceType + " in " + p.SubnetID
}

// Refusal is a candidate EC2 had no capacity for: its placement and EC2's error.
type Refusal struct {
	Placement
	Code    string
	Message string
}

// MarketCapacityBlock is the market type of a Capacity Block for ML launch.
const MarketCapacityBlock = "capacity-block"

// capacityCodes are RunInstances errors that say a candidate has no capacity now, so the next
// one is worth trying: no capacity of the type in the zone (InsufficientInstanceCapacity and
// its host and generic forms), a targeted reservation or Capacity Block without a free slot,
// and a type the zone does not offer (Unsupported).
var capacityCodes = []string{
	"InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientCapacityOnHost", "InsufficientHostCapacity",
	"InsufficientReservedInstanceCapacity", "ReservationCapacityExceeded", "Unsupported",
}

// IsCapacity reports whether err is EC2 refusing a launch for want of capacity (capacityCodes).
func IsCapacity(err error) bool { return slices.Contains(capacityCodes, awsaccess.APICode(err)) }

// Tags that name what a launch made, so that its cleanup can find it after an answer was lost
// and a person can find it in the console.
const (
	// RunTag is the run: the Packer run UUID, or a generated id.
	RunTag = "dlami:run"
	// LaunchTag is the one launch, and its RunInstances client token.
	LaunchTag = "dlami:launch"
)

// Instance is a running launched instance, and what its cleanup must remove.
type Instance struct {
	ID                    string
	PublicIP, PrivateIP   string
	PublicDNS, PrivateDNS string
	Signer                ssh.Signer
	// Placement is the candidate EC2 launched; Refused the ones before it that had no capacity.
	Placement Placement
	Refused   []Refusal
	// Layout is the launched candidate's network interfaces: how many EFA it attached.
	Layout Layout
	// SecurityGroups are the groups of its interfaces (the temporary one, or the user's).
	SecurityGroups []string
	// ElasticIP is the temporary Elastic IP associated with its primary interface, if any.
	ElasticIP string
	// SubnetID is the subnet EC2 describes the instance in.
	SubnetID string
	// DescribedEFA is how many EFA interfaces EC2 describes on the instance once it runs
	// (InterfaceType efa or efa-only): what it got, whatever the launch asked for.
	DescribedEFA int
	// LaunchTime is when EC2 says the instance launched (DescribeInstances' LaunchTime, read
	// once it runs). Terminated is when it stopped running for good, read by the cleanup when
	// EC2 describes it terminated: the time of the termination request EC2 gives in its
	// StateTransitionReason ("User initiated (2026-12-01 20:00:00 GMT)"), else the moment the
	// cleanup saw it terminated. Zero until then, and when the cleanup could not confirm the
	// termination. Together they are the instance's time (Lifetime).
	LaunchTime, Terminated time.Time
	// peers are the other instances of a launch of several (Spec.Count), in launch index
	// order; each holds only its own id, addresses and Elastic IP. The launch's temporaries
	// are the first instance's.
	peers []*Instance
	// node is the instance's place in its launch, from 1, on the Elastic IP's node tag.
	node int
	// keyName is set before CreateKeyPair is sent; groupName and vpc before
	// CreateSecurityGroup, securityGroup once it answered (or the group was found by name);
	// token before RunInstances.
	keyName, securityGroup string
	groupName, vpc         string
	token                  string
	api                    EC2API
	patience               Patience
	// launchID is the launch tag's value, set with the first token (the first candidate's
	// client token is launchID, each later one's launchID-N).
	launchID string
	// interfaces is set before a RunInstances that names network interfaces (an EFA layout):
	// the cleanup then looks for interfaces of the launch that outlived the instance.
	interfaces bool
	// placementGroup is the temporary placement group's name, set before it is created;
	// placementGroupUsed the group the instance was launched into.
	placementGroup, placementGroupUsed string
	// elasticIP is set before the Elastic IP is allocated; allocationID once it answered (or
	// the address was found by the launch tag).
	elasticIP    bool
	allocationID string
	// unanswered counts the AllocateAddress calls that failed after EC2 may have allocated
	// (mayHaveActed); extraAllocations are addresses found by the tags, not yet released.
	unanswered       int
	extraAllocations []string
	// primaryENI is the primary network interface, from DescribeInstances.
	primaryENI string
	// tags are the launch's, for what it makes after RunInstances.
	tags map[string]string
	// count is how many instances the launch asked for, set once RunInstances answered.
	count int
}

// PlacementGroup is the placement group the instance was launched into, if any.
func (in *Instance) PlacementGroup() string { return in.placementGroupUsed }

// Lifetime is the instance's time as the launch and its cleanup read it from EC2: Ended is
// zero while the cleanup has not confirmed its termination.
func (in *Instance) Lifetime() Lifetime {
	return Lifetime{InstanceID: in.ID, InstanceType: in.Placement.InstanceType, Launched: in.LaunchTime, Ended: in.Terminated}
}

// Nodes are the instances of the launch, in launch index order: in itself first, then the
// others of a launch of several (Spec.Count). Each has its own id and addresses and shares the
// launch's placement, layout, security groups and key.
func (in *Instance) Nodes() []*Instance {
	return append([]*Instance{in}, in.peers...)
}

// ids are the ids of every instance of the launch that has one.
func (in *Instance) ids() []string {
	var ids []string
	for _, n := range in.Nodes() {
		if n.ID != "" {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// SSHInterfaces are the values of ssh_interface, as amazon-ebs's: which address of the
// instance to connect to.
var SSHInterfaces = []string{"public_ip", "private_ip", "public_dns", "private_dns"}

// CheckSSHInterface refuses an ssh_interface that is not one of SSHInterfaces; empty is the
// default (the public IP, else the private one).
func CheckSSHInterface(iface string) error {
	if iface == "" || slices.Contains(SSHInterfaces, iface) {
		return nil
	}
	return fmt.Errorf("ssh_interface %q: use %s", iface, strings.Join(SSHInterfaces, ", "))
}

// Address returns the address to reach the instance over iface, one of SSHInterfaces; empty
// means the public IP when it has one, else the private one.
func (in *Instance) Address(iface string) (string, error) {
	if err := CheckSSHInterface(iface); err != nil {
		return "", err
	}
	v := map[string]string{"public_ip": in.PublicIP, "private_ip": in.PrivateIP, "public_dns": in.PublicDNS, "private_dns": in.PrivateDNS}[iface]
	if iface == "" {
		v = cmp.Or(in.PublicIP, in.PrivateIP)
	}
	if v == "" {
		return "", fmt.Errorf("instance %s has no %s address (ssh_interface = %q)", in.ID, cmp.Or(iface, "public or private IP"), iface)
	}
	return v, nil
}

// Launch creates the temporaries, runs the instance and waits until it is running. Before
// anything is made it reads the instance types' network cards (DescribeInstanceTypes) when
// the launch attaches EFA, and refuses the user's security groups that would not carry EFA
// traffic. Each step is retried while EC2 throttles, fails with a 5xx, drops the connection or
// does not answer, and is safe to try again after an answer was lost: a key pair that exists
// already is replaced (its private key went with the lost answer), a security group that
// exists already is looked up by its name and used, a rule or a placement group that exists
// already is success, RunInstances (every interface in one request) carries a client token,
// and an Elastic IP is looked up by the launch tag before a second is allocated. On error
// Launch has already cleaned up what it created, or what it may have created when an answer
// was lost; what the cleanup could not remove is named by a LeakError in the error. The
// returned Instance must be passed to Cleanup.
//
// The launch is a list of steps, in the manner of packer-plugin-amazon: each resource's step
// lives in its own file beside the undo the cleanup runs (keypair.go, securitygroup.go,
// placementgroup.go, instances.go, elasticip.go).
func Launch(ctx context.Context, api EC2API, s Spec, say func(string)) (*Instance, error) {
	b, err := newBuild(ctx, api, s)
	if err != nil {
		return nil, err
	}
	in := b.in
	for _, step := range []func(context.Context, func(string)) error{
		b.readVolumes, b.makeKeyPair, b.makeSecurityGroup, b.makePlacementGroup, b.runInstances, b.waitRunning, b.attachElasticIPs,
	} {
		if err := step(ctx, say); err != nil {
			if cerr := Cleanup(ctx, in, say); cerr != nil {
				err = fmt.Errorf("%w; cleaning up: %w", err, cerr)
			}
			return nil, err
		}
	}
	return in, nil
}

// build is one launch under way: its spec, the instance it fills in, and what the steps hand
// on to the next (the candidates' layouts, the security groups, the placement group).
type build struct {
	s          Spec
	in         *Instance
	suffix     string
	tags       map[string]string
	candidates []Placement
	layouts    map[string]Layout
	// efa: some candidate attaches EFA interfaces.
	efa bool
	// groups are the instance's security groups; placementGroup the group it launches into.
	groups         []string
	placementGroup string
	// vpc is the candidates' VPC, where the temporary security group is made.
	vpc string
	// volumes are the image's EBS mappings, each deleted on termination.
	volumes []types.BlockDeviceMapping
}

// newBuild checks, before anything is made, the network interfaces each candidate gets and
// whether the user's security groups carry EFA traffic, and names the launch.
func newBuild(ctx context.Context, api EC2API, s Spec) (*build, error) {
	suffix := randomSuffix()
	in := &Instance{api: api, patience: s.patience()}
	tags := maps.Clone(s.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[RunTag] = cmp.Or(s.RunID, "dlami-"+suffix)
	tags[LaunchTag] = "dlami-verify-" + suffix
	in.tags = tags
	b := &build{s: s, in: in, suffix: suffix, tags: tags, candidates: append([]Placement{{s.InstanceType, s.SubnetID}}, s.Fallbacks...)}
	var err error
	if b.layouts, err = in.planLayouts(ctx, s, b.candidates); err != nil {
		return nil, err
	}
	b.efa = slices.ContainsFunc(slices.Collect(maps.Values(b.layouts)), func(l Layout) bool { return l.EFA > 0 })
	if b.efa && len(s.SecurityGroupIDs) > 0 {
		if err := in.checkSelfTraffic(ctx, s.SecurityGroupIDs); err != nil {
			return nil, err
		}
	}
	// The candidates' subnets (and the VPC the temporary security group goes in): a subnet EC2
	// does not know is found here, before anything is made.
	if len(s.SecurityGroupIDs) == 0 || slices.ContainsFunc(b.candidates, func(c Placement) bool { return c.SubnetID != "" }) {
		err := in.step(ctx, func(ctx context.Context) (err error) {
			b.vpc, err = vpcOfAll(ctx, api, b.candidates)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// planLayouts is the network interfaces of each candidate's instance type, read from
// DescribeInstanceTypes once for all of them; none are asked for without EFA.
func (in *Instance) planLayouts(ctx context.Context, s Spec, candidates []Placement) (map[string]Layout, error) {
	out := map[string]Layout{}
	var typs []string
	for _, c := range candidates {
		out[c.InstanceType] = Layout{InstanceType: c.InstanceType, Interfaces: []Interface{{Type: InterfaceENA}}}
		typs = append(typs, c.InstanceType)
	}
	if s.EFA == 0 {
		return out, nil
	}
	setting := cmp.Or(s.EFASetting, "efa")
	var infos map[string]types.InstanceTypeInfo
	err := in.step(ctx, func(ctx context.Context) error {
		var err error
		infos, err = describeTypes(ctx, in.api, typs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: reading the network cards and EFA limits of %s: %w (set efa = \"none\" to launch without EFA)", setting, strings.Join(slices.Compact(slices.Clone(typs)), ", "), err)
	}
	for _, t := range typs {
		l, err := PlanLayout(infos[t], s.EFA, setting)
		if err != nil {
			return nil, err
		}
		if l.EFA == 0 && s.RequireEFA != "" {
			return nil, fmt.Errorf("%s: %s takes no EFA interface, and the test across nodes runs over EFA; list instance types with EFA", s.RequireEFA, t)
		}
		out[t] = l
	}
	return out, nil
}

// layoutHint says, after EC2 refused a launch with several interfaces, which layout it was.
func layoutHint(l Layout) string {
	if len(l.Interfaces) < 2 {
		return ""
	}
	return fmt.Sprintf(" (network interfaces, card/device type: %s; set efa to a count, or \"none\", to attach fewer)", l)
}

// step runs one step of a launch: f, one call bounded by the call timeout, retried while its
// error is transient, until the launch's context or the step's own deadline (the patience's
// Timeout) ends.
func (in *Instance) step(ctx context.Context, f func(context.Context) error) error {
	return in.stepCalls(ctx, func(ctx context.Context) error { return in.patience.call(ctx, f) })
}

// stepCalls is step for an f that makes several calls, each bounded by in.patience.call.
func (in *Instance) stepCalls(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, in.patience.timeout())
	defer cancel()
	return in.patience.retryCalls(ctx, lasting, f)
}

// errNotYet is a step that found EC2 not caught up yet (a security group EC2 says exists but
// does not list): transient, so the step tries again.
var errNotYet = errors.New("EC2 does not show it yet")

func tagSpec(rt types.ResourceType, tags map[string]string) []types.TagSpecification {
	if len(tags) == 0 {
		return nil
	}
	return []types.TagSpecification{{ResourceType: rt, Tags: toTags(tags)}}
}

func toTags(m map[string]string) []types.Tag {
	out := make([]types.Tag, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return strings.ToLower(hex.EncodeToString(b[:]))
}

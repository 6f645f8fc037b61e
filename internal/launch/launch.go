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
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"golang.org/x/crypto/ssh"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
	"github.com/dlami-bake/packer-plugin-dlami/internal/pause"
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

// notFoundTries is how often a termination is retried while EC2 does not know the instance
// id yet (it is eventually consistent just after RunInstances).
const notFoundTries = 5

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
	// primaryENI is the primary network interface, from DescribeInstances.
	primaryENI string
	// tags are the launch's, for what it makes after RunInstances.
	tags map[string]string
}

// PlacementGroup is the placement group the instance was launched into, if any.
func (in *Instance) PlacementGroup() string { return in.placementGroupUsed }

// Lifetime is the instance's time as the launch and its cleanup read it from EC2: Ended is
// zero while the cleanup has not confirmed its termination.
func (in *Instance) Lifetime() Lifetime {
	return Lifetime{InstanceID: in.ID, InstanceType: in.Placement.InstanceType, Launched: in.LaunchTime, Ended: in.Terminated}
}

// efaInterfaces counts the EFA interfaces EC2 describes on an instance.
func efaInterfaces(i types.Instance) int {
	n := 0
	for _, ni := range i.NetworkInterfaces {
		if t := aws.ToString(ni.InterfaceType); t == InterfaceEFA || t == InterfaceEFAOnly {
			n++
		}
	}
	return n
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

// NodeTag numbers each instance's Elastic IP in a launch of several: a lost AllocateAddress
// answer is found again by it.
const NodeTag = "dlami:node"

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
// and an Elastic IP is looked up by the launch tag before a second is allocated. On error Launch has already cleaned up what it created, or what it
// may have created when an answer was lost; what the cleanup could not remove is named by a
// LeakError in the error. The returned Instance must be passed to Cleanup.
func Launch(ctx context.Context, api EC2API, s Spec, say func(string)) (*Instance, error) {
	suffix := randomSuffix()
	in := &Instance{api: api, patience: s.patience()}
	tags := maps.Clone(s.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[RunTag] = cmp.Or(s.RunID, "dlami-"+suffix)
	tags[LaunchTag] = "dlami-verify-" + suffix
	in.tags = tags
	fail := func(err error) (*Instance, error) {
		if cerr := Cleanup(ctx, in, say); cerr != nil {
			err = fmt.Errorf("%w; cleaning up: %w", err, cerr)
		}
		return nil, err
	}
	candidates := append([]Placement{{s.InstanceType, s.SubnetID}}, s.Fallbacks...)

	// Before anything is made: the network interfaces each candidate gets, and whether the
	// user's security groups carry EFA traffic.
	layouts, err := in.planLayouts(ctx, s, candidates)
	if err != nil {
		return nil, err
	}
	efa := slices.ContainsFunc(slices.Collect(maps.Values(layouts)), func(l Layout) bool { return l.EFA > 0 })
	if efa && len(s.SecurityGroupIDs) > 0 {
		if err := in.checkSelfTraffic(ctx, s.SecurityGroupIDs); err != nil {
			return nil, err
		}
	}

	// As amazon-ebs does: EC2 makes the key pair and hands back the private key once. The
	// name is kept before the call: a lost answer may still have made the key pair.
	in.keyName = "dlami-verify-" + suffix
	if err := in.createKeyPair(ctx, tags); err != nil {
		return fail(fmt.Errorf("creating the temporary key pair %s: %w", in.keyName, err))
	}
	say("created temporary key pair " + in.keyName)

	groups := s.SecurityGroupIDs
	if len(groups) == 0 {
		var vpc string
		err := in.step(ctx, func(ctx context.Context) error {
			var err error
			vpc, err = vpcOfAll(ctx, api, candidates)
			return err
		})
		if err != nil {
			return fail(err)
		}
		in.groupName, in.vpc = "dlami-verify-"+suffix, vpc
		if err := in.createGroup(ctx, tags); err != nil {
			return fail(fmt.Errorf("creating the temporary security group %s: %w", in.groupName, err))
		}
		say("created temporary security group " + in.securityGroup)
		if err := in.openGroup(ctx, s.sshCIDRs(), efa); err != nil {
			return fail(fmt.Errorf("opening %s: %w", in.securityGroup, err))
		}
		groups = []string{in.securityGroup}
	}
	in.SecurityGroups = groups

	placementGroup := s.PlacementGroup
	if s.TemporaryPlacementGroup {
		// Its name is kept before the call: a lost answer may still have made it.
		in.placementGroup = "dlami-verify-" + suffix
		if err := in.createPlacementGroup(ctx, tags); err != nil {
			return fail(fmt.Errorf("creating the temporary placement group %s: %w", in.placementGroup, err))
		}
		say("created temporary cluster placement group " + in.placementGroup)
		placementGroup = in.placementGroup
	}

	// The client token makes a retry of a launch whose answer was lost (the SDK's or this
	// step's) the same launch, not a second instance; the launch tag finds it when no answer
	// came at all. One RunInstances attaches every interface of the layout.
	in.launchID = tags[LaunchTag]
	var out *ec2.RunInstancesOutput
	for i, c := range candidates {
		one := s
		one.InstanceType, one.SubnetID = c.InstanceType, c.SubnetID
		layout := layouts[c.InstanceType]
		run := runInput(one, in.keyName, groups, placementGroup, layout, tags)
		if len(run.NetworkInterfaces) > 1 {
			in.interfaces = true
		}
		in.token = in.launchID
		if i > 0 {
			in.token = fmt.Sprintf("%s-%d", in.launchID, i+1)
		}
		run.ClientToken = aws.String(in.token)
		last := i == len(candidates)-1
		var optFns []func(*ec2.Options)
		if !last {
			// The next candidate is the retry: a capacity refusal falls through at once instead
			// of spending the SDK's attempts on a zone that has none.
			optFns = append(optFns, func(o *ec2.Options) {
				if r, ok := o.Retryer.(aws.RetryerV2); ok {
					o.Retryer = finalOnCapacity{r}
				}
			})
		}
		err := in.step(ctx, func(ctx context.Context) error {
			var err error
			out, err = api.RunInstances(ctx, run, optFns...)
			return err
		})
		if err == nil {
			in.Placement, in.Layout, in.placementGroupUsed = c, layout, placementGroup
			break
		}
		if !IsCapacity(err) {
			return fail(fmt.Errorf("launching %s from %s: %w%s%s", c, s.ImageID, err, capacityHint(err), layoutHint(layout)))
		}
		in.Refused = append(in.Refused, Refusal{Placement: c, Code: awsaccess.APICode(err), Message: awsaccess.APIMessage(err)})
		if last {
			return fail(&CapacityError{Refused: in.Refused, Err: fmt.Errorf("launching %s from %s: %w%s", c, s.ImageID, err, capacityHint(err))})
		}
		say(fmt.Sprintf("no capacity for %s (%s); trying %s", c, awsaccess.APICode(err), candidates[i+1]))
	}
	count := max(s.Count, 1)
	launched := slices.Clone(out.Instances)
	slices.SortFunc(launched, func(a, b types.Instance) int {
		return int(aws.ToInt32(a.AmiLaunchIndex) - aws.ToInt32(b.AmiLaunchIndex))
	})
	for i, li := range launched {
		n := in
		if i > 0 {
			n = &Instance{api: api, patience: in.patience, launchID: in.launchID, tags: in.tags, Placement: in.Placement, Layout: in.Layout,
				SecurityGroups: in.SecurityGroups, Signer: in.Signer, placementGroupUsed: in.placementGroupUsed}
			in.peers = append(in.peers, n)
		}
		n.ID, n.node = aws.ToString(li.InstanceId), i+1
	}
	if len(out.Instances) != count {
		// MinCount = MaxCount: EC2 launches all or none. Anything else is not a fleet to test.
		return fail(fmt.Errorf("RunInstances returned %d instances, asked for %d", len(out.Instances), count))
	}
	attached := ""
	if in.Layout.EFA > 0 {
		attached = fmt.Sprintf(", %d EFA interfaces each: %s", in.Layout.EFA, in.Layout)
	}
	say(fmt.Sprintf("launched %s (%s from %s%s); waiting until it runs", strings.Join(in.ids(), ", "), in.Placement, s.ImageID, attached))
	for _, n := range in.Nodes() {
		if err := n.waitRunning(ctx, say); err != nil {
			return fail(err)
		}
	}
	if s.wantsElasticIP(in.Layout) {
		for _, n := range in.Nodes() {
			if err := n.attachElasticIP(ctx, say); err != nil {
				return fail(err)
			}
		}
	}
	return in, nil
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

// wantsElasticIP reports whether the launch gets a temporary Elastic IP.
func (s Spec) wantsElasticIP(l Layout) bool {
	switch s.ElasticIP {
	case AlwaysElasticIP:
		return true
	case ElasticIPWhenSeveralInterfaces:
		return len(l.Interfaces) > 1
	}
	return false
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

// createKeyPair makes the temporary key pair and keeps its private key. EC2 hands the private
// key out once: when an earlier try's answer was lost, the retry meets InvalidKeyPair.Duplicate
// and the key pair, which carries this launch's own name, is replaced.
func (in *Instance) createKeyPair(ctx context.Context, tags map[string]string) error {
	create := &ec2.CreateKeyPairInput{
		KeyName: aws.String(in.keyName), KeyType: types.KeyTypeEd25519,
		TagSpecifications: tagSpec(types.ResourceTypeKeyPair, tags),
	}
	var kp *ec2.CreateKeyPairOutput
	createKey := func(ctx context.Context) (err error) {
		kp, err = in.api.CreateKeyPair(ctx, create)
		return err
	}
	return in.stepCalls(ctx, func(ctx context.Context) error {
		err := in.patience.call(ctx, createKey)
		if awsaccess.APICode(err) == "InvalidKeyPair.Duplicate" {
			if err := in.patience.call(ctx, func(ctx context.Context) error {
				_, err := in.api.DeleteKeyPair(ctx, &ec2.DeleteKeyPairInput{KeyName: aws.String(in.keyName)})
				return err
			}); err != nil {
				return fmt.Errorf("replacing the key pair an unanswered try made: %w", err)
			}
			err = in.patience.call(ctx, createKey)
		}
		if err != nil {
			return err
		}
		signer, err := ssh.ParsePrivateKey([]byte(aws.ToString(kp.KeyMaterial)))
		if err != nil {
			return fmt.Errorf("the temporary key pair's private key is unreadable: %w", err)
		}
		in.Signer = signer
		return nil
	})
}

// createGroup makes the temporary security group. When an earlier try's answer was lost, the
// retry meets InvalidGroup.Duplicate: the group, which carries this launch's own name, is
// looked up and used.
func (in *Instance) createGroup(ctx context.Context, tags map[string]string) error {
	return in.stepCalls(ctx, func(ctx context.Context) error {
		var out *ec2.CreateSecurityGroupOutput
		err := in.patience.call(ctx, func(ctx context.Context) (err error) {
			out, err = in.api.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
				GroupName: aws.String(in.groupName), Description: aws.String("Temporary: SSH for the dlami post-processor's first-boot check"),
				VpcId: aws.String(in.vpc), TagSpecifications: tagSpec(types.ResourceTypeSecurityGroup, tags),
			})
			return err
		})
		if awsaccess.APICode(err) == "InvalidGroup.Duplicate" {
			var id string
			ferr := in.patience.call(ctx, func(ctx context.Context) (err error) {
				id, err = in.lookupGroup(ctx)
				return err
			})
			switch {
			case ferr != nil:
				return fmt.Errorf("finding the group an unanswered try made: %w", ferr)
			case id == "":
				return fmt.Errorf("%w: %w", errNotYet, err)
			}
			in.securityGroup = id
			return nil
		}
		if err != nil {
			return err
		}
		in.securityGroup = aws.ToString(out.GroupId)
		return nil
	})
}

// openGroup admits cidrs on port 22 of the temporary group, in one rule, and, for a launch with
// EFA, all traffic from and to the group itself, which EFA's OS-bypass traffic needs (EC2 User
// Guide, "Get started with EFA", step 1): one ingress call for both inbound rules, one egress
// call. A rule an earlier try added (its answer lost) is InvalidPermission.Duplicate: success.
func (in *Instance) openGroup(ctx context.Context, cidrs []string, efa bool) error {
	var ranges []types.IpRange
	for _, c := range cidrs {
		ranges = append(ranges, types.IpRange{CidrIp: aws.String(c)})
	}
	ingress := []types.IpPermission{{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(22), ToPort: aws.Int32(22), IpRanges: ranges}}
	self := types.IpPermission{IpProtocol: aws.String("-1"), UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String(in.securityGroup)}}}
	if efa {
		ingress = append(ingress, self)
	}
	err := in.step(ctx, func(ctx context.Context) error {
		_, err := in.api.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(in.securityGroup), IpPermissions: ingress})
		if awsaccess.APICode(err) == "InvalidPermission.Duplicate" {
			return nil
		}
		return err
	})
	if err != nil || !efa {
		return err
	}
	return in.step(ctx, func(ctx context.Context) error {
		_, err := in.api.AuthorizeSecurityGroupEgress(ctx, &ec2.AuthorizeSecurityGroupEgressInput{GroupId: aws.String(in.securityGroup), IpPermissions: []types.IpPermission{self}})
		if awsaccess.APICode(err) == "InvalidPermission.Duplicate" {
			return nil
		}
		return err
	})
}

// lookupGroup returns the id of the temporary security group, found by its name in its VPC,
// or "" when EC2 lists none.
func (in *Instance) lookupGroup(ctx context.Context) (string, error) {
	out, err := in.api.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []types.Filter{
		{Name: aws.String("group-name"), Values: []string{in.groupName}},
		{Name: aws.String("vpc-id"), Values: []string{in.vpc}},
	}})
	if err != nil || len(out.SecurityGroups) == 0 {
		return "", err
	}
	return aws.ToString(out.SecurityGroups[0].GroupId), nil
}

// CapacityError is a launch whose every candidate EC2 refused for capacity.
type CapacityError struct {
	Refused []Refusal
	Err     error
}

func (e *CapacityError) Error() string {
	if len(e.Refused) < 2 {
		return e.Err.Error()
	}
	var tried []string
	for _, r := range e.Refused {
		tried = append(tried, fmt.Sprintf("%s: %s", r.Placement, r.Code))
	}
	return fmt.Sprintf("no candidate had capacity (%s): %v", strings.Join(tried, "; "), e.Err)
}

func (e *CapacityError) Unwrap() error { return e.Err }

// finalOnCapacity is a retryer that does not retry a capacity refusal.
type finalOnCapacity struct{ aws.RetryerV2 }

func (r finalOnCapacity) IsErrorRetryable(err error) bool {
	return !IsCapacity(err) && r.RetryerV2.IsErrorRetryable(err)
}

// runInput is the RunInstances request of s: every interface of layout in one request, in
// placementGroup when it is set.
func runInput(s Spec, keyName string, groups []string, placementGroup string, layout Layout, tags map[string]string) *ec2.RunInstancesInput {
	run := &ec2.RunInstancesInput{
		ImageId: aws.String(s.ImageID), InstanceType: types.InstanceType(s.InstanceType),
		MinCount: aws.Int32(int32(max(s.Count, 1))), MaxCount: aws.Int32(int32(max(s.Count, 1))), KeyName: aws.String(keyName),
		TagSpecifications: tagSpec(types.ResourceTypeInstance, tags),
	}
	switch {
	case len(layout.Interfaces) > 1:
		// EC2 refuses AssociatePublicIpAddress with several interfaces ("cannot be specified
		// when launching with multiple network interfaces") and gives such an instance no
		// public IP: it is not sent (an Elastic IP, a bastion or the private address reach the
		// instance). The interfaces carry the launch tag, so that any of them left after the
		// instance is found.
		for _, i := range layout.Interfaces {
			ni := types.InstanceNetworkInterfaceSpecification{
				NetworkCardIndex: aws.Int32(int32(i.Card)), DeviceIndex: aws.Int32(int32(i.Device)), InterfaceType: aws.String(i.Type),
				Groups: groups, DeleteOnTermination: aws.Bool(true),
			}
			if s.SubnetID != "" {
				ni.SubnetId = aws.String(s.SubnetID)
			}
			run.NetworkInterfaces = append(run.NetworkInterfaces, ni)
		}
		run.TagSpecifications = append(run.TagSpecifications, tagSpec(types.ResourceTypeNetworkInterface, tags)...)
	case s.SubnetID != "" || s.AssociatePublicIPAddress != nil:
		ni := types.InstanceNetworkInterfaceSpecification{DeviceIndex: aws.Int32(0), Groups: groups, DeleteOnTermination: aws.Bool(true)}
		if s.SubnetID != "" {
			ni.SubnetId = aws.String(s.SubnetID)
		}
		ni.AssociatePublicIpAddress = s.AssociatePublicIPAddress
		run.NetworkInterfaces = []types.InstanceNetworkInterfaceSpecification{ni}
	default:
		run.SecurityGroupIds = groups
	}
	if placementGroup != "" {
		run.Placement = &types.Placement{GroupName: aws.String(placementGroup)}
	}
	if s.IAMInstanceProfile != "" {
		run.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: aws.String(s.IAMInstanceProfile)}
	}
	if s.CapacityReservationPreference != "" || s.CapacityReservationID != "" || s.CapacityReservationGroupARN != "" {
		crs := &types.CapacityReservationSpecification{}
		if s.CapacityReservationPreference != "" {
			crs.CapacityReservationPreference = types.CapacityReservationPreference(s.CapacityReservationPreference)
		}
		if s.CapacityReservationID != "" || s.CapacityReservationGroupARN != "" {
			crs.CapacityReservationTarget = &types.CapacityReservationTarget{}
			if s.CapacityReservationID != "" {
				crs.CapacityReservationTarget.CapacityReservationId = aws.String(s.CapacityReservationID)
			}
			if s.CapacityReservationGroupARN != "" {
				crs.CapacityReservationTarget.CapacityReservationResourceGroupArn = aws.String(s.CapacityReservationGroupARN)
			}
		}
		run.CapacityReservationSpecification = crs
	}
	if m := s.Metadata; m != nil {
		mo := &types.InstanceMetadataOptionsRequest{
			HttpEndpoint: types.InstanceMetadataEndpointState(m.HTTPEndpoint), HttpTokens: types.HttpTokensState(m.HTTPTokens),
			InstanceMetadataTags: types.InstanceMetadataTagsState(m.InstanceMetadataTags),
		}
		if m.HTTPPutResponseHopLimit != 0 {
			mo.HttpPutResponseHopLimit = aws.Int32(m.HTTPPutResponseHopLimit)
		}
		run.MetadataOptions = mo
	}
	if len(s.UserData) > 0 {
		run.UserData = aws.String(base64.StdEncoding.EncodeToString(s.UserData))
	}
	if s.MarketType != "" {
		run.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketType(s.MarketType)}
	}
	return run
}

func capacityHint(err error) string {
	if IsCapacity(err) {
		return " (GPU capacity is scarce: target an On-Demand Capacity Reservation or a Capacity Block with capacity_reservation_id / capacity_reservation_group_arn (market_type = \"capacity-block\" for a Capacity Block), or list more instance_types or subnet_ids to try in order)"
	}
	return ""
}

// vpcOfAll is the one VPC of the candidates' subnets, where the temporary security group is
// made: the default VPC when no subnet is named.
func vpcOfAll(ctx context.Context, api EC2API, candidates []Placement) (string, error) {
	var subnets []string
	named := 0
	for _, c := range candidates {
		if c.SubnetID != "" {
			named++
			if !slices.Contains(subnets, c.SubnetID) {
				subnets = append(subnets, c.SubnetID)
			}
		}
	}
	if named != 0 && named != len(candidates) {
		return "", errors.New("some candidates name a subnet and some do not: name one for each (subnet_ids) or none (the default VPC)")
	}
	if len(subnets) == 0 {
		return vpcOf(ctx, api, "")
	}
	out, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: subnets})
	if err != nil {
		if len(subnets) == 1 {
			return "", fmt.Errorf("subnet_id %s: %w", subnets[0], err)
		}
		return "", fmt.Errorf("subnet_ids %s: %w", strings.Join(subnets, ", "), err)
	}
	if len(out.Subnets) != len(subnets) {
		return "", fmt.Errorf("subnet_id(s) %s: EC2 found %d of them", strings.Join(subnets, ", "), len(out.Subnets))
	}
	vpcs := map[string][]string{}
	for _, sn := range out.Subnets {
		v := aws.ToString(sn.VpcId)
		vpcs[v] = append(vpcs[v], aws.ToString(sn.SubnetId))
	}
	if len(vpcs) != 1 {
		var parts []string
		for _, v := range slices.Sorted(maps.Keys(vpcs)) {
			parts = append(parts, v+": "+strings.Join(vpcs[v], ", "))
		}
		return "", fmt.Errorf("subnet_ids are in %d VPCs (%s): the temporary security group is made in one; list subnets of one VPC, or set security_group_ids", len(vpcs), strings.Join(parts, "; "))
	}
	return aws.ToString(out.Subnets[0].VpcId), nil
}

func vpcOf(ctx context.Context, api EC2API, subnet string) (string, error) {
	if subnet != "" {
		out, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{subnet}})
		if err != nil {
			return "", fmt.Errorf("subnet_id %s: %w", subnet, err)
		}
		if len(out.Subnets) != 1 {
			return "", fmt.Errorf("subnet_id %s: not found", subnet)
		}
		return aws.ToString(out.Subnets[0].VpcId), nil
	}
	out, err := api.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []types.Filter{{Name: aws.String("is-default"), Values: []string{"true"}}}})
	if err != nil {
		return "", fmt.Errorf("finding the default VPC: %w", err)
	}
	if len(out.Vpcs) == 0 {
		return "", errors.New("the region has no default VPC: set subnet_id")
	}
	return aws.ToString(out.Vpcs[0].VpcId), nil
}

func (in *Instance) describe(ctx context.Context) (types.Instance, error) {
	out, err := in.api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{in.ID}})
	if err != nil {
		return types.Instance{}, err
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			if aws.ToString(i.InstanceId) == in.ID {
				return i, nil
			}
		}
	}
	return types.Instance{}, fmt.Errorf("instance %s: not found", in.ID)
}

// waitRunning waits until EC2 describes the instance running, saying at the patience's pace
// what it waits for (the state EC2 last gave) while it takes long.
func (in *Instance) waitRunning(ctx context.Context, say func(string)) error {
	var state atomic.Value
	state.Store("no answer yet")
	var limit time.Duration
	if d, ok := ctx.Deadline(); ok {
		limit = time.Until(d)
	}
	stop := in.patience.pace().Waiting(say, func() string {
		return fmt.Sprintf("%s to run (EC2 says: %s)", in.ID, state.Load())
	}, limit)
	defer stop()
	for {
		var i types.Instance
		err := in.patience.call(ctx, func(ctx context.Context) error {
			var err error
			i, err = in.describe(ctx)
			return err
		})
		if denied(err) {
			// A missing permission does not grant itself by waiting.
			return fmt.Errorf("instance %s: reading its state: %w", in.ID, err)
		}
		if err != nil {
			state.Store(err.Error())
		}
		if err == nil && i.State != nil {
			state.Store(string(i.State.Name))
			switch i.State.Name {
			case types.InstanceStateNameRunning:
				in.PublicIP, in.PrivateIP = aws.ToString(i.PublicIpAddress), aws.ToString(i.PrivateIpAddress)
				in.PublicDNS, in.PrivateDNS = aws.ToString(i.PublicDnsName), aws.ToString(i.PrivateDnsName)
				in.primaryENI = primaryInterface(i)
				in.DescribedEFA = efaInterfaces(i)
				in.SubnetID = aws.ToString(i.SubnetId)
				in.LaunchTime = aws.ToTime(i.LaunchTime).UTC()
				return nil
			case types.InstanceStateNameTerminated, types.InstanceStateNameShuttingDown, types.InstanceStateNameStopped:
				reason := ""
				if i.StateReason != nil {
					reason = ": " + aws.ToString(i.StateReason.Message)
				}
				return fmt.Errorf("instance %s is %s instead of running%s", in.ID, i.State.Name, reason)
			}
		}
		if err := pause.Sleep(ctx, in.patience.poll()); err != nil {
			return fmt.Errorf("instance %s did not reach running: %w", in.ID, err)
		}
	}
}

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

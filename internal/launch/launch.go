// Package launch starts a throwaway instance from an AMI to check its first boot, and always
// takes it down again: a temporary key pair and security group, RunInstances with the launch
// settings a user of the amazon plugin expects (and a client token, so that a retried launch
// is the same launch), waiting until it runs, and a cleanup that terminates it and deletes the
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
}

// Spec is what to launch.
type Spec struct {
	ImageID      string
	InstanceType string
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
	// Poll is how often the instance's state is read, and the first backoff of the cleanup's
	// retries; 0 means 5 s.
	Poll time.Duration
	// CleanupTimeout bounds the cleanup; 0 means CleanupTimeout.
	CleanupTimeout time.Duration
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

const (
	// CleanupTimeout is how long a cleanup keeps retrying, detached from the cancellation of
	// the run that launched: termination takes a minute or two, and EC2 refuses to delete the
	// security group until the instance's network interface is gone.
	CleanupTimeout = 10 * time.Minute
	// CallTimeout bounds each EC2 call of a cleanup, of a launch that was cancelled, and of
	// tagging and deregistration, so that one call that never answers cannot use up the
	// cleanup's time (awsaccess.HTTPTimeout bounds each HTTP attempt inside it).
	CallTimeout = time.Minute
	// notFoundTries is how often a termination is retried while EC2 does not know the
	// instance id yet (it is eventually consistent just after RunInstances).
	notFoundTries = 5
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
	// keyName is set before CreateKeyPair is sent; groupName and vpc before
	// CreateSecurityGroup, securityGroup once it answered; token before RunInstances.
	keyName, securityGroup string
	groupName, vpc         string
	token                  string
	api                    EC2API
	poll, cleanupTimeout   time.Duration
	// launchID is the launch tag's value, set with the first token (the first candidate's
	// client token is launchID, each later one's launchID-N).
	launchID string
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

// Launch creates the temporaries, runs the instance and waits until it is running. On error
// it has already cleaned up what it created, or what it may have created when an answer was
// lost; an instance it could not confirm terminated is named by a NotTerminatedError in the
// error. The returned Instance must be passed to Cleanup.
func Launch(ctx context.Context, api EC2API, s Spec, say func(string)) (*Instance, error) {
	suffix := randomSuffix()
	in := &Instance{api: api, poll: cmp.Or(s.Poll, 5*time.Second), cleanupTimeout: cmp.Or(s.CleanupTimeout, CleanupTimeout)}
	tags := maps.Clone(s.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[RunTag] = cmp.Or(s.RunID, "dlami-"+suffix)
	tags[LaunchTag] = "dlami-verify-" + suffix
	fail := func(err error) (*Instance, error) {
		if cerr := Cleanup(ctx, in, say); cerr != nil {
			err = fmt.Errorf("%w; cleaning up: %w", err, cerr)
		}
		return nil, err
	}

	// As amazon-ebs does: EC2 makes the key pair and hands back the private key once. The
	// name is kept before the call: a lost answer may still have made the key pair.
	in.keyName = "dlami-verify-" + suffix
	kp, err := api.CreateKeyPair(ctx, &ec2.CreateKeyPairInput{
		KeyName: aws.String(in.keyName), KeyType: types.KeyTypeEd25519,
		TagSpecifications: tagSpec(types.ResourceTypeKeyPair, tags),
	})
	if err != nil {
		return fail(fmt.Errorf("creating the temporary key pair: %w", err))
	}
	if in.Signer, err = ssh.ParsePrivateKey([]byte(aws.ToString(kp.KeyMaterial))); err != nil {
		return fail(fmt.Errorf("the temporary key pair's private key is unreadable: %w", err))
	}
	say("created temporary key pair " + in.keyName)

	candidates := append([]Placement{{s.InstanceType, s.SubnetID}}, s.Fallbacks...)
	groups := s.SecurityGroupIDs
	if len(groups) == 0 {
		vpc, err := vpcOfAll(ctx, api, candidates)
		if err != nil {
			return fail(err)
		}
		in.groupName, in.vpc = "dlami-verify-"+suffix, vpc
		out, err := api.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
			GroupName: aws.String(in.groupName), Description: aws.String("Temporary: SSH for the dlami post-processor's first-boot check"),
			VpcId: aws.String(vpc), TagSpecifications: tagSpec(types.ResourceTypeSecurityGroup, tags),
		})
		if err != nil {
			return fail(fmt.Errorf("creating the temporary security group: %w", err))
		}
		in.securityGroup = aws.ToString(out.GroupId)
		say("created temporary security group " + in.securityGroup)
		var ranges []types.IpRange
		for _, c := range s.sshCIDRs() {
			ranges = append(ranges, types.IpRange{CidrIp: aws.String(c)})
		}
		if _, err := api.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{
			GroupId:       aws.String(in.securityGroup),
			IpPermissions: []types.IpPermission{{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(22), ToPort: aws.Int32(22), IpRanges: ranges}},
		}); err != nil {
			return fail(fmt.Errorf("opening port 22 in %s: %w", in.securityGroup, err))
		}
		groups = []string{in.securityGroup}
	}

	// The client token makes the SDK's retry of a launch whose answer was lost the same
	// launch, not a second instance; the launch tag finds it when no answer came at all.
	in.launchID = tags[LaunchTag]
	var out *ec2.RunInstancesOutput
	for i, c := range candidates {
		one := s
		one.InstanceType, one.SubnetID = c.InstanceType, c.SubnetID
		run := runInput(one, in.keyName, groups, tags)
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
		out, err = api.RunInstances(ctx, run, optFns...)
		if err == nil {
			in.Placement = c
			break
		}
		if !IsCapacity(err) {
			return fail(fmt.Errorf("launching %s from %s: %w%s", c, s.ImageID, err, capacityHint(err)))
		}
		in.Refused = append(in.Refused, Refusal{Placement: c, Code: awsaccess.APICode(err), Message: awsaccess.APIMessage(err)})
		if last {
			return fail(&CapacityError{Refused: in.Refused, Err: fmt.Errorf("launching %s from %s: %w%s", c, s.ImageID, err, capacityHint(err))})
		}
		say(fmt.Sprintf("no capacity for %s (%s); trying %s", c, awsaccess.APICode(err), candidates[i+1]))
	}
	if len(out.Instances) != 1 {
		return fail(fmt.Errorf("RunInstances returned %d instances", len(out.Instances)))
	}
	in.ID = aws.ToString(out.Instances[0].InstanceId)
	say(fmt.Sprintf("launched %s (%s from %s); waiting until it runs", in.ID, in.Placement, s.ImageID))
	if err := in.waitRunning(ctx); err != nil {
		return fail(err)
	}
	return in, nil
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

// runInput is the RunInstances request of s.
func runInput(s Spec, keyName string, groups []string, tags map[string]string) *ec2.RunInstancesInput {
	run := &ec2.RunInstancesInput{
		ImageId: aws.String(s.ImageID), InstanceType: types.InstanceType(s.InstanceType),
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), KeyName: aws.String(keyName),
		TagSpecifications: tagSpec(types.ResourceTypeInstance, tags),
	}
	if s.SubnetID != "" || s.AssociatePublicIPAddress != nil {
		ni := types.InstanceNetworkInterfaceSpecification{DeviceIndex: aws.Int32(0), Groups: groups, DeleteOnTermination: aws.Bool(true)}
		if s.SubnetID != "" {
			ni.SubnetId = aws.String(s.SubnetID)
		}
		ni.AssociatePublicIpAddress = s.AssociatePublicIPAddress
		run.NetworkInterfaces = []types.InstanceNetworkInterfaceSpecification{ni}
	} else {
		run.SecurityGroupIds = groups
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

func (in *Instance) waitRunning(ctx context.Context) error {
	for {
		i, err := in.describe(ctx)
		if err == nil && i.State != nil {
			switch i.State.Name {
			case types.InstanceStateNameRunning:
				in.PublicIP, in.PrivateIP = aws.ToString(i.PublicIpAddress), aws.ToString(i.PrivateIpAddress)
				in.PublicDNS, in.PrivateDNS = aws.ToString(i.PublicDnsName), aws.ToString(i.PrivateDnsName)
				return nil
			case types.InstanceStateNameTerminated, types.InstanceStateNameShuttingDown, types.InstanceStateNameStopped:
				reason := ""
				if i.StateReason != nil {
					reason = ": " + aws.ToString(i.StateReason.Message)
				}
				return fmt.Errorf("instance %s is %s instead of running%s", in.ID, i.State.Name, reason)
			}
		}
		if err := pause.Sleep(ctx, in.poll); err != nil {
			return fmt.Errorf("instance %s did not reach running: %w", in.ID, err)
		}
	}
}

// NotTerminatedError names instances a cleanup could not confirm terminated by its deadline:
// they are still running, and billed, until someone terminates them.
type NotTerminatedError struct {
	IDs []string
	Err error
}

func (e *NotTerminatedError) Error() string {
	return fmt.Sprintf("%s not confirmed terminated: %v", strings.Join(e.IDs, ", "), e.Err)
}

func (e *NotTerminatedError) Unwrap() error { return e.Err }

// NotTerminated returns the instances err says are still running, if any.
func NotTerminated(err error) []string {
	var nt *NotTerminatedError
	if errors.As(err, &nt) {
		return nt.IDs
	}
	return nil
}

// Cleanup terminates the instance and deletes the temporary security group and key pair, and
// what a launch whose answer was lost may have made. It runs detached from ctx's cancellation
// (a cancelled run must still clean up) for at most the launch's CleanupTimeout, bounds each
// call by CallTimeout, and retries throttled and failed calls with backoff until then. It is
// safe on a partly launched Instance and on nil, keeps going past errors and returns them all;
// an instance it could not confirm terminated is named by a NotTerminatedError.
func Cleanup(ctx context.Context, in *Instance, say func(string)) error {
	if in == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(in.cleanupTimeout, CleanupTimeout))
	defer cancel()
	var errs []error
	ids, err := in.launched(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	if len(ids) > 0 {
		if err := in.terminate(ctx, ids, say); err != nil {
			errs = append(errs, &NotTerminatedError{IDs: ids, Err: err})
		}
	}
	if in.securityGroup == "" && in.groupName != "" {
		// CreateSecurityGroup went out without an answer: find the group by its name.
		id, err := in.findGroup(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		in.securityGroup = id
	}
	if in.securityGroup != "" {
		// EC2 refuses while the instance's network interface lingers (DependencyViolation).
		err := in.retry(ctx, func(ctx context.Context) error {
			_, err := in.api.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(in.securityGroup)})
			if strings.HasPrefix(awsaccess.APICode(err), "InvalidGroup.NotFound") {
				return nil
			}
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting security group %s: %w", in.securityGroup, err))
		} else {
			say("deleted temporary security group " + in.securityGroup)
		}
	}
	if in.keyName != "" {
		// EC2 answers success for a key pair that does not exist.
		err := in.retry(ctx, func(ctx context.Context) error {
			_, err := in.api.DeleteKeyPair(ctx, &ec2.DeleteKeyPairInput{KeyName: aws.String(in.keyName)})
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting key pair %s: %w", in.keyName, err))
		} else {
			say("deleted temporary key pair " + in.keyName)
		}
	}
	return errors.Join(errs...)
}

// launched is the instance to terminate: the one RunInstances answered with, else those a
// RunInstances without an answer made, found by the launch tag.
func (in *Instance) launched(ctx context.Context) ([]string, error) {
	if in.ID != "" {
		return []string{in.ID}, nil
	}
	if in.token == "" {
		return nil, nil
	}
	// Every candidate's instance carries the one launch tag.
	var ids []string
	err := in.retry(ctx, func(ctx context.Context) error {
		ids = nil
		out, err := in.api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{
			{Name: aws.String("tag:" + LaunchTag), Values: []string{in.launchID}},
			{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}},
		}})
		if err != nil {
			return err
		}
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				ids = append(ids, aws.ToString(i.InstanceId))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finding the instance of launch %s (%s = %s) after RunInstances failed: %w; look for it in the console", in.launchID, LaunchTag, in.launchID, err)
	}
	return ids, nil
}

// findGroup returns the id of the temporary security group, found by name, or "".
func (in *Instance) findGroup(ctx context.Context) (string, error) {
	var id string
	err := in.retry(ctx, func(ctx context.Context) error {
		out, err := in.api.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []types.Filter{
			{Name: aws.String("group-name"), Values: []string{in.groupName}},
			{Name: aws.String("vpc-id"), Values: []string{in.vpc}},
		}})
		if err == nil && len(out.SecurityGroups) > 0 {
			id = aws.ToString(out.SecurityGroups[0].GroupId)
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("finding security group %s after CreateSecurityGroup failed: %w", in.groupName, err)
	}
	return id, nil
}

// terminate terminates ids and waits until EC2 says they are terminated, retrying both across
// errors (throttling, 5xx, an id EC2 does not know yet) until ctx ends.
func (in *Instance) terminate(ctx context.Context, ids []string, say func(string)) error {
	notFound := 0
	err := in.retry(ctx, func(ctx context.Context) error {
		_, err := in.api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
		if awsaccess.APICode(err) == "InvalidInstanceID.NotFound" {
			if notFound++; notFound >= notFoundTries {
				return nil // gone, or never there
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("terminating %s: %w", strings.Join(ids, ", "), err)
	}
	say("terminating " + strings.Join(ids, ", "))
	// The security group can only go once the instance is gone. The waiter would stop at the
	// first describe error; a cleanup keeps asking until its deadline.
	w := ec2.NewInstanceTerminatedWaiter(boundedDescribe{in.api}, func(o *ec2.InstanceTerminatedWaiterOptions) {
		o.MinDelay, o.MaxDelay = in.poll, 6*in.poll
		terminated := o.Retryable
		o.Retryable = func(ctx context.Context, di *ec2.DescribeInstancesInput, out *ec2.DescribeInstancesOutput, err error) (bool, error) {
			if err != nil {
				return true, nil
			}
			return terminated(ctx, di, out, err)
		}
	})
	for {
		left := time.Until(deadline(ctx))
		if left <= 0 {
			return fmt.Errorf("waiting for %s to terminate: %w", strings.Join(ids, ", "), context.DeadlineExceeded)
		}
		err := w.Wait(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids}, left)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for %s to terminate: %w", strings.Join(ids, ", "), err)
		}
		// Pending or stopping (the termination did not take yet): terminate again.
		_, _ = call(ctx, func(ctx context.Context) (*ec2.TerminateInstancesOutput, error) {
			return in.api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
		})
		if err := pause.Sleep(ctx, in.poll); err != nil {
			return fmt.Errorf("waiting for %s to terminate: %w", strings.Join(ids, ", "), err)
		}
	}
}

// boundedDescribe bounds each DescribeInstances of the waiter by CallTimeout.
type boundedDescribe struct{ api EC2API }

func (b boundedDescribe) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return call(ctx, func(ctx context.Context) (*ec2.DescribeInstancesOutput, error) {
		return b.api.DescribeInstances(ctx, in, optFns...)
	})
}

// retry calls f, each call bounded by CallTimeout, until it succeeds or ctx ends, with
// jittered exponential backoff from the poll interval between calls. It returns f's last
// error when ctx ends first.
func (in *Instance) retry(ctx context.Context, f func(context.Context) error) error {
	backoff := awsaccess.RetryPolicy{BaseDelay: in.poll, MaxBackoff: 6 * in.poll}
	for n := 1; ; n++ {
		_, err := call(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
		if err == nil {
			return nil
		}
		if perr := pause.Sleep(ctx, max(backoff.Backoff(n), in.poll/4)); perr != nil {
			return fmt.Errorf("%w (still failing at the cleanup deadline after %d tries)", err, n)
		}
	}
}

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// call makes one EC2 call bounded by CallTimeout.
func call[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	return f(ctx)
}

// TagImage sets tags on an AMI; the call is bounded by CallTimeout.
func TagImage(ctx context.Context, api EC2API, imageID string, tags map[string]string) error {
	if _, err := call(ctx, func(ctx context.Context) (*ec2.CreateTagsOutput, error) {
		return api.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{imageID}, Tags: toTags(tags)})
	}); err != nil {
		return fmt.Errorf("tagging %s: %w", imageID, err)
	}
	return nil
}

// Deregister deregisters an AMI and deletes its EBS snapshots, so a bad image cannot reach a
// launch template. Each call is bounded by CallTimeout.
func Deregister(ctx context.Context, api EC2API, imageID string) error {
	out, err := call(ctx, func(ctx context.Context) (*ec2.DescribeImagesOutput, error) {
		return api.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{imageID}})
	})
	if err != nil {
		return fmt.Errorf("describing %s: %w", imageID, err)
	}
	var snaps []string
	for _, img := range out.Images {
		for _, bdm := range img.BlockDeviceMappings {
			if bdm.Ebs != nil && bdm.Ebs.SnapshotId != nil {
				snaps = append(snaps, aws.ToString(bdm.Ebs.SnapshotId))
			}
		}
	}
	if _, err := call(ctx, func(ctx context.Context) (*ec2.DeregisterImageOutput, error) {
		return api.DeregisterImage(ctx, &ec2.DeregisterImageInput{ImageId: aws.String(imageID)})
	}); err != nil {
		return fmt.Errorf("deregistering %s: %w", imageID, err)
	}
	var errs []error
	for _, sn := range snaps {
		if _, err := call(ctx, func(ctx context.Context) (*ec2.DeleteSnapshotOutput, error) {
			return api.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: aws.String(sn)})
		}); err != nil {
			errs = append(errs, fmt.Errorf("deleting snapshot %s of %s: %w", sn, imageID, err))
		}
	}
	return errors.Join(errs...)
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

// Package launch starts a throwaway instance from an AMI to check its first boot, and always
// takes it down again: a temporary key pair and security group, RunInstances with the launch
// settings a user of the amazon plugin expects, waiting until it runs, and a cleanup that
// terminates it and deletes the temporaries whatever happened. It also tags and deregisters
// AMIs. It talks to EC2 through the typed client interface below; the checks are elsewhere.
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
	"github.com/aws/smithy-go"
	"golang.org/x/crypto/ssh"

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
	// CapacityReservationPreference is "open", "none" or "capacity-reservations-only"; with
	// CapacityReservationID or CapacityReservationGroupARN it targets a reservation (ODCR or
	// a Capacity Block for ML), as amazon-ebs's settings of the same names do.
	CapacityReservationPreference string
	CapacityReservationID         string
	CapacityReservationGroupARN   string
	// SSHCIDR is the source the temporary security group admits on port 22.
	SSHCIDR string
	// Tags go on the instance and the temporaries.
	Tags map[string]string
	// Poll is how often the instance's state is read; 0 means 5 s.
	Poll time.Duration
}

// Instance is a running launched instance.
type Instance struct {
	ID                     string
	PublicIP, PrivateIP    string
	PublicDNS, PrivateDNS  string
	Signer                 ssh.Signer
	keyName, securityGroup string
	api                    EC2API
	poll                   time.Duration
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

// Launch creates the temporaries, runs the instance and waits until it is running. On error it
// has already cleaned up what it created. The returned Instance must be passed to Cleanup.
func Launch(ctx context.Context, api EC2API, s Spec, say func(string)) (*Instance, error) {
	in := &Instance{api: api, poll: s.Poll}
	if in.poll == 0 {
		in.poll = 5 * time.Second
	}
	suffix := randomSuffix()
	fail := func(err error) (*Instance, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		if cerr := Cleanup(cctx, in, say); cerr != nil {
			err = fmt.Errorf("%w; cleaning up: %v", err, cerr)
		}
		return nil, err
	}

	// As amazon-ebs does: EC2 makes the key pair and hands back the private key once.
	in.keyName = "dlami-verify-" + suffix
	kp, err := api.CreateKeyPair(ctx, &ec2.CreateKeyPairInput{
		KeyName: aws.String(in.keyName), KeyType: types.KeyTypeEd25519,
		TagSpecifications: tagSpec(types.ResourceTypeKeyPair, s.Tags),
	})
	if err != nil {
		in.keyName = ""
		return fail(fmt.Errorf("creating the temporary key pair: %w", err))
	}
	if in.Signer, err = ssh.ParsePrivateKey([]byte(aws.ToString(kp.KeyMaterial))); err != nil {
		return fail(fmt.Errorf("the temporary key pair's private key is unreadable: %w", err))
	}
	say("created temporary key pair " + in.keyName)

	groups := s.SecurityGroupIDs
	if len(groups) == 0 {
		vpc, err := vpcOf(ctx, api, s.SubnetID)
		if err != nil {
			return fail(err)
		}
		out, err := api.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
			GroupName: aws.String("dlami-verify-" + suffix), Description: aws.String("Temporary: SSH for the dlami post-processor's first-boot check"),
			VpcId: aws.String(vpc), TagSpecifications: tagSpec(types.ResourceTypeSecurityGroup, s.Tags),
		})
		if err != nil {
			return fail(fmt.Errorf("creating the temporary security group: %w", err))
		}
		in.securityGroup = aws.ToString(out.GroupId)
		say("created temporary security group " + in.securityGroup)
		cidr := cmp.Or(s.SSHCIDR, "0.0.0.0/0")
		if _, err := api.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{
			GroupId: aws.String(in.securityGroup), IpProtocol: aws.String("tcp"), FromPort: aws.Int32(22), ToPort: aws.Int32(22), CidrIp: aws.String(cidr),
		}); err != nil {
			return fail(fmt.Errorf("opening port 22 in %s: %w", in.securityGroup, err))
		}
		groups = []string{in.securityGroup}
	}

	run := &ec2.RunInstancesInput{
		ImageId: aws.String(s.ImageID), InstanceType: types.InstanceType(s.InstanceType),
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), KeyName: aws.String(in.keyName),
		TagSpecifications: tagSpec(types.ResourceTypeInstance, s.Tags),
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
	out, err := api.RunInstances(ctx, run)
	if err != nil {
		return fail(fmt.Errorf("launching %s from %s: %w%s", s.InstanceType, s.ImageID, err, capacityHint(err)))
	}
	if len(out.Instances) != 1 {
		return fail(fmt.Errorf("RunInstances returned %d instances", len(out.Instances)))
	}
	in.ID = aws.ToString(out.Instances[0].InstanceId)
	say(fmt.Sprintf("launched %s (%s from %s); waiting until it runs", in.ID, s.InstanceType, s.ImageID))
	if err := in.waitRunning(ctx); err != nil {
		return fail(err)
	}
	return in, nil
}

func capacityHint(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) && (ae.ErrorCode() == "InsufficientInstanceCapacity" || ae.ErrorCode() == "InsufficientCapacityOnHost") {
		return " (GPU capacity is scarce: target an On-Demand Capacity Reservation or a Capacity Block with capacity_reservation_id / capacity_reservation_group_arn, or try another subnet's Availability Zone)"
	}
	return ""
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

// Cleanup terminates the instance and deletes the temporary security group and key pair. It
// is safe on a partly launched Instance and on nil, and keeps going past errors, returning
// them all.
func Cleanup(ctx context.Context, in *Instance, say func(string)) error {
	if in == nil {
		return nil
	}
	var errs []error
	if in.ID != "" {
		if _, err := in.api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{in.ID}}); err != nil {
			errs = append(errs, fmt.Errorf("terminating %s: %w", in.ID, err))
		} else {
			say("terminating " + in.ID)
			// The security group can only go once the instance is gone.
			for {
				i, err := in.describe(ctx)
				if err != nil || (i.State != nil && i.State.Name == types.InstanceStateNameTerminated) {
					break
				}
				if err := pause.Sleep(ctx, in.poll); err != nil {
					errs = append(errs, fmt.Errorf("waiting for %s to terminate: %w", in.ID, err))
					break
				}
			}
		}
	}
	if in.securityGroup != "" {
		if _, err := in.api.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(in.securityGroup)}); err != nil {
			errs = append(errs, fmt.Errorf("deleting security group %s: %w", in.securityGroup, err))
		} else {
			say("deleted temporary security group " + in.securityGroup)
		}
	}
	if in.keyName != "" {
		if _, err := in.api.DeleteKeyPair(ctx, &ec2.DeleteKeyPairInput{KeyName: aws.String(in.keyName)}); err != nil {
			errs = append(errs, fmt.Errorf("deleting key pair %s: %w", in.keyName, err))
		} else {
			say("deleted temporary key pair " + in.keyName)
		}
	}
	return errors.Join(errs...)
}

// TagImage sets tags on an AMI.
func TagImage(ctx context.Context, api EC2API, imageID string, tags map[string]string) error {
	if _, err := api.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{imageID}, Tags: toTags(tags)}); err != nil {
		return fmt.Errorf("tagging %s: %w", imageID, err)
	}
	return nil
}

// Deregister deregisters an AMI and deletes its EBS snapshots, so a bad image cannot reach a
// launch template.
func Deregister(ctx context.Context, api EC2API, imageID string) error {
	out, err := api.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{imageID}})
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
	if _, err := api.DeregisterImage(ctx, &ec2.DeregisterImageInput{ImageId: aws.String(imageID)}); err != nil {
		return fmt.Errorf("deregistering %s: %w", imageID, err)
	}
	var errs []error
	for _, sn := range snaps {
		if _, err := api.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: aws.String(sn)}); err != nil {
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

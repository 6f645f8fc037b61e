package launch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
)

// checkSelfTraffic refuses the user's security groups for a launch with EFA unless they carry
// EFA traffic: EFA's OS-bypass traffic arrives only when a group of the interfaces allows all
// inbound traffic from a group of the interfaces, and one allows all outbound traffic to one
// (EC2 User Guide, "Get started with EFA", step 1: "allows all inbound and outbound traffic to
// and from the security group itself"). A rule to or from 0.0.0.0/0 does not count: EFA
// addresses are neither IPv4 nor IPv6, only a rule naming a group matches them. Without the
// rule the traffic tests stall until their timeout, so the launch is refused before anything
// is made, naming the rule that is missing.
func (in *Instance) checkSelfTraffic(ctx context.Context, groups []string) error {
	var out *ec2.DescribeSecurityGroupsOutput
	err := in.step(ctx, func(ctx context.Context) (err error) {
		out, err = in.api.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: groups})
		return err
	})
	if err != nil {
		return fmt.Errorf("security_group_ids %s: reading their rules (EFA needs a rule allowing all traffic to and from the group itself): %w", strings.Join(groups, ", "), err)
	}
	return SelfTrafficRules(out.SecurityGroups, groups)
}

// SelfTrafficRules says which rule the groups lack for EFA traffic among interfaces in all of
// them: an inbound and an outbound rule of protocol -1 (all traffic) naming one of the groups;
// nil when they have both. No group at all is an error, never a panic.
func SelfTrafficRules(described []types.SecurityGroup, groups []string) error {
	if len(groups) == 0 {
		return errors.New("security_group_ids: no security group to carry the EFA interfaces' traffic: name one with a rule allowing all traffic to and from itself, or leave security_group_ids unset for a temporary group that has it")
	}
	has := func(egress bool) bool {
		for _, g := range described {
			perms := g.IpPermissions
			if egress {
				perms = g.IpPermissionsEgress
			}
			for _, p := range perms {
				if aws.ToString(p.IpProtocol) != "-1" {
					continue
				}
				for _, pair := range p.UserIdGroupPairs {
					if slices.Contains(groups, aws.ToString(pair.GroupId)) {
						return true
					}
				}
			}
		}
		return false
	}
	var missing []string
	first := groups[0]
	if !has(false) {
		missing = append(missing, fmt.Sprintf("an inbound rule allowing all traffic (protocol -1, all ports) from the group itself: aws ec2 authorize-security-group-ingress --group-id %s --ip-permissions 'IpProtocol=-1,UserIdGroupPairs=[{GroupId=%s}]'", first, first))
	}
	if !has(true) {
		missing = append(missing, fmt.Sprintf("an outbound rule allowing all traffic (protocol -1, all ports) to the group itself: aws ec2 authorize-security-group-egress --group-id %s --ip-permissions 'IpProtocol=-1,UserIdGroupPairs=[{GroupId=%s}]'", first, first))
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("security_group_ids %s: the EFA interfaces' traffic needs %s (an allow-all rule to 0.0.0.0/0 does not carry EFA; without it the EFA traffic test stalls until its timeout). Add it, leave security_group_ids unset for a temporary group that has it, or set efa = \"none\"",
		strings.Join(groups, ", "), strings.Join(missing, ", and "))
}

// createPlacementGroup makes the temporary cluster placement group. EC2 has no client token
// for it: a retry after a lost answer meets InvalidPlacementGroup.Duplicate, and the group,
// which carries this launch's own name, is the one it made.
func (in *Instance) createPlacementGroup(ctx context.Context, tags map[string]string) error {
	return in.step(ctx, func(ctx context.Context) error {
		_, err := in.api.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{
			GroupName: aws.String(in.placementGroup), Strategy: types.PlacementStrategyCluster,
			TagSpecifications: tagSpec(types.ResourceTypePlacementGroup, tags),
		})
		if awsaccess.APICode(err) == "InvalidPlacementGroup.Duplicate" {
			return nil
		}
		return err
	})
}

// primaryInterface is the id of an instance's primary network interface (card 0, device 0).
func primaryInterface(i types.Instance) string {
	for _, ni := range i.NetworkInterfaces {
		if a := ni.Attachment; a != nil && aws.ToInt32(a.DeviceIndex) == 0 && aws.ToInt32(a.NetworkCardIndex) == 0 {
			return aws.ToString(ni.NetworkInterfaceId)
		}
	}
	return ""
}

// attachElasticIP allocates a temporary Elastic IP and associates it with the primary
// interface: the instance's public address when EC2 gave it none at launch. AllocateAddress
// has no client token: the address carries the launch tag, and a retry first looks for one
// with this launch's tag, so that a lost answer does not allocate a second.
func (in *Instance) attachElasticIP(ctx context.Context, say func(string)) error {
	if in.primaryENI == "" {
		return fmt.Errorf("instance %s: DescribeInstances shows no primary network interface to associate an Elastic IP with", in.ID)
	}
	in.elasticIP = true
	var public string
	tried := false
	err := in.stepCalls(ctx, func(ctx context.Context) error {
		if tried {
			// An earlier try may have allocated it, its answer lost.
			var found types.Address
			if err := in.patience.call(ctx, func(ctx context.Context) (err error) {
				found, err = in.lookupAddress(ctx)
				return err
			}); err != nil {
				return err
			}
			if found.AllocationId != nil {
				in.allocationID, public = aws.ToString(found.AllocationId), aws.ToString(found.PublicIp)
				return nil
			}
		}
		tried = true
		return in.patience.call(ctx, func(ctx context.Context) error {
			// Not the SDK's retries: they would resend it blind; this step's retry looks first.
			out, err := in.api.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: types.DomainTypeVpc, TagSpecifications: tagSpec(types.ResourceTypeElasticIp, in.addressTags())},
				func(o *ec2.Options) { o.Retryer = aws.NopRetryer{} })
			if err != nil {
				return err
			}
			in.allocationID, public = aws.ToString(out.AllocationId), aws.ToString(out.PublicIp)
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("allocating a temporary Elastic IP for %s: %w", in.ID, err)
	}
	say(fmt.Sprintf("allocated temporary Elastic IP %s (%s)", public, in.allocationID))
	// AllowReassociation: a retry after a lost answer associates the address with the same
	// interface again.
	err = in.step(ctx, func(ctx context.Context) error {
		_, err := in.api.AssociateAddress(ctx, &ec2.AssociateAddressInput{
			AllocationId: aws.String(in.allocationID), NetworkInterfaceId: aws.String(in.primaryENI), AllowReassociation: aws.Bool(true),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("associating Elastic IP %s with %s's primary interface %s: %w", public, in.ID, in.primaryENI, err)
	}
	in.ElasticIP, in.PublicIP = public, public
	say(fmt.Sprintf("associated %s with %s's primary interface %s (EC2 gives an instance with %d network interfaces no public IP at launch)",
		public, in.ID, in.primaryENI, max(len(in.Layout.Interfaces), 1)))
	return nil
}

// lookupAddress is the Elastic IP carrying this launch's tag; zero when there is none.
func (in *Instance) lookupAddress(ctx context.Context) (types.Address, error) {
	out, err := in.api.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: []types.Filter{
		{Name: aws.String("tag:" + LaunchTag), Values: []string{in.launchID}},
		{Name: aws.String("tag:" + NodeTag), Values: []string{in.nodeTag()}},
	}})
	if err != nil || len(out.Addresses) == 0 {
		return types.Address{}, err
	}
	return out.Addresses[0], nil
}

// releaseElasticIP disassociates and releases the temporary Elastic IP, found by the launch tag
// when the allocation's answer was lost. It waits for nothing: disassociated first, it goes
// while the instance may still be terminating. A retry after a lost answer meets
// InvalidAllocationID.NotFound or InvalidAssociationID.NotFound: done.
func (in *Instance) releaseElasticIP(ctx context.Context, say func(string)) error {
	if in.allocationID == "" {
		err := in.patience.retry(ctx, cleanupFinal, func(ctx context.Context) error {
			a, err := in.lookupAddress(ctx)
			in.allocationID = aws.ToString(a.AllocationId)
			return err
		})
		if err != nil {
			return fmt.Errorf("finding the Elastic IP of launch %s (%s = %s) after AllocateAddress failed: %w", in.launchID, LaunchTag, in.launchID, err)
		}
		if in.allocationID == "" {
			return nil // never allocated
		}
	}
	err := in.patience.retryCalls(ctx, cleanupFinal, func(ctx context.Context) error {
		var out *ec2.DescribeAddressesOutput
		err := in.patience.call(ctx, func(ctx context.Context) (err error) {
			out, err = in.api.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{AllocationIds: []string{in.allocationID}})
			return err
		})
		if awsaccess.APICode(err) == "InvalidAllocationID.NotFound" {
			return nil
		}
		if err != nil {
			return err
		}
		for _, a := range out.Addresses {
			if a.AssociationId == nil {
				continue
			}
			err := in.patience.call(ctx, func(ctx context.Context) error {
				_, err := in.api.DisassociateAddress(ctx, &ec2.DisassociateAddressInput{AssociationId: a.AssociationId})
				return err
			})
			if err != nil && awsaccess.APICode(err) != "InvalidAssociationID.NotFound" {
				return fmt.Errorf("disassociating it: %w", err)
			}
		}
		err = in.patience.call(ctx, func(ctx context.Context) error {
			_, err := in.api.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: aws.String(in.allocationID)})
			return err
		})
		if awsaccess.APICode(err) == "InvalidAllocationID.NotFound" {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("releasing Elastic IP %s: %w", in.allocationID, err)
	}
	say("released temporary Elastic IP " + in.allocationID)
	return nil
}

// deleteInterfaces deletes the network interfaces of the launch EC2 did not delete with the
// instance, found by the launch tag; left is set to those still there, looked once the lookup
// answered. Interfaces launched
// with DeleteOnTermination go with the instance: this finds none unless EC2 kept one (an
// interface still attached is retried until it is available, or gone).
func (in *Instance) deleteInterfaces(ctx context.Context, say func(string), left *[]string, looked *bool) error {
	return in.patience.retryCalls(ctx, cleanupFinal, func(ctx context.Context) error {
		var out *ec2.DescribeNetworkInterfacesOutput
		err := in.patience.call(ctx, func(ctx context.Context) (err error) {
			out, err = in.api.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
				{Name: aws.String("tag:" + LaunchTag), Values: []string{in.launchID}},
			}})
			return err
		})
		if err != nil {
			return err
		}
		*left, *looked = nil, true
		var errs []error
		for _, ni := range out.NetworkInterfaces {
			id := aws.ToString(ni.NetworkInterfaceId)
			if ni.Status == types.NetworkInterfaceStatusInUse {
				*left = append(*left, id)
				errs = append(errs, fmt.Errorf("%s is still attached", id))
				continue
			}
			err := in.patience.call(ctx, func(ctx context.Context) error {
				_, err := in.api.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
				return err
			})
			if err != nil && awsaccess.APICode(err) != "InvalidNetworkInterfaceID.NotFound" {
				*left = append(*left, id)
				errs = append(errs, fmt.Errorf("deleting %s: %w", id, err))
				continue
			}
			say("deleted network interface " + id + ", left after the instance")
		}
		return errors.Join(errs...)
	})
}

// deletePlacementGroup deletes the temporary placement group. EC2 refuses while an instance
// in it is not terminated yet (InvalidPlacementGroup.InUse: retried); a group EC2 does not
// know was never made, or a retry after a lost answer: done.
func (in *Instance) deletePlacementGroup(ctx context.Context, say func(string)) error {
	err := in.patience.retry(ctx, cleanupFinal, func(ctx context.Context) error {
		_, err := in.api.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String(in.placementGroup)})
		if awsaccess.APICode(err) == "InvalidPlacementGroup.Unknown" {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("deleting placement group %s: %w", in.placementGroup, err)
	}
	say("deleted temporary placement group " + in.placementGroup)
	return nil
}

// nodeTag is the instance's number in its launch, as its Elastic IP's NodeTag says it.
func (in *Instance) nodeTag() string { return strconv.Itoa(max(in.node, 1)) }

// addressTags are the launch's tags and the instance's node number.
func (in *Instance) addressTags() map[string]string {
	tags := maps.Clone(in.tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[NodeTag] = in.nodeTag()
	return tags
}

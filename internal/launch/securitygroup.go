package launch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
)

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

func (in *Instance) deleteGroup(ctx context.Context, say func(string)) error {
	if in.securityGroup == "" {
		// CreateSecurityGroup went out without an answer: find the group by its name.
		err := in.patience.retry(ctx, cleanupFinal, func(ctx context.Context) error {
			var err error
			in.securityGroup, err = in.lookupGroup(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("finding security group %s after CreateSecurityGroup failed: %w", in.groupName, err)
		}
		if in.securityGroup == "" {
			return nil // never made
		}
	}
	// EC2 refuses while the instance's network interface lingers (DependencyViolation); a
	// retry after a lost answer meets InvalidGroup.NotFound.
	err := in.patience.retry(ctx, cleanupFinal, func(ctx context.Context) error {
		_, err := in.api.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(in.securityGroup)})
		if strings.HasPrefix(awsaccess.APICode(err), "InvalidGroup.NotFound") {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("deleting security group %s: %w", in.securityGroup, err)
	}
	say("deleted temporary security group " + in.securityGroup)
	return nil
}

// makeSecurityGroup is the launch's security group step: the user's groups, else a temporary
// one in the candidates' VPC that admits SSH (and, with EFA, all traffic within itself).
func (b *build) makeSecurityGroup(ctx context.Context, say func(string)) error {
	in := b.in
	b.groups = b.s.SecurityGroupIDs
	if len(b.groups) == 0 {
		in.groupName, in.vpc = "dlami-verify-"+b.suffix, b.vpc
		if err := in.createGroup(ctx, b.tags); err != nil {
			return fmt.Errorf("creating the temporary security group %s: %w", in.groupName, err)
		}
		say("created temporary security group " + in.securityGroup)
		if err := in.openGroup(ctx, b.s.sshCIDRs(), b.efa); err != nil {
			return fmt.Errorf("opening %s: %w", in.securityGroup, err)
		}
		b.groups = []string{in.securityGroup}
	}
	in.SecurityGroups = b.groups
	return nil
}

// securityGroupResources is the temporary group as the cleanup removes it: EC2 refuses to
// delete it while a network interface in it is there.
func (in *Instance) securityGroupResources() []resource {
	if in.securityGroup == "" && in.groupName == "" {
		return nil
	}
	return []resource{{kind: KindSecurityGroup, after: []string{KindInstance, KindInterface}, weight: 3, remove: in.deleteGroup,
		left: func(err error) Leak {
			l := Leak{Kind: KindSecurityGroup, Name: in.groupName, VPC: in.vpc, Err: err}
			if in.securityGroup != "" {
				l.IDs = []string{in.securityGroup}
			}
			return l
		}}}
}

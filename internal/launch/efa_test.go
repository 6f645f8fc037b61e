package launch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// efaSpec is spec with every EFA interface of the type.
func efaSpec(typ string) Spec {
	s := spec(region)
	s.InstanceType, s.EFA, s.EFASetting = typ, EFAAll, `efa = "all"`
	return s
}

// The layout of the User Guide for each type the fake has figures for, read from
// DescribeInstanceTypes through the real SDK and launched in one RunInstances: the primary
// ENA on card 0 device 0, efa-only on card 0 device 1 where card 0 takes EFA, efa-only on
// device 0 of every further card (P5 use case 1: 32 EFA; p6-b300: cards 1-16, card 0 ENA
// only). The fake accepts each, and the host is told exactly the cards of the EFA interfaces.
func TestEFALayoutsOfTheUserGuide(t *testing.T) {
	cardsFrom := func(from, to int) []int {
		var out []int
		for c := from; c <= to; c++ {
			out = append(out, c)
		}
		return out
	}
	for _, tc := range []struct {
		typ   string
		want  int // Spec.EFA
		cards []int
	}{
		{"p5.48xlarge", EFAAll, cardsFrom(0, 31)},
		{"p5e.48xlarge", EFAAll, cardsFrom(0, 31)},
		{"p5en.48xlarge", EFAAll, cardsFrom(0, 15)},
		{"p6-b200.48xlarge", EFAAll, cardsFrom(0, 7)},
		{"p6-b300.48xlarge", EFAAll, cardsFrom(1, 16)},
		{"p4d.24xlarge", EFAAll, cardsFrom(0, 3)},
		{"g6e.48xlarge", EFAAll, cardsFrom(0, 3)},
		{"g5.48xlarge", EFAAll, []int{0}},
		{"p5.4xlarge", EFAAll, []int{0}},
		{"g5.xlarge", EFAAll, nil}, // no EFA: one default interface
		{"p6-b200.48xlarge", 2, []int{0, 1}},
		{"p6-b300.48xlarge", 3, []int{1, 2, 3}},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.typ, tc.want), func(t *testing.T) {
			f := newFake(t)
			s := efaSpec(tc.typ)
			s.EFA = tc.want
			in, err := Launch(context.Background(), f.client(region), s, discard)
			if err != nil {
				t.Fatal(err)
			}
			if in.Layout.EFA != len(tc.cards) {
				t.Errorf("layout %s: %d EFA, want %d", in.Layout, in.Layout.EFA, len(tc.cards))
			}
			if n := f.srv.CallCount(awsfake.OpRunInstances, region); n != 1 {
				t.Errorf("%d RunInstances calls, want one for every interface", n)
			}
			inst := f.state(region).Instances[0]
			if !slices.Equal(inst.EFACards, tc.cards) {
				t.Errorf("the host's EFA cards %v, want %v", inst.EFACards, tc.cards)
			}
			want := []awsfake.InstanceInterface{{InterfaceType: "interface"}}
			for _, c := range tc.cards {
				d := 0
				if c == 0 {
					d = 1
				}
				want = append(want, awsfake.InstanceInterface{InterfaceType: "efa-only", NetworkCardIndex: c, DeviceIndex: d})
			}
			var got []awsfake.InstanceInterface
			for _, ni := range inst.NetworkInterfaces {
				got = append(got, awsfake.InstanceInterface{InterfaceType: ni.InterfaceType, NetworkCardIndex: ni.NetworkCardIndex, DeviceIndex: ni.DeviceIndex})
			}
			if !slices.Equal(got, want) {
				t.Errorf("interfaces %+v\nwant %+v", got, want)
			}
			if len(tc.cards) > 0 && !inst.EFATraffic {
				t.Errorf("EFA traffic blocked: the temporary group lacks its self rules")
			}
			if err := Cleanup(context.Background(), in, discard); err != nil {
				t.Fatal(err)
			}
			assertNothingLeft(t, f)
		})
	}
}

// What the launch cannot attach is refused before anything is made, naming the setting.
func TestEFACountsTheTypeCannotTake(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		want int
		msg  string
	}{
		{"p6-b200.48xlarge", 9, "p6-b200.48xlarge takes at most 8 EFA interfaces"},
		{"g5.xlarge", 1, "g5.xlarge does not support EFA"},
		{"t3.micro", EFAAll, `set efa = "none"`},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			f := newFake(t)
			s := efaSpec(tc.typ)
			s.EFA, s.EFASetting = tc.want, "efa = setting"
			_, err := Launch(context.Background(), f.client(region), s, discard)
			if err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "efa = setting") {
				t.Fatalf("err %v: want %q naming the setting", err, tc.msg)
			}
			if f.srv.CallCount(awsfake.OpCreateKeyPair, region) != 0 || f.srv.CallCount(awsfake.OpRunInstances, region) != 0 {
				t.Error("something was made before the refusal")
			}
		})
	}
}

// PlanLayout follows NetworkCardInfo.InterfaceTypes where EC2 lists them: a card that does not
// list efa or efa-only gets no EFA interface.
func TestPlanLayoutFollowsListedInterfaceTypes(t *testing.T) {
	card := func(i int, ts ...types.NetworkCardInterfaceType) types.NetworkCardInfo {
		return types.NetworkCardInfo{NetworkCardIndex: aws.Int32(int32(i)), MaximumNetworkInterfaces: aws.Int32(4), InterfaceTypes: ts}
	}
	ena, efa := types.NetworkCardInterfaceTypeInterface, types.NetworkCardInterfaceTypeEfaOnly
	info := types.InstanceTypeInfo{InstanceType: "p9.hypothetical", NetworkInfo: &types.NetworkInfo{
		EfaSupported: aws.Bool(true), EfaInfo: &types.EfaInfo{MaximumEfaInterfaces: aws.Int32(4)},
		MaximumNetworkCards: aws.Int32(5), MaximumNetworkInterfaces: aws.Int32(20),
		NetworkCards: []types.NetworkCardInfo{card(0, ena), card(1, ena, efa), card(2, ena), card(3, efa), card(4, ena, types.NetworkCardInterfaceTypeEfa)},
	}}
	l, err := PlanLayout(info, EFAAll, "efa")
	if err != nil {
		t.Fatal(err)
	}
	if got := l.String(); got != "0/0 interface, 1/0 efa-only, 3-4/0 efa-only" {
		t.Errorf("layout %s", got)
	}
	if _, err := PlanLayout(info, 4, "efa = 4"); err == nil || !strings.Contains(err.Error(), "at most 3") {
		t.Errorf("a count past the EFA cards: %v", err)
	}
}

// EC2 refuses every layout the User Guide rules out, with its codes: the fake does (a request
// sent through the real SDK). The launch never builds one of these; a launch whose request EC2
// refuses reports EC2's code and the layout it sent, and leaves nothing behind.
func TestTheFakeRefusesInvalidLayouts(t *testing.T) {
	ni := func(card, dev int, typ string) types.InstanceNetworkInterfaceSpecification {
		return types.InstanceNetworkInterfaceSpecification{NetworkCardIndex: aws.Int32(int32(card)), DeviceIndex: aws.Int32(int32(dev)), InterfaceType: aws.String(typ)}
	}
	p5 := func(n int) []types.InstanceNetworkInterfaceSpecification {
		out := []types.InstanceNetworkInterfaceSpecification{ni(0, 0, "interface"), ni(0, 1, "efa-only")}
		for c := 1; c < n; c++ {
			out = append(out, ni(c, 0, "efa-only"))
		}
		return out
	}
	for _, tc := range []struct {
		name, typ, code string
		nis             []types.InstanceNetworkInterfaceSpecification
	}{
		{"EFA on a type without EFA", "g5.xlarge", "InvalidParameterCombination", []types.InstanceNetworkInterfaceSpecification{ni(0, 0, "efa")}},
		{"more EFA than MaximumEfaInterfaces", "p6-b200.48xlarge", "InvalidParameterValue",
			append([]types.InstanceNetworkInterfaceSpecification{ni(0, 0, "efa")}, p5(8)[1:]...)},
		{"a card past MaximumNetworkCards", "p6-b200.48xlarge", "InvalidParameterValue", []types.InstanceNetworkInterfaceSpecification{ni(0, 0, "interface"), ni(8, 0, "efa-only")}},
		{"efa-only as the primary", "p5.48xlarge", "InvalidParameterCombination", []types.InstanceNetworkInterfaceSpecification{ni(0, 0, "efa-only")}},
		{"two interfaces on one card and device", "p5.48xlarge", "InvalidParameterValue", []types.InstanceNetworkInterfaceSpecification{ni(0, 0, "interface"), ni(1, 0, "efa-only"), ni(1, 0, "efa-only")}},
		{"EFA on p6-b300's card 0", "p6-b300.48xlarge", "InvalidParameterCombination", []types.InstanceNetworkInterfaceSpecification{ni(0, 0, "interface"), ni(0, 1, "efa-only")}},
		{"a device index past the card's interfaces", "p5.48xlarge", "InvalidParameterValue", []types.InstanceNetworkInterfaceSpecification{ni(0, 0, "interface"), ni(2, 2, "interface")}},
		{"no interface at card 0 device 0", "p5.48xlarge", "InvalidParameterValue", []types.InstanceNetworkInterfaceSpecification{ni(0, 1, "interface")}},
		{"a public IP with several interfaces", "p5.48xlarge", "InvalidParameterCombination", func() []types.InstanceNetworkInterfaceSpecification {
			l := p5(2)
			l[0].AssociatePublicIpAddress = aws.Bool(true)
			return l
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			_, err := f.client(region).RunInstances(context.Background(), &ec2.RunInstancesInput{
				ImageId: aws.String(seedAMI(region)), InstanceType: types.InstanceType(tc.typ), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
				NetworkInterfaces: tc.nis,
			})
			if got := awsaccess.APICode(err); got != tc.code {
				t.Errorf("%v: code %q, want %q", err, got, tc.code)
			}
			if n := len(f.state(region).Instances); n != 0 {
				t.Errorf("%d instances after a refused launch", n)
			}
		})
	}

	// A launch whose request EC2 refuses says so with EC2's code and the layout, and cleans up.
	f := newFake(t)
	api := &rewriteRun{EC2API: f.client(region), rewrite: func(in *ec2.RunInstancesInput) {
		in.NetworkInterfaces[0].InterfaceType = aws.String("efa-only")
	}}
	_, err := Launch(context.Background(), api, efaSpec("p6-b200.48xlarge"), discard)
	if err == nil || !strings.Contains(err.Error(), "InvalidParameterCombination") || !strings.Contains(err.Error(), "0/0 interface, 0/1 efa-only, 1-7/0 efa-only") {
		t.Errorf("err %v: want EC2's code and the layout", err)
	}
	assertNothingLeft(t, f)
}

// rewriteRun changes each RunInstances request before it is sent.
type rewriteRun struct {
	EC2API
	rewrite func(*ec2.RunInstancesInput)
}

func (r *rewriteRun) RunInstances(ctx context.Context, in *ec2.RunInstancesInput, o ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	r.rewrite(in)
	return r.EC2API.RunInstances(ctx, in, o...)
}

// The temporary group of a launch with EFA allows all traffic to and from itself, in and out,
// besides SSH from the source CIDRs; the user's groups without such a rule are refused before
// anything is made, naming the rule; with it they are used as they are.
func TestEFASecurityGroups(t *testing.T) {
	f := newFake(t)
	in, err := Launch(context.Background(), f.client(region), efaSpec("p6-b200.48xlarge"), discard)
	if err != nil {
		t.Fatal(err)
	}
	sg := in.SecurityGroups[0]
	var group awsfake.SecurityGroup
	for _, g := range f.state(region).SecurityGroups {
		if g.ID == sg {
			group = g
		}
	}
	self := func(rules []awsfake.Permission) bool {
		return slices.ContainsFunc(rules, func(r awsfake.Permission) bool {
			return r.Protocol == "-1" && slices.Equal(r.GroupIDs, []string{sg})
		})
	}
	if !self(group.Ingress) || !self(group.Egress) {
		t.Errorf("group %s: ingress %+v egress %+v: want all traffic from and to itself", sg, group.Ingress, group.Egress)
	}
	if !slices.ContainsFunc(group.Ingress, func(r awsfake.Permission) bool {
		return r.Protocol == "tcp" && r.FromPort == 22 && slices.Equal(r.CIDRs, []string{"203.0.113.0/24"})
	}) {
		t.Errorf("ingress %+v: SSH from the source CIDR is missing", group.Ingress)
	}
	if err := Cleanup(context.Background(), in, discard); err != nil {
		t.Fatal(err)
	}

	// The user's group: the default VPC's default group lets all traffic in from itself, and
	// out to 0.0.0.0/0 only.
	c := f.client(region)
	ctx := context.Background()
	mk, err := c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("team-efa"), Description: aws.String("x"), VpcId: aws.String(f.state(region).Vpc.ID)})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(mk.GroupId)
	perm := []types.IpPermission{{IpProtocol: aws.String("-1"), UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String(id)}}}}
	if _, err := c.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: perm}); err != nil {
		t.Fatal(err)
	}
	s := efaSpec("p6-b200.48xlarge")
	s.SecurityGroupIDs = []string{id}
	before := f.srv.CallCount(awsfake.OpCreateKeyPair, region)
	_, err = Launch(ctx, c, s, discard)
	if err == nil || !strings.Contains(err.Error(), "an outbound rule allowing all traffic (protocol -1, all ports) to the group itself") ||
		strings.Contains(err.Error(), "an inbound rule") || !strings.Contains(err.Error(), "security_group_ids "+id) {
		t.Fatalf("err %v: want the missing outbound rule named", err)
	}
	if f.srv.CallCount(awsfake.OpCreateKeyPair, region) != before {
		t.Error("a key pair was made before the refusal")
	}
	if _, err := c.AuthorizeSecurityGroupEgress(ctx, &ec2.AuthorizeSecurityGroupEgressInput{GroupId: aws.String(id), IpPermissions: perm}); err != nil {
		t.Fatal(err)
	}
	in, err = Launch(ctx, c, s, discard)
	if err != nil {
		t.Fatalf("a group with both self rules: %v", err)
	}
	if inst := f.state(region).Instances[1]; !inst.EFATraffic || !slices.Equal(inst.SecurityGroupIDs, []string{id}) {
		t.Errorf("instance groups %v, EFA traffic %v", inst.SecurityGroupIDs, inst.EFATraffic)
	}
	if err := Cleanup(ctx, in, discard); err != nil {
		t.Fatal(err)
	}
	// Without EFA the user's groups are not judged.
	s.EFA = 0
	if _, err := c.RevokeSecurityGroupEgress(ctx, &ec2.RevokeSecurityGroupEgressInput{GroupId: aws.String(id), IpPermissions: perm}); err != nil {
		t.Fatal(err)
	}
	in, err = Launch(ctx, c, s, discard)
	if err != nil {
		t.Fatalf("efa none with the user's group: %v", err)
	}
	if err := Cleanup(ctx, in, discard); err != nil {
		t.Fatal(err)
	}
}

// A temporary cluster placement group is made for the launch and removed with the instance; an
// existing one is used and left alone.
func TestPlacementGroups(t *testing.T) {
	f := newFake(t)
	s := efaSpec("p5.48xlarge")
	s.TemporaryPlacementGroup = true
	in, err := Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	rs := f.state(region)
	if len(rs.PlacementGroups) != 1 || rs.PlacementGroups[0].Strategy != "cluster" || rs.Instances[0].PlacementGroup != rs.PlacementGroups[0].Name ||
		rs.PlacementGroups[0].Tags[LaunchTag] != in.launchID {
		t.Fatalf("placement groups %+v, instance in %q", rs.PlacementGroups, rs.Instances[0].PlacementGroup)
	}
	if err := Cleanup(context.Background(), in, discard); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, f)

	if _, err := f.client(region).CreatePlacementGroup(context.Background(), &ec2.CreatePlacementGroupInput{GroupName: aws.String("team-cluster"), Strategy: types.PlacementStrategyCluster}); err != nil {
		t.Fatal(err)
	}
	s.TemporaryPlacementGroup, s.PlacementGroup = false, "team-cluster"
	in, err = Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.state(region).Instances[1].PlacementGroup; got != "team-cluster" {
		t.Errorf("instance in %q", got)
	}
	if err := Cleanup(context.Background(), in, discard); err != nil {
		t.Fatal(err)
	}
	if pgs := f.state(region).PlacementGroups; len(pgs) != 1 || pgs[0].Name != "team-cluster" {
		t.Errorf("placement groups %+v: the user's must stay", pgs)
	}
}

// EC2 gives an instance with several interfaces no public IP: a temporary Elastic IP on the
// primary interface is its public address, released by the cleanup.
func TestElasticIP(t *testing.T) {
	f := newFake(t)
	s := efaSpec("p6-b200.48xlarge")
	s.ElasticIP = ElasticIPWhenSeveralInterfaces
	in, err := Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	rs := f.state(region)
	if len(rs.ElasticIPs) != 1 {
		t.Fatalf("elastic IPs %+v", rs.ElasticIPs)
	}
	eip := rs.ElasticIPs[0]
	primary := ""
	for _, ni := range rs.Instances[0].NetworkInterfaces {
		if ni.NetworkCardIndex == 0 && ni.DeviceIndex == 0 {
			primary = ni.ID
		}
	}
	if eip.NetworkInterfaceID != primary || eip.Tags[LaunchTag] != in.launchID || rs.Instances[0].PublicIP != eip.PublicIP {
		t.Errorf("elastic IP %+v on %s, instance public IP %q", eip, primary, rs.Instances[0].PublicIP)
	}
	if addr, _ := in.Address(""); addr != eip.PublicIP || in.ElasticIP != eip.PublicIP {
		t.Errorf("address %q, want the Elastic IP %s", addr, eip.PublicIP)
	}
	if err := Cleanup(context.Background(), in, discard); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, f)

	// One interface: no Elastic IP unless always.
	s.EFA = 0
	in, err = Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.state(region).ElasticIPs); n != 0 || in.ElasticIP != "" {
		t.Errorf("%d Elastic IPs for a launch with one interface", n)
	}
	if err := Cleanup(context.Background(), in, discard); err != nil {
		t.Fatal(err)
	}
}

// Every step of a launch with EFA, a temporary placement group and an Elastic IP is safe to
// try again after EC2 acted and its answer was lost: nothing is made twice, and the cleanup
// removes everything.
func TestEFALaunchIsIdempotentAfterALostAnswer(t *testing.T) {
	for _, op := range []string{awsfake.OpDescribeInstanceTypes, awsfake.OpAuthorizeSecurityGroupIngress, awsfake.OpAuthorizeSecurityGroupEgress,
		awsfake.OpCreatePlacementGroup, awsfake.OpRunInstances, awsfake.OpAllocateAddress, awsfake.OpAssociateAddress} {
		t.Run(op, func(t *testing.T) {
			f := newFake(t)
			f.srv.SetFault(op, region, awsfake.Fault{LoseAnswer: 1})
			s := efaSpec("p5.48xlarge")
			s.TemporaryPlacementGroup, s.ElasticIP = true, ElasticIPWhenSeveralInterfaces
			in, err := Launch(context.Background(), f.sdkRetrying(region), s, discard)
			if err != nil {
				t.Fatalf("launch after a lost %s answer: %v", op, err)
			}
			rs := f.state(region)
			if len(rs.Instances) != 1 || len(rs.PlacementGroups) != 1 || len(rs.ElasticIPs) != 1 || len(rs.NetworkInterfaces) != 33 {
				t.Fatalf("%d instances, %d placement groups, %d Elastic IPs, %d interfaces: want 1, 1, 1, 33",
					len(rs.Instances), len(rs.PlacementGroups), len(rs.ElasticIPs), len(rs.NetworkInterfaces))
			}
			if !rs.Instances[0].EFATraffic || rs.Instances[0].PublicIP != rs.ElasticIPs[0].PublicIP {
				t.Errorf("EFA traffic %v, public IP %q", rs.Instances[0].EFATraffic, rs.Instances[0].PublicIP)
			}
			if err := Cleanup(context.Background(), in, discard); err != nil {
				t.Fatal(err)
			}
			assertNothingLeft(t, f)
		})
	}
}

// An Elastic IP whose allocation answer was lost is found by the launch tag (not allocated
// twice), and released by the cleanup of a launch that fails after it.
func TestElasticIPOfALostAllocationIsReleased(t *testing.T) {
	f := newFake(t)
	f.srv.SetFault(awsfake.OpAllocateAddress, region, awsfake.Fault{LoseAnswer: 1})
	f.srv.SetFault(awsfake.OpAssociateAddress, region, awsfake.Fault{AccessDenied: true})
	s := efaSpec("p6-b200.48xlarge")
	s.ElasticIP = ElasticIPWhenSeveralInterfaces
	_, err := Launch(context.Background(), f.sdkRetrying(region), s, discard)
	if err == nil || !strings.Contains(err.Error(), "UnauthorizedOperation") {
		t.Fatalf("AssociateAddress denied: err %v", err)
	}
	if n := f.srv.CallCount(awsfake.OpAllocateAddress, region); n != 1 {
		t.Errorf("%d AllocateAddress calls: the retry should have found the first address by its tag", n)
	}
	assertNothingLeft(t, f)
}

// Interfaces EC2 did not delete with the instance (launched without DeleteOnTermination here)
// are found by the launch tag and deleted before the security group, which EC2 refuses to
// delete while they are in it.
func TestCleanupDeletesInterfacesLeftAfterTheInstance(t *testing.T) {
	f := newFake(t)
	api := &rewriteRun{EC2API: f.client(region), rewrite: func(in *ec2.RunInstancesInput) {
		for i := range in.NetworkInterfaces {
			in.NetworkInterfaces[i].DeleteOnTermination = aws.Bool(false)
		}
	}}
	in, err := Launch(context.Background(), api, efaSpec("p6-b200.48xlarge"), discard)
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	if err := Cleanup(context.Background(), in, func(s string) { said = append(said, s) }); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.Join(said, "\n"), "left after the instance"); n != 9 {
		t.Errorf("%d interfaces deleted after the instance, want 9:\n%s", n, strings.Join(said, "\n"))
	}
	assertNothingLeft(t, f)

	// Denied: named with the command that removes them, and the group that waits for them too.
	in, err = Launch(context.Background(), api, efaSpec("p6-b200.48xlarge"), discard)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.SetFault(awsfake.OpDeleteNetworkInterface, region, awsfake.Fault{AccessDenied: true})
	leaks := Leaks(Cleanup(context.Background(), in, discard))
	if len(leaks) != 2 || leaks[0].Kind != KindInterface || len(leaks[0].IDs) != 9 || leaks[1].Kind != KindSecurityGroup {
		t.Fatalf("leaks %+v", leaks)
	}
	if cmd := leaks[0].Command(region); strings.Count(cmd, "aws ec2 delete-network-interface --region us-east-1 --network-interface-id eni-") != 9 {
		t.Errorf("command %q", cmd)
	}
}

// Leak commands of the new kinds, with and without the id.
func TestLeakCommandsOfTheNetwork(t *testing.T) {
	for _, tc := range []struct {
		leak Leak
		want string
	}{
		{Leak{Kind: KindInterface, LaunchID: "dlami-verify-0a1b"},
			`for eni in $(aws ec2 describe-network-interfaces --region us-east-1 --filters Name=tag:dlami:launch,Values=dlami-verify-0a1b --query 'NetworkInterfaces[].NetworkInterfaceId' --output text); do aws ec2 delete-network-interface --region us-east-1 --network-interface-id "$eni"; done`},
		{Leak{Kind: KindInterface, IDs: []string{"eni-1", "eni-2"}},
			"aws ec2 delete-network-interface --region us-east-1 --network-interface-id eni-1; aws ec2 delete-network-interface --region us-east-1 --network-interface-id eni-2"},
		{Leak{Kind: KindElasticIP, IDs: []string{"eipalloc-1"}}, "aws ec2 release-address --region us-east-1 --allocation-id eipalloc-1"},
		{Leak{Kind: KindElasticIP, LaunchID: "dlami-verify-0a1b"},
			"for a in $(aws ec2 describe-addresses --region us-east-1 --filters Name=tag:dlami:launch,Values=dlami-verify-0a1b --query 'Addresses[].AllocationId' --output text); do aws ec2 release-address --region us-east-1 --allocation-id \"$a\"; done"},
		{Leak{Kind: KindPlacementGroup, IDs: []string{"dlami-verify-0a1b"}}, "aws ec2 delete-placement-group --region us-east-1 --group-name dlami-verify-0a1b"},
	} {
		if got := tc.leak.Command(region); got != tc.want {
			t.Errorf("%s: %q\nwant %q", tc.leak.What(), got, tc.want)
		}
	}
}

// A denied lookup of the leftover interfaces cannot tell whether any is there: it is named
// with the command that finds them by tag, and the security group is still tried (EC2 refuses
// it itself while an interface is in it). Here none is: the group goes.
func TestCleanupTriesTheGroupWhenTheInterfaceLookupIsDenied(t *testing.T) {
	f := newFake(t)
	in, err := Launch(context.Background(), f.client(region), efaSpec("p6-b200.48xlarge"), discard)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.SetFault(awsfake.OpDescribeNetworkInterfaces, region, awsfake.Fault{AccessDenied: true})
	leaks := Leaks(Cleanup(context.Background(), in, discard))
	if len(leaks) != 1 || leaks[0].Kind != KindInterface || len(leaks[0].IDs) != 0 || !strings.HasPrefix(leaks[0].Command(region), "for eni in $(aws ec2 describe-network-interfaces") {
		t.Fatalf("leaks %+v", leaks)
	}
	assertNothingLeft(t, f)
}

// A type whose interface limits EC2's public answers lack (p6e-gb200.36xlarge: 17 cards, 16
// EFA, no MaximumNetworkInterfaces; grace-blackwell.md 1.1) still takes an efa-only interface on
// device 0 of every card but card 0; a second device on a card needs the figure.
func TestPlanLayoutWithoutInterfaceLimits(t *testing.T) {
	info := types.InstanceTypeInfo{InstanceType: "p6e-gb200.36xlarge", NetworkInfo: &types.NetworkInfo{
		EfaSupported: aws.Bool(true), EfaInfo: &types.EfaInfo{MaximumEfaInterfaces: aws.Int32(16)}, MaximumNetworkCards: aws.Int32(17)}}
	for _, tc := range []struct {
		want   int
		layout string
	}{{EFAAll, "0/0 interface, 1-16/0 efa-only"}, {4, "0/0 interface, 1-4/0 efa-only"}} {
		l, err := PlanLayout(info, tc.want, "efa")
		if err != nil {
			t.Fatal(err)
		}
		if got := l.String(); got != tc.layout {
			t.Errorf("efa %d: layout %s, want %s", tc.want, got, tc.layout)
		}
	}
}

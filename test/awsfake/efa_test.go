package awsfake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
)

// iface is one NetworkInterface.N of a launch: card, device index, interface type.
type iface struct {
	card, dev int
	typ       string
}

// interfaces builds the SDK's interface list; every entry sends its card, device and type,
// as the User Guide's CLI examples do.
func interfaces(list ...iface) []ec2types.InstanceNetworkInterfaceSpecification {
	var out []ec2types.InstanceNetworkInterfaceSpecification
	for _, i := range list {
		out = append(out, ec2types.InstanceNetworkInterfaceSpecification{NetworkCardIndex: aws.Int32(int32(i.card)),
			DeviceIndex: aws.Int32(int32(i.dev)), InterfaceType: aws.String(i.typ)})
	}
	return out
}

// p5CurrentLayout is the User Guide's P5/P5e use case 1 (current text): 0/0 interface, 0/1
// efa-only, cards 1-31 device 0 efa-only: 33 interfaces, 32 EFA.
func p5CurrentLayout() []iface {
	l := []iface{{0, 0, "interface"}, {0, 1, "efa-only"}}
	for c := 1; c < 32; c++ {
		l = append(l, iface{c, 0, "efa-only"})
	}
	return l
}

// p5OlderLayout is the same use case in the page's older text: 0/0 efa, cards 1-31 device 1
// efa-only: 32 interfaces, 32 EFA.
func p5OlderLayout() []iface {
	l := []iface{{0, 0, "efa"}}
	for c := 1; c < 32; c++ {
		l = append(l, iface{c, 1, "efa-only"})
	}
	return l
}

// p6b200Layout is P6-B200 use case 1 (0/0 interface, 0/1 efa-only, cards 1-7 device 0
// efa-only) and, with ena, use case 2 (plus interface at device 1 on cards 1-7).
func p6b200Layout(ena bool) []iface {
	l := []iface{{0, 0, "interface"}, {0, 1, "efa-only"}}
	for c := 1; c < 8; c++ {
		l = append(l, iface{c, 0, "efa-only"})
		if ena {
			l = append(l, iface{c, 1, "interface"})
		}
	}
	return l
}

// p6b300Layout is P6-B300 use case 1: 0/0 interface, cards 1-16 device 0 efa-only (card 0 is
// ENA-only).
func p6b300Layout() []iface {
	l := []iface{{0, 0, "interface"}}
	for c := 1; c <= 16; c++ {
		l = append(l, iface{c, 0, "efa-only"})
	}
	return l
}

func seq(from, to int) []int {
	var out []int
	for c := from; c <= to; c++ {
		out = append(out, c)
	}
	return out
}

// Every layout EC2 refuses is refused with EC2's code (the message verbatim where it is
// public), before anything exists: no instance, no interface.
func TestRunInstancesRefusesWhatEC2Refuses(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	ctx := context.Background()
	withPrimary := func(extra ...iface) []iface { return append([]iface{{0, 0, "interface"}}, extra...) }
	nineEFA := append(p6b200Layout(false), iface{1, 1, "efa-only"})
	tests := []struct {
		name      string
		typ       string
		ifaces    []iface
		mutate    func(*ec2.RunInstancesInput)
		code, msg string
	}{
		{"EFA on a type without EFA", "g5.xlarge", withPrimary(iface{0, 1, "efa-only"}), nil,
			"InvalidParameterCombination", "g5.xlarge instances do not support Elastic Fabric Adapters."},
		{"EFA on a G size without EFA", "g6e.4xlarge", withPrimary(iface{0, 1, "efa-only"}), nil,
			"InvalidParameterCombination", "g6e.4xlarge instances do not support Elastic Fabric Adapters."},
		{"a second EFA on g6e.12xlarge", "g6e.12xlarge", []iface{{0, 0, "efa"}, {0, 1, "efa-only"}}, nil,
			"InvalidParameterValue", "2 EFA network interfaces (InterfaceType efa or efa-only); g6e.12xlarge supports at most 1"},
		{"a second card on g6e.12xlarge", "g6e.12xlarge", withPrimary(iface{1, 0, "efa-only"}), nil,
			"InvalidParameterValue", "network card index '1' is not valid for g6e.12xlarge: it has 1 network cards"},
		{"EFA on the CPU control type", "c7i.8xlarge", []iface{{0, 0, "efa"}}, nil,
			"InvalidParameterCombination", "c7i.8xlarge instances do not support Elastic Fabric Adapters."},
		{"more EFA interfaces than MaximumEfaInterfaces", "p6-b200.48xlarge", nineEFA, nil,
			"InvalidParameterValue", "9 EFA network interfaces (InterfaceType efa or efa-only); p6-b200.48xlarge supports at most 8"},
		{"card index past MaximumNetworkCards", "p6-b200.48xlarge", withPrimary(iface{8, 0, "efa-only"}), nil,
			"InvalidParameterValue", "network card index '8' is not valid for p6-b200.48xlarge: it has 8 network cards"},
		{"device index past the card's MaximumNetworkInterfaces", "p5.48xlarge", withPrimary(iface{2, 2, "efa-only"}), nil,
			"InvalidParameterValue", "The specified number '2' for the device index exceeds the maximum number of network interfaces supported by the network card at network card index 2. The maximum devices for this network card is 2. Specify a number from 0 to 1, and try again."},
		{"efa-only as the primary interface", "p5.48xlarge", []iface{{0, 0, "efa-only"}}, nil,
			"InvalidParameterCombination", "You can't use an EFA-only network interface as the primary network interface"},
		{"a public IP with more than one interface", "p5.48xlarge", withPrimary(iface{0, 1, "efa-only"}),
			func(in *ec2.RunInstancesInput) { in.NetworkInterfaces[0].AssociatePublicIpAddress = aws.Bool(true) },
			"InvalidParameterCombination", "The associatePublicIPAddress parameter cannot be specified when launching with multiple network interfaces."},
		{"two interfaces on one card and device index", "p5.48xlarge", withPrimary(iface{1, 0, "efa-only"}, iface{1, 0, "efa-only"}), nil,
			"InvalidParameterValue", "Two network interfaces are specified at network card index 1 and device index 0"},
		{"interfaces plus an instance-level subnet", "p5.48xlarge", withPrimary(),
			func(in *ec2.RunInstancesInput) {
				in.SubnetId = aws.String(e.fake.State("us-east-1", false).Regions["us-east-1"].Subnet.ID)
			},
			"InvalidParameterCombination", "Network interfaces and an instance-level subnet ID may not be specified on the same request"},
		{"interfaces plus instance-level security groups", "p5.48xlarge", withPrimary(),
			func(in *ec2.RunInstancesInput) { in.SecurityGroups = []string{"default"} },
			"InvalidParameterCombination", "Network interfaces and an instance-level security groups may not be specified on the same request"},
		{"no interface at card 0 / device 0", "p5.48xlarge", []iface{{0, 1, "interface"}, {1, 0, "efa-only"}}, nil,
			"InvalidParameterValue", "When specifying network interfaces, you must include a device at index 0 and network card at index 0."},
		{"the primary on another card", "p5.48xlarge", []iface{{1, 0, "interface"}}, nil,
			"InvalidParameterValue", "you must include a device at index 0 and network card at index 0"},
		{"EFA on P6-B300's ENA-only card 0", "p6-b300.48xlarge", withPrimary(iface{0, 1, "efa-only"}), nil,
			"InvalidParameterCombination", "Network card index 0 of p6-b300.48xlarge does not support EFA"},
		{"two EFA on one card", "p5.48xlarge", []iface{{0, 0, "efa"}, {0, 1, "efa-only"}}, nil,
			"InvalidParameterCombination", "Network card index 0 has more than one EFA interface"},
		{"no device index", "p5.48xlarge", nil,
			func(in *ec2.RunInstancesInput) {
				in.NetworkInterfaces = []ec2types.InstanceNetworkInterfaceSpecification{{InterfaceType: aws.String("efa")}}
			},
			"InvalidParameterValue", "Each network interface requires a device index."},
		{"an interface type EC2 does not know", "p5.48xlarge", []iface{{0, 0, "trunk"}}, nil,
			"InvalidParameterValue", "'trunk' is not a valid value for interface type. Enter a valid value and try again."},
		{"several interfaces on a type without public figures", "t3.micro", withPrimary(iface{0, 1, "interface"}), nil,
			"InvalidParameterValue", "The fake EC2 cannot judge this network interface layout for t3.micro"},
		// Into a Capacity Block: EC2 launches p6e-gb200 nowhere else (capacityblocks.go).
		{"a second interface on a card whose limit is not found", "p6e-gb200.36xlarge", withPrimary(iface{0, 1, "interface"}), intoBlock,
			"InvalidParameterValue", "NetworkCards[0].MaximumNetworkInterfaces is not in its public figures"},
		{"an unknown placement group", "p5.48xlarge", p5CurrentLayout(),
			func(in *ec2.RunInstancesInput) { in.Placement = &ec2types.Placement{GroupName: aws.String("nowhere")} },
			"InvalidPlacementGroup.Unknown", "The Placement Group 'nowhere' is unknown."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := &ec2.RunInstancesInput{ImageId: aws.String(dlamiID("us-east-1", "20261002")), InstanceType: ec2types.InstanceType(tc.typ),
				MinCount: aws.Int32(1), MaxCount: aws.Int32(1), NetworkInterfaces: interfaces(tc.ifaces...)}
			if tc.mutate != nil {
				tc.mutate(in)
			}
			_, err := c.RunInstances(ctx, in)
			if errorCode(err) != tc.code || httpStatus(err) != http.StatusBadRequest || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v (HTTP %d), want %s %q", err, httpStatus(err), tc.code, tc.msg)
			}
			rs := e.fake.State("us-east-1", true).Regions["us-east-1"]
			if len(rs.Instances) != 0 || len(rs.NetworkInterfaces) != 0 {
				t.Errorf("a refused launch left %d instances, %d interfaces", len(rs.Instances), len(rs.NetworkInterfaces))
			}
		})
	}
}

// The layouts the User Guide documents, current and older, are accepted; the instance has
// one interface per entry (in card order, efa-only without an IP, no public IP with several)
// and its host is asked for exactly the EFA devices the launch attached.
func TestEFALayoutsBecomeInterfacesAndDevices(t *testing.T) {
	tests := []struct {
		name, typ string
		ifaces    []iface
		wantCards []int
	}{
		{"p5.48xlarge, 32 EFA, current layout", "p5.48xlarge", p5CurrentLayout(), seq(0, 31)},
		{"p5.48xlarge, 32 EFA, older layout", "p5.48xlarge", p5OlderLayout(), seq(0, 31)},
		{"p6-b200.48xlarge, 8 EFA, use case 1", "p6-b200.48xlarge", p6b200Layout(false), seq(0, 7)},
		{"p6-b200.48xlarge, 8 EFA and 8 ENA, use case 2", "p6-b200.48xlarge", p6b200Layout(true), seq(0, 7)},
		{"p6-b300.48xlarge, 16 EFA on cards 1-16", "p6-b300.48xlarge", p6b300Layout(), seq(1, 16)},
		{"g5.48xlarge, its one EFA", "g5.48xlarge", []iface{{0, 0, "interface"}, {0, 1, "efa-only"}}, []int{0}},
		// The generic User Guide rule on the G sizes: primary ENA at 0/0, efa-only at 0/1 (card 0
		// takes EFA), then device 0 of each further card.
		{"g6e.12xlarge, its one EFA", "g6e.12xlarge", []iface{{0, 0, "interface"}, {0, 1, "efa-only"}}, []int{0}},
		{"g6e.24xlarge, 2 EFA on its 2 cards", "g6e.24xlarge", []iface{{0, 0, "interface"}, {0, 1, "efa-only"}, {1, 0, "efa-only"}}, []int{0, 1}},
		{"gr6.8xlarge, its one EFA", "gr6.8xlarge", []iface{{0, 0, "interface"}, {0, 1, "efa-only"}}, []int{0}},
		{"p5.48xlarge, a skipped card", "p5.48xlarge", []iface{{0, 0, "interface"}, {2, 0, "efa-only"}, {5, 1, "efa"}}, []int{2, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &testMachines{}
			e := newEC2Env(t, m)
			c := e.client("us-east-1")
			inst := e.run(t, c, &ec2.RunInstancesInput{InstanceType: ec2types.InstanceType(tc.typ), NetworkInterfaces: interfaces(tc.ifaces...)})
			id := aws.ToString(inst.InstanceId)
			m.waitCalls(t, "Start "+id)
			if got := m.specs[0].Network.EFACards; !slices.Equal(got, tc.wantCards) {
				t.Errorf("the host gets EFA cards %v, want %v", got, tc.wantCards)
			}
			if aws.ToString(inst.PublicIpAddress) != "" {
				t.Errorf("public IP %q with %d interfaces; EC2 gives none", aws.ToString(inst.PublicIpAddress), len(tc.ifaces))
			}
			got := instanceOf(t, c, id).NetworkInterfaces
			if len(got) != len(tc.ifaces) {
				t.Fatalf("DescribeInstances lists %d interfaces, want %d", len(got), len(tc.ifaces))
			}
			for i, ni := range got {
				card, dev := aws.ToInt32(ni.Attachment.NetworkCardIndex), aws.ToInt32(ni.Attachment.DeviceIndex)
				if i > 0 {
					pc, pd := aws.ToInt32(got[i-1].Attachment.NetworkCardIndex), aws.ToInt32(got[i-1].Attachment.DeviceIndex)
					if pc > card || pc == card && pd >= dev {
						t.Errorf("interface %d (%d/%d) after %d/%d: want card order", i, card, dev, pc, pd)
					}
				}
				typ := aws.ToString(ni.InterfaceType)
				if hasIP := aws.ToString(ni.PrivateIpAddress) != ""; hasIP == (typ == "efa-only") {
					t.Errorf("interface %d/%d (%s) private IP %q: efa-only has none, the others one", card, dev, typ, aws.ToString(ni.PrivateIpAddress))
				}
				if card == 0 && dev == 0 && aws.ToString(ni.PrivateIpAddress) != aws.ToString(inst.PrivateIpAddress) {
					t.Errorf("primary private IP %q, instance's %q", aws.ToString(ni.PrivateIpAddress), aws.ToString(inst.PrivateIpAddress))
				}
				if len(ni.Groups) != 1 || aws.ToString(ni.Groups[0].GroupName) != "default" {
					t.Errorf("interface %d/%d groups %+v, want the VPC's default group", card, dev, ni.Groups)
				}
			}
			dni, err := c.DescribeNetworkInterfaces(context.Background(), &ec2.DescribeNetworkInterfacesInput{Filters: []ec2types.Filter{
				{Name: aws.String("attachment.instance-id"), Values: []string{id}}, {Name: aws.String("interface-type"), Values: []string{"efa", "efa-only"}}}})
			if err != nil {
				t.Fatalf("DescribeNetworkInterfaces: %v", err)
			}
			if len(dni.NetworkInterfaces) != len(tc.wantCards) {
				t.Errorf("DescribeNetworkInterfaces lists %d EFA interfaces, want %d", len(dni.NetworkInterfaces), len(tc.wantCards))
			}
			if _, err := c.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return instanceOfState(t, c, id) == "terminated" })
			if left := e.fake.State("us-east-1", true).Regions["us-east-1"].NetworkInterfaces; len(left) != 0 {
				t.Errorf("interfaces launched with DeleteOnTermination outlive the instance: %d", len(left))
			}
		})
	}
}

// amazon-ebs's launch (one default interface) gives no EFA device, whatever the type, and the
// public IP the default subnet maps.
func TestDefaultLaunchHasNoEFA(t *testing.T) {
	for _, typ := range []string{"p5.48xlarge", "p6-b200.48xlarge", "t3.micro"} {
		t.Run(typ, func(t *testing.T) {
			m := &testMachines{}
			e := newEC2Env(t, m)
			c := e.client("us-east-1")
			inst := e.run(t, c, &ec2.RunInstancesInput{InstanceType: ec2types.InstanceType(typ)})
			m.waitCalls(t, "Start "+aws.ToString(inst.InstanceId))
			if n := m.specs[0].Network; len(n.EFACards) != 0 {
				t.Errorf("a default launch gives the host EFA cards %v", n.EFACards)
			}
			got := instanceOf(t, c, aws.ToString(inst.InstanceId))
			if len(got.NetworkInterfaces) != 1 || aws.ToString(got.NetworkInterfaces[0].InterfaceType) != "interface" ||
				aws.ToString(got.PublicIpAddress) == "" || aws.ToString(got.PublicIpAddress) != aws.ToString(got.PrivateIpAddress) {
				t.Errorf("interfaces %+v, public %q", got.NetworkInterfaces, aws.ToString(got.PublicIpAddress))
			}
			if st := e.fake.State("us-east-1", true).Regions["us-east-1"].Instances[0]; st.EFATraffic && len(st.EFACards) > 0 {
				t.Errorf("state %+v", st)
			}
		})
	}
	// One interface with AssociatePublicIpAddress=false: no public IP.
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	in := &ec2.RunInstancesInput{NetworkInterfaces: interfaces(iface{0, 0, "interface"})}
	in.NetworkInterfaces[0].AssociatePublicIpAddress = aws.Bool(false)
	if ip := aws.ToString(e.run(t, c, in).PublicIpAddress); ip != "" {
		t.Errorf("AssociatePublicIpAddress=false gave public IP %q", ip)
	}
}

// DescribeInstanceTypes answers the fact sheet's figures, leaves out what it marks "not
// found", and refuses a type it has none for.
func TestDescribeInstanceTypes(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	ctx := context.Background()
	out, err := c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{
		"p5.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge", "g5.xlarge", "p6e-gb200.36xlarge", "c7i.8xlarge"}})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]ec2types.InstanceTypeInfo{}
	for _, it := range out.InstanceTypes {
		by[string(it.InstanceType)] = it
	}
	p5 := by["p5.48xlarge"]
	n := p5.NetworkInfo
	if !aws.ToBool(n.EfaSupported) || aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces) != 32 || aws.ToInt32(n.MaximumNetworkCards) != 32 ||
		aws.ToInt32(n.MaximumNetworkInterfaces) != 64 || aws.ToInt32(n.DefaultNetworkCardIndex) != 0 || len(n.NetworkCards) != 32 ||
		aws.ToInt32(n.NetworkCards[31].NetworkCardIndex) != 31 || aws.ToInt32(n.NetworkCards[31].MaximumNetworkInterfaces) != 2 ||
		aws.ToString(n.NetworkPerformance) != "3200 Gigabit" || aws.ToInt32(n.Ipv4AddressesPerInterface) != 50 {
		t.Errorf("p5.48xlarge network %+v", n)
	}
	if g := p5.GpuInfo.Gpus[0]; aws.ToString(g.Name) != "H100" || aws.ToInt32(g.Count) != 8 || aws.ToInt32(g.MemoryInfo.SizeInMiB) != 81920 ||
		aws.ToInt32(p5.VCpuInfo.DefaultVCpus) != 192 || aws.ToInt64(p5.MemoryInfo.SizeInMiB) != 2097152 ||
		!slices.Equal(p5.ProcessorInfo.SupportedArchitectures, []ec2types.ArchitectureType{"x86_64"}) {
		t.Errorf("p5.48xlarge GPU %+v vCPU %+v memory %+v", g, p5.VCpuInfo, p5.MemoryInfo)
	}
	if n := by["p6-b200.48xlarge"].NetworkInfo; aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces) != 8 || aws.ToInt32(n.MaximumNetworkCards) != 8 ||
		aws.ToInt32(n.MaximumNetworkInterfaces) != 32 || aws.ToInt32(n.NetworkCards[7].MaximumNetworkInterfaces) != 4 || n.NetworkPerformance != nil {
		t.Errorf("p6-b200.48xlarge network %+v (NetworkPerformance is not found: left out)", n)
	}
	if n := by["p6-b300.48xlarge"].NetworkInfo; aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces) != 16 || aws.ToInt32(n.MaximumNetworkCards) != 17 || len(n.NetworkCards) != 17 {
		t.Errorf("p6-b300.48xlarge network %+v", n)
	}
	if g5 := by["g5.xlarge"]; aws.ToBool(g5.NetworkInfo.EfaSupported) || g5.NetworkInfo.EfaInfo != nil || aws.ToString(g5.GpuInfo.Gpus[0].Name) != "A10G" {
		t.Errorf("g5.xlarge %+v", g5.NetworkInfo)
	}
	if st := p5.InstanceStorageInfo; st == nil || st.NvmeSupport != ec2types.EphemeralNvmeSupportRequired || aws.ToInt64(st.TotalSizeInGB) != 30400 {
		t.Errorf("p5.48xlarge InstanceStorageInfo %+v, want NVMe required, 30400 GB (K-fake)", st)
	}
	if c7 := by["c7i.8xlarge"]; c7.GpuInfo != nil || aws.ToInt32(c7.VCpuInfo.DefaultVCpus) != 32 || aws.ToBool(c7.NetworkInfo.EfaSupported) || c7.InstanceStorageInfo != nil {
		t.Errorf("c7i.8xlarge %+v", c7)
	}
	gb := by["p6e-gb200.36xlarge"]
	if gb.VCpuInfo != nil || gb.MemoryInfo != nil || gb.GpuInfo != nil || gb.ProcessorInfo != nil || gb.NetworkInfo.EfaInfo == nil || aws.ToInt32(gb.NetworkInfo.EfaInfo.MaximumEfaInterfaces) != 16 ||
		gb.NetworkInfo.MaximumNetworkInterfaces != nil || len(gb.NetworkInfo.NetworkCards) != 0 || aws.ToInt32(gb.NetworkInfo.MaximumNetworkCards) != 17 {
		t.Errorf("p6e-gb200.36xlarge answers figures the fact sheet does not have: %+v", gb)
	}
	_, err = c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"p5.48xlarge", "t3.micro"}})
	if errorCode(err) != "InvalidInstanceType" || !strings.Contains(err.Error(), "t3.micro") {
		t.Errorf("a type without figures: %v", err)
	}
	all, err := c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{})
	if err != nil {
		t.Fatal(err)
	}
	// 46 profiled types (internal/profile) and the c7i.8xlarge control.
	if len(all.InstanceTypes) != len(DescribableInstanceTypes()) || len(DescribableInstanceTypes()) != 47 {
		t.Errorf("all types: %d", len(all.InstanceTypes))
	}
	efa, err := c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{
		{Name: aws.String("network-info.efa-supported"), Values: []string{"true"}}, {Name: aws.String("instance-type"), Values: []string{"g*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	// K-doc's vpc.amazonaws.com/efa: g5, g6 and g6e from 8xlarge up (five sizes each) and
	// gr6.8xlarge.
	if len(efa.InstanceTypes) != 16 {
		t.Errorf("EFA-capable g types: %d, want 16", len(efa.InstanceTypes))
	}
	pager := ec2.NewDescribeInstanceTypesPaginator(c, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(5)})
	seen := 0
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen += len(page.InstanceTypes)
	}
	if seen != 47 {
		t.Errorf("paged through %d types, want 47", seen)
	}
}

// Every type internal/profile knows is described, in one call, and agrees with the profile on
// what both state (architecture, GPU count, EFA maximum); a few of the rows outside the fact
// sheet's tables are checked figure by figure against their sources.
func TestDescribeInstanceTypesCoversEveryProfile(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	var want []ec2types.InstanceType
	for _, p := range profile.All() {
		want = append(want, ec2types.InstanceType(p.InstanceType))
	}
	if len(want) != 46 {
		t.Fatalf("internal/profile lists %d types; this test was written for 46: describe the new ones first", len(want))
	}
	out, err := c.DescribeInstanceTypes(context.Background(), &ec2.DescribeInstanceTypesInput{InstanceTypes: want})
	if err != nil {
		t.Fatalf("DescribeInstanceTypes of every profiled type: %v", err)
	}
	by := map[string]ec2types.InstanceTypeInfo{}
	for _, it := range out.InstanceTypes {
		by[string(it.InstanceType)] = it
	}
	for _, p := range profile.All() {
		it, ok := by[p.InstanceType]
		if !ok {
			t.Errorf("%s is profiled but not described", p.InstanceType)
			continue
		}
		// InstanceStorageInfo as the profile's NVMe (both from K-doc's instance-local-nvme).
		if got := it.InstanceStorageInfo != nil && it.InstanceStorageInfo.NvmeSupport == ec2types.EphemeralNvmeSupportRequired; got != p.NVMe {
			t.Errorf("%s InstanceStorageInfo %+v, profile NVMe %v", p.InstanceType, it.InstanceStorageInfo, p.NVMe)
		}
		if p.InstanceType == "p6e-gb200.36xlarge" {
			continue // only UG-EFA's card count is public (checked in TestDescribeInstanceTypes)
		}
		if got := it.ProcessorInfo.SupportedArchitectures; !slices.Equal(got, []ec2types.ArchitectureType{ec2types.ArchitectureType(p.Arch)}) {
			t.Errorf("%s architectures %v, profile %s", p.InstanceType, got, p.Arch)
		}
		if it.GpuInfo == nil || len(it.GpuInfo.Gpus) != 1 || aws.ToString(it.GpuInfo.Gpus[0].Manufacturer) != "NVIDIA" {
			t.Errorf("%s GpuInfo %+v, want one NVIDIA entry", p.InstanceType, it.GpuInfo)
			continue
		}
		// g6f/gr6f: a fractional L4 has no Count (K-doc: instance-gpu-count 0); the profile
		// counts the one vGPU nvidia-smi shows.
		fractional := strings.HasPrefix(p.InstanceType, "g6f.") || strings.HasPrefix(p.InstanceType, "gr6f.")
		if got := it.GpuInfo.Gpus[0].Count; fractional && got != nil || !fractional && aws.ToInt32(got) != int32(p.GPUCount) {
			t.Errorf("%s GPU count %v, profile %d", p.InstanceType, got, p.GPUCount)
		}
		n := it.NetworkInfo
		maxEFA := 0
		if n.EfaInfo != nil {
			maxEFA = int(aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces))
		}
		if maxEFA != p.MaxEFA || aws.ToBool(n.EfaSupported) != (p.MaxEFA > 0) {
			t.Errorf("%s EfaSupported %v, MaximumEfaInterfaces %d; profile MaxEFA %d", p.InstanceType, aws.ToBool(n.EfaSupported), maxEFA, p.MaxEFA)
		}
		if len(n.NetworkCards) != int(aws.ToInt32(n.MaximumNetworkCards)) || len(n.NetworkCards) == 0 {
			t.Errorf("%s lists %d network cards, MaximumNetworkCards %d", p.InstanceType, len(n.NetworkCards), aws.ToInt32(n.MaximumNetworkCards))
		}
	}

	// Spot checks against the sources (Karpenter at 1d927085): K-vpc gives the interfaces and
	// cards, K-doc the EFA count, GPUs, vCPUs and memory, K-fake a full g5.12xlarge.
	type figures struct {
		efa, cards, perCard, interfaces, ipv4 int32
		gpu                                   string
		gpus, gpuMiB, vcpus                   int32
		memMiB                                int64
	}
	for typ, f := range map[string]figures{
		"g6e.12xlarge": {efa: 1, cards: 1, perCard: 10, interfaces: 10, ipv4: 30, gpu: "L40S", gpus: 4, gpuMiB: 45776, vcpus: 48, memMiB: 393216},
		"g6e.24xlarge": {efa: 2, cards: 2, perCard: 10, interfaces: 20, ipv4: 50, gpu: "L40S", gpus: 4, gpuMiB: 45776, vcpus: 96, memMiB: 786432},
		"g5.12xlarge":  {efa: 1, cards: 1, perCard: 15, interfaces: 15, ipv4: 50, gpu: "A10G", gpus: 4, gpuMiB: 22888, vcpus: 48, memMiB: 196608},
		"g6.48xlarge":  {efa: 1, cards: 1, perCard: 15, interfaces: 15, ipv4: 50, gpu: "L4", gpus: 8, gpuMiB: 22888, vcpus: 192, memMiB: 786432},
		"gr6.8xlarge":  {efa: 1, cards: 1, perCard: 8, interfaces: 8, ipv4: 30, gpu: "L4", gpus: 1, gpuMiB: 22888, vcpus: 32, memMiB: 262144},
	} {
		it := by[typ]
		n, g := it.NetworkInfo, it.GpuInfo.Gpus[0]
		if aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces) != f.efa || aws.ToInt32(n.MaximumNetworkCards) != f.cards || len(n.NetworkCards) != int(f.cards) ||
			aws.ToInt32(n.NetworkCards[len(n.NetworkCards)-1].MaximumNetworkInterfaces) != f.perCard || aws.ToInt32(n.MaximumNetworkInterfaces) != f.interfaces ||
			aws.ToInt32(n.Ipv4AddressesPerInterface) != f.ipv4 || n.NetworkPerformance != nil {
			t.Errorf("%s network %+v, want %+v (NetworkPerformance not found: left out)", typ, n, f)
		}
		if aws.ToString(g.Name) != f.gpu || aws.ToInt32(g.Count) != f.gpus || aws.ToInt32(g.MemoryInfo.SizeInMiB) != f.gpuMiB ||
			aws.ToInt32(it.VCpuInfo.DefaultVCpus) != f.vcpus || aws.ToInt64(it.MemoryInfo.SizeInMiB) != f.memMiB ||
			it.Hypervisor != "nitro" || aws.ToBool(it.BareMetal) {
			t.Errorf("%s GPU %+v vCPU %d memory %d hypervisor %q", typ, g, aws.ToInt32(it.VCpuInfo.DefaultVCpus), aws.ToInt64(it.MemoryInfo.SizeInMiB), it.Hypervisor)
		}
	}
	if g := by["g5g.metal"]; !aws.ToBool(g.BareMetal) || g.Hypervisor != "" || aws.ToString(g.ProcessorInfo.Manufacturer) != "AWS" ||
		aws.ToInt32(g.GpuInfo.Gpus[0].Count) != 2 || aws.ToInt32(g.GpuInfo.Gpus[0].MemoryInfo.SizeInMiB) != 16384 || aws.ToBool(g.NetworkInfo.EfaSupported) {
		t.Errorf("g5g.metal (K-vpc: bare metal, no hypervisor; K-doc: 2 x t4g 16384 MiB, no EFA): %+v", g)
	}
	if g := by["g6f.large"]; aws.ToInt32(g.GpuInfo.Gpus[0].MemoryInfo.SizeInMiB) != 2861 || aws.ToString(g.GpuInfo.Gpus[0].Name) != "L4" ||
		aws.ToInt32(g.NetworkInfo.MaximumNetworkInterfaces) != 2 || aws.ToInt32(g.VCpuInfo.DefaultVCpus) != 2 {
		t.Errorf("g6f.large (K-doc: 1/8 of an L4, 2861 MiB, 2 vCPUs; K-vpc: 2 interfaces): %+v", g)
	}
}

// The security groups' rules decide EFA traffic: only all-traffic rules naming the group, in
// and out, let it through (0.0.0.0/0 does not), and a change reaches the running host.
func TestSecurityGroupRulesDriveEFATraffic(t *testing.T) {
	m := &testMachines{}
	e := newEC2Env(t, m)
	c := e.client("us-east-1")
	ctx := context.Background()
	sg, err := c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("efa"), Description: aws.String("EFA")})
	if err != nil {
		t.Fatal(err)
	}
	gid := aws.ToString(sg.GroupId)
	self := []ec2types.IpPermission{{IpProtocol: aws.String("-1"), UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: sg.GroupId}}}}
	layout := interfaces(p6b200Layout(false)...)
	for i := range layout {
		layout[i].Groups = []string{gid}
	}
	id := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{NetworkInterfaces: layout}).InstanceId)
	m.waitCalls(t, "Start "+id)
	if n := m.specs[0].Network; n.EFATraffic || !strings.Contains(n.EFATrafficBlockedBy, "outbound") {
		t.Fatalf("a new group (egress 0.0.0.0/0 only): %+v, want EFA traffic blocked for want of an outbound self rule", n)
	}
	if _, err := c.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: sg.GroupId, IpPermissions: self}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AuthorizeSecurityGroupEgress(ctx, &ec2.AuthorizeSecurityGroupEgressInput{GroupId: sg.GroupId,
		IpPermissions: []ec2types.IpPermission{{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(0), ToPort: aws.Int32(65535), UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: sg.GroupId}}}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if slices.ContainsFunc(m.Calls(), func(c string) bool { return strings.HasPrefix(c, "SetNetwork") }) {
		t.Fatalf("TCP to itself is not all traffic, yet the host was told: %v", m.Calls())
	}
	if _, err := c.AuthorizeSecurityGroupEgress(ctx, &ec2.AuthorizeSecurityGroupEgressInput{GroupId: sg.GroupId, IpPermissions: self}); err != nil {
		t.Fatal(err)
	}
	m.waitCalls(t, "SetNetwork "+id+" efa-traffic=true")
	if st := e.fake.State("us-east-1", true).Regions["us-east-1"].Instances[0]; !st.EFATraffic {
		t.Error("state: EFA traffic still blocked after the self rules were added")
	}
	if _, err := c.AuthorizeSecurityGroupEgress(ctx, &ec2.AuthorizeSecurityGroupEgressInput{GroupId: sg.GroupId, IpPermissions: self}); errorCode(err) != "InvalidPermission.Duplicate" {
		t.Errorf("the same self rule again: %v", err)
	}
	d, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{gid}})
	if err != nil || len(d.SecurityGroups[0].IpPermissionsEgress) != 3 || len(d.SecurityGroups[0].IpPermissions) != 1 ||
		aws.ToString(d.SecurityGroups[0].IpPermissions[0].UserIdGroupPairs[0].GroupId) != gid {
		t.Errorf("DescribeSecurityGroups: %v %+v", err, d)
	}
	// The fault the verification must meet: the self rule removed while it runs.
	if _, err := c.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: sg.GroupId, IpPermissions: self}); err != nil {
		t.Fatal(err)
	}
	m.waitCalls(t, "SetNetwork "+id+" efa-traffic=false")
	st := e.fake.State("us-east-1", true).Regions["us-east-1"].Instances[0]
	if st.EFATraffic || !slices.Equal(st.EFACards, seq(0, 7)) {
		t.Errorf("state: EFA cards %v traffic %t", st.EFACards, st.EFATraffic)
	}
	// Revoking what is not there is no error on a VPC group: the answer lists it.
	rv, err := c.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: sg.GroupId, IpPermissions: self})
	if err != nil || !aws.ToBool(rv.Return) || len(rv.UnknownIpPermissions) != 1 {
		t.Errorf("revoking a missing rule: %v %+v", err, rv)
	}
	// The VPC's default group lets its members in but has no outbound rule to itself.
	m2 := &testMachines{}
	e2 := newEC2Env(t, m2)
	c2 := e2.client("us-east-1")
	id2 := aws.ToString(e2.run(t, c2, &ec2.RunInstancesInput{NetworkInterfaces: interfaces(p6b200Layout(false)...)}).InstanceId)
	m2.waitCalls(t, "Start "+id2)
	if n := m2.specs[0].Network; n.EFATraffic {
		t.Errorf("default group: EFA traffic allowed (%+v)", n)
	}
}

// Placement groups: created, described, used by a launch, refused for deletion while an
// instance is in them, then deleted; the state dump lists them.
func TestPlacementGroups(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	ctx := context.Background()
	pg, err := c.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{GroupName: aws.String("dlami-verify"), Strategy: ec2types.PlacementStrategyCluster,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: "placement-group", Tags: []ec2types.Tag{{Key: aws.String("dlami:run"), Value: aws.String("r1")}}}}})
	if err != nil || aws.ToString(pg.PlacementGroup.GroupName) != "dlami-verify" || !strings.HasPrefix(aws.ToString(pg.PlacementGroup.GroupId), "pg-") ||
		pg.PlacementGroup.State != ec2types.PlacementGroupStateAvailable || !strings.HasSuffix(aws.ToString(pg.PlacementGroup.GroupArn), ":placement-group/dlami-verify") {
		t.Fatalf("CreatePlacementGroup: %v %+v", err, pg)
	}
	if _, err := c.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{GroupName: aws.String("dlami-verify"), Strategy: ec2types.PlacementStrategyCluster}); errorCode(err) != "InvalidPlacementGroup.Duplicate" {
		t.Errorf("duplicate: %v", err)
	}
	d, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:dlami:run"), Values: []string{"r1"}}}})
	if err != nil || len(d.PlacementGroups) != 1 || d.PlacementGroups[0].Strategy != ec2types.PlacementStrategyCluster {
		t.Errorf("described by tag: %v %+v", err, d)
	}
	id := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{InstanceType: "p5.48xlarge", NetworkInterfaces: interfaces(p5CurrentLayout()...),
		Placement: &ec2types.Placement{GroupName: aws.String("dlami-verify")}}).InstanceId)
	if g := aws.ToString(instanceOf(t, c, id).Placement.GroupName); g != "dlami-verify" {
		t.Errorf("instance placement group %q", g)
	}
	_, err = c.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String("dlami-verify")})
	if errorCode(err) != "InvalidPlacementGroup.InUse" || !strings.Contains(err.Error(), "The placement group 'dlami-verify' is in use and may not be deleted.") {
		t.Errorf("deleting a group with a running instance: %v", err)
	}
	if rs := e.fake.State("us-east-1", true).Regions["us-east-1"]; len(rs.PlacementGroups) != 1 || rs.PlacementGroups[0].Tags["dlami:run"] != "r1" || rs.Instances[0].PlacementGroup != "dlami-verify" {
		t.Errorf("state: %+v %+v", rs.PlacementGroups, rs.Instances)
	}
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return instanceOfState(t, c, id) == "terminated" })
	if _, err := c.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String("dlami-verify")}); err != nil {
		t.Fatalf("deleting the group once its instance is terminated: %v", err)
	}
	if _, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{GroupNames: []string{"dlami-verify"}}); errorCode(err) != "InvalidPlacementGroup.Unknown" {
		t.Errorf("a deleted group described: %v", err)
	}
	if _, err := c.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String("dlami-verify")}); errorCode(err) != "InvalidPlacementGroup.Unknown" {
		t.Errorf("deleting it again: %v", err)
	}
	if left := e.fake.State("us-east-1", true).Regions["us-east-1"].PlacementGroups; len(left) != 0 {
		t.Errorf("left: %+v", left)
	}
}

// Elastic IPs: allocate, associate with the primary interface of a multi-interface instance
// (EC2's own refusals on the way), the instance's public IP follows, release is refused while
// associated; termination disassociates; everything shows in the state dump until released.
func TestElasticIPs(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	ctx := context.Background()
	al, err := c.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: ec2types.DomainTypeVpc,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: "elastic-ip", Tags: []ec2types.Tag{{Key: aws.String("dlami:run"), Value: aws.String("r1")}}}}})
	if err != nil || !strings.HasPrefix(aws.ToString(al.AllocationId), "eipalloc-") || aws.ToString(al.PublicIp) != "127.1.0.1" {
		t.Fatalf("AllocateAddress: %v %+v", err, al)
	}
	inst := e.run(t, c, &ec2.RunInstancesInput{NetworkInterfaces: interfaces(p6b200Layout(false)...)})
	id := aws.ToString(inst.InstanceId)
	waitFor(t, func() bool { return instanceOfState(t, c, id) == "running" })
	_, err = c.AssociateAddress(ctx, &ec2.AssociateAddressInput{AllocationId: al.AllocationId, InstanceId: inst.InstanceId})
	if errorCode(err) != "InvalidInstanceID" || !strings.Contains(err.Error(), "There are multiple interfaces attached to instance '"+id+"'. Please specify an interface ID for the operation instead.") {
		t.Errorf("associating by instance with 9 interfaces: %v", err)
	}
	var primary, efaOnly string
	for _, ni := range instanceOf(t, c, id).NetworkInterfaces {
		switch {
		case aws.ToInt32(ni.Attachment.NetworkCardIndex) == 0 && aws.ToInt32(ni.Attachment.DeviceIndex) == 0:
			primary = aws.ToString(ni.NetworkInterfaceId)
		case efaOnly == "":
			efaOnly = aws.ToString(ni.NetworkInterfaceId)
		}
	}
	if _, err := c.AssociateAddress(ctx, &ec2.AssociateAddressInput{AllocationId: al.AllocationId, NetworkInterfaceId: aws.String(efaOnly)}); errorCode(err) != "InvalidParameterValue" {
		t.Errorf("associating with an efa-only interface: %v", err)
	}
	as, err := c.AssociateAddress(ctx, &ec2.AssociateAddressInput{AllocationId: al.AllocationId, NetworkInterfaceId: aws.String(primary)})
	if err != nil || !strings.HasPrefix(aws.ToString(as.AssociationId), "eipassoc-") {
		t.Fatalf("AssociateAddress: %v %+v", err, as)
	}
	if ip := aws.ToString(instanceOf(t, c, id).PublicIpAddress); ip != "127.1.0.1" {
		t.Errorf("the instance's public IP is %q, want its Elastic IP", ip)
	}
	if _, err := c.AssociateAddress(ctx, &ec2.AssociateAddressInput{AllocationId: al.AllocationId, NetworkInterfaceId: aws.String(primary)}); errorCode(err) != "Resource.AlreadyAssociated" {
		t.Errorf("associating again without AllowReassociation: %v", err)
	}
	if _, err := c.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: al.AllocationId}); errorCode(err) != "InvalidIPAddress.InUse" {
		t.Errorf("releasing an associated address: %v", err)
	}
	da, err := c.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: []string{id}}}})
	if err != nil || len(da.Addresses) != 1 || aws.ToString(da.Addresses[0].NetworkInterfaceId) != primary || aws.ToString(da.Addresses[0].AssociationId) != aws.ToString(as.AssociationId) {
		t.Errorf("DescribeAddresses: %v %+v", err, da)
	}
	if _, err := c.DisassociateAddress(ctx, &ec2.DisassociateAddressInput{AssociationId: as.AssociationId}); err != nil {
		t.Fatal(err)
	}
	if ip := aws.ToString(instanceOf(t, c, id).PublicIpAddress); ip != "" {
		t.Errorf("after disassociation the instance has public IP %q; its launch gave none", ip)
	}
	if _, err := c.DisassociateAddress(ctx, &ec2.DisassociateAddressInput{AssociationId: as.AssociationId}); errorCode(err) != "InvalidAssociationID.NotFound" {
		t.Errorf("disassociating again: %v", err)
	}
	// Termination disassociates; the address stays allocated (a leftover until released).
	if _, err := c.AssociateAddress(ctx, &ec2.AssociateAddressInput{AllocationId: al.AllocationId, NetworkInterfaceId: aws.String(primary)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return instanceOfState(t, c, id) == "terminated" })
	eips := e.fake.State("us-east-1", true).Regions["us-east-1"].ElasticIPs
	if len(eips) != 1 || eips[0].AssociationID != "" || eips[0].Tags["dlami:run"] != "r1" {
		t.Errorf("after termination: %+v, want the address allocated, unassociated", eips)
	}
	if _, err := c.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: al.AllocationId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: al.AllocationId}); errorCode(err) != "InvalidAllocationID.NotFound" {
		t.Errorf("releasing it again: %v", err)
	}
	if _, err := c.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{PublicIp: aws.String("127.1.0.1")}); errorCode(err) != "InvalidParameterValue" ||
		!strings.Contains(err.Error(), "You must specify an allocation id when releasing a VPC elastic IP address") {
		t.Errorf("releasing by public IP: %v", err)
	}
	if left := e.fake.State("us-east-1", true).Regions["us-east-1"].ElasticIPs; len(left) != 0 {
		t.Errorf("left: %+v", left)
	}
}

// With simulated hosts an associated Elastic IP reaches the instance's host: a connection to
// its port goes to the instance's address, and stops when the address is disassociated.
func TestElasticIPReachesTheHost(t *testing.T) {
	host, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2 here: %v", err)
	}
	defer host.Close()
	go func() {
		for {
			conn, err := host.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(conn, "SSH-2.0-simulated\r\n")
			conn.Close()
		}
	}()
	m := &testMachines{}
	e := newEC2Env(t, m)
	_, port, _ := net.SplitHostPort(host.Addr().String())
	e.fake.sshPort, _ = strconv.Atoi(port)
	c := e.client("us-east-1")
	ctx := context.Background()
	inst := e.run(t, c, &ec2.RunInstancesInput{NetworkInterfaces: interfaces(p6b200Layout(false)...)})
	if aws.ToString(inst.PrivateIpAddress) != "127.0.0.2" {
		t.Fatalf("instance address %s", aws.ToString(inst.PrivateIpAddress))
	}
	waitFor(t, func() bool { return instanceOfState(t, c, aws.ToString(inst.InstanceId)) == "running" })
	al, err := c.AllocateAddress(ctx, &ec2.AllocateAddressInput{})
	if err != nil {
		t.Fatal(err)
	}
	primary := aws.ToString(instanceOf(t, c, aws.ToString(inst.InstanceId)).NetworkInterfaces[0].NetworkInterfaceId)
	as, err := c.AssociateAddress(ctx, &ec2.AssociateAddressInput{AllocationId: al.AllocationId, NetworkInterfaceId: aws.String(primary)})
	if err != nil {
		t.Fatal(err)
	}
	eip := net.JoinHostPort(aws.ToString(al.PublicIp), port)
	conn, err := net.DialTimeout("tcp", eip, 2*time.Second)
	if err != nil {
		t.Fatalf("dialling the Elastic IP %s: %v", eip, err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	banner, err := io.ReadAll(conn)
	conn.Close()
	if string(banner) != "SSH-2.0-simulated\r\n" {
		t.Errorf("through the Elastic IP: %q, %v", banner, err)
	}
	if _, err := c.DisassociateAddress(ctx, &ec2.DisassociateAddressInput{AssociationId: as.AssociationId}); err != nil {
		t.Fatal(err)
	}
	if conn, err := net.DialTimeout("tcp", eip, time.Second); err == nil {
		conn.Close()
		t.Errorf("the Elastic IP still answers after disassociation")
	}
}

// An interface launched with DeleteOnTermination=false outlives its instance: it shows as
// "available" in DescribeNetworkInterfaces and the state dump (what a run left behind), keeps
// its security group from being deleted, and goes with DeleteNetworkInterface.
func TestDetachedInterfaceIsALeftover(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	ctx := context.Background()
	sg, err := c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("keep"), Description: aws.String("keep")})
	if err != nil {
		t.Fatal(err)
	}
	layout := interfaces(iface{0, 0, "interface"}, iface{1, 0, "efa-only"})
	for i := range layout {
		layout[i].Groups = []string{aws.ToString(sg.GroupId)}
	}
	layout[1].DeleteOnTermination = aws.Bool(false)
	id := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{InstanceType: "p5.48xlarge", NetworkInterfaces: layout}).InstanceId)
	var kept string
	for _, ni := range instanceOf(t, c, id).NetworkInterfaces {
		if aws.ToString(ni.InterfaceType) == "efa-only" {
			kept = aws.ToString(ni.NetworkInterfaceId)
		}
	}
	if _, err := c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(kept)}); errorCode(err) != "InvalidNetworkInterface.InUse" {
		t.Errorf("deleting an attached interface: %v", err)
	}
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return instanceOfState(t, c, id) == "terminated" })
	left := e.fake.State("us-east-1", true).Regions["us-east-1"].NetworkInterfaces
	if len(left) != 1 || left[0].ID != kept || left[0].Status != "available" || left[0].InstanceID != "" {
		t.Fatalf("after termination: %+v, want only the kept interface, available", left)
	}
	d, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []ec2types.Filter{{Name: aws.String("status"), Values: []string{"available"}}}})
	if err != nil || len(d.NetworkInterfaces) != 1 || d.NetworkInterfaces[0].Attachment != nil {
		t.Errorf("DescribeNetworkInterfaces available: %v %+v", err, d)
	}
	if _, err := c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: sg.GroupId}); errorCode(err) != "DependencyViolation" {
		t.Errorf("deleting the group of a leftover interface: %v", err)
	}
	if _, err := c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(kept)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(kept)}); errorCode(err) != "InvalidNetworkInterfaceID.NotFound" {
		t.Errorf("deleting it again: %v", err)
	}
	if _, err := c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: sg.GroupId}); err != nil {
		t.Errorf("deleting the group once nothing uses it: %v", err)
	}
}

// The new actions take the fault API like every other: a throttle answers EC2's
// RequestLimitExceeded and is consumed; a latency fault outlasts a caller's deadline; every
// action the fake answered shows in actions_served.
func TestNewActionsTakeFaults(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	ctx := context.Background()
	calls := []struct {
		op   string
		call func() error
	}{
		{OpCreatePlacementGroup, func() error {
			_, err := c.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{GroupName: aws.String("g"), Strategy: ec2types.PlacementStrategyCluster})
			return err
		}},
		{OpDescribePlacementGroups, func() error {
			_, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{})
			return err
		}},
		{OpAllocateAddress, func() error { _, err := c.AllocateAddress(ctx, &ec2.AllocateAddressInput{}); return err }},
		{OpDescribeAddresses, func() error { _, err := c.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{}); return err }},
		{OpDescribeInstanceTypes, func() error { _, err := c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{}); return err }},
		{OpDescribeNetworkInterfaces, func() error {
			_, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{})
			return err
		}},
		{OpDeletePlacementGroup, func() error {
			_, err := c.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String("g")})
			return err
		}},
	}
	for _, cl := range calls {
		e.fake.SetFault(cl.op, "", Fault{Throttle: 1})
		if err := cl.call(); errorCode(err) != "RequestLimitExceeded" || httpStatus(err) != http.StatusServiceUnavailable {
			t.Errorf("%s under a throttle: %v", cl.op, err)
		}
		if err := cl.call(); err != nil {
			t.Errorf("%s after the throttle: %v", cl.op, err)
		}
	}
	e.fake.SetFault(OpAssociateAddress, "", Fault{Latency: 2 * time.Second})
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := c.AssociateAddress(short, &ec2.AssociateAddressInput{AllocationId: aws.String("eipalloc-0a"), InstanceId: aws.String("i-0a")})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("AssociateAddress under latency: %v", err)
	}
	served := e.fake.ActionsServed()
	for _, cl := range calls {
		if !slices.Contains(served, "ec2:"+cl.op) {
			t.Errorf("actions_served lacks ec2:%s: %v", cl.op, served)
		}
	}
	if _, _, _, err := ParseFault("CreatePlacementGroup=capacity:1"); err == nil {
		t.Errorf("capacity accepted for CreatePlacementGroup")
	}
	if op, _, _, err := ParseFault(fmt.Sprintf("%s=500:2", OpReleaseAddress)); err != nil || op != OpReleaseAddress {
		t.Errorf("a fault on ReleaseAddress: %v", err)
	}
}

// A type the fact sheet does not have (a GPU type newer than the plugin's profiles) is
// described with its model's figures under its own name, by this fake only; a bad name, a type
// the sheet has and a model it lacks are refused.
func TestAddInstanceType(t *testing.T) {
	f := NewSeeded("us-east-1")
	f.addrBusy = func(string) bool { return false }
	for _, c := range []struct{ name, like, want string }{
		{"p7 future", "p6-b200.48xlarge", "not an instance type name"},
		{"p5.48xlarge", "p6-b200.48xlarge", "already has it"},
		{"p7-future.48xlarge", "p9.1xlarge", "does not have"},
	} {
		if err := f.AddInstanceType(c.name, c.like); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AddInstanceType(%q, %q) = %v, want %q", c.name, c.like, err, c.want)
		}
	}
	if err := f.AddInstanceType("p7-future.48xlarge", "p6-b200.48xlarge"); err != nil {
		t.Fatal(err)
	}
	srv := f.Start()
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = f.Close(ctx)
	})
	c := (&ec2Env{fake: f, url: srv.URL}).client("us-east-1")
	out, err := c.DescribeInstanceTypes(context.Background(), &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"p7-future.48xlarge"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.InstanceTypes) != 1 || out.InstanceTypes[0].InstanceType != "p7-future.48xlarge" || out.InstanceTypes[0].GpuInfo == nil ||
		aws.ToInt32(out.InstanceTypes[0].GpuInfo.Gpus[0].Count) != 8 || aws.ToString(out.InstanceTypes[0].GpuInfo.Gpus[0].Name) != "B200" {
		t.Errorf("p7-future.48xlarge = %+v, want p6-b200.48xlarge's 8 B200", out.InstanceTypes)
	}
	if slices.Contains(DescribableInstanceTypes(), "p7-future.48xlarge") {
		t.Error("the new type leaked into the fact sheet every fake shares")
	}
}

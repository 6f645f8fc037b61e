package launch

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// EC2 gives an instance an EFA device only for a network interface launched with InterfaceType
// efa or efa-only, and never attaches one to a running instance (EC2 User Guide, "Elastic
// Fabric Adapter", "Create and attach an EFA"): every EFA a verification judges is one its own
// RunInstances asked for. The layout below is the User Guide's for instance types with several
// network cards ("Maximize network bandwidth on Amazon EC2 instances with multiple network
// cards", efa-acc-inst-types):
//
//  1. the primary interface, network card 0, device 0, is ENA (InterfaceType interface): "You
//     can't use an EFA-only network interface as the primary network interface";
//  2. if network card 0 supports EFA, an efa-only interface on card 0, device 1;
//  3. an efa-only interface on device 0 of each further card.
//
// On p5.48xlarge and p5e.48xlarge this is the guide's P5 use case 1 (0/0 interface, 0/1
// efa-only, cards 1-31 device 0 efa-only: 32 EFA); on p6-b200.48xlarge its use case 1 (8 EFA);
// on p6-b300.48xlarge, whose card 0 takes no EFA (aws-parallelcluster#7143), its use case 1
// (0/0 interface, cards 1-16 device 0 efa-only: 16 EFA). The facts and their sources are in
// the project's shared/docs/efa-launch.md and ec2-gpu-network-facts.md.

// EFAAll asks for every EFA interface the instance type takes (Spec.EFA).
const EFAAll = -1

// Interface types of a launch's network interfaces.
const (
	InterfaceENA     = "interface"
	InterfaceEFAOnly = "efa-only"
	// InterfaceEFA is an EFA with ENA (an IP address); a layout does not ask for it, but EC2
	// may describe one.
	InterfaceEFA = "efa"
)

// Interface is one network interface of a launch.
type Interface struct {
	Card, Device int
	Type         string
}

// Layout is the network interfaces a launch asks for on one instance type: the primary ENA
// interface first, then one efa-only interface per EFA, in card order.
type Layout struct {
	InstanceType string
	Interfaces   []Interface
	// EFA is how many of the interfaces bring an EFA device.
	EFA int
}

// efaSupported reports whether info says the type takes EFA.
func efaSupported(info types.InstanceTypeInfo) bool {
	n := info.NetworkInfo
	return n != nil && aws.ToBool(n.EfaSupported) && n.EfaInfo != nil && aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces) > 0
}

// efaCards are the network cards that take an EFA interface, in order, each with the device
// index its efa-only interface goes on. A card whose InterfaceTypes DescribeInstanceTypes
// lists takes one when they name efa or efa-only. Where EC2 lists none (no public
// DescribeInstanceTypes answer shows the field for the GPU types), every card takes one when
// the type has at least as many EFA as cards (p4d, p5, p5en, p6-b200, g6e), and every card but
// card 0 when it has fewer (p6-b300: 16 EFA on 17 cards, card 0 ENA-only).
func efaCards(info types.InstanceTypeInfo) []Interface {
	n := info.NetworkInfo
	type card struct {
		index, maxInterfaces int
		types                []types.NetworkCardInterfaceType
	}
	var cards []card
	for _, c := range n.NetworkCards {
		cards = append(cards, card{int(aws.ToInt32(c.NetworkCardIndex)), int(aws.ToInt32(c.MaximumNetworkInterfaces)), c.InterfaceTypes})
	}
	if len(cards) == 0 {
		// No per-card figures: one card per MaximumNetworkCards, each taking as many interfaces
		// as the type.
		for i := range max(int(aws.ToInt32(n.MaximumNetworkCards)), 1) {
			cards = append(cards, card{i, int(aws.ToInt32(n.MaximumNetworkInterfaces)), nil})
		}
	}
	slices.SortFunc(cards, func(a, b card) int { return cmp.Compare(a.index, b.index) })
	listed := slices.ContainsFunc(cards, func(c card) bool { return len(c.types) > 0 })
	maxEFA := int(aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces))
	var out []Interface
	for _, c := range cards {
		device := 0
		if c.index == 0 {
			device = 1 // device 0 is the primary's
		}
		// A card EC2 gives no interface limit for still holds its device 0 (a network card is
		// where an interface attaches; p6e-gb200's per-card and per-type limits are not public,
		// grace-blackwell.md 1.1): only a second device needs the figure.
		takesEFA := device < max(c.maxInterfaces, 1)
		switch {
		case listed:
			takesEFA = takesEFA && (slices.Contains(c.types, types.NetworkCardInterfaceTypeEfa) || slices.Contains(c.types, types.NetworkCardInterfaceTypeEfaOnly))
		case maxEFA < len(cards):
			takesEFA = takesEFA && c.index != 0
		}
		if takesEFA {
			out = append(out, Interface{Card: c.index, Device: device, Type: InterfaceEFAOnly})
		}
	}
	if len(out) > maxEFA {
		out = out[:maxEFA]
	}
	return out
}

// PlanLayout is the layout of a launch on the instance type info describes with want EFA
// interfaces: EFAAll for every one the type takes (none on a type without EFA), 0 for none, or
// a count, which the type must take. setting names the setting that chose want, for errors.
func PlanLayout(info types.InstanceTypeInfo, want int, setting string) (Layout, error) {
	typ := string(info.InstanceType)
	primary := Interface{Card: 0, Device: 0, Type: InterfaceENA}
	l := Layout{InstanceType: typ, Interfaces: []Interface{primary}}
	if want == 0 {
		return l, nil
	}
	if info.NetworkInfo == nil || !efaSupported(info) {
		if want == EFAAll {
			return l, nil
		}
		return Layout{}, fmt.Errorf("%s: %s does not support EFA (DescribeInstanceTypes: EfaSupported false); use efa = \"none\" or an EFA instance type", setting, typ)
	}
	efa := efaCards(info)
	if want != EFAAll {
		if want > len(efa) {
			return Layout{}, fmt.Errorf("%s: %s takes at most %d EFA interfaces (DescribeInstanceTypes: EfaInfo.MaximumEfaInterfaces %d, %d network cards); use a count up to %d, or efa = \"all\"",
				setting, typ, len(efa), aws.ToInt32(info.NetworkInfo.EfaInfo.MaximumEfaInterfaces), max(len(info.NetworkInfo.NetworkCards), int(aws.ToInt32(info.NetworkInfo.MaximumNetworkCards))), len(efa))
		}
		efa = efa[:want]
	}
	if limit := int(aws.ToInt32(info.NetworkInfo.MaximumNetworkInterfaces)); limit > 0 && len(efa)+1 > limit {
		if want != EFAAll {
			return Layout{}, fmt.Errorf("%s: %s takes at most %d network interfaces (DescribeInstanceTypes: MaximumNetworkInterfaces), one of them the primary: use a count up to %d", setting, typ, limit, limit-1)
		}
		efa = efa[:limit-1]
	}
	l.Interfaces = append(l.Interfaces, efa...)
	l.EFA = len(efa)
	return l, nil
}

// String lists the layout as card/device type, one entry per interface, consecutive cards
// with the same device and type as a range: "0/0 interface, 0/1 efa-only, 1-31/0 efa-only".
func (l Layout) String() string {
	var parts []string
	for i := 0; i < len(l.Interfaces); {
		first := l.Interfaces[i]
		j := i + 1
		for j < len(l.Interfaces) && l.Interfaces[j].Device == first.Device && l.Interfaces[j].Type == first.Type &&
			l.Interfaces[j].Card == l.Interfaces[j-1].Card+1 {
			j++
		}
		cards := fmt.Sprint(first.Card)
		if last := l.Interfaces[j-1].Card; j-i > 1 {
			cards = fmt.Sprintf("%d-%d", first.Card, last)
		}
		parts = append(parts, fmt.Sprintf("%s/%d %s", cards, first.Device, first.Type))
		i = j
	}
	return strings.Join(parts, ", ")
}

// describeTypes answers DescribeInstanceTypes for typs in one call (at most a handful: the
// candidates of one launch).
func describeTypes(ctx context.Context, api EC2API, typs []string) (map[string]types.InstanceTypeInfo, error) {
	var want []types.InstanceType
	for _, t := range typs {
		if !slices.Contains(want, types.InstanceType(t)) {
			want = append(want, types.InstanceType(t))
		}
	}
	page, err := api.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: want})
	if err != nil {
		return nil, err
	}
	out := map[string]types.InstanceTypeInfo{}
	for _, it := range page.InstanceTypes {
		out[string(it.InstanceType)] = it
	}
	var missing []string
	for _, t := range want {
		if _, ok := out[string(t)]; !ok {
			missing = append(missing, string(t))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("DescribeInstanceTypes did not describe %s", strings.Join(missing, ", "))
	}
	return out, nil
}

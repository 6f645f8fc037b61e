package awsfake

import (
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// Network interfaces: every instance has one per entry of its launch's NetworkInterface.N, or
// one default interface (card 0, device 0, InterfaceType "interface") when the launch sent none,
// as amazon-ebs does. An EFA device exists only for an interface of type efa or efa-only (EC2
// User Guide, "Elastic Fabric Adapter"; ../shared/docs/efa-launch.md row 1), and only from the
// launch: the fake has no AttachNetworkInterface (an EFA cannot be attached to a running
// instance, efa-launch.md row 2).

// Interface types of InstanceNetworkInterfaceSpecification.InterfaceType.
const (
	InterfaceENA     = "interface" // the default: ENA only
	InterfaceEFA     = "efa"       // EFA with ENA: an EFA device and an IP address
	InterfaceEFAOnly = "efa-only"  // an EFA device, no IP address
)

// InterfaceSpec is one NetworkInterface.N of a RunInstances request.
type InterfaceSpec struct {
	DeviceIndex         int
	NetworkCardIndex    int
	InterfaceType       string
	SubnetID            string
	SecurityGroupIDs    []string
	AssociatePublicIP   *bool // nil: not sent
	DeleteOnTermination bool
}

// EFA reports whether the interface brings an EFA device.
func (s InterfaceSpec) EFA() bool { return isEFAType(s.InterfaceType) }

func isEFAType(t string) bool { return t == InterfaceEFA || t == InterfaceEFAOnly }

// maxCardOrDevice bounds the indexes the parser accepts before the type's figures judge them
// (p6-b300 has 17 cards, p5 64 interfaces: well below this).
const maxCardOrDevice = 1000

// parseInterfaceSpecs reads NetworkInterface.N and refuses what EC2 refuses whatever the
// instance type; checkLaunchLayout judges the rest against the type's figures.
func parseInterfaceSpecs(form url.Values) ([]InterfaceSpec, error) {
	var out []InterfaceSpec
	for _, i := range listIndices(form, "NetworkInterface") {
		p := fmt.Sprintf("NetworkInterface.%d.", i)
		if form.Get(p+"NetworkInterfaceId") != "" {
			// Not an EC2 refusal: the fake creates every interface at launch and cannot attach
			// an existing one.
			return nil, inputError("InvalidParameterValue", "%sNetworkInterfaceId: the fake EC2 does not launch with existing network interfaces; describe the interface with DeviceIndex, NetworkCardIndex, InterfaceType, SubnetId and SecurityGroupId instead", p)
		}
		if form.Get(p+"DeviceIndex") == "" {
			// hashicorp/packer PR #2242 quotes EC2 (InvalidParameterValue).
			return nil, inputError("InvalidParameterValue", "Each network interface requires a device index.")
		}
		s := InterfaceSpec{InterfaceType: orDefault(form.Get(p+"InterfaceType"), InterfaceENA), SubnetID: form.Get(p + "SubnetId"),
			SecurityGroupIDs: indexedList(form, p+"SecurityGroupId")}
		var err error
		if s.DeviceIndex, err = intParam(form, p+"DeviceIndex", 0, 0, maxCardOrDevice); err != nil {
			return nil, err
		}
		if s.NetworkCardIndex, err = intParam(form, p+"NetworkCardIndex", 0, 0, maxCardOrDevice); err != nil {
			return nil, err
		}
		switch s.InterfaceType {
		case InterfaceENA, InterfaceEFA, InterfaceEFAOnly:
		default:
			// The wording of EC2's answer for an InterfaceType it did not know (aws/aws-sdk-go#3095).
			return nil, inputError("InvalidParameterValue", "'%s' is not a valid value for interface type. Enter a valid value and try again.", s.InterfaceType)
		}
		if _, ok := form[p+"AssociatePublicIpAddress"]; ok {
			b, err := boolParam(form, p+"AssociatePublicIpAddress")
			if err != nil {
				return nil, err
			}
			s.AssociatePublicIP = &b
		}
		// The API reference states no default; interfaces EC2 creates at launch are deleted
		// with the instance unless the launch says otherwise.
		s.DeleteOnTermination = true
		if _, ok := form[p+"DeleteOnTermination"]; ok {
			if s.DeleteOnTermination, err = boolParam(form, p+"DeleteOnTermination"); err != nil {
				return nil, err
			}
		}
		if s.SubnetID != "" {
			if err := checkID(s.SubnetID, "subnet", "InvalidSubnetID.Malformed"); err != nil {
				return nil, err
			}
		}
		for _, g := range s.SecurityGroupIDs {
			if err := checkID(g, "sg", "InvalidGroupId.Malformed"); err != nil {
				return nil, err
			}
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, checkInterfaceCombination(out)
}

// checkInterfaceCombination refuses the layouts EC2 refuses whatever the instance type.
func checkInterfaceCombination(specs []InterfaceSpec) error {
	seen := map[[2]int]bool{}
	primary := -1
	for i, s := range specs {
		k := [2]int{s.NetworkCardIndex, s.DeviceIndex}
		if seen[k] {
			// EC2's RunInstances message for this is not public (ec2-gpu-network-facts.md, "Not
			// found"); the code is the one EC2 answers when an attachment takes a device index
			// already in use (cilium/cilium PR #42512).
			return inputError("InvalidParameterValue", "Two network interfaces are specified at network card index %d and device index %d. Each network interface needs its own pair of network card index and device index.", s.NetworkCardIndex, s.DeviceIndex)
		}
		seen[k] = true
		if k == [2]int{0, 0} {
			primary = i
		}
	}
	if primary < 0 {
		// aws/aws-parallelcluster PR #5984 quotes the message; its code is not shown.
		return inputError("InvalidParameterValue", "When specifying network interfaces, you must include a device at index 0 and network card at index 0.")
	}
	if specs[primary].InterfaceType == InterfaceEFAOnly {
		// EC2 User Guide (efa-acc-inst-types): "You can't use an EFA-only network interface as
		// the primary network interface." EC2's error code and message are not public.
		return inputError("InvalidParameterCombination", "You can't use an EFA-only network interface as the primary network interface (network card index 0, device index 0). Use InterfaceType interface or efa there.")
	}
	if len(specs) > 1 {
		for _, s := range specs {
			if s.AssociatePublicIP != nil && *s.AssociatePublicIP {
				// Verbatim (aws/karpenter-provider-aws PR #5666, kubernetes-on-aws PR #8733,
				// erlcloud PR #284). Sending false is accepted: the User Guide's launch-template
				// example sends "AssociatePublicIpAddress": false on every entry.
				return inputError("InvalidParameterCombination", "The associatePublicIPAddress parameter cannot be specified when launching with multiple network interfaces.")
			}
		}
	}
	return nil
}

// checkLaunchLayout judges a launch's interfaces against its type's figures. t is nil for a type
// the fake has no figures for: only a launch with one plain primary interface can go there.
// Where EC2's answer is not public the code is EC2's general one (ec2-gpu-network-facts.md "Not
// found") and the message the fake's own.
func checkLaunchLayout(instanceType string, t *InstanceTypeInfo, specs []InterfaceSpec) (response, bool) {
	efa := 0
	for _, s := range specs {
		if s.EFA() {
			efa++
		}
	}
	unknown := func(figure string) (response, bool) {
		// Not an EC2 answer: the fake cannot judge this launch without the figure.
		return badRequest("InvalidParameterValue", "The fake EC2 cannot judge this network interface layout for %s: %s is not in its public figures (ec2-gpu-network-facts.md); launch with one interface at network card 0, device 0, or add the figure there first",
			instanceType, figure), false
	}
	if t == nil {
		if len(specs) > 1 || efa > 0 {
			return unknown("the instance type")
		}
		return response{}, true
	}
	if efa > 0 {
		switch {
		case t.EfaSupported == nil:
			return unknown("NetworkInfo.EfaSupported")
		case !*t.EfaSupported:
			// The console's wording for a type without EFA (devopsacademyau/academy PR #277,
			// "t2.micro instances do not support Elastic Fabric Adapters."); code not public.
			return badRequest("InvalidParameterCombination", "%s instances do not support Elastic Fabric Adapters.", instanceType), false
		case t.MaximumEfaInterfaces == nil:
			return unknown("EfaInfo.MaximumEfaInterfaces")
		case efa > *t.MaximumEfaInterfaces:
			return badRequest("InvalidParameterValue", "The request specifies %d EFA network interfaces (InterfaceType efa or efa-only); %s supports at most %d (EfaInfo.MaximumEfaInterfaces).",
				efa, instanceType, *t.MaximumEfaInterfaces), false
		}
	}
	efaOnCard := map[int]int{}
	for _, s := range specs {
		if s.NetworkCardIndex > 0 || s.DeviceIndex > 0 {
			if t.MaximumNetworkCards == nil {
				return unknown("NetworkInfo.MaximumNetworkCards")
			}
		}
		if s.NetworkCardIndex >= deref(t.MaximumNetworkCards, 1) {
			return badRequest("InvalidParameterValue", "The specified network card index '%d' is not valid for %s: it has %d network cards (MaximumNetworkCards); specify a number from 0 to %d.",
				s.NetworkCardIndex, instanceType, *t.MaximumNetworkCards, *t.MaximumNetworkCards-1), false
		}
		if s.DeviceIndex > 0 {
			if t.CardInterfaces == nil || s.NetworkCardIndex >= len(t.CardInterfaces) {
				return unknown(fmt.Sprintf("NetworkCards[%d].MaximumNetworkInterfaces", s.NetworkCardIndex))
			}
			if max := t.CardInterfaces[s.NetworkCardIndex]; s.DeviceIndex >= max {
				// Verbatim form (eksctl-io/eksctl #7520, aws/aws-k8s-tester PR #531); the code is
				// not shown there (EKS relays it as InvalidRequest).
				return badRequest("InvalidParameterValue", "The specified number '%d' for the device index exceeds the maximum number of network interfaces supported by the network card at network card index %d. The maximum devices for this network card is %d. Specify a number from 0 to %d, and try again.",
					s.DeviceIndex, s.NetworkCardIndex, max, max-1), false
			}
		}
		if s.EFA() {
			if !t.efaCardAllowed(s.NetworkCardIndex) {
				// UG-EFA: p6-b300 card 0 is ENA-only (aws-parallelcluster#7143); p6e-gb200 card 0
				// ENA. Code and message not public.
				return badRequest("InvalidParameterCombination", "Network card index %d of %s does not support EFA (InterfaceType %s); EFA interfaces go on network cards %s.",
					s.NetworkCardIndex, instanceType, s.InterfaceType, intList(t.EFACards)), false
			}
			efaOnCard[s.NetworkCardIndex]++
			if efaOnCard[s.NetworkCardIndex] > 1 {
				// Mirrors Karpenter's rule ("can have at most one efa device per network card",
				// pkg/apis/v1/ec2nodeclass.go); EC2's own answer is not public.
				return badRequest("InvalidParameterCombination", "Network card index %d has more than one EFA interface; each network card takes at most one EFA (efa or efa-only).", s.NetworkCardIndex), false
			}
		}
	}
	if t.MaximumNetworkInterfaces != nil && len(specs) > *t.MaximumNetworkInterfaces {
		// The old attach-path wording (chef/knife-ec2 PR #375).
		return badRequest("AttachmentLimitExceeded", "Interface count %d exceeds the limit for %s", len(specs), instanceType), false
	}
	return response{}, true
}

func deref(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func intList(l []int) string {
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = itoa(v)
	}
	return strings.Join(s, ", ")
}

// NetworkInterface is one elastic network interface as the fake reports it.
type NetworkInterface struct {
	ID                  string            `json:"id"`
	InterfaceType       string            `json:"interface_type"`
	Status              string            `json:"status"` // in-use | available
	InstanceID          string            `json:"instance_id,omitempty"`
	AttachmentID        string            `json:"attachment_id,omitempty"`
	NetworkCardIndex    int               `json:"network_card_index"`
	DeviceIndex         int               `json:"device_index"`
	DeleteOnTermination bool              `json:"delete_on_termination"`
	AttachTime          string            `json:"attach_time,omitempty"`
	SubnetID            string            `json:"subnet_id"`
	VpcID               string            `json:"vpc_id"`
	AvailabilityZone    string            `json:"availability_zone"`
	SecurityGroupIDs    []string          `json:"security_group_ids"`
	PrivateIP           string            `json:"private_ip,omitempty"` // none on efa-only
	PublicIP            string            `json:"public_ip,omitempty"`  // the launch's, or an Elastic IP's
	MACAddress          string            `json:"mac_address"`
	Tags                map[string]string `json:"tags,omitempty"`
	// launchPublicIP is the public IP the launch gave; it comes back when an Elastic IP goes.
	launchPublicIP string
}

// InstanceInterface is one of an instance's interfaces in the state dump, in card order.
type InstanceInterface struct {
	ID               string `json:"id"`
	InterfaceType    string `json:"interface_type"`
	NetworkCardIndex int    `json:"network_card_index"`
	DeviceIndex      int    `json:"device_index"`
	PrivateIP        string `json:"private_ip,omitempty"`
}

// macFor derives a stable, locally administered MAC address from an interface id.
func macFor(id string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	v := h.Sum64()
	return fmt.Sprintf("0e:%02x:%02x:%02x:%02x:%02x", byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// secondaryIP returns a free private address of the subnet for an interface that is not the
// primary (the primary's is the instance's loopback address, which the host listens on).
// EC2 reserves a subnet's first four addresses and its last. Runs under s.mu.
func secondaryIP(rd *regionData) string {
	prefix := netip.MustParsePrefix(rd.subnet.CIDRBlock)
	a := prefix.Addr()
	for range 4 {
		a = a.Next()
	}
	for ; prefix.Contains(a); a = a.Next() {
		if !prefix.Contains(a.Next()) {
			break // the broadcast address
		}
		if !rd.privateIPs[a.String()] {
			rd.privateIPs[a.String()] = true
			return a.String()
		}
	}
	return ""
}

// createInterfaces makes an instance's interfaces, in card and device order: the launch's, or
// one default. The primary gets the instance's address; a public IP only with one interface
// (AssociatePublicIpAddress, or the subnet's MapPublicIpOnLaunch when it is not sent). Runs
// under s.mu.
func (s *Server) createInterfaces(rd *regionData, r *instanceRec, in RunInstancesInput, groups []string) {
	specs := in.Interfaces
	if len(specs) == 0 {
		specs = []InterfaceSpec{{InterfaceType: InterfaceENA, DeleteOnTermination: true}}
	}
	specs = append([]InterfaceSpec(nil), specs...)
	sort.SliceStable(specs, func(a, b int) bool {
		if specs[a].NetworkCardIndex != specs[b].NetworkCardIndex {
			return specs[a].NetworkCardIndex < specs[b].NetworkCardIndex
		}
		return specs[a].DeviceIndex < specs[b].DeviceIndex
	})
	for _, sp := range specs {
		eni := &NetworkInterface{ID: s.newID("eni"), InterfaceType: sp.InterfaceType, Status: "in-use", InstanceID: r.ID,
			NetworkCardIndex: sp.NetworkCardIndex, DeviceIndex: sp.DeviceIndex, DeleteOnTermination: sp.DeleteOnTermination,
			AttachTime: r.LaunchTime, SubnetID: rd.subnet.ID, VpcID: rd.vpc.ID, AvailabilityZone: rd.subnet.AvailabilityZone,
			SecurityGroupIDs: groups}
		eni.AttachmentID = s.newID("eni-attach")
		eni.MACAddress = macFor(eni.ID)
		if len(sp.SecurityGroupIDs) > 0 {
			eni.SecurityGroupIDs = append([]string(nil), sp.SecurityGroupIDs...)
		}
		primary := sp.NetworkCardIndex == 0 && sp.DeviceIndex == 0
		switch {
		case primary:
			eni.PrivateIP = r.Address
			if len(specs) == 1 && (sp.AssociatePublicIP == nil && rd.subnetMapsPublicIP() || sp.AssociatePublicIP != nil && *sp.AssociatePublicIP) {
				eni.PublicIP, eni.launchPublicIP = r.Address, r.Address
			}
		case sp.InterfaceType != InterfaceEFAOnly:
			// "You can't assign an IP address to an EFA-only network interface" (User Guide).
			eni.PrivateIP = secondaryIP(rd)
		}
		applyTags(&eni.Tags, tagsFor(in.TagSpecs, "network-interface"))
		rd.interfaces[eni.ID] = eni
		r.interfaceIDs = append(r.interfaceIDs, eni.ID)
		r.NetworkInterfaces = append(r.NetworkInterfaces, InstanceInterface{ID: eni.ID, InterfaceType: eni.InterfaceType,
			NetworkCardIndex: eni.NetworkCardIndex, DeviceIndex: eni.DeviceIndex, PrivateIP: eni.PrivateIP})
		if primary {
			r.SecurityGroupIDs = eni.SecurityGroupIDs
		}
	}
	r.PublicIP = s.primaryInterface(rd, r).PublicIP
}

// subnetMapsPublicIP is the subnet's MapPublicIpOnLaunch: true for the region's default subnet,
// as DescribeSubnets answers.
func (rd *regionData) subnetMapsPublicIP() bool { return rd.subnet.DefaultForAz }

// instanceInterfaces returns an instance's interfaces that still exist, in card order. Runs
// under s.mu.
func instanceInterfaces(rd *regionData, r *instanceRec) []*NetworkInterface {
	var out []*NetworkInterface
	for _, id := range r.interfaceIDs {
		if eni := rd.interfaces[id]; eni != nil && eni.InstanceID == r.ID {
			out = append(out, eni)
		}
	}
	return out
}

// primaryInterface returns the instance's card 0 / device 0 interface (an empty one once it is
// gone). Runs under s.mu.
func (s *Server) primaryInterface(rd *regionData, r *instanceRec) *NetworkInterface {
	for _, eni := range instanceInterfaces(rd, r) {
		if eni.NetworkCardIndex == 0 && eni.DeviceIndex == 0 {
			return eni
		}
	}
	return &NetworkInterface{}
}

// efaCards lists the network card of each EFA interface the instance has, in card order:
// the EFA devices its host shows. Runs under s.mu.
func efaCards(rd *regionData, r *instanceRec) []int {
	var out []int
	for _, eni := range instanceInterfaces(rd, r) {
		if isEFAType(eni.InterfaceType) {
			out = append(out, eni.NetworkCardIndex)
		}
	}
	return out
}

// releaseInterfaces detaches a terminated instance's interfaces: deleted when launched with
// DeleteOnTermination, otherwise left "available" (and listed by DescribeNetworkInterfaces and
// the state dump until DeleteNetworkInterface). Elastic IPs on them are disassociated. Runs
// under s.mu.
func (s *Server) releaseInterfaces(rd *regionData, r *instanceRec) {
	for _, eni := range instanceInterfaces(rd, r) {
		for _, a := range rd.addresses {
			if a.NetworkInterfaceID == eni.ID {
				s.disassociate(rd, a)
			}
		}
		if eni.PrivateIP != r.Address {
			delete(rd.privateIPs, eni.PrivateIP)
		}
		if eni.DeleteOnTermination {
			delete(rd.interfaces, eni.ID)
			continue
		}
		eni.Status, eni.InstanceID, eni.AttachmentID, eni.AttachTime = "available", "", "", ""
		eni.PublicIP, eni.launchPublicIP = "", ""
		if eni.PrivateIP == r.Address {
			// The loopback address goes back to the pool with the instance; the detached
			// interface keeps a subnet address instead.
			eni.PrivateIP = secondaryIP(rd)
		}
	}
}

var networkInterfaceFilters = map[string]bool{
	"network-interface-id": true, "attachment.instance-id": true, "attachment.device-index": true, "attachment.status": true,
	"attachment.delete-on-termination": true, "attachment.attachment-id": true, "interface-type": true, "status": true,
	"subnet-id": true, "vpc-id": true, "group-id": true, "private-ip-address": true, "availability-zone": true,
	"mac-address": true, "tag-key": true,
}

// ParseDescribeNetworkInterfaces decodes DescribeNetworkInterfaces.
func ParseDescribeNetworkInterfaces(form url.Values) (DescribeInput, error) {
	return parseDescribe(form, describeParams{idParam: "NetworkInterfaceId", idPrefix: "eni", malformedCode: "InvalidNetworkInterfaceId.Malformed",
		filters: networkInterfaceFilters, tagFilters: true, maxResultsLo: 5})
}

// ParseNetworkInterfaceID decodes DeleteNetworkInterface.
func ParseNetworkInterfaceID(form url.Values) (string, error) {
	id := form.Get("NetworkInterfaceId")
	if id == "" {
		return "", inputError("MissingParameter", "The request must contain the parameter NetworkInterfaceId")
	}
	return id, checkID(id, "eni", "InvalidNetworkInterfaceId.Malformed")
}

func notFoundInterface(id string) response {
	// InvalidNetworkInterfaceID.NotFound: EC2 API Reference, "Error codes".
	return badRequest("InvalidNetworkInterfaceID.NotFound", "The networkInterface ID '%s' does not exist", id)
}

func (s *Server) describeNetworkInterfaces(region string, in DescribeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	all := make([]*NetworkInterface, 0, len(rd.interfaces))
	for _, id := range sortedKeys(rd.interfaces) {
		all = append(all, rd.interfaces[id])
	}
	enis, next, errResp, ok := describe(describeSpec[*NetworkInterface]{
		in: in, all: all, id: func(e *NetworkInterface) string { return e.ID },
		notFound: func(missing []string) response { return notFoundInterface(missing[0]) },
		tags:     func(e *NetworkInterface) map[string]string { return e.Tags },
		field:    networkInterfaceField,
	})
	if !ok {
		return errResp
	}
	out := xmlDescribeNetworkInterfaces{ec2Meta: meta(), Interfaces: []xmlNetworkInterface{}, NextToken: next}
	for _, e := range enis {
		out.Interfaces = append(out.Interfaces, s.renderNetworkInterface(rd, e))
	}
	return xmlOK(out)
}

func networkInterfaceField(e *NetworkInterface, name string) []string {
	switch name {
	case "network-interface-id":
		return []string{e.ID}
	case "attachment.instance-id":
		return []string{e.InstanceID}
	case "attachment.attachment-id":
		return []string{e.AttachmentID}
	case "attachment.device-index":
		if e.InstanceID == "" {
			return nil
		}
		return []string{itoa(e.DeviceIndex)}
	case "attachment.status":
		if e.InstanceID == "" {
			return nil
		}
		return []string{"attached"}
	case "attachment.delete-on-termination":
		return []string{boolString(e.DeleteOnTermination)}
	case "interface-type":
		return []string{e.InterfaceType}
	case "status":
		return []string{e.Status}
	case "subnet-id":
		return []string{e.SubnetID}
	case "vpc-id":
		return []string{e.VpcID}
	case "group-id":
		return e.SecurityGroupIDs
	case "private-ip-address":
		return []string{e.PrivateIP}
	case "availability-zone":
		return []string{e.AvailabilityZone}
	case "mac-address":
		return []string{e.MACAddress}
	}
	return nil
}

func (s *Server) deleteNetworkInterface(region, id string) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	eni := rd.interfaces[id]
	if eni == nil {
		return notFoundInterface(id)
	}
	if eni.InstanceID != "" {
		// InvalidNetworkInterface.InUse: EC2 API Reference, "Error codes"; message not public.
		return badRequest("InvalidNetworkInterface.InUse", "The network interface '%s' is currently in use (attached to %s at network card index %d, device index %d) and cannot be deleted.",
			id, eni.InstanceID, eni.NetworkCardIndex, eni.DeviceIndex)
	}
	for _, a := range rd.addresses {
		if a.NetworkInterfaceID == id {
			s.disassociate(rd, a)
		}
	}
	delete(rd.privateIPs, eni.PrivateIP)
	delete(rd.interfaces, id)
	return returnTrue(OpDeleteNetworkInterface)
}

type xmlInterfaceAttachment struct {
	AttachmentID        string `xml:"attachmentId"`
	InstanceID          string `xml:"instanceId,omitempty"`
	InstanceOwnerID     string `xml:"instanceOwnerId,omitempty"`
	DeviceIndex         int    `xml:"deviceIndex"`
	NetworkCardIndex    int    `xml:"networkCardIndex"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlInterfaceAssociation struct {
	PublicIP      string `xml:"publicIp"`
	PublicDNSName string `xml:"publicDnsName"`
	IPOwnerID     string `xml:"ipOwnerId"`
	AllocationID  string `xml:"allocationId,omitempty"`
	AssociationID string `xml:"associationId,omitempty"`
}

type xmlInterfacePrivateIP struct {
	PrivateIPAddress string                   `xml:"privateIpAddress"`
	Primary          bool                     `xml:"primary"`
	Association      *xmlInterfaceAssociation `xml:"association,omitempty"`
}

type xmlNetworkInterface struct {
	NetworkInterfaceID string                   `xml:"networkInterfaceId"`
	SubnetID           string                   `xml:"subnetId"`
	VpcID              string                   `xml:"vpcId"`
	AvailabilityZone   string                   `xml:"availabilityZone,omitempty"`
	Description        string                   `xml:"description"`
	OwnerID            string                   `xml:"ownerId"`
	Status             string                   `xml:"status"`
	MACAddress         string                   `xml:"macAddress"`
	PrivateIPAddress   string                   `xml:"privateIpAddress,omitempty"`
	SourceDestCheck    bool                     `xml:"sourceDestCheck"`
	Groups             []xmlGroupRef            `xml:"groupSet>item"`
	Attachment         *xmlInterfaceAttachment  `xml:"attachment,omitempty"`
	Association        *xmlInterfaceAssociation `xml:"association,omitempty"`
	PrivateIPs         []xmlInterfacePrivateIP  `xml:"privateIpAddressesSet>item"`
	InterfaceType      string                   `xml:"interfaceType"`
	TagSet             *[]xmlTag                `xml:"tagSet>item,omitempty"`
}

type xmlDescribeNetworkInterfaces struct {
	XMLName xml.Name `xml:"DescribeNetworkInterfacesResponse"`
	ec2Meta
	Interfaces []xmlNetworkInterface `xml:"networkInterfaceSet>item"`
	NextToken  string                `xml:"nextToken,omitempty"`
}

// renderNetworkInterface renders an interface for DescribeNetworkInterfaces and (with the
// instance-level fields cleared by the caller) DescribeInstances. Runs under s.mu.
func (s *Server) renderNetworkInterface(rd *regionData, e *NetworkInterface) xmlNetworkInterface {
	x := xmlNetworkInterface{NetworkInterfaceID: e.ID, SubnetID: e.SubnetID, VpcID: e.VpcID, AvailabilityZone: e.AvailabilityZone,
		OwnerID: s.account, Status: e.Status, MACAddress: e.MACAddress, PrivateIPAddress: e.PrivateIP, SourceDestCheck: true,
		Groups: []xmlGroupRef{}, InterfaceType: e.InterfaceType, TagSet: xmlTags(e.Tags), PrivateIPs: []xmlInterfacePrivateIP{}}
	for _, id := range e.SecurityGroupIDs {
		name := ""
		if g := rd.groups[id]; g != nil {
			name = g.Name
		}
		x.Groups = append(x.Groups, xmlGroupRef{GroupID: id, GroupName: name})
	}
	if e.InstanceID != "" {
		x.Attachment = &xmlInterfaceAttachment{AttachmentID: e.AttachmentID, InstanceID: e.InstanceID, InstanceOwnerID: s.account,
			DeviceIndex: e.DeviceIndex, NetworkCardIndex: e.NetworkCardIndex, Status: "attached", AttachTime: e.AttachTime,
			DeleteOnTermination: e.DeleteOnTermination}
	}
	if e.PublicIP != "" {
		x.Association = &xmlInterfaceAssociation{PublicIP: e.PublicIP, IPOwnerID: "amazon"}
		for _, a := range rd.addresses {
			if a.NetworkInterfaceID == e.ID {
				x.Association.IPOwnerID, x.Association.AllocationID, x.Association.AssociationID = s.account, a.AllocationID, a.AssociationID
			}
		}
	}
	if e.PrivateIP != "" {
		x.PrivateIPs = append(x.PrivateIPs, xmlInterfacePrivateIP{PrivateIPAddress: e.PrivateIP, Primary: true, Association: x.Association})
	}
	return x
}

// interfacesUsingGroup reports whether any interface (attached or not) is in the group: EC2
// refuses to delete such a group (DependencyViolation). Runs under s.mu.
func interfacesUsingGroup(rd *regionData, groupID string) bool {
	for _, e := range rd.interfaces {
		if slices.Contains(e.SecurityGroupIDs, groupID) {
			return true
		}
	}
	return false
}

package awsfake

import (
	"encoding/xml"
	"errors"
	"io"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Elastic IPs (AllocateAddress, AssociateAddress, DisassociateAddress, ReleaseAddress,
// DescribeAddresses). An instance launched with EFA interfaces on several cards gets no public
// IP at launch; an Elastic IP on its primary interface is one way to reach it
// (efa-launch.md, the AssociatePublicIpAddress row). Each Elastic IP is a loopback address of
// its own (from 127.1.0.1 up, apart from the instances' 127.0.x.y); while it is associated and
// hosts are simulated, the fake forwards TCP connections to its port 22 to the instance's host,
// so reaching an instance through its Elastic IP is real.
//
// Error codes: EC2 API Reference, "Error codes" (InvalidAllocationID.NotFound,
// InvalidAssociationID.NotFound, InvalidAddress.NotFound, InvalidIPAddress.InUse,
// Resource.AlreadyAssociated, IncorrectInstanceState). ReleaseAddress answers an unknown
// allocation with InvalidAllocationID.NotFound, as the wire does (another EC2 emulator's test
// records the reference's InvalidAddressID.NotFound as wrong there). Verbatim messages: an
// instance with several interfaces (InvalidInstanceID "There are multiple interfaces attached
// to instance '…'. Please specify an interface ID for the operation instead.", quoted in many
// public projects), ReleaseAddress by public IP ("You must specify an allocation id when
// releasing a VPC elastic IP address", boto/boto#2727). Other messages are the fake's own.

// ElasticIP is one allocated Elastic IP address.
type ElasticIP struct {
	AllocationID       string            `json:"allocation_id"`
	PublicIP           string            `json:"public_ip"`
	Domain             string            `json:"domain"`
	AssociationID      string            `json:"association_id,omitempty"`
	InstanceID         string            `json:"instance_id,omitempty"`
	NetworkInterfaceID string            `json:"network_interface_id,omitempty"`
	PrivateIP          string            `json:"private_ip,omitempty"`
	Tags               map[string]string `json:"tags,omitempty"`
	// unlisted is how many more listings (a DescribeAddresses without allocation ids) leave the
	// address out: SetAddressListingLag.
	unlisted int
}

var (
	firstElasticIP = netip.MustParseAddr("127.1.0.1")
	lastElasticIP  = netip.MustParseAddr("127.1.255.254")
)

// AllocateAddressInput is the decoded form of AllocateAddress.
type AllocateAddressInput struct {
	TagSpecs []TagSpecification
}

// ParseAllocateAddress decodes AllocateAddress.
func ParseAllocateAddress(form url.Values) (AllocateAddressInput, error) {
	var in AllocateAddressInput
	switch d := form.Get("Domain"); d {
	case "", "vpc":
	default:
		// EC2-Classic is retired; "standard" addresses no longer exist.
		return in, inputError("InvalidParameterValue", "Value (%s) for parameter domain is invalid. Valid value: vpc", d)
	}
	if a := form.Get("Address"); a != "" {
		// Not an EC2 refusal: the fake has no BYOIP pools.
		return in, inputError("InvalidParameterValue", "Address %s: the fake EC2 allocates from Amazon's pool only (no BYOIP addresses)", a)
	}
	var err error
	in.TagSpecs, err = parseTagSpecifications(form, "elastic-ip")
	return in, err
}

// AssociateAddressInput is the decoded form of AssociateAddress.
type AssociateAddressInput struct {
	AllocationID       string
	InstanceID         string
	NetworkInterfaceID string
	PrivateIP          string
	AllowReassociation bool
}

// ParseAssociateAddress decodes AssociateAddress.
func ParseAssociateAddress(form url.Values) (AssociateAddressInput, error) {
	in := AssociateAddressInput{AllocationID: form.Get("AllocationId"), InstanceID: form.Get("InstanceId"),
		NetworkInterfaceID: form.Get("NetworkInterfaceId"), PrivateIP: form.Get("PrivateIpAddress")}
	if in.AllocationID == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter AllocationId (a VPC Elastic IP address is named by its allocation ID)")
	}
	if err := checkID(in.AllocationID, "eipalloc", "InvalidAllocationID.Malformed"); err != nil {
		return in, err
	}
	if in.InstanceID == "" && in.NetworkInterfaceID == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter InstanceId or NetworkInterfaceId")
	}
	if in.InstanceID != "" {
		if err := checkID(in.InstanceID, "i", "InvalidInstanceID.Malformed"); err != nil {
			return in, err
		}
	}
	if in.NetworkInterfaceID != "" {
		if err := checkID(in.NetworkInterfaceID, "eni", "InvalidNetworkInterfaceId.Malformed"); err != nil {
			return in, err
		}
	}
	var err error
	in.AllowReassociation, err = boolParam(form, "AllowReassociation")
	return in, err
}

// ParseDisassociateAddress decodes DisassociateAddress (AssociationId).
func ParseDisassociateAddress(form url.Values) (string, error) {
	id := form.Get("AssociationId")
	if id == "" {
		return "", inputError("MissingParameter", "The request must contain the parameter AssociationId")
	}
	return id, checkID(id, "eipassoc", "InvalidAssociationID.Malformed")
}

// ParseReleaseAddress decodes ReleaseAddress (AllocationId).
func ParseReleaseAddress(form url.Values) (string, error) {
	id := form.Get("AllocationId")
	if id == "" {
		if form.Get("PublicIp") != "" {
			return "", inputError("InvalidParameterValue", "You must specify an allocation id when releasing a VPC elastic IP address")
		}
		return "", inputError("MissingParameter", "The request must contain the parameter AllocationId")
	}
	return id, checkID(id, "eipalloc", "InvalidAllocationID.Malformed")
}

// DescribeAddressesInput is the decoded form of DescribeAddresses.
type DescribeAddressesInput struct {
	DescribeInput
	PublicIPs []string
}

var addressFilters = map[string]bool{
	"allocation-id": true, "association-id": true, "domain": true, "instance-id": true, "network-interface-id": true,
	"private-ip-address": true, "public-ip": true, "tag-key": true,
}

// ParseDescribeAddresses decodes DescribeAddresses (AllocationId.N, PublicIp.N, Filter.N; no paging).
func ParseDescribeAddresses(form url.Values) (DescribeAddressesInput, error) {
	d, err := parseDescribe(form, describeParams{idParam: "AllocationId", idPrefix: "eipalloc", malformedCode: "InvalidAllocationID.Malformed",
		filters: addressFilters, tagFilters: true})
	return DescribeAddressesInput{DescribeInput: d, PublicIPs: indexedList(form, "PublicIp")}, err
}

func allocationNotFound(id string) response {
	return badRequest("InvalidAllocationID.NotFound", "The allocation ID '%s' does not exist", id)
}

// allocElasticIP returns the lowest free Elastic IP address. Runs under s.mu.
func (s *Server) allocElasticIP(allocationID string) (string, bool) {
	for a := firstElasticIP; a.Compare(lastElasticIP) <= 0; a = a.Next() {
		b := a.As4()
		if b[3] == 0 || b[3] == 255 {
			continue
		}
		if _, used := s.elasticIPs[a.String()]; used {
			continue
		}
		if s.machines != nil && s.addrBusy(a.String()) {
			continue
		}
		s.elasticIPs[a.String()] = allocationID
		return a.String(), true
	}
	return "", false
}

func (s *Server) allocateAddress(region string, in AllocateAddressInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	id := s.newID("eipalloc")
	public, ok := s.allocElasticIP(id)
	if !ok {
		return badRequest("AddressLimitExceeded", "The maximum number of addresses has been reached.")
	}
	a := &ElasticIP{AllocationID: id, PublicIP: public, Domain: "vpc", unlisted: s.addressListingLag}
	applyTags(&a.Tags, tagsFor(in.TagSpecs, "elastic-ip"))
	rd.addresses[id] = a
	return xmlOK(xmlAllocateAddress{ec2Meta: meta(), PublicIP: public, AllocationID: id, Domain: "vpc",
		PublicIpv4Pool: "amazon", NetworkBorderGroup: region})
}

func (s *Server) associateAddress(region string, in AssociateAddressInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	a := rd.addresses[in.AllocationID]
	if a == nil {
		return allocationNotFound(in.AllocationID)
	}
	var eni *NetworkInterface
	if in.NetworkInterfaceID != "" {
		if eni = rd.interfaces[in.NetworkInterfaceID]; eni == nil {
			return notFoundInterface(in.NetworkInterfaceID)
		}
		if in.InstanceID != "" && eni.InstanceID != in.InstanceID {
			return badRequest("InvalidParameterCombination", "The network interface '%s' is not attached to instance '%s'", eni.ID, in.InstanceID)
		}
	} else {
		r := rd.instances[in.InstanceID]
		if r == nil {
			return notFoundInstances([]string{in.InstanceID})
		}
		enis := instanceInterfaces(rd, r)
		if len(enis) > 1 {
			return badRequest("InvalidInstanceID", "There are multiple interfaces attached to instance '%s'. Please specify an interface ID for the operation instead.", r.ID)
		}
		if len(enis) == 0 {
			return badRequest("IncorrectInstanceState", "The instance '%s' is not in a valid state for this operation.", r.ID)
		}
		eni = enis[0]
	}
	if eni.InstanceID != "" {
		if r := rd.instances[eni.InstanceID]; r != nil && r.State == StatePending {
			return badRequest("IncorrectInstanceState", "The instance '%s' is not in a valid state for this operation (pending).", r.ID)
		}
	}
	if eni.PrivateIP == "" {
		// "You can't assign an IP address to an EFA-only network interface" (User Guide,
		// create-efa); EC2's error for this is not public.
		return badRequest("InvalidParameterValue", "The network interface '%s' is an EFA-only interface and has no IP address; associate the Elastic IP address with an interface of type interface or efa (the primary interface).", eni.ID)
	}
	if in.PrivateIP != "" && in.PrivateIP != eni.PrivateIP {
		return badRequest("InvalidParameterValue", "The private IP address %s is not assigned to the network interface '%s'", in.PrivateIP, eni.ID)
	}
	if a.AssociationID != "" && !in.AllowReassociation {
		return badRequest("Resource.AlreadyAssociated", "resource %s is already associated with associate-id %s", a.AllocationID, a.AssociationID)
	}
	if a.AssociationID != "" {
		s.disassociate(rd, a)
	}
	// An interface holds one public address: an Elastic IP already there is disassociated
	// ("the existing address is disassociated ... but remains allocated to your account").
	for _, other := range rd.addresses {
		if other.NetworkInterfaceID == eni.ID {
			s.disassociate(rd, other)
		}
	}
	a.AssociationID, a.NetworkInterfaceID, a.InstanceID, a.PrivateIP = s.newID("eipassoc"), eni.ID, eni.InstanceID, eni.PrivateIP
	eni.PublicIP = a.PublicIP
	s.refreshPublicIP(rd, eni.InstanceID)
	s.startForward(rd, a)
	return xmlOK(xmlAssociateAddress{ec2Meta: meta(), AssociationID: a.AssociationID})
}

// disassociate removes an Elastic IP's association: its interface gets back the public IP of
// its launch, if any. Runs under s.mu.
func (s *Server) disassociate(rd *regionData, a *ElasticIP) {
	if eni := rd.interfaces[a.NetworkInterfaceID]; eni != nil && eni.PublicIP == a.PublicIP {
		eni.PublicIP = eni.launchPublicIP
	}
	s.stopForward(a.PublicIP)
	instanceID := a.InstanceID
	a.AssociationID, a.NetworkInterfaceID, a.InstanceID, a.PrivateIP = "", "", "", ""
	s.refreshPublicIP(rd, instanceID)
}

// refreshPublicIP sets an instance's public IP from its primary interface. Runs under s.mu.
func (s *Server) refreshPublicIP(rd *regionData, instanceID string) {
	if r := rd.instances[instanceID]; r != nil && r.State != StateTerminated {
		r.PublicIP = s.primaryInterface(rd, r).PublicIP
	}
}

func (s *Server) disassociateAddress(region, associationID string) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	for _, a := range rd.addresses {
		if a.AssociationID == associationID {
			s.disassociate(rd, a)
			return returnTrue(OpDisassociateAddress)
		}
	}
	return badRequest("InvalidAssociationID.NotFound", "The association ID '%s' does not exist", associationID)
}

func (s *Server) releaseElasticIP(region, allocationID string) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	a := rd.addresses[allocationID]
	if a == nil {
		return allocationNotFound(allocationID)
	}
	if a.AssociationID != "" {
		// ReleaseAddress reference: "You must disassociate the Elastic IP address before you
		// can release it. Otherwise, Amazon EC2 returns an error (InvalidIPAddress.InUse)."
		return badRequest("InvalidIPAddress.InUse", "Address %s is in use (associated with %s)", a.PublicIP, a.NetworkInterfaceID)
	}
	delete(s.elasticIPs, a.PublicIP)
	delete(rd.addresses, allocationID)
	return returnTrue(OpReleaseAddress)
}

func (s *Server) describeAddresses(region string, in DescribeAddressesInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	var all []*ElasticIP
	for _, id := range sortedKeys(rd.addresses) {
		all = append(all, rd.addresses[id])
	}
	for _, ipAddr := range in.PublicIPs {
		found := false
		for _, a := range all {
			found = found || a.PublicIP == ipAddr
		}
		if !found {
			return badRequest("InvalidAddress.NotFound", "Address '%s' not found.", ipAddr)
		}
	}
	addrs, _, errResp, ok := describe(describeSpec[*ElasticIP]{
		in: in.DescribeInput, all: all, id: func(a *ElasticIP) string { return a.AllocationID },
		notFound: func(missing []string) response { return allocationNotFound(missing[0]) },
		keep: func(a *ElasticIP) bool {
			if len(in.IDs) == 0 && len(in.PublicIPs) == 0 && a.unlisted > 0 {
				// EC2's describes are eventually consistent: a fresh address is not listed yet.
				a.unlisted--
				return false
			}
			return len(in.PublicIPs) == 0 || contains(in.PublicIPs, a.PublicIP)
		},
		tags: func(a *ElasticIP) map[string]string { return a.Tags },
		field: func(a *ElasticIP, name string) []string {
			switch name {
			case "allocation-id":
				return []string{a.AllocationID}
			case "association-id":
				return []string{a.AssociationID}
			case "domain":
				return []string{a.Domain}
			case "instance-id":
				return []string{a.InstanceID}
			case "network-interface-id":
				return []string{a.NetworkInterfaceID}
			case "private-ip-address":
				return []string{a.PrivateIP}
			case "public-ip":
				return []string{a.PublicIP}
			}
			return nil
		},
	})
	if !ok {
		return errResp
	}
	out := xmlDescribeAddresses{ec2Meta: meta(), Addresses: []xmlAddress{}}
	for _, a := range addrs {
		out.Addresses = append(out.Addresses, xmlAddress{PublicIP: a.PublicIP, AllocationID: a.AllocationID, Domain: a.Domain,
			AssociationID: a.AssociationID, InstanceID: a.InstanceID, NetworkInterfaceID: a.NetworkInterfaceID,
			NetworkInterfaceOwnerID: ownerIf(a.NetworkInterfaceID, s.account), PrivateIPAddress: a.PrivateIP,
			PublicIpv4Pool: "amazon", NetworkBorderGroup: region, TagSet: xmlTags(a.Tags)})
	}
	return xmlOK(out)
}

func ownerIf(id, owner string) string {
	if id == "" {
		return ""
	}
	return owner
}

type xmlAllocateAddress struct {
	XMLName xml.Name `xml:"AllocateAddressResponse"`
	ec2Meta
	PublicIP           string `xml:"publicIp"`
	AllocationID       string `xml:"allocationId"`
	Domain             string `xml:"domain"`
	PublicIpv4Pool     string `xml:"publicIpv4Pool"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
}

type xmlAssociateAddress struct {
	XMLName xml.Name `xml:"AssociateAddressResponse"`
	ec2Meta
	Return        bool   `xml:"return"`
	AssociationID string `xml:"associationId"`
}

type xmlAddress struct {
	PublicIP                string    `xml:"publicIp"`
	AllocationID            string    `xml:"allocationId"`
	Domain                  string    `xml:"domain"`
	AssociationID           string    `xml:"associationId,omitempty"`
	InstanceID              string    `xml:"instanceId,omitempty"`
	NetworkInterfaceID      string    `xml:"networkInterfaceId,omitempty"`
	NetworkInterfaceOwnerID string    `xml:"networkInterfaceOwnerId,omitempty"`
	PrivateIPAddress        string    `xml:"privateIpAddress,omitempty"`
	PublicIpv4Pool          string    `xml:"publicIpv4Pool"`
	NetworkBorderGroup      string    `xml:"networkBorderGroup"`
	TagSet                  *[]xmlTag `xml:"tagSet>item,omitempty"`
}

type xmlDescribeAddresses struct {
	XMLName xml.Name `xml:"DescribeAddressesResponse"`
	ec2Meta
	Addresses []xmlAddress `xml:"addressesSet>item"`
}

// forward relays TCP connections from an Elastic IP's port to its instance's host.
type forward struct {
	ln    net.Listener
	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// startForward makes an associated Elastic IP reach its instance's host: connections to
// PublicIP:port go to the instance's primary private address, port (22 unless a test changed
// s.sshPort). Only with simulated hosts. A listener that cannot start is logged, not fatal:
// EC2's association itself worked. Runs under s.mu.
func (s *Server) startForward(rd *regionData, a *ElasticIP) {
	if s.machines == nil || s.closed || a.InstanceID == "" {
		return
	}
	r := rd.instances[a.InstanceID]
	if r == nil || r.Address == "" {
		return
	}
	port := strconv.Itoa(s.sshPort)
	target := net.JoinHostPort(r.Address, port)
	ln, err := net.Listen("tcp", net.JoinHostPort(a.PublicIP, port))
	if err != nil {
		go s.logf("elastic IP %s: cannot forward port %s to %s: %v", a.PublicIP, port, target, err)
		return
	}
	f := &forward{ln: ln, conns: map[net.Conn]bool{}}
	s.forwards[a.PublicIP] = f
	f.wg.Add(1)
	go f.serve(target)
}

// stopForward closes an Elastic IP's forwarder and every connection through it. Runs under s.mu.
func (s *Server) stopForward(publicIP string) {
	f := s.forwards[publicIP]
	if f == nil {
		return
	}
	delete(s.forwards, publicIP)
	f.close()
}

func (f *forward) close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil // a relay that connects after this closes at once
	f.mu.Unlock()
}

func (f *forward) track(c net.Conn, on bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		if f.conns == nil {
			return false
		}
		f.conns[c] = true
		return true
	}
	if f.conns != nil {
		delete(f.conns, c)
	}
	return true
}

func (f *forward) serve(target string) {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go f.relay(c, target)
	}
}

func (f *forward) relay(c net.Conn, target string) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	if !f.track(c, true) || !f.track(up, true) {
		return
	}
	defer f.track(c, false)
	defer f.track(up, false)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	<-done
}

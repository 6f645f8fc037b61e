package awsfake

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ec2Handler parses one EC2 action and returns the function that answers
// it. Parse errors come back as "Code: message" errors.
func (s *Server) ec2Handler(action, region string, form url.Values) (func() response, error) {
	switch action {
	case OpDescribeImages:
		in, err := ParseDescribeImages(form)
		return func() response { return s.describeImages(region, in) }, err
	case OpDescribeRegions:
		in, err := ParseDescribeRegions(form)
		return func() response { return describeRegions(in) }, err
	case OpDescribeVpcs:
		in, err := ParseDescribeVpcs(form)
		return func() response { return s.describeVpcs(region, in) }, err
	case OpDescribeSubnets:
		in, err := ParseDescribeSubnets(form)
		return func() response { return s.describeSubnets(region, in) }, err
	case OpDescribeInstanceTypeOfferings:
		in, err := ParseDescribeInstanceTypeOfferings(form)
		return func() response { return describeOfferings(region, in) }, err
	case OpCreateKeyPair:
		in, err := ParseCreateKeyPair(form)
		return func() response { return s.createKeyPair(region, in) }, err
	case OpDescribeKeyPairs:
		in, err := ParseDescribeKeyPairs(form)
		return func() response { return s.describeKeyPairs(region, in) }, err
	case OpDeleteKeyPair:
		in, err := ParseDeleteKeyPair(form)
		return func() response { return s.deleteKeyPair(region, in) }, err
	case OpCreateSecurityGroup:
		in, err := ParseCreateSecurityGroup(form)
		return func() response { return s.createSecurityGroup(region, in) }, err
	case OpAuthorizeSecurityGroupIngress:
		in, err := ParseAuthorizeIngress(form)
		return func() response { return s.authorizeIngress(region, in) }, err
	case OpDescribeSecurityGroups:
		in, err := ParseDescribeSecurityGroups(form)
		return func() response { return s.describeSecurityGroups(region, in) }, err
	case OpDeleteSecurityGroup:
		in, err := ParseDeleteSecurityGroup(form)
		return func() response { return s.deleteSecurityGroup(region, in) }, err
	case OpRunInstances:
		in, err := ParseRunInstances(form)
		return func() response { return s.runInstances(region, in) }, err
	case OpDescribeInstances:
		in, err := ParseDescribeInstances(form)
		return func() response { return s.describeInstances(region, in) }, err
	case OpStopInstances:
		ids, err := ParseInstanceIDs(form)
		return func() response { return s.stopInstances(region, ids) }, err
	case OpTerminateInstances:
		ids, err := ParseInstanceIDs(form)
		return func() response { return s.terminateInstances(region, ids) }, err
	case OpCreateTags:
		in, err := ParseCreateTags(form)
		return func() response { return s.createTags(region, in) }, err
	case OpDescribeTags:
		in, err := ParseDescribeTags(form)
		return func() response { return s.describeTags(region, in) }, err
	case OpCreateImage:
		in, err := ParseCreateImage(form)
		return func() response { return s.createImage(region, in) }, err
	case OpCopyImage:
		in, err := ParseCopyImage(form)
		return func() response { return s.copyImage(region, in) }, err
	case OpDeregisterImage:
		in, err := ParseImageID(form)
		return func() response { return s.deregisterImage(region, in) }, err
	case OpModifyImageAttribute:
		in, err := ParseModifyImageAttribute(form)
		return func() response { return s.modifyImageAttribute(region, in) }, err
	case OpEnableImageDeprecation:
		in, err := ParseImageID(form)
		if err == nil {
			if _, perr := time.Parse(time.RFC3339, in.DeprecateAt); perr != nil {
				err = inputError("InvalidParameterValue", "DeprecateAt %q is not an RFC 3339 time", in.DeprecateAt)
			}
		}
		return func() response { return s.enableImageDeprecation(region, in) }, err
	case OpDescribeSnapshots:
		in, err := ParseDescribeSnapshots(form)
		return func() response { return s.describeSnapshots(region, in) }, err
	case OpDeleteSnapshot:
		id, err := ParseSnapshotID(form)
		return func() response { return s.deleteSnapshot(region, id) }, err
	case OpModifySnapshotAttribute:
		in, err := ParseModifySnapshotAttribute(form)
		return func() response { return s.modifySnapshotAttribute(region, in) }, err
	case OpDescribeVolumes:
		in, err := ParseDescribeVolumes(form)
		return func() response { return s.describeVolumes(region, in) }, err
	case OpDeleteVolume:
		id, err := ParseVolumeID(form)
		return func() response { return s.deleteVolume(region, id) }, err
	}
	return nil, inputError("InvalidAction", "The action %s is not valid for this web service.", action)
}

func badRequest(code, format string, args ...any) response {
	return ec2Error(http.StatusBadRequest, code, fmt.Sprintf(format, args...))
}

// insufficientCapacity is EC2's answer when a zone has no capacity for a
// type: a server error (HTTP 500, which SDKs retry) with this wording.
func insufficientCapacity(region, instanceType string) response {
	return ec2Error(http.StatusInternalServerError, "InsufficientInstanceCapacity", fmt.Sprintf(
		"We currently do not have sufficient %s capacity in the Availability Zone you requested (%sa). "+
			"Our system will be working on provisioning additional capacity. You can currently get %s capacity by not "+
			"specifying an Availability Zone in your request or choosing %sb, %sc.", instanceType, region, instanceType, region, region))
}

// matchFilters applies EC2 filter semantics: every filter must match; within
// one, any value. field returns the resource's values for a filter name.
func matchFilters(filters []Filter, tags map[string]string, field func(name string) []string) bool {
	for _, f := range filters {
		var have []string
		switch {
		case f.Name == "tag-key":
			have = sortedKeys(tags)
		case strings.HasPrefix(f.Name, "tag:"):
			v, ok := tags[strings.TrimPrefix(f.Name, "tag:")]
			if !ok {
				return false
			}
			have = []string{v}
		default:
			have = field(f.Name)
		}
		hit := false
		for _, want := range f.Values {
			for _, h := range have {
				if matchWildcard(want, h) {
					hit = true
				}
			}
		}
		if !hit {
			return false
		}
	}
	return true
}

// page cuts a sorted result list for MaxResults/NextToken.
func page[T any](items []T, maxResults int, token string) ([]T, string, error) {
	if maxResults == 0 && token == "" {
		return items, "", nil
	}
	start := 0
	if token != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(token, "fake-next-"))
		if err != nil || n < 0 || n > len(items) || !strings.HasPrefix(token, "fake-next-") {
			return nil, "", fmt.Errorf("the token %q is invalid", token)
		}
		start = n
	}
	if maxResults == 0 {
		maxResults = 1000
	}
	end := min(start+maxResults, len(items))
	next := ""
	if end < len(items) {
		next = fmt.Sprintf("fake-next-%d", end)
	}
	return items[start:end], next, nil
}

func boolString(b bool) string { return strconv.FormatBool(b) }

// --- network ---------------------------------------------------------------

func (s *Server) describeVpcs(region string, in DescribeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	for _, id := range in.IDs {
		if id != rd.vpc.ID {
			return badRequest("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", id)
		}
	}
	out := xmlDescribeVpcs{ec2Meta: meta(), Vpcs: []xmlVpc{}}
	v := rd.vpc
	if matchFilters(in.Filters, nil, func(name string) []string {
		switch name {
		case "vpc-id":
			return []string{v.ID}
		case "is-default", "isDefault":
			return []string{boolString(v.IsDefault)}
		case "state":
			return []string{"available"}
		case "cidr", "cidr-block":
			return []string{v.CIDRBlock}
		case "owner-id":
			return []string{s.account}
		}
		return nil
	}) {
		out.Vpcs = append(out.Vpcs, xmlVpc{VpcID: v.ID, OwnerID: s.account, State: "available", CidrBlock: v.CIDRBlock,
			DhcpOptionsID: "dopt-0" + v.ID[len("vpc-0"):], InstanceTenancy: "default", IsDefault: v.IsDefault})
	}
	return xmlOK(out)
}

func (s *Server) describeSubnets(region string, in DescribeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	for _, id := range in.IDs {
		if id != rd.subnet.ID {
			return badRequest("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	out := xmlDescribeSubnets{ec2Meta: meta(), Subnets: []xmlSubnet{}}
	sn := rd.subnet
	if matchFilters(in.Filters, nil, func(name string) []string {
		switch name {
		case "subnet-id":
			return []string{sn.ID}
		case "vpc-id", "vpcId":
			return []string{sn.VpcID}
		case "state":
			return []string{"available"}
		case "availability-zone", "availabilityZone":
			return []string{sn.AvailabilityZone}
		case "default-for-az", "defaultForAz":
			return []string{boolString(sn.DefaultForAz)}
		case "cidr-block":
			return []string{sn.CIDRBlock}
		case "owner-id":
			return []string{s.account}
		}
		return nil
	}) {
		out.Subnets = append(out.Subnets, xmlSubnet{SubnetID: sn.ID, State: "available", OwnerID: s.account, VpcID: sn.VpcID,
			SubnetArn:               fmt.Sprintf("arn:%s:ec2:%s:%s:subnet/%s", partition(region), region, s.account, sn.ID),
			CidrBlock:               sn.CIDRBlock,
			AvailableIPAddressCount: 4091 - s.liveInstances(rd), AvailabilityZone: sn.AvailabilityZone,
			AvailabilityZoneID: "use1-az1", DefaultForAz: sn.DefaultForAz, MapPublicIPOnLaunch: true})
	}
	return xmlOK(out)
}

func (s *Server) liveInstances(rd *regionData) int {
	n := 0
	for _, r := range rd.instances {
		if r.State != StateTerminated {
			n++
		}
	}
	return n
}

// FakeRegions are the regions DescribeRegions lists (the fake answers for
// any region; these are the ones it admits exist).
func FakeRegions() []string {
	return append(append([]string(nil), SeedRegions...), "ap-northeast-3")
}

func describeRegions(in DescribeRegionsInput) response {
	all := FakeRegions()
	for _, name := range in.RegionNames {
		if !contains(all, name) {
			return badRequest("InvalidParameterValue", "Invalid region: %s", name)
		}
	}
	out := xmlDescribeRegions{ec2Meta: meta(), Regions: []xmlRegion{}}
	for _, r := range all {
		if len(in.RegionNames) > 0 && !contains(in.RegionNames, r) {
			continue
		}
		endpoint := "ec2." + r + ".amazonaws.com"
		if !matchFilters(in.Filters, nil, func(name string) []string {
			switch name {
			case "region-name":
				return []string{r}
			case "endpoint":
				return []string{endpoint}
			case "opt-in-status":
				return []string{"opt-in-not-required"}
			}
			return nil
		}) {
			continue
		}
		out.Regions = append(out.Regions, xmlRegion{RegionName: r, RegionEndpoint: endpoint, OptInStatus: "opt-in-not-required"})
	}
	return xmlOK(out)
}

// offeredTypes are listed when DescribeInstanceTypeOfferings names no type;
// when it names types, the fake offers every well-formed one.
func offeredTypes() []string {
	return []string{"g6e.xlarge", "p4d.24xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "t3.micro"}
}

func describeOfferings(region string, in DescribeOfferingsInput) response {
	locations := []string{region}
	switch in.LocationType {
	case "availability-zone":
		locations = []string{region + "a"}
	case "availability-zone-id":
		locations = []string{"use1-az1"}
	}
	types := offeredTypes()
	for _, f := range in.Filters {
		if f.Name == "instance-type" {
			types = nil
			for _, v := range f.Values {
				if instanceTypeShape.MatchString(v) {
					types = append(types, v)
				}
			}
		}
	}
	out := xmlDescribeOfferings{ec2Meta: meta(), Offerings: []xmlOffering{}}
	for _, loc := range locations {
		for _, t := range types {
			if matchFilters(in.Filters, nil, func(name string) []string {
				if name == "location" {
					return []string{loc}
				}
				return []string{t}
			}) {
				out.Offerings = append(out.Offerings, xmlOffering{InstanceType: t, LocationType: in.LocationType, Location: loc})
			}
		}
	}
	return xmlOK(out)
}

// --- key pairs -------------------------------------------------------------

func (s *Server) createKeyPair(region string, in KeyPairInput) response {
	s.mu.Lock()
	exists := s.region(region).keyPairs[in.KeyName] != nil
	s.mu.Unlock()
	if exists {
		return badRequest("InvalidKeyPair.Duplicate", "The keypair '%s' already exists.", in.KeyName)
	}
	// Key generation takes a while for RSA; do it outside the lock.
	key, err := generateKeyPair(in.KeyType, in.KeyName)
	if err != nil {
		return ec2Error(http.StatusInternalServerError, "InternalError", "generating the key pair: "+err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	if rd.keyPairs[in.KeyName] != nil {
		return badRequest("InvalidKeyPair.Duplicate", "The keypair '%s' already exists.", in.KeyName)
	}
	kp := &KeyPair{ID: s.newID("key"), Name: in.KeyName, Type: in.KeyType, Fingerprint: key.fingerprint,
		PublicKey: key.authorizedKey, CreateTime: ec2Time(s.now())}
	applyTags(&kp.Tags, tagsFor(in.TagSpecs, "key-pair"))
	rd.keyPairs[kp.Name] = kp
	return xmlOK(xmlCreateKeyPair{ec2Meta: meta(), KeyName: kp.Name, KeyFingerprint: kp.Fingerprint, KeyMaterial: key.privatePEM,
		KeyPairID: kp.ID, TagSet: xmlTags(kp.Tags)})
}

func (s *Server) keyPairByID(rd *regionData, id string) *KeyPair {
	for _, kp := range rd.keyPairs {
		if kp.ID == id {
			return kp
		}
	}
	return nil
}

func (s *Server) deleteKeyPair(region string, in KeyPairInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	kp := rd.keyPairs[in.KeyName]
	if in.KeyPairID != "" {
		kp = s.keyPairByID(rd, in.KeyPairID)
	}
	// EC2 answers success for a key pair that does not exist.
	out := xmlDeleteKeyPair{ec2Meta: meta(), Return: true}
	if kp != nil {
		delete(rd.keyPairs, kp.Name)
		out.KeyPairID = kp.ID
	}
	return xmlOK(out)
}

func (s *Server) describeKeyPairs(region string, in DescribeKeyPairsInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	for _, name := range in.KeyNames {
		if rd.keyPairs[name] == nil {
			return badRequest("InvalidKeyPair.NotFound", "The key pair '%s' does not exist", name)
		}
	}
	for _, id := range in.KeyPairIDs {
		if s.keyPairByID(rd, id) == nil {
			return badRequest("InvalidKeyPair.NotFound", "The key pair ID '%s' does not exist", id)
		}
	}
	out := xmlDescribeKeyPairs{ec2Meta: meta(), Keys: []xmlKeyPairInfo{}}
	for _, name := range sortedKeys(rd.keyPairs) {
		kp := rd.keyPairs[name]
		if (len(in.KeyNames) > 0 && !contains(in.KeyNames, name)) || (len(in.KeyPairIDs) > 0 && !contains(in.KeyPairIDs, kp.ID)) {
			continue
		}
		if !matchFilters(in.Filters, kp.Tags, func(f string) []string {
			switch f {
			case "key-name":
				return []string{kp.Name}
			case "key-pair-id":
				return []string{kp.ID}
			case "fingerprint":
				return []string{kp.Fingerprint}
			}
			return nil
		}) {
			continue
		}
		out.Keys = append(out.Keys, xmlKeyPairInfo{KeyPairID: kp.ID, KeyName: kp.Name, KeyFingerprint: kp.Fingerprint, KeyType: kp.Type,
			CreateTime: kp.CreateTime, TagSet: xmlTags(kp.Tags)})
	}
	return xmlOK(out)
}

// --- security groups -------------------------------------------------------

// groupByName finds a group by name in the default VPC. Runs under s.mu.
func groupByName(rd *regionData, name string) *SecurityGroup {
	for _, g := range rd.groups {
		if g.Name == name && g.VpcID == rd.vpc.ID {
			return g
		}
	}
	return nil
}

func (s *Server) createSecurityGroup(region string, in SecurityGroupInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	vpc := orDefault(in.VpcID, rd.vpc.ID)
	if vpc != rd.vpc.ID {
		return badRequest("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", vpc)
	}
	if groupByName(rd, in.GroupName) != nil {
		return badRequest("InvalidGroup.Duplicate", "The security group '%s' already exists for VPC '%s'", in.GroupName, vpc)
	}
	g := &SecurityGroup{ID: s.newID("sg"), Name: in.GroupName, Description: in.Description, VpcID: vpc, OwnerID: s.account}
	applyTags(&g.Tags, tagsFor(in.TagSpecs, "security-group"))
	rd.groups[g.ID] = g
	return xmlOK(xmlCreateSecurityGroup{ec2Meta: meta(), Return: true, GroupID: g.ID, TagSet: xmlTags(g.Tags)})
}

func (s *Server) findGroup(rd *regionData, id, name string) (*SecurityGroup, response, bool) {
	if id != "" {
		if g := rd.groups[id]; g != nil {
			return g, response{}, true
		}
		return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id), false
	}
	if g := groupByName(rd, name); g != nil {
		return g, response{}, true
	}
	return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", name, rd.vpc.ID), false
}

func samePermission(a, b Permission) bool {
	return a.Protocol == b.Protocol && a.FromPort == b.FromPort && a.ToPort == b.ToPort
}

func (s *Server) authorizeIngress(region string, in AuthorizeIngressInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	g, errResp, ok := s.findGroup(rd, in.GroupID, in.GroupName)
	if !ok {
		return errResp
	}
	for _, p := range in.Permissions {
		for _, id := range p.GroupIDs {
			if rd.groups[id] == nil {
				return badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
			}
		}
		for _, have := range g.Ingress {
			if !samePermission(have, p) {
				continue
			}
			for _, c := range p.CIDRs {
				if contains(have.CIDRs, c) {
					return badRequest("InvalidPermission.Duplicate", "the specified rule \"peer: %s, %s, from port: %d, to port: %d, ALLOW\" already exists",
						c, strings.ToUpper(p.Protocol), p.FromPort, p.ToPort)
				}
			}
		}
	}
	for _, p := range in.Permissions {
		p.CIDRs = append([]string(nil), p.CIDRs...)
		p.GroupIDs = append([]string(nil), p.GroupIDs...)
		g.Ingress = append(g.Ingress, p)
	}
	return returnTrue(OpAuthorizeSecurityGroupIngress)
}

func (s *Server) describeSecurityGroups(region string, in DescribeSecurityGroupsInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	for _, id := range in.IDs {
		if rd.groups[id] == nil {
			return badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	for _, name := range in.GroupNames {
		if groupByName(rd, name) == nil {
			return badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", name, rd.vpc.ID)
		}
	}
	var groups []xmlSecurityGroup
	for _, id := range sortedKeys(rd.groups) {
		g := rd.groups[id]
		if (len(in.IDs) > 0 && !contains(in.IDs, id)) || (len(in.GroupNames) > 0 && !contains(in.GroupNames, g.Name)) {
			continue
		}
		if !matchFilters(in.Filters, g.Tags, func(f string) []string {
			switch f {
			case "group-id":
				return []string{g.ID}
			case "group-name":
				return []string{g.Name}
			case "vpc-id":
				return []string{g.VpcID}
			case "description":
				return []string{g.Description}
			case "owner-id":
				return []string{g.OwnerID}
			}
			return nil
		}) {
			continue
		}
		groups = append(groups, renderSecurityGroup(g))
	}
	groups, next, err := page(groups, in.MaxResults, in.NextToken)
	if err != nil {
		return badRequest("InvalidParameterValue", "%v", err)
	}
	return xmlOK(xmlDescribeSecurityGroups{ec2Meta: meta(), Groups: append([]xmlSecurityGroup{}, groups...), NextToken: next})
}

func (s *Server) deleteSecurityGroup(region string, in SecurityGroupInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	g, errResp, ok := s.findGroup(rd, in.GroupID, in.GroupName)
	if !ok {
		return errResp
	}
	if g.Name == "default" {
		return badRequest("CannotDelete", "the specified group: \"%s\" name: \"default\" cannot be deleted by a user", g.ID)
	}
	for _, r := range rd.instances {
		if r.State != StateTerminated && contains(r.SecurityGroupIDs, g.ID) {
			return badRequest("DependencyViolation", "resource %s has a dependent object", g.ID)
		}
	}
	delete(rd.groups, g.ID)
	return xmlOK(xmlReturn{XMLName: xml.Name{Local: "DeleteSecurityGroupResponse"}, ec2Meta: meta(), Return: true, ID: g.ID})
}

// --- instances -------------------------------------------------------------

// defaultRootVolumeGiB is the DLAMI's root volume size.
const defaultRootVolumeGiB = 75

func (s *Server) launchable(img *Image) bool {
	return s.visibleTo(img) && img.State != "deregistered"
}

func (s *Server) runInstances(region string, in RunInstancesInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	if in.ClientToken != "" {
		// EC2 treats a repeated client token as the same launch.
		var again []*instanceRec
		for _, r := range rd.instances {
			if r.ClientToken == in.ClientToken {
				again = append(again, r)
			}
		}
		if len(again) > 0 {
			sort.Slice(again, func(a, b int) bool { return again[a].seq < again[b].seq })
			return s.renderReservation(rd, again)
		}
	}
	img := rd.images[in.ImageID]
	if img == nil || !s.launchable(img) {
		return badRequest("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", in.ImageID)
	}
	if st := orDefault(img.State, "available"); st != "available" {
		return badRequest("InvalidAMIID.Unavailable", "The image id '[%s]' is %s, not available", in.ImageID, st)
	}
	var authorizedKey string
	if in.KeyName != "" {
		kp := rd.keyPairs[in.KeyName]
		if kp == nil {
			return badRequest("InvalidKeyPair.NotFound", "The key pair '%s' does not exist", in.KeyName)
		}
		authorizedKey = kp.PublicKey
	}
	if in.SubnetID != "" && in.SubnetID != rd.subnet.ID {
		return badRequest("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", in.SubnetID)
	}
	if in.AvailabilityZone != "" && in.AvailabilityZone != rd.subnet.AvailabilityZone {
		return badRequest("InvalidParameterValue", "Invalid availability zone: [%s]", in.AvailabilityZone)
	}
	groups := append([]string(nil), in.SecurityGroupIDs...)
	for _, id := range groups {
		if rd.groups[id] == nil {
			return badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	for _, name := range in.SecurityGroups {
		g := groupByName(rd, name)
		if g == nil {
			return badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", name, rd.vpc.ID)
		}
		groups = append(groups, g.ID)
	}
	if len(groups) == 0 {
		groups = []string{groupByName(rd, "default").ID}
	}
	if s.takeRunFault(region, func(f *Fault) *int { return &f.InsufficientCapacity }) {
		return insufficientCapacity(region, in.InstanceType)
	}
	// Each instance needs its own loopback address; too few is EC2's
	// capacity error.
	ids, addrs := []string{}, []string{}
	for i := 0; i < in.MaxCount; i++ {
		id := s.newID("i")
		addr, ok := s.allocAddress(id)
		if !ok {
			break
		}
		ids, addrs = append(ids, id), append(addrs, addr)
	}
	if len(addrs) < in.MinCount {
		for _, a := range addrs {
			s.releaseAddress(a)
		}
		return insufficientCapacity(region, in.InstanceType)
	}
	stuck := s.takeRunFault(region, func(f *Fault) *int { return &f.StuckPending })
	now := s.now()
	rootDevice := orDefault(img.RootDeviceName, "/dev/sda1")
	var launched []*instanceRec
	for i, id := range ids {
		addr := addrs[i]
		s.instanceSeq++
		r := &instanceRec{Instance: Instance{
			ID: id, Region: region, ImageID: img.ID, InstanceType: in.InstanceType, KeyName: in.KeyName, VpcID: rd.vpc.ID,
			SubnetID: rd.subnet.ID, AvailabilityZone: rd.subnet.AvailabilityZone, SecurityGroupIDs: groups, Address: addr,
			State: StatePending, LaunchTime: ec2Time(now), Architecture: orDefault(img.Architecture, "x86_64"),
			RootDeviceName: rootDevice, Layers: append([]string(nil), img.Layers...), ClientToken: in.ClientToken, Stuck: stuck,
		}, userData: in.UserData, authorizedKey: authorizedKey, machineMu: &sync.Mutex{}, seq: s.instanceSeq}
		applyTags(&r.Tags, tagsFor(in.TagSpecs, "instance"))
		s.attachVolumes(rd, r, img, in, now)
		rd.instances[id] = r
		launched = append(launched, r)
	}
	reservation := s.newID("r")
	for _, r := range launched {
		r.reservationID = reservation
		s.startMachine(r)
	}
	return s.renderReservation(rd, launched)
}

// attachVolumes creates the instance's EBS volumes from the image's block
// devices, with the launch's overrides. Runs under s.mu.
func (s *Server) attachVolumes(rd *regionData, r *instanceRec, img *Image, in RunInstancesInput, now time.Time) {
	devices := imageBlockDevices(img)
	for _, o := range in.BlockDevices {
		found := false
		for i := range devices {
			if devices[i].DeviceName == o.DeviceName {
				found = true
				if o.NoDevice {
					devices[i].NoDevice = true
					continue
				}
				if o.VolumeSize > 0 {
					devices[i].VolumeSize = o.VolumeSize
				}
				if o.VolumeType != "" {
					devices[i].VolumeType = o.VolumeType
				}
				devices[i].DeleteOnTermination = o.DeleteOnTermination
			}
		}
		if !found && !o.NoDevice && o.VirtualName == "" {
			devices = append(devices, o)
		}
	}
	for _, d := range devices {
		if d.NoDevice || d.VirtualName != "" {
			continue
		}
		v := &Volume{ID: s.newID("vol"), State: "in-use", InstanceID: r.ID, DeviceName: d.DeviceName, SnapshotID: d.SnapshotID,
			AvailabilityZone: r.AvailabilityZone, Size: max(d.VolumeSize, 1), VolumeType: orDefault(d.VolumeType, "gp3"),
			DeleteOnTermination: d.DeleteOnTermination, CreateTime: ec2Time(now)}
		applyTags(&v.Tags, tagsFor(in.TagSpecs, "volume"))
		rd.volumes[v.ID] = v
		r.Volumes = append(r.Volumes, InstanceVolume{DeviceName: d.DeviceName, VolumeID: v.ID, DeleteOnTermination: d.DeleteOnTermination})
	}
}

// imageBlockDevices returns the image's block devices, inventing the root
// snapshot for seeded images that carry only a root device name.
func imageBlockDevices(img *Image) []BlockDevice {
	if len(img.BlockDevices) > 0 {
		return append([]BlockDevice(nil), img.BlockDevices...)
	}
	return []BlockDevice{{DeviceName: orDefault(img.RootDeviceName, "/dev/sda1"), SnapshotID: "snap-" + strings.TrimPrefix(img.ID, "ami-"),
		VolumeSize: defaultRootVolumeGiB, VolumeType: "gp3", DeleteOnTermination: true}}
}

// startMachine boots the host behind a new instance. Runs under s.mu.
func (s *Server) startMachine(r *instanceRec) {
	switch {
	case r.Stuck:
		r.settle = settle{work: &work{}} // never done
	case s.machines == nil:
		r.settle = settle{work: doneWork()}
	default:
		m, w := s.machines, &work{}
		r.settle = settle{work: w}
		spec := MachineSpec{InstanceID: r.ID, InstanceType: r.InstanceType, ImageID: r.ImageID, Address: r.Address,
			Layers: append([]string(nil), r.Layers...), AuthorizedKey: r.authorizedKey, UserData: append([]byte(nil), r.userData...)}
		s.background(r.machineMu, w, func(ctx context.Context) error {
			if err := m.Start(ctx, spec); err != nil {
				return fmt.Errorf("booting %s: %w", spec.InstanceID, err)
			}
			return nil
		}, func(err error) {
			if err != nil {
				// A half-booted host must not linger: tear it down.
				s.background(r.machineMu, &work{}, func(ctx context.Context) error { return m.Terminate(ctx, r.ID) }, nil)
			}
		})
	}
}

func (s *Server) renderReservation(rd *regionData, launched []*instanceRec) response {
	out := xmlRunInstances{ec2Meta: meta()}
	out.OwnerID = s.account
	out.Groups = []xmlGroupRef{}
	if len(launched) > 0 {
		out.ReservationID = launched[0].reservationID
	}
	for i, r := range launched {
		out.Instances = append(out.Instances, s.renderInstance(rd, r, i))
	}
	return xmlOK(out)
}

func instanceField(r *instanceRec) func(string) []string {
	return func(name string) []string {
		switch name {
		case "instance-id":
			return []string{r.ID}
		case "instance-state-name":
			return []string{r.State}
		case "instance-state-code":
			return []string{itoa(stateCodes[r.State])}
		case "image-id":
			return []string{r.ImageID}
		case "instance-type":
			return []string{r.InstanceType}
		case "key-name":
			return []string{r.KeyName}
		case "vpc-id":
			return []string{r.VpcID}
		case "subnet-id":
			return []string{r.SubnetID}
		case "availability-zone":
			return []string{r.AvailabilityZone}
		case "ip-address", "private-ip-address":
			return []string{r.Address}
		case "instance.group-id":
			return r.SecurityGroupIDs
		}
		return nil
	}
}

func notFoundInstances(ids []string) response {
	if len(ids) == 1 {
		return badRequest("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", ids[0])
	}
	return badRequest("InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(ids, ", "))
}

// instancesByID resolves ids or reports the missing ones. Runs under s.mu.
func instancesByID(rd *regionData, ids []string) ([]*instanceRec, []string) {
	var found []*instanceRec
	var missing []string
	for _, id := range ids {
		if r := rd.instances[id]; r != nil {
			found = append(found, r)
		} else {
			missing = append(missing, id)
		}
	}
	return found, missing
}

func (s *Server) describeInstances(region string, in DescribeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	var picked []*instanceRec
	if len(in.IDs) > 0 {
		found, missing := instancesByID(rd, in.IDs)
		if len(missing) > 0 {
			return notFoundInstances(missing)
		}
		picked = found
	} else {
		for _, r := range rd.instances {
			picked = append(picked, r)
		}
	}
	sort.Slice(picked, func(a, b int) bool { return picked[a].seq < picked[b].seq })
	var out []*instanceRec
	for _, r := range picked {
		s.observeInstance(rd, r)
		if matchFilters(in.Filters, r.Tags, instanceField(r)) {
			out = append(out, r)
		}
	}
	out, next, err := page(out, in.MaxResults, in.NextToken)
	if err != nil {
		return badRequest("InvalidParameterValue", "%v", err)
	}
	doc := xmlDescribeInstances{ec2Meta: meta(), Reservations: []xmlReservation{}, NextToken: next}
	index := map[string]int{}
	for _, r := range out {
		i, ok := index[r.reservationID]
		if !ok {
			i = len(doc.Reservations)
			index[r.reservationID] = i
			doc.Reservations = append(doc.Reservations, xmlReservation{ReservationID: r.reservationID, OwnerID: s.account, Groups: []xmlGroupRef{}})
		}
		res := &doc.Reservations[i]
		res.Instances = append(res.Instances, s.renderInstance(rd, r, len(res.Instances)))
	}
	return xmlOK(doc)
}

func (s *Server) stopInstances(region string, ids []string) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	found, missing := instancesByID(rd, ids)
	if len(missing) > 0 {
		return notFoundInstances(missing)
	}
	for _, r := range found {
		switch r.State {
		case StateRunning, StateStopping, StateStopped:
		default:
			return badRequest("IncorrectInstanceState", "The instance '%s' is not in a state from which it can be stopped.", r.ID)
		}
	}
	out := xmlStateChanges{XMLName: xml.Name{Local: "StopInstancesResponse"}, ec2Meta: meta()}
	for _, r := range found {
		prev := r.State
		if r.State == StateRunning {
			r.State = StateStopping
			r.StateReasonCode, r.StateReasonMessage = "", ""
			if s.machines == nil {
				r.settle = settle{work: doneWork()}
			} else {
				m, w, id := s.machines, &work{}, r.ID
				r.settle = settle{work: w}
				s.background(r.machineMu, w, func(ctx context.Context) error { return m.Stop(ctx, id) }, nil)
			}
		}
		out.Instances = append(out.Instances, xmlStateChange{InstanceID: r.ID, CurrentState: instanceState(r.State), PreviousState: instanceState(prev)})
	}
	return xmlOK(out)
}

func (s *Server) terminateInstances(region string, ids []string) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	found, missing := instancesByID(rd, ids)
	if len(missing) > 0 {
		return notFoundInstances(missing)
	}
	out := xmlStateChanges{XMLName: xml.Name{Local: "TerminateInstancesResponse"}, ec2Meta: meta()}
	for _, r := range found {
		prev := r.State
		if r.State != StateTerminated && r.State != StateShuttingDown {
			r.State = StateShuttingDown
			r.Stuck = false
			r.StateReasonCode = "Client.UserInitiatedShutdown"
			r.StateReasonMessage = "Client.UserInitiatedShutdown: User initiated shutdown"
			r.StateTransitionReason = fmt.Sprintf("User initiated (%s)", s.now().UTC().Format("2006-01-02 15:04:05 GMT"))
			if s.machines == nil {
				r.settle = settle{work: doneWork()}
			} else {
				m, w, id := s.machines, &work{}, r.ID
				r.settle = settle{work: w}
				s.background(r.machineMu, w, func(ctx context.Context) error { return m.Terminate(ctx, id) }, nil)
			}
		}
		out.Instances = append(out.Instances, xmlStateChange{InstanceID: r.ID, CurrentState: instanceState(r.State), PreviousState: instanceState(prev)})
	}
	return xmlOK(out)
}

// --- tags ------------------------------------------------------------------

// tagsOf returns a pointer to the tag map of an owned resource, or the
// error EC2 gives for an id it cannot find. Runs under s.mu.
func (s *Server) tagsOf(rd *regionData, id string) (*map[string]string, response, bool) {
	rt, _ := resourceTypeOf(id)
	switch rt {
	case "instance":
		if r := rd.instances[id]; r != nil {
			return &r.Tags, response{}, true
		}
		return nil, notFoundInstances([]string{id}), false
	case "image":
		img := rd.images[id]
		if img == nil || !s.visibleTo(img) {
			return nil, badRequest("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id), false
		}
		if img.OwnerID != s.account {
			// The shared images map has one tag set per image; letting a
			// consumer tag the publisher's image would leak across accounts.
			return nil, ec2Error(http.StatusForbidden, "UnauthorizedOperation", fmt.Sprintf("You are not authorized to tag image %s (owned by %s); the fake tags only the caller's own images", id, img.OwnerID)), false
		}
		return &img.Tags, response{}, true
	case "snapshot":
		if sn := rd.snapshots[id]; sn != nil {
			return &sn.Tags, response{}, true
		}
		return nil, badRequest("InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", id), false
	case "volume":
		if v := rd.volumes[id]; v != nil {
			return &v.Tags, response{}, true
		}
		return nil, badRequest("InvalidVolume.NotFound", "The volume '%s' does not exist.", id), false
	case "security-group":
		if g := rd.groups[id]; g != nil {
			return &g.Tags, response{}, true
		}
		return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id), false
	case "key-pair":
		if kp := s.keyPairByID(rd, id); kp != nil {
			return &kp.Tags, response{}, true
		}
		return nil, badRequest("InvalidKeyPair.NotFound", "The key pair ID '%s' does not exist", id), false
	}
	return nil, badRequest("InvalidID", "The ID '%s' is not valid or cannot be tagged by the fake", id), false
}

func (s *Server) createTags(region string, in TagsInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	var maps []*map[string]string
	for _, id := range in.ResourceIDs {
		m, errResp, ok := s.tagsOf(rd, id)
		if !ok {
			return errResp
		}
		maps = append(maps, m)
	}
	for _, m := range maps {
		applyTags(m, in.Tags)
		if len(*m) > maxTagsPer {
			return badRequest("TagLimitExceeded", "The maximum number of tags per resource is %d", maxTagsPer)
		}
	}
	return returnTrue(OpCreateTags)
}

func (s *Server) describeTags(region string, in DescribeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	var all []xmlTagDescription
	add := func(id, rt string, tags map[string]string) {
		for _, k := range sortedKeys(tags) {
			all = append(all, xmlTagDescription{ResourceID: id, ResourceType: rt, Key: k, Value: tags[k]})
		}
	}
	for _, id := range sortedKeys(rd.instances) {
		add(id, "instance", rd.instances[id].Tags)
	}
	for _, id := range sortedKeys(rd.images) {
		if rd.images[id].OwnerID == s.account {
			add(id, "image", rd.images[id].Tags)
		}
	}
	for _, id := range sortedKeys(rd.snapshots) {
		add(id, "snapshot", rd.snapshots[id].Tags)
	}
	for _, id := range sortedKeys(rd.volumes) {
		add(id, "volume", rd.volumes[id].Tags)
	}
	for _, id := range sortedKeys(rd.groups) {
		add(id, "security-group", rd.groups[id].Tags)
	}
	for _, name := range sortedKeys(rd.keyPairs) {
		add(rd.keyPairs[name].ID, "key-pair", rd.keyPairs[name].Tags)
	}
	var out []xmlTagDescription
	for _, t := range all {
		if matchFilters(in.Filters, nil, func(name string) []string {
			switch name {
			case "resource-id":
				return []string{t.ResourceID}
			case "resource-type":
				return []string{t.ResourceType}
			case "key":
				return []string{t.Key}
			case "value":
				return []string{t.Value}
			}
			return nil
		}) {
			out = append(out, t)
		}
	}
	out, next, err := page(out, in.MaxResults, in.NextToken)
	if err != nil {
		return badRequest("InvalidParameterValue", "%v", err)
	}
	return xmlOK(xmlDescribeTags{ec2Meta: meta(), Tags: append([]xmlTagDescription{}, out...), NextToken: next})
}

// --- images ----------------------------------------------------------------

// ownedImageNamed finds the caller's image with this name. Runs under s.mu.
func (s *Server) ownedImageNamed(rd *regionData, name string) *Image {
	for _, img := range rd.images {
		if img.Name == name && img.OwnerID == s.account && img.State != "deregistered" {
			return img
		}
	}
	return nil
}

func (s *Server) createImage(region string, in CreateImageInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	r := rd.instances[in.InstanceID]
	if r == nil {
		return notFoundInstances([]string{in.InstanceID})
	}
	switch r.State {
	case StateStopped:
	case StateRunning:
		if s.machines != nil {
			return badRequest("IncorrectInstanceState", "The instance '%s' is running; the fake captures the disk of stopped instances only (stop it first, as amazon-ebs does)", r.ID)
		}
	case StateTerminated:
		return badRequest("IncorrectInstanceState", "The instance '%s' is not in a state from which it can be imaged (terminated).", r.ID)
	default:
		// amazon-ebs retries on exactly this message.
		return badRequest("InvalidParameterValue", "Instance is not in state 'running' or 'stopped' (instance '%s' is %s)", r.ID, r.State)
	}
	if dup := s.ownedImageNamed(rd, in.Name); dup != nil {
		return badRequest("InvalidAMIName.Duplicate", "AMI name %s is already in use by AMI %s", in.Name, dup.ID)
	}
	now := s.now()
	img := &Image{
		ID: s.newID("ami"), Name: in.Name, Description: in.Description, OwnerID: s.account, State: "pending",
		Architecture: r.Architecture, CreationDate: ec2Time(now), RootDeviceName: r.RootDeviceName, RootDeviceType: "ebs",
		VirtualizationType: "hvm", Layers: append([]string(nil), r.Layers...), SourceInstanceID: r.ID,
	}
	applyTags(&img.Tags, tagsFor(in.TagSpecs, "image"))
	w := doneWork()
	if s.machines != nil {
		w = &work{}
	}
	for _, v := range r.Volumes {
		vol := rd.volumes[v.VolumeID]
		bd := BlockDevice{DeviceName: v.DeviceName, VolumeSize: defaultRootVolumeGiB, VolumeType: "gp3", DeleteOnTermination: v.DeleteOnTermination}
		if vol != nil {
			bd.VolumeSize, bd.VolumeType = vol.Size, vol.VolumeType
		}
		for _, o := range in.BlockDevices {
			if o.DeviceName == bd.DeviceName && !o.NoDevice {
				if o.VolumeSize > 0 {
					bd.VolumeSize = o.VolumeSize
				}
				if o.VolumeType != "" {
					bd.VolumeType = o.VolumeType
				}
				bd.DeleteOnTermination = o.DeleteOnTermination
			}
		}
		sn := &Snapshot{ID: s.newID("snap"), VolumeID: v.VolumeID, State: "pending", OwnerID: s.account,
			Description: fmt.Sprintf("Created by CreateImage(%s) for %s", r.ID, img.ID), VolumeSize: bd.VolumeSize, StartTime: ec2Time(now)}
		applyTags(&sn.Tags, tagsFor(in.TagSpecs, "snapshot"))
		rd.snapshots[sn.ID] = sn
		rd.snapshotSettle[sn.ID] = &settle{work: w}
		bd.SnapshotID = sn.ID
		img.BlockDevices = append(img.BlockDevices, bd)
	}
	rd.images[img.ID] = img
	rd.imageSettle[img.ID] = &settle{work: w}
	if s.machines != nil {
		m, id, imageID := s.machines, r.ID, img.ID
		var layer string
		s.background(r.machineMu, w, func(ctx context.Context) error {
			l, err := m.Snapshot(ctx, id)
			if err != nil {
				return fmt.Errorf("snapshotting %s for %s: %w", id, imageID, err)
			}
			if l == "" {
				return fmt.Errorf("snapshotting %s for %s: the machine backend returned no layer", id, imageID)
			}
			layer = l
			return nil
		}, func(err error) {
			if img := rd.images[imageID]; err == nil && img != nil {
				img.Layers = append(img.Layers, layer)
			}
		})
	}
	return xmlOK(xmlImageID{XMLName: xml.Name{Local: "CreateImageResponse"}, ec2Meta: meta(), ImageID: img.ID})
}

func (s *Server) copyImage(region string, in CopyImageInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.region(in.SourceRegion).images[in.SourceImageID]
	if src == nil || !s.launchable(src) {
		return badRequest("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", in.SourceImageID)
	}
	if st := orDefault(src.State, "available"); st != "available" {
		return badRequest("InvalidAMIID.Unavailable", "The image id '[%s]' is %s; only available images can be copied", in.SourceImageID, st)
	}
	rd := s.region(region)
	if dup := s.ownedImageNamed(rd, in.Name); dup != nil {
		return badRequest("InvalidAMIName.Duplicate", "AMI name %s is already in use by AMI %s", in.Name, dup.ID)
	}
	now := s.now()
	img := &Image{
		ID: s.newID("ami"), Name: in.Name, Description: orDefault(in.Description, src.Description), OwnerID: s.account, State: "pending",
		Architecture: src.Architecture, CreationDate: ec2Time(now), RootDeviceName: src.RootDeviceName, RootDeviceType: src.RootDeviceType,
		VirtualizationType: src.VirtualizationType, Layers: append([]string(nil), src.Layers...),
		SourceImageID: src.ID, SourceRegion: in.SourceRegion,
	}
	if in.CopyImageTags {
		img.Tags = copyTags(src.Tags)
	}
	applyTags(&img.Tags, tagsFor(in.TagSpecs, "image"))
	for _, bd := range imageBlockDevices(src) {
		if bd.SnapshotID != "" {
			sn := &Snapshot{ID: s.newID("snap"), VolumeID: "vol-ffffffff", State: "pending", OwnerID: s.account,
				Description: fmt.Sprintf("Copied for DestinationAmi %s from SourceAmi %s for SourceSnapshot %s", img.ID, src.ID, bd.SnapshotID),
				VolumeSize:  bd.VolumeSize, StartTime: ec2Time(now), Encrypted: in.Encrypted || bd.Encrypted}
			applyTags(&sn.Tags, tagsFor(in.TagSpecs, "snapshot"))
			rd.snapshots[sn.ID] = sn
			rd.snapshotSettle[sn.ID] = &settle{work: doneWork()}
			bd.SnapshotID = sn.ID
		}
		bd.Encrypted = bd.Encrypted || in.Encrypted
		img.BlockDevices = append(img.BlockDevices, bd)
	}
	rd.images[img.ID] = img
	rd.imageSettle[img.ID] = &settle{work: doneWork()}
	return xmlOK(xmlImageID{XMLName: xml.Name{Local: "CopyImageResponse"}, ec2Meta: meta(), ImageID: img.ID})
}

// ownedImage finds an image the caller may change. Runs under s.mu.
func (s *Server) ownedImage(rd *regionData, id string) (*Image, response, bool) {
	img := rd.images[id]
	if img == nil || !s.visibleTo(img) {
		return nil, badRequest("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id), false
	}
	if img.OwnerID != s.account {
		return nil, ec2Error(http.StatusBadRequest, "AuthFailure", "Not authorized for image:"+id), false
	}
	return img, response{}, true
}

func (s *Server) deregisterImage(region string, in ImageIDInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	img, errResp, ok := s.ownedImage(rd, in.ImageID)
	if !ok {
		return errResp
	}
	delete(rd.images, img.ID)
	delete(rd.imageSettle, img.ID)
	gone := cloneImage(*img)
	gone.State = "deregistered"
	rd.deregistered[img.ID] = deregisteredImage{img: gone, at: s.now()}
	if in.DeleteAssociatedSnapshots {
		for _, bd := range img.BlockDevices {
			delete(rd.snapshots, bd.SnapshotID)
			delete(rd.snapshotSettle, bd.SnapshotID)
		}
	}
	return returnTrue(OpDeregisterImage)
}

func (s *Server) modifyImageAttribute(region string, in AttributeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	img, errResp, ok := s.ownedImage(rd, in.ResourceID)
	if !ok {
		return errResp
	}
	for _, u := range in.AddUsers {
		if !contains(img.LaunchUsers, u) {
			img.LaunchUsers = append(img.LaunchUsers, u)
		}
	}
	var kept []string
	for _, u := range img.LaunchUsers {
		if !contains(in.RemoveUsers, u) {
			kept = append(kept, u)
		}
	}
	img.LaunchUsers = kept
	if len(in.AddGroups) > 0 {
		img.Public = true
	}
	if len(in.RemoveGroups) > 0 {
		img.Public = false
	}
	if in.Description != nil {
		img.Description = *in.Description
	}
	return returnTrue(OpModifyImageAttribute)
}

func (s *Server) enableImageDeprecation(region string, in ImageIDInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, errResp, ok := s.ownedImage(s.region(region), in.ImageID)
	if !ok {
		return errResp
	}
	t, _ := time.Parse(time.RFC3339, in.DeprecateAt) // checked by the parser
	img.DeprecationTime = ec2Time(t)
	return returnTrue(OpEnableImageDeprecation)
}

// --- snapshots and volumes -------------------------------------------------

func (s *Server) describeSnapshots(region string, in DescribeSnapshotsInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	for _, id := range in.IDs {
		if rd.snapshots[id] == nil {
			return badRequest("InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", id)
		}
	}
	var out []xmlSnapshot
	for _, id := range sortedKeys(rd.snapshots) {
		sn := rd.snapshots[id]
		if len(in.IDs) > 0 && !contains(in.IDs, id) {
			continue
		}
		if len(in.Owners) > 0 && !contains(in.Owners, "self") && !contains(in.Owners, sn.OwnerID) {
			continue
		}
		s.observeSnapshot(rd, sn)
		if !matchFilters(in.Filters, sn.Tags, func(f string) []string {
			switch f {
			case "snapshot-id":
				return []string{sn.ID}
			case "volume-id":
				return []string{sn.VolumeID}
			case "status":
				return []string{sn.State}
			case "owner-id":
				return []string{sn.OwnerID}
			case "description":
				return []string{sn.Description}
			}
			return nil
		}) {
			continue
		}
		out = append(out, renderSnapshot(sn))
	}
	out, next, err := page(out, in.MaxResults, in.NextToken)
	if err != nil {
		return badRequest("InvalidParameterValue", "%v", err)
	}
	return xmlOK(xmlDescribeSnapshots{ec2Meta: meta(), Snapshots: append([]xmlSnapshot{}, out...), NextToken: next})
}

func (s *Server) deleteSnapshot(region, id string) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	if rd.snapshots[id] == nil {
		return badRequest("InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", id)
	}
	for _, imgID := range sortedKeys(rd.images) {
		for _, bd := range rd.images[imgID].BlockDevices {
			if bd.SnapshotID == id {
				return badRequest("InvalidSnapshot.InUse", "The snapshot %s is currently in use by %s", id, imgID)
			}
		}
	}
	delete(rd.snapshots, id)
	delete(rd.snapshotSettle, id)
	return returnTrue(OpDeleteSnapshot)
}

func (s *Server) modifySnapshotAttribute(region string, in AttributeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.region(region).snapshots[in.ResourceID]
	if sn == nil {
		return badRequest("InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", in.ResourceID)
	}
	for _, u := range in.AddUsers {
		if !contains(sn.CreateVolumeUsers, u) {
			sn.CreateVolumeUsers = append(sn.CreateVolumeUsers, u)
		}
	}
	var kept []string
	for _, u := range sn.CreateVolumeUsers {
		if !contains(in.RemoveUsers, u) {
			kept = append(kept, u)
		}
	}
	sn.CreateVolumeUsers = kept
	return returnTrue(OpModifySnapshotAttribute)
}

func (s *Server) describeVolumes(region string, in DescribeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	for _, id := range in.IDs {
		if rd.volumes[id] == nil {
			return badRequest("InvalidVolume.NotFound", "The volume '%s' does not exist.", id)
		}
	}
	var out []xmlVolume
	for _, id := range sortedKeys(rd.volumes) {
		v := rd.volumes[id]
		if len(in.IDs) > 0 && !contains(in.IDs, id) {
			continue
		}
		if !matchFilters(in.Filters, v.Tags, func(f string) []string {
			switch f {
			case "volume-id":
				return []string{v.ID}
			case "status":
				return []string{v.State}
			case "attachment.instance-id":
				return []string{v.InstanceID}
			case "snapshot-id":
				return []string{v.SnapshotID}
			}
			return nil
		}) {
			continue
		}
		out = append(out, renderVolume(v))
	}
	out, next, err := page(out, in.MaxResults, in.NextToken)
	if err != nil {
		return badRequest("InvalidParameterValue", "%v", err)
	}
	return xmlOK(xmlDescribeVolumes{ec2Meta: meta(), Volumes: append([]xmlVolume{}, out...), NextToken: next})
}

func (s *Server) deleteVolume(region, id string) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	v := rd.volumes[id]
	if v == nil {
		return badRequest("InvalidVolume.NotFound", "The volume '%s' does not exist.", id)
	}
	if v.State == "in-use" {
		return badRequest("VolumeInUse", "Volume %s is currently attached to %s", id, v.InstanceID)
	}
	delete(rd.volumes, id)
	return returnTrue(OpDeleteVolume)
}

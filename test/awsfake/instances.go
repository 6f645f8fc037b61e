package awsfake

import (
	"context"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Instance states, as EC2 names them, and their numeric codes.
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
	StateStopping     = "stopping"
	StateStopped      = "stopped"
)

var stateCodes = map[string]int{
	StatePending: 0, StateRunning: 16, StateShuttingDown: 32, StateTerminated: 48, StateStopping: 64, StateStopped: 80,
}

// InstanceVolume is one EBS volume attached to an instance.
type InstanceVolume struct {
	DeviceName          string `json:"device_name"`
	VolumeID            string `json:"volume_id"`
	DeleteOnTermination bool   `json:"delete_on_termination"`
}

// Instance is one EC2 instance as the fake reports it.
type Instance struct {
	ID                    string            `json:"id"`
	Region                string            `json:"region"`
	ImageID               string            `json:"image_id"`
	InstanceType          string            `json:"instance_type"`
	KeyName               string            `json:"key_name,omitempty"`
	VpcID                 string            `json:"vpc_id"`
	SubnetID              string            `json:"subnet_id"`
	AvailabilityZone      string            `json:"availability_zone"`
	SecurityGroupIDs      []string          `json:"security_group_ids,omitempty"`
	Address               string            `json:"address,omitempty"`   // the primary interface's private IP; empty once terminated
	PublicIP              string            `json:"public_ip,omitempty"` // = Address with one interface (AssociatePublicIpAddress or the subnet's default), an Elastic IP, or none
	State                 string            `json:"state"`
	StateReasonCode       string            `json:"state_reason_code,omitempty"`
	StateReasonMessage    string            `json:"state_reason_message,omitempty"`
	StateTransitionReason string            `json:"state_transition_reason,omitempty"`
	LaunchTime            string            `json:"launch_time"`
	Architecture          string            `json:"architecture"`
	RootDeviceName        string            `json:"root_device_name"`
	Volumes               []InstanceVolume  `json:"volumes,omitempty"`
	Layers                []string          `json:"layers,omitempty"` // the AMI's layers the host booted from
	Tags                  map[string]string `json:"tags,omitempty"`
	ClientToken           string            `json:"client_token,omitempty"`
	// MetadataOptions are the launch's MetadataOptions.* (IMDS), as sent; absent when the
	// launch sent none (EC2 then applies the account's defaults).
	MetadataOptions *MetadataOptions `json:"metadata_options,omitempty"`
	// UserData is the launch's user data, decoded from base64.
	UserData string `json:"user_data,omitempty"`
	// Stuck marks an instance the stuck-pending fault keeps in pending.
	Stuck bool `json:"stuck,omitempty"`
	// RunningSeconds is this instance's metered time (see usage.go), filled in by State.
	RunningSeconds float64 `json:"running_seconds"`
	// PlacementGroup is the launch's Placement.GroupName.
	PlacementGroup string `json:"placement_group,omitempty"`
	// NetworkInterfaces are the interfaces the launch made, in card and device order (one
	// default interface when it sent none).
	NetworkInterfaces []InstanceInterface `json:"network_interfaces,omitempty"`
	// EFACards and EFATraffic are what the instance's host shows (MachineNetwork): the card of
	// each EFA interface, and whether the security groups let EFA traffic through.
	EFACards   []int `json:"efa_cards,omitempty"`
	EFATraffic bool  `json:"efa_traffic"`
}

type instanceRec struct {
	Instance
	userData      []byte
	authorizedKey string
	settle        settle
	// machineMu serialises this instance's machine calls (a terminate
	// issued while the boot runs waits for the boot).
	machineMu     *sync.Mutex
	seq           uint64 // launch order
	reservationID string
	meter         meter // the time it ran (usage.go)
	// interfaceIDs are the launch's interfaces (eni- ids), in card and device order.
	interfaceIDs []string
	// network is what the host was last told (MachineSpec.Network, Machines.SetNetwork).
	network MachineNetwork
}

var instanceFilters = map[string]bool{
	"instance-id": true, "instance-state-name": true, "instance-state-code": true, "image-id": true,
	"instance-type": true, "key-name": true, "vpc-id": true, "subnet-id": true, "availability-zone": true,
	"ip-address": true, "private-ip-address": true, "tag-key": true, "instance.group-id": true, "placement-group-name": true,
	"network-interface.network-interface-id": true,
}

// ParseDescribeInstances decodes DescribeInstances and DescribeInstanceStatus.
func ParseDescribeInstances(form url.Values) (DescribeInput, error) {
	return parseDescribe(form, describeParams{idParam: "InstanceId", idPrefix: "i", malformedCode: "InvalidInstanceID.Malformed",
		filters: instanceFilters, tagFilters: true, maxResultsLo: 5})
}

// ParseInstanceIDs decodes the InstanceId.N list of Stop/Terminate/Start.
func ParseInstanceIDs(form url.Values) ([]string, error) {
	ids := indexedList(form, "InstanceId")
	if len(ids) == 0 {
		return nil, inputError("MissingParameter", "The request must contain the parameter InstanceId")
	}
	for _, id := range ids {
		if err := checkID(id, "i", "InvalidInstanceID.Malformed"); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// RunInstancesInput is the decoded form of RunInstances.
type RunInstancesInput struct {
	ImageID          string
	InstanceType     string
	MinCount         int
	MaxCount         int
	KeyName          string
	SecurityGroupIDs []string
	SecurityGroups   []string // names
	SubnetID         string
	AvailabilityZone string
	UserData         []byte
	BlockDevices     []BlockDevice
	TagSpecs         []TagSpecification
	ClientToken      string
	MetadataOptions  *MetadataOptions
	// Interfaces are NetworkInterface.N (none: one default interface).
	Interfaces []InterfaceSpec
	// PlacementGroup is Placement.GroupName; PlacementGroupID Placement.GroupId.
	PlacementGroup   string
	PlacementGroupID string
	// CapacityReservationID and CapacityReservationGroupARN are the reservation the launch
	// targets (CapacityReservationSpecification.CapacityReservationTarget); CapacityReservation
	// Preference its preference instead (open, none, capacity-reservations-only).
	CapacityReservationID         string
	CapacityReservationGroupARN   string
	CapacityReservationPreference string
	// MarketType is InstanceMarketOptions.MarketType (capacity-block, spot; empty: on-demand).
	MarketType string
}

// MetadataOptions is RunInstances' MetadataOptions (the instance metadata service, IMDS):
// what the launch asked for, empty fields unsent.
type MetadataOptions struct {
	HTTPEndpoint            string `json:"http_endpoint,omitempty"`
	HTTPTokens              string `json:"http_tokens,omitempty"`
	HTTPPutResponseHopLimit int    `json:"http_put_response_hop_limit,omitempty"`
	InstanceMetadataTags    string `json:"instance_metadata_tags,omitempty"`
	HTTPProtocolIPv6        string `json:"http_protocol_ipv6,omitempty"`
}

// parseMetadataOptions reads MetadataOptions.*, refusing values EC2 refuses (its enums,
// a hop limit outside 1-64); nil when none was sent.
func parseMetadataOptions(form url.Values) (*MetadataOptions, error) {
	const p = "MetadataOptions."
	var m MetadataOptions
	sent := false
	for _, f := range []struct {
		name string
		dst  *string
	}{{"HttpEndpoint", &m.HTTPEndpoint}, {"HttpTokens", &m.HTTPTokens}, {"InstanceMetadataTags", &m.InstanceMetadataTags}, {"HttpProtocolIpv6", &m.HTTPProtocolIPv6}} {
		v, ok := form[p+f.name]
		if !ok {
			continue
		}
		sent = true
		want := []string{"enabled", "disabled"}
		if f.name == "HttpTokens" {
			want = []string{"optional", "required"}
		}
		if len(v) != 1 || !contains(want, v[0]) {
			return nil, inputError("InvalidParameterValue", "Invalid value '%s' for %s%s. Valid values: %s", strings.Join(v, ","), p, f.name, strings.Join(want, ", "))
		}
		*f.dst = v[0]
	}
	if _, ok := form[p+"HttpPutResponseHopLimit"]; ok {
		sent = true
		n, err := intParam(form, p+"HttpPutResponseHopLimit", 0, 1, 64)
		if err == nil && n == 0 {
			err = inputError("InvalidParameterValue", "Value () for parameter %sHttpPutResponseHopLimit is invalid. Expecting a value between 1 and 64", p)
		}
		if err != nil {
			return nil, err
		}
		m.HTTPPutResponseHopLimit = n
	}
	if !sent {
		return nil, nil
	}
	return &m, nil
}

// MaxInstancesPerLaunch bounds RunInstances MaxCount: each instance is a
// simulated host with its own loopback address.
const MaxInstancesPerLaunch = 16

var instanceTypeShape = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9]+$`)

// ParseRunInstances decodes RunInstances.
func ParseRunInstances(form url.Values) (RunInstancesInput, error) {
	in := RunInstancesInput{
		ImageID: form.Get("ImageId"), InstanceType: form.Get("InstanceType"), KeyName: form.Get("KeyName"),
		SecurityGroupIDs: indexedList(form, "SecurityGroupId"), SecurityGroups: indexedList(form, "SecurityGroup"),
		SubnetID: form.Get("SubnetId"), AvailabilityZone: form.Get("Placement.AvailabilityZone"), ClientToken: form.Get("ClientToken"),
		PlacementGroup: form.Get("Placement.GroupName"), PlacementGroupID: form.Get("Placement.GroupId"),
	}
	if in.ImageID == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter ImageId")
	}
	if err := checkID(in.ImageID, "ami", "InvalidAMIID.Malformed"); err != nil {
		return in, err
	}
	if in.InstanceType == "" {
		in.InstanceType = "m1.small" // EC2's documented default
	}
	if !instanceTypeShape.MatchString(in.InstanceType) {
		return in, inputError("InvalidParameterValue", "Invalid value '%s' for InstanceType.", in.InstanceType)
	}
	var err error
	if in.MinCount, err = intParam(form, "MinCount", 0, 1, MaxInstancesPerLaunch); err != nil {
		return in, err
	}
	if in.MaxCount, err = intParam(form, "MaxCount", 0, 1, MaxInstancesPerLaunch); err != nil {
		return in, err
	}
	if in.MinCount == 0 || in.MaxCount == 0 {
		return in, inputError("MissingParameter", "The request must contain the parameters MinCount and MaxCount")
	}
	if in.MinCount > in.MaxCount {
		return in, inputError("InvalidParameterValue", "MinCount (%d) must not exceed MaxCount (%d)", in.MinCount, in.MaxCount)
	}
	// A launch with network interfaces carries its subnet and groups there, never beside them.
	if in.Interfaces, err = parseInterfaceSpecs(form); err != nil {
		return in, err
	}
	if len(in.Interfaces) > 0 && in.SubnetID != "" {
		// Verbatim (ec2-gpu-network-facts.md, "EC2 error codes": aws/aws-cli #809, PR #1874).
		return in, inputError("InvalidParameterCombination", "Network interfaces and an instance-level subnet ID may not be specified on the same request")
	}
	if len(in.Interfaces) > 0 && len(in.SecurityGroupIDs)+len(in.SecurityGroups) > 0 {
		// Verbatim (aws/aws-sdk-ruby#662, saltstack/salt#25569; not in the fact sheet).
		return in, inputError("InvalidParameterCombination", "Network interfaces and an instance-level security groups may not be specified on the same request")
	}
	if in.PlacementGroup != "" && in.PlacementGroupID != "" {
		return in, inputError("InvalidParameterCombination", "Placement.GroupName and Placement.GroupId may not be specified on the same request; name the placement group once")
	}
	if err := parseCapacityReservation(form, &in); err != nil {
		return in, err
	}
	for _, id := range in.SecurityGroupIDs {
		if err := checkID(id, "sg", "InvalidGroupId.Malformed"); err != nil {
			return in, err
		}
	}
	if in.SubnetID != "" {
		if err := checkID(in.SubnetID, "subnet", "InvalidSubnetID.Malformed"); err != nil {
			return in, err
		}
	}
	if ud := form.Get("UserData"); ud != "" {
		b, err := base64.StdEncoding.DecodeString(ud)
		if err != nil {
			return in, inputError("InvalidParameterValue", "Invalid BASE64 encoding of user data.")
		}
		if len(b) > 16<<10 {
			return in, inputError("InvalidParameterValue", "User data is limited to 16384 bytes")
		}
		in.UserData = b
	}
	if in.BlockDevices, err = parseBlockDevices(form); err != nil {
		return in, err
	}
	if in.MetadataOptions, err = parseMetadataOptions(form); err != nil {
		return in, err
	}
	if in.TagSpecs, err = parseTagSpecifications(form, "instance", "volume", "network-interface"); err != nil {
		return in, err
	}
	return in, nil
}

func (s *Server) runInstances(region string, in RunInstancesInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	if again := replayedLaunch(rd, in.ClientToken); len(again) > 0 {
		return s.renderReservation(rd, again)
	}
	img, errResp, ok := s.launchImage(rd, in.ImageID)
	if !ok {
		return errResp
	}
	authorizedKey, errResp, ok := launchKey(rd, in.KeyName)
	if !ok {
		return errResp
	}
	if errResp, ok := checkPlacement(rd, in); !ok {
		return errResp
	}
	placementGroup, errResp, ok := launchPlacementGroup(rd, in)
	if !ok {
		return errResp
	}
	groups, errResp, ok := launchGroups(rd, in)
	if !ok {
		return errResp
	}
	if errResp, ok := s.checkCapacityBlockOnly(in); !ok {
		return errResp
	}
	var figures *InstanceTypeInfo
	if t, known := s.instanceType(in.InstanceType); known {
		figures = t
	}
	if len(in.Interfaces) > 0 {
		if errResp, ok := checkLaunchLayout(in.InstanceType, figures, in.Interfaces); !ok {
			return errResp
		}
	}
	if s.takeRunFault(region, func(f *Fault) *int { return &f.InsufficientCapacity }) {
		return insufficientCapacity(region, in.InstanceType)
	}
	ids, addrs, ok := s.reserveAddresses(in.MinCount, in.MaxCount)
	if !ok {
		return insufficientCapacity(region, in.InstanceType)
	}
	stuck := s.takeRunFault(region, func(f *Fault) *int { return &f.StuckPending })
	dropEFA := s.takeEFADrop(region)
	now := s.now()
	var launched []*instanceRec
	for i, id := range ids {
		one := in
		if i == dropEFA-1 {
			one.Interfaces = withoutEFA(in.Interfaces)
		}
		r := s.newInstance(region, rd, img, one, id, addrs[i], groups, now)
		r.userData, r.authorizedKey, r.Stuck = in.UserData, authorizedKey, stuck
		r.PlacementGroup = placementGroup
		launched = append(launched, r)
	}
	reservation := s.newID("r")
	for _, r := range launched {
		r.reservationID = reservation
		s.startMachine(r)
	}
	if s.takeRunFault(region, func(f *Fault) *int { return &f.PartialAnswer }) {
		launched = launched[:1]
	}
	return s.renderReservation(rd, launched)
}

// withoutEFA is a launch's interfaces without its EFA ones (the efa-dropped fault).
func withoutEFA(specs []InterfaceSpec) []InterfaceSpec {
	var out []InterfaceSpec
	for _, sp := range specs {
		if sp.InterfaceType != InterfaceEFA && sp.InterfaceType != InterfaceEFAOnly {
			out = append(out, sp)
		}
	}
	return out
}

// replayedLaunch returns the instances of an earlier launch with the same
// client token: EC2 treats a repeated token as the same launch. Runs under s.mu.
func replayedLaunch(rd *regionData, clientToken string) []*instanceRec {
	if clientToken == "" {
		return nil
	}
	var again []*instanceRec
	for _, r := range instancesInLaunchOrder(rd) {
		if r.ClientToken == clientToken {
			again = append(again, r)
		}
	}
	return again
}

// launchImage finds the image a launch boots: visible, not deregistered and
// available. Runs under s.mu.
func (s *Server) launchImage(rd *regionData, imageID string) (*Image, response, bool) {
	img := rd.images[imageID]
	if img == nil || !s.launchable(img) {
		return nil, badRequest("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", imageID), false
	}
	if st := orDefault(img.State, "available"); st != "available" {
		return nil, badRequest("InvalidAMIID.Unavailable", "The image id '[%s]' is %s, not available", imageID, st), false
	}
	return img, response{}, true
}

// launchKey returns the public key of the launch's key pair ("" for none).
// Runs under s.mu.
func launchKey(rd *regionData, keyName string) (string, response, bool) {
	if keyName == "" {
		return "", response{}, true
	}
	kp := rd.keyPairs[keyName]
	if kp == nil {
		return "", badRequest("InvalidKeyPair.NotFound", "The key pair '%s' does not exist", keyName), false
	}
	return kp.PublicKey, response{}, true
}

// checkPlacement accepts only the default subnet (the instance's and every interface's) and
// its zone. Runs under s.mu.
func checkPlacement(rd *regionData, in RunInstancesInput) (response, bool) {
	subnets := []string{in.SubnetID}
	for _, sp := range in.Interfaces {
		subnets = append(subnets, sp.SubnetID)
	}
	for _, sn := range subnets {
		if sn != "" && sn != rd.subnet.ID {
			return badRequest("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", sn), false
		}
	}
	if in.AvailabilityZone != "" && in.AvailabilityZone != rd.subnet.AvailabilityZone {
		return badRequest("InvalidParameterValue", "Invalid availability zone: [%s]", in.AvailabilityZone), false
	}
	return response{}, true
}

// launchPlacementGroup resolves Placement.GroupName or .GroupId to the group's name ("" for
// none). Runs under s.mu.
func launchPlacementGroup(rd *regionData, in RunInstancesInput) (string, response, bool) {
	switch {
	case in.PlacementGroup != "":
		if placementGroupByName(rd, in.PlacementGroup) == nil {
			return "", placementGroupUnknown(in.PlacementGroup), false
		}
		return in.PlacementGroup, response{}, true
	case in.PlacementGroupID != "":
		if g := rd.placementGroups[in.PlacementGroupID]; g != nil {
			return g.Name, response{}, true
		}
		return "", placementGroupUnknown(in.PlacementGroupID), false
	}
	return "", response{}, true
}

// launchGroups resolves the launch's instance-level security groups, by id and by name; none
// means the default group (also what an interface without SecurityGroupId gets). The
// interfaces' groups must exist too. Runs under s.mu.
func launchGroups(rd *regionData, in RunInstancesInput) ([]string, response, bool) {
	groups := append([]string(nil), in.SecurityGroupIDs...)
	var all []string
	all = append(all, groups...)
	for _, sp := range in.Interfaces {
		all = append(all, sp.SecurityGroupIDs...)
	}
	for _, id := range all {
		if rd.groups[id] == nil {
			return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id), false
		}
	}
	for _, name := range in.SecurityGroups {
		g := groupByName(rd, name)
		if g == nil {
			return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", name, rd.vpc.ID), false
		}
		groups = append(groups, g.ID)
	}
	if len(groups) == 0 {
		groups = []string{groupByName(rd, "default").ID}
	}
	return groups, response{}, true
}

// reserveAddresses takes up to maxCount instance ids, each with its own
// loopback address; fewer than minCount addresses is EC2's capacity error
// (reported as !ok, with nothing kept). Runs under s.mu.
func (s *Server) reserveAddresses(minCount, maxCount int) (ids, addrs []string, ok bool) {
	for range maxCount {
		id := s.newID("i")
		addr, ok := s.allocAddress(id)
		if !ok {
			break
		}
		ids, addrs = append(ids, id), append(addrs, addr)
	}
	if len(addrs) < minCount {
		for _, a := range addrs {
			s.releaseAddress(a)
		}
		return nil, nil, false
	}
	return ids, addrs, true
}

// newInstance records one pending instance of a launch, with its volumes.
// Runs under s.mu.
func (s *Server) newInstance(region string, rd *regionData, img *Image, in RunInstancesInput, id, addr string, groups []string, now time.Time) *instanceRec {
	s.instanceSeq++
	r := &instanceRec{Instance: Instance{
		ID: id, Region: region, ImageID: img.ID, InstanceType: in.InstanceType, KeyName: in.KeyName, VpcID: rd.vpc.ID,
		SubnetID: rd.subnet.ID, AvailabilityZone: rd.subnet.AvailabilityZone, SecurityGroupIDs: groups, Address: addr,
		State: StatePending, LaunchTime: ec2Time(now), Architecture: orDefault(img.Architecture, "x86_64"),
		RootDeviceName: orDefault(img.RootDeviceName, "/dev/sda1"), Layers: append([]string(nil), img.Layers...), ClientToken: in.ClientToken,
		MetadataOptions: in.MetadataOptions, UserData: string(in.UserData),
	}, machineMu: &sync.Mutex{}, seq: s.instanceSeq}
	applyTags(&r.Tags, tagsFor(in.TagSpecs, "instance"))
	s.attachVolumes(rd, r, img, in, now)
	rd.instances[id] = r
	s.createInterfaces(rd, r, in, groups)
	r.network = machineNetwork(rd, r)
	r.EFACards, r.EFATraffic = r.network.EFACards, r.network.EFATraffic
	return r
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
			Layers: append([]string(nil), r.Layers...), AuthorizedKey: r.authorizedKey, UserData: append([]byte(nil), r.userData...),
			Network: r.network}
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

// insufficientCapacity is EC2's answer when a zone has no capacity for a
// type: a server error (HTTP 500, which SDKs retry) with this wording.
func insufficientCapacity(region, instanceType string) response {
	return ec2Error(http.StatusInternalServerError, "InsufficientInstanceCapacity", fmt.Sprintf(
		"We currently do not have sufficient %s capacity in the Availability Zone you requested (%sa). "+
			"Our system will be working on provisioning additional capacity. You can currently get %s capacity by not "+
			"specifying an Availability Zone in your request or choosing %sb, %sc.", instanceType, region, instanceType, region, region))
}

func (s *Server) describeInstances(region string, in DescribeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	instances, next, errResp, ok := describe(describeSpec[*instanceRec]{
		in: in, all: instancesInLaunchOrder(rd), id: func(r *instanceRec) string { return r.ID },
		notFound: notFoundInstances,
		observe:  func(r *instanceRec) { s.observeInstance(rd, r) },
		tags:     func(r *instanceRec) map[string]string { return r.Tags },
		field:    instanceField,
	})
	if !ok {
		return errResp
	}
	doc := xmlDescribeInstances{ec2Meta: meta(), Reservations: []xmlReservation{}, NextToken: next}
	index := map[string]int{}
	for _, r := range instances {
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

// instancesInLaunchOrder lists a region's instances oldest first, the order
// EC2 answers in. Runs under s.mu.
func instancesInLaunchOrder(rd *regionData) []*instanceRec {
	out := make([]*instanceRec, 0, len(rd.instances))
	for _, r := range rd.instances {
		out = append(out, r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].seq < out[b].seq })
	return out
}

// instanceField returns an instance's values for a DescribeInstances filter.
func instanceField(r *instanceRec, name string) []string {
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
	case "ip-address":
		return []string{r.PublicIP}
	case "private-ip-address":
		return []string{r.Address}
	case "instance.group-id":
		return r.SecurityGroupIDs
	case "placement-group-name":
		return []string{r.PlacementGroup}
	case "network-interface.network-interface-id":
		return r.interfaceIDs
	}
	return nil
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

// observeInstance is called for every instance a DescribeInstances (or
// DescribeInstanceStatus) answer includes, before rendering it.
func (s *Server) observeInstance(rd *regionData, r *instanceRec) {
	switch r.State {
	case StatePending, StateStopping, StateShuttingDown:
	default:
		return
	}
	if r.Stuck || !s.advance(&r.settle) {
		return
	}
	err := r.settle.work.err
	r.settle = settle{}
	now := transitionTime(s.now())
	switch r.State {
	case StatePending:
		if err != nil {
			// EC2 moves a launch that fails inside the service to terminated
			// with Server.InternalError; the host was torn down by the boot
			// goroutine.
			s.finishTerminate(rd, r)
			r.StateReasonCode = "Server.InternalError"
			r.StateReasonMessage = "Server.InternalError: Internal error on launch: " + err.Error()
			r.StateTransitionReason = fmt.Sprintf("Server.InternalError (%s)", now)
			return
		}
		r.State = StateRunning
		r.meter.start(s.now())
	case StateStopping:
		if err != nil {
			// The host did not stop; say so instead of pretending.
			r.State = StateRunning
			r.StateReasonCode = "Server.InternalError"
			r.StateReasonMessage = "Server.InternalError: stop failed: " + err.Error()
			return
		}
		r.State = StateStopped
		r.meter.stop(s.now())
		r.StateReasonCode = "Client.UserInitiatedShutdown"
		r.StateReasonMessage = "Client.UserInitiatedShutdown: User initiated shutdown"
		r.StateTransitionReason = fmt.Sprintf("User initiated (%s)", now)
	case StateShuttingDown:
		s.finishTerminate(rd, r)
		if err != nil {
			r.StateReasonMessage += " (teardown reported: " + err.Error() + ")"
		}
	}
}

func (s *Server) stopInstances(region string, ids []string) response {
	return s.changeStates(region, ids, OpStopInstances, func(r *instanceRec) (response, bool) {
		switch r.State {
		case StateRunning, StateStopping, StateStopped:
			return response{}, true
		}
		return badRequest("IncorrectInstanceState", "The instance '%s' is not in a state from which it can be stopped.", r.ID), false
	}, func(r *instanceRec) {
		if r.State == StateRunning {
			r.State = StateStopping
			r.StateReasonCode, r.StateReasonMessage = "", ""
			s.beginTransition(r, Machines.Stop)
		}
	})
}

func (s *Server) terminateInstances(region string, ids []string) response {
	return s.changeStates(region, ids, OpTerminateInstances, nil, func(r *instanceRec) {
		if r.State != StateTerminated && r.State != StateShuttingDown {
			r.State = StateShuttingDown
			r.Stuck = false
			r.StateReasonCode = "Client.UserInitiatedShutdown"
			r.StateReasonMessage = "Client.UserInitiatedShutdown: User initiated shutdown"
			r.StateTransitionReason = fmt.Sprintf("User initiated (%s)", transitionTime(s.now()))
			s.beginTransition(r, Machines.Terminate)
		}
	})
}

// changeStates answers StopInstances and TerminateInstances: every id must
// exist and pass check (nil: any state) before change moves each instance;
// the answer lists each one's previous and current state.
func (s *Server) changeStates(region string, ids []string, op string, check func(*instanceRec) (response, bool), change func(*instanceRec)) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	found, missing := instancesByID(s.region(region), ids)
	if len(missing) > 0 {
		return notFoundInstances(missing)
	}
	if check != nil {
		for _, r := range found {
			if errResp, ok := check(r); !ok {
				return errResp
			}
		}
	}
	out := xmlStateChanges{XMLName: xml.Name{Local: op + "Response"}, ec2Meta: meta()}
	for _, r := range found {
		prev := r.State
		change(r)
		out.Instances = append(out.Instances, xmlStateChange{InstanceID: r.ID, CurrentState: instanceState(r.State), PreviousState: instanceState(prev)})
	}
	return xmlOK(out)
}

// beginTransition starts the machine call behind a stopping or shutting-down
// instance, in the background; without machines the work is done at once.
// Runs under s.mu.
func (s *Server) beginTransition(r *instanceRec, call func(m Machines, ctx context.Context, instanceID string) error) {
	if s.machines == nil {
		r.settle = settle{work: doneWork()}
		return
	}
	m, w, id := s.machines, &work{}, r.ID
	r.settle = settle{work: w}
	s.background(r.machineMu, w, func(ctx context.Context) error { return call(m, ctx, id) }, nil)
}

// transitionTime formats t as EC2 does in StateTransitionReason.
func transitionTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 GMT") }

// finishTerminate moves an instance to terminated: its address goes back to
// the pool and its delete-on-termination volumes go away. Runs under s.mu.
func (s *Server) finishTerminate(rd *regionData, r *instanceRec) {
	r.State = StateTerminated
	r.meter.stop(s.now())
	s.releaseInterfaces(rd, r)
	s.releaseAddress(r.Address)
	r.Address, r.PublicIP = "", ""
	for _, v := range r.Volumes {
		vol := rd.volumes[v.VolumeID]
		if vol == nil {
			continue
		}
		if vol.DeleteOnTermination {
			delete(rd.volumes, v.VolumeID)
			continue
		}
		vol.State, vol.InstanceID = "available", ""
	}
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

type xmlInstanceState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

func instanceState(name string) xmlInstanceState {
	return xmlInstanceState{Code: stateCodes[name], Name: name}
}

type xmlGroupRef struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type xmlInstanceEBS struct {
	VolumeID            string `xml:"volumeId"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlInstanceBDM struct {
	DeviceName string         `xml:"deviceName"`
	EBS        xmlInstanceEBS `xml:"ebs"`
}

type xmlPlacement struct {
	AvailabilityZone string `xml:"availabilityZone"`
	GroupName        string `xml:"groupName,omitempty"`
	Tenancy          string `xml:"tenancy"`
}

type xmlMonitoring struct {
	State string `xml:"state"`
}

type xmlInstance struct {
	InstanceID         string                `xml:"instanceId"`
	ImageID            string                `xml:"imageId"`
	State              xmlInstanceState      `xml:"instanceState"`
	PrivateDNSName     string                `xml:"privateDnsName"`
	DNSName            string                `xml:"dnsName"`
	Reason             string                `xml:"reason"`
	KeyName            string                `xml:"keyName,omitempty"`
	AmiLaunchIndex     int                   `xml:"amiLaunchIndex"`
	InstanceType       string                `xml:"instanceType"`
	LaunchTime         string                `xml:"launchTime"`
	Placement          xmlPlacement          `xml:"placement"`
	Monitoring         xmlMonitoring         `xml:"monitoring"`
	SubnetID           string                `xml:"subnetId"`
	VpcID              string                `xml:"vpcId"`
	PrivateIPAddress   string                `xml:"privateIpAddress,omitempty"`
	IPAddress          string                `xml:"ipAddress,omitempty"`
	SourceDestCheck    bool                  `xml:"sourceDestCheck"`
	Groups             []xmlGroupRef         `xml:"groupSet>item"`
	StateReason        *xmlStateReason       `xml:"stateReason,omitempty"`
	NetworkInterfaces  []xmlNetworkInterface `xml:"networkInterfaceSet>item,omitempty"`
	Architecture       string                `xml:"architecture"`
	RootDeviceType     string                `xml:"rootDeviceType"`
	RootDeviceName     string                `xml:"rootDeviceName"`
	BlockDeviceMapping []xmlInstanceBDM      `xml:"blockDeviceMapping>item"`
	VirtualizationType string                `xml:"virtualizationType"`
	ClientToken        string                `xml:"clientToken"`
	TagSet             *[]xmlTag             `xml:"tagSet>item,omitempty"`
	Hypervisor         string                `xml:"hypervisor"`
	EbsOptimized       bool                  `xml:"ebsOptimized"`
	EnaSupport         bool                  `xml:"enaSupport"`
	PlatformDetails    string                `xml:"platformDetails"`
	UsageOperation     string                `xml:"usageOperation"`
	BootMode           string                `xml:"currentInstanceBootMode"`
}

// renderInstance runs under s.mu.
func (s *Server) renderInstance(rd *regionData, r *instanceRec, launchIndex int) xmlInstance {
	x := xmlInstance{
		InstanceID: r.ID, ImageID: r.ImageID, State: instanceState(r.State), Reason: r.StateTransitionReason,
		KeyName: r.KeyName, AmiLaunchIndex: launchIndex, InstanceType: r.InstanceType, LaunchTime: r.LaunchTime,
		Placement: xmlPlacement{AvailabilityZone: r.AvailabilityZone, GroupName: r.PlacementGroup, Tenancy: "default"}, Monitoring: xmlMonitoring{"disabled"},
		SubnetID: r.SubnetID, VpcID: r.VpcID, PrivateIPAddress: r.Address, IPAddress: r.PublicIP, SourceDestCheck: true,
		Groups: []xmlGroupRef{}, Architecture: r.Architecture, RootDeviceType: "ebs", RootDeviceName: r.RootDeviceName,
		VirtualizationType: "hvm", ClientToken: r.ClientToken, TagSet: xmlTags(r.Tags), Hypervisor: "xen", EnaSupport: true,
		PlatformDetails: "Linux/UNIX", UsageOperation: "RunInstances", BootMode: "uefi",
	}
	if r.StateReasonCode != "" {
		x.StateReason = &xmlStateReason{Code: r.StateReasonCode, Message: r.StateReasonMessage}
	}
	for _, id := range r.SecurityGroupIDs {
		name := ""
		if g := rd.groups[id]; g != nil {
			name = g.Name
		}
		x.Groups = append(x.Groups, xmlGroupRef{GroupID: id, GroupName: name})
	}
	if r.State != StateTerminated {
		for _, e := range instanceInterfaces(rd, r) {
			ni := s.renderNetworkInterface(rd, e)
			// DescribeInstances' InstanceNetworkInterface has no availability zone or tags.
			ni.AvailabilityZone, ni.TagSet = "", nil
			ni.Attachment.InstanceID, ni.Attachment.InstanceOwnerID = "", ""
			x.NetworkInterfaces = append(x.NetworkInterfaces, ni)
		}
		for _, v := range r.Volumes {
			x.BlockDeviceMapping = append(x.BlockDeviceMapping, xmlInstanceBDM{DeviceName: v.DeviceName, EBS: xmlInstanceEBS{
				VolumeID: v.VolumeID, Status: "attached", AttachTime: r.LaunchTime, DeleteOnTermination: v.DeleteOnTermination}})
		}
	}
	return x
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Groups        []xmlGroupRef `xml:"groupSet>item"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type xmlRunInstances struct {
	XMLName xml.Name `xml:"RunInstancesResponse"`
	ec2Meta
	xmlReservation
}

type xmlDescribeInstances struct {
	XMLName xml.Name `xml:"DescribeInstancesResponse"`
	ec2Meta
	Reservations []xmlReservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

type xmlStateChange struct {
	InstanceID    string           `xml:"instanceId"`
	CurrentState  xmlInstanceState `xml:"currentState"`
	PreviousState xmlInstanceState `xml:"previousState"`
}

type xmlStateChanges struct {
	XMLName xml.Name
	ec2Meta
	Instances []xmlStateChange `xml:"instancesSet>item"`
}

package awsfake

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The parsers in this file turn an EC2 query body (already split into
// url.Values) into a typed input. They are pure, never panic, and reject what
// EC2 rejects with an error whose text is "Code: message", so the handler can
// answer in EC2's wire format (see inputError).

// Filter is one EC2 Filter.N.Name / Filter.N.Value.M group.
type Filter = ImageFilter

// Tag is one EC2 tag.
type Tag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// TagSpecification is one TagSpecification.N group: tags for the resources
// of one type that a call creates.
type TagSpecification struct {
	ResourceType string
	Tags         []Tag
}

// inputError is a parse error that already names the EC2 error code.
func inputError(code, format string, args ...any) error {
	return fmt.Errorf("%s: %s", code, fmt.Sprintf(format, args...))
}

const (
	maxListIndex = 1000 // EC2 caps list parameters well below this
	maxTagKey    = 128
	maxTagValue  = 256
	maxTagsPer   = 50
)

// listIndices returns the distinct N (1..maxListIndex) of keys "prefix.N" or
// "prefix.N.rest", sorted. Iterating the keys that are present, rather than
// counting up from 1, keeps a hostile "Filter.99999999.Name" cheap.
func listIndices(form url.Values, prefix string) []int {
	seen := map[int]bool{}
	for k := range form {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		i, err := strconv.Atoi(num)
		if err != nil || i < 1 || i > maxListIndex {
			continue
		}
		seen[i] = true
	}
	out := make([]int, 0, len(seen))
	for i := range seen {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// boolParam reads an optional "true"/"false" parameter.
func boolParam(form url.Values, name string) (bool, error) {
	switch v := form.Get(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, inputError("InvalidParameterValue", "Value (%s) for parameter %s is invalid. Expected: 'true' or 'false'.", v, name)
	}
}

// intParam reads an optional integer parameter within [lo, hi]; def when absent.
func intParam(form url.Values, name string, def, lo, hi int) (int, error) {
	v := form.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, inputError("InvalidParameterValue", "Value (%s) for parameter %s is invalid. Expecting a value between %d and %d", v, name, lo, hi)
	}
	return n, nil
}

// parseFilters reads Filter.N.Name / Filter.N.Value.M, accepting only the
// names in known (and tag:KEY when tags is true).
func parseFilters(form url.Values, known map[string]bool, tags bool) ([]Filter, error) {
	var out []Filter
	for _, i := range listIndices(form, "Filter") {
		name := form.Get(fmt.Sprintf("Filter.%d.Name", i))
		if name == "" {
			return nil, inputError("InvalidParameterValue", "Filter.%d.Name is empty; every filter needs a name", i)
		}
		if !known[name] && !(tags && strings.HasPrefix(name, "tag:") && len(name) > len("tag:")) {
			return nil, inputError("InvalidParameterValue", "The filter '%s' is invalid", name)
		}
		out = append(out, Filter{Name: name, Values: indexedList(form, fmt.Sprintf("Filter.%d.Value", i))})
	}
	return out, nil
}

// parseTags reads prefix.N.Key / prefix.N.Value.
func parseTags(form url.Values, prefix string) ([]Tag, error) {
	idx := listIndices(form, prefix)
	if len(idx) > maxTagsPer {
		return nil, inputError("TagLimitExceeded", "The maximum number of tags per resource is %d; got %d", maxTagsPer, len(idx))
	}
	var out []Tag
	for _, i := range idx {
		t := Tag{Key: form.Get(fmt.Sprintf("%s.%d.Key", prefix, i)), Value: form.Get(fmt.Sprintf("%s.%d.Value", prefix, i))}
		if t.Key == "" || len(t.Key) > maxTagKey {
			return nil, inputError("InvalidParameterValue", "Tag key must be 1 to %d characters (%s.%d.Key)", maxTagKey, prefix, i)
		}
		if strings.HasPrefix(strings.ToLower(t.Key), "aws:") {
			return nil, inputError("InvalidParameterValue", "Tag keys starting with 'aws:' are reserved for internal use (%s.%d.Key %q)", prefix, i, t.Key)
		}
		if len(t.Value) > maxTagValue {
			return nil, inputError("InvalidParameterValue", "Tag value must be at most %d characters (%s.%d.Value)", maxTagValue, prefix, i)
		}
		out = append(out, t)
	}
	return out, nil
}

// parseTagSpecifications reads TagSpecification.N.ResourceType/Tag.M.*,
// accepting only the resource types in allowed.
func parseTagSpecifications(form url.Values, allowed ...string) ([]TagSpecification, error) {
	var out []TagSpecification
	for _, i := range listIndices(form, "TagSpecification") {
		rt := form.Get(fmt.Sprintf("TagSpecification.%d.ResourceType", i))
		if !contains(allowed, rt) {
			return nil, inputError("InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation (want one of %s)", rt, strings.Join(allowed, ", "))
		}
		tags, err := parseTags(form, fmt.Sprintf("TagSpecification.%d.Tag", i))
		if err != nil {
			return nil, err
		}
		out = append(out, TagSpecification{ResourceType: rt, Tags: tags})
	}
	return out, nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// ID shapes: EC2 ids are a prefix, a dash and 8 or 17 lowercase hex digits.
// The fake also accepts the seed's and tests' hand-written ids, which use
// other characters after the dash, so only the prefix is checked strictly.
var idShape = regexp.MustCompile(`^[a-z]+-[0-9a-zA-Z]{1,32}$`)

// checkID reports InvalidXxx.Malformed when id lacks the resource's prefix.
func checkID(id, prefix, malformedCode string) error {
	if !strings.HasPrefix(id, prefix+"-") || !idShape.MatchString(id) {
		return inputError(malformedCode, "Invalid id: \"%s\" (expecting \"%s-...\")", id, prefix)
	}
	return nil
}

// DescribeInput is the common shape of the Describe* calls the fake serves:
// ids, filters and optional paging.
type DescribeInput struct {
	IDs        []string
	Filters    []Filter
	MaxResults int
	NextToken  string
}

func parseDescribe(form url.Values, idParam, idPrefix, malformedCode string, known map[string]bool, maxResultsLo int) (DescribeInput, error) {
	in := DescribeInput{IDs: indexedList(form, idParam)}
	for _, id := range in.IDs {
		if err := checkID(id, idPrefix, malformedCode); err != nil {
			return in, err
		}
	}
	var err error
	if in.Filters, err = parseFilters(form, known, true); err != nil {
		return in, err
	}
	if in.MaxResults, err = intParam(form, "MaxResults", 0, maxResultsLo, 1000); err != nil {
		return in, err
	}
	if in.MaxResults > 0 && len(in.IDs) > 0 {
		return in, inputError("InvalidParameterCombination", "The parameter %s cannot be used with the parameter maxResults", idParam)
	}
	in.NextToken = form.Get("NextToken")
	return in, nil
}

var instanceFilters = map[string]bool{
	"instance-id": true, "instance-state-name": true, "instance-state-code": true, "image-id": true,
	"instance-type": true, "key-name": true, "vpc-id": true, "subnet-id": true, "availability-zone": true,
	"ip-address": true, "private-ip-address": true, "tag-key": true, "instance.group-id": true,
}

// ParseDescribeInstances decodes DescribeInstances and DescribeInstanceStatus.
func ParseDescribeInstances(form url.Values) (DescribeInput, error) {
	return parseDescribe(form, "InstanceId", "i", "InvalidInstanceID.Malformed", instanceFilters, 5)
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

// BlockDevice is one block device mapping of a launch or an image.
type BlockDevice struct {
	DeviceName          string `json:"device_name"`
	SnapshotID          string `json:"snapshot_id,omitempty"`
	VolumeSize          int    `json:"volume_size,omitempty"` // GiB
	VolumeType          string `json:"volume_type,omitempty"`
	DeleteOnTermination bool   `json:"delete_on_termination"`
	Encrypted           bool   `json:"encrypted,omitempty"`
	NoDevice            bool   `json:"no_device,omitempty"`
	VirtualName         string `json:"virtual_name,omitempty"`
}

func parseBlockDevices(form url.Values) ([]BlockDevice, error) {
	var out []BlockDevice
	for _, i := range listIndices(form, "BlockDeviceMapping") {
		p := fmt.Sprintf("BlockDeviceMapping.%d.", i)
		bd := BlockDevice{DeviceName: form.Get(p + "DeviceName"), SnapshotID: form.Get(p + "Ebs.SnapshotId"),
			VolumeType: form.Get(p + "Ebs.VolumeType"), VirtualName: form.Get(p + "VirtualName")}
		if bd.DeviceName == "" {
			return nil, inputError("InvalidBlockDeviceMapping", "BlockDeviceMapping.%d.DeviceName is required", i)
		}
		_, bd.NoDevice = form[p+"NoDevice"]
		var err error
		if bd.VolumeSize, err = intParam(form, p+"Ebs.VolumeSize", 0, 1, 65536); err != nil {
			return nil, err
		}
		dot := form.Get(p + "Ebs.DeleteOnTermination")
		if bd.DeleteOnTermination, err = boolParam(form, p+"Ebs.DeleteOnTermination"); err != nil {
			return nil, err
		}
		if dot == "" {
			bd.DeleteOnTermination = true
		}
		if bd.Encrypted, err = boolParam(form, p+"Ebs.Encrypted"); err != nil {
			return nil, err
		}
		switch bd.VolumeType {
		case "", "gp2", "gp3", "io1", "io2", "st1", "sc1", "standard":
		default:
			return nil, inputError("InvalidParameterValue", "Value (%s) for parameter volumeType is invalid. Valid types: gp2, gp3, io1, io2, st1, sc1, standard", bd.VolumeType)
		}
		if bd.SnapshotID != "" {
			if err := checkID(bd.SnapshotID, "snap", "InvalidSnapshotID.Malformed"); err != nil {
				return nil, err
			}
		}
		out = append(out, bd)
	}
	return out, nil
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
	// A launch with a network interface carries its subnet and groups there.
	for _, i := range listIndices(form, "NetworkInterface") {
		p := fmt.Sprintf("NetworkInterface.%d.", i)
		if v := form.Get(p + "SubnetId"); v != "" {
			if in.SubnetID != "" && in.SubnetID != v {
				return in, inputError("InvalidParameterCombination", "Network interfaces and an instance-level subnet may not be specified on the same request")
			}
			in.SubnetID = v
		}
		in.SecurityGroupIDs = append(in.SecurityGroupIDs, indexedList(form, p+"SecurityGroupId")...)
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
	if in.TagSpecs, err = parseTagSpecifications(form, "instance", "volume", "network-interface"); err != nil {
		return in, err
	}
	return in, nil
}

// KeyPairInput is the decoded form of CreateKeyPair and DeleteKeyPair.
type KeyPairInput struct {
	KeyName   string
	KeyPairID string
	KeyType   string // "rsa" or "ed25519"
	KeyFormat string // "pem" or "ppk"
	TagSpecs  []TagSpecification
}

var keyNameShape = regexp.MustCompile(`^[\x20-\x7e]{1,255}$`)

// ParseCreateKeyPair decodes CreateKeyPair.
func ParseCreateKeyPair(form url.Values) (KeyPairInput, error) {
	in := KeyPairInput{KeyName: form.Get("KeyName"), KeyType: orDefault(form.Get("KeyType"), "rsa"), KeyFormat: orDefault(form.Get("KeyFormat"), "pem")}
	if in.KeyName == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter KeyName")
	}
	if !keyNameShape.MatchString(in.KeyName) {
		return in, inputError("InvalidKeyPair.Format", "Key pair name %q must be 1 to 255 printable ASCII characters", in.KeyName)
	}
	if in.KeyType != "rsa" && in.KeyType != "ed25519" {
		return in, inputError("InvalidParameterValue", "Value (%s) for parameter keyType is invalid. Valid values: rsa, ed25519", in.KeyType)
	}
	if in.KeyFormat != "pem" && in.KeyFormat != "ppk" {
		return in, inputError("InvalidParameterValue", "Value (%s) for parameter keyFormat is invalid. Valid values: pem, ppk", in.KeyFormat)
	}
	if in.KeyFormat == "ppk" {
		return in, inputError("InvalidParameterValue", "the fake EC2 endpoint creates pem key pairs only; ask for KeyFormat pem")
	}
	var err error
	in.TagSpecs, err = parseTagSpecifications(form, "key-pair")
	return in, err
}

// ParseDeleteKeyPair decodes DeleteKeyPair (KeyName or KeyPairId).
func ParseDeleteKeyPair(form url.Values) (KeyPairInput, error) {
	in := KeyPairInput{KeyName: form.Get("KeyName"), KeyPairID: form.Get("KeyPairId")}
	if in.KeyName == "" && in.KeyPairID == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter KeyName or KeyPairId")
	}
	if in.KeyPairID != "" {
		if err := checkID(in.KeyPairID, "key", "InvalidKeyPair.Malformed"); err != nil {
			return in, err
		}
	}
	return in, nil
}

// DescribeKeyPairsInput is the decoded form of DescribeKeyPairs.
type DescribeKeyPairsInput struct {
	KeyNames   []string
	KeyPairIDs []string
	Filters    []Filter
}

var keyPairFilters = map[string]bool{"key-name": true, "key-pair-id": true, "fingerprint": true, "tag-key": true}

// ParseDescribeKeyPairs decodes DescribeKeyPairs.
func ParseDescribeKeyPairs(form url.Values) (DescribeKeyPairsInput, error) {
	in := DescribeKeyPairsInput{KeyNames: indexedList(form, "KeyName"), KeyPairIDs: indexedList(form, "KeyPairId")}
	for _, id := range in.KeyPairIDs {
		if err := checkID(id, "key", "InvalidKeyPair.Malformed"); err != nil {
			return in, err
		}
	}
	var err error
	in.Filters, err = parseFilters(form, keyPairFilters, true)
	return in, err
}

// SecurityGroupInput is the decoded form of CreateSecurityGroup and
// DeleteSecurityGroup.
type SecurityGroupInput struct {
	GroupID     string
	GroupName   string
	Description string
	VpcID       string
	TagSpecs    []TagSpecification
}

// ParseCreateSecurityGroup decodes CreateSecurityGroup.
func ParseCreateSecurityGroup(form url.Values) (SecurityGroupInput, error) {
	in := SecurityGroupInput{GroupName: form.Get("GroupName"), Description: form.Get("GroupDescription"), VpcID: form.Get("VpcId")}
	if in.GroupName == "" || len(in.GroupName) > 255 {
		return in, inputError("MissingParameter", "The request must contain the parameter GroupName (1 to 255 characters)")
	}
	if strings.HasPrefix(in.GroupName, "sg-") {
		return in, inputError("InvalidParameterValue", "Group names may not be in the format sg-*")
	}
	if in.Description == "" || len(in.Description) > 255 {
		return in, inputError("MissingParameter", "The request must contain the parameter GroupDescription (1 to 255 characters)")
	}
	if in.VpcID != "" {
		if err := checkID(in.VpcID, "vpc", "InvalidVpcID.Malformed"); err != nil {
			return in, err
		}
	}
	var err error
	in.TagSpecs, err = parseTagSpecifications(form, "security-group")
	return in, err
}

// ParseDeleteSecurityGroup decodes DeleteSecurityGroup (GroupId or GroupName).
func ParseDeleteSecurityGroup(form url.Values) (SecurityGroupInput, error) {
	in := SecurityGroupInput{GroupID: form.Get("GroupId"), GroupName: form.Get("GroupName")}
	if in.GroupID == "" && in.GroupName == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter GroupId or GroupName")
	}
	if in.GroupID != "" {
		if err := checkID(in.GroupID, "sg", "InvalidGroupId.Malformed"); err != nil {
			return in, err
		}
	}
	return in, nil
}

// Permission is one ingress rule: a protocol, a port range and where from.
type Permission struct {
	Protocol string   `json:"protocol"`
	FromPort int      `json:"from_port"`
	ToPort   int      `json:"to_port"`
	CIDRs    []string `json:"cidrs,omitempty"`
	GroupIDs []string `json:"group_ids,omitempty"`
}

// AuthorizeIngressInput is the decoded form of AuthorizeSecurityGroupIngress.
type AuthorizeIngressInput struct {
	GroupID     string
	GroupName   string
	Permissions []Permission
}

var cidrShape = regexp.MustCompile(`^(\d{1,3}\.){3}\d{1,3}/\d{1,2}$|^[0-9a-fA-F:]+/\d{1,3}$`)

func parsePort(form url.Values, name string) (int, error) {
	return intParam(form, name, -1, -1, 65535)
}

// ParseAuthorizeIngress decodes AuthorizeSecurityGroupIngress, in both its
// IpPermissions.N form and the legacy top-level CidrIp/FromPort form.
func ParseAuthorizeIngress(form url.Values) (AuthorizeIngressInput, error) {
	in := AuthorizeIngressInput{GroupID: form.Get("GroupId"), GroupName: form.Get("GroupName")}
	if in.GroupID == "" && in.GroupName == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter GroupId or GroupName")
	}
	if in.GroupID != "" {
		if err := checkID(in.GroupID, "sg", "InvalidGroupId.Malformed"); err != nil {
			return in, err
		}
	}
	read := func(prefix string, cidrs []string, groups []string) (Permission, error) {
		p := Permission{Protocol: form.Get(prefix + "IpProtocol"), CIDRs: cidrs, GroupIDs: groups}
		var err error
		if p.FromPort, err = parsePort(form, prefix+"FromPort"); err != nil {
			return p, err
		}
		if p.ToPort, err = parsePort(form, prefix+"ToPort"); err != nil {
			return p, err
		}
		switch p.Protocol {
		case "tcp", "udp", "icmp", "-1", "all":
		case "":
			return p, inputError("MissingParameter", "The request must contain the parameter %sIpProtocol", prefix)
		default:
			return p, inputError("InvalidParameterValue", "Invalid value '%s' for IP protocol. Unknown protocol.", p.Protocol)
		}
		if (p.Protocol == "tcp" || p.Protocol == "udp") && (p.FromPort < 0 || p.ToPort < p.FromPort) {
			return p, inputError("InvalidParameterValue", "Invalid port range %d-%d for %s", p.FromPort, p.ToPort, p.Protocol)
		}
		for _, c := range p.CIDRs {
			if !cidrShape.MatchString(c) {
				return p, inputError("InvalidParameterValue", "CIDR block %s is malformed", c)
			}
		}
		return p, nil
	}
	for _, i := range listIndices(form, "IpPermissions") {
		prefix := fmt.Sprintf("IpPermissions.%d.", i)
		var cidrs []string
		for _, j := range listIndices(form, prefix+"IpRanges") {
			cidrs = append(cidrs, form.Get(fmt.Sprintf("%sIpRanges.%d.CidrIp", prefix, j)))
		}
		var groups []string
		for _, j := range listIndices(form, prefix+"Groups") {
			groups = append(groups, form.Get(fmt.Sprintf("%sGroups.%d.GroupId", prefix, j)))
		}
		p, err := read(prefix, cidrs, groups)
		if err != nil {
			return in, err
		}
		in.Permissions = append(in.Permissions, p)
	}
	if c := form.Get("CidrIp"); c != "" || form.Get("IpProtocol") != "" {
		var cidrs []string
		if c != "" {
			cidrs = []string{c}
		}
		p, err := read("", cidrs, nil)
		if err != nil {
			return in, err
		}
		in.Permissions = append(in.Permissions, p)
	}
	if len(in.Permissions) == 0 {
		return in, inputError("MissingParameter", "The request must contain the parameter IpPermissions")
	}
	return in, nil
}

var securityGroupFilters = map[string]bool{"group-id": true, "group-name": true, "vpc-id": true, "description": true, "owner-id": true, "tag-key": true}

// DescribeSecurityGroupsInput is the decoded form of DescribeSecurityGroups.
type DescribeSecurityGroupsInput struct {
	DescribeInput
	GroupNames []string
}

// ParseDescribeSecurityGroups decodes DescribeSecurityGroups.
func ParseDescribeSecurityGroups(form url.Values) (DescribeSecurityGroupsInput, error) {
	d, err := parseDescribe(form, "GroupId", "sg", "InvalidGroupId.Malformed", securityGroupFilters, 5)
	return DescribeSecurityGroupsInput{DescribeInput: d, GroupNames: indexedList(form, "GroupName")}, err
}

var vpcFilters = map[string]bool{"vpc-id": true, "is-default": true, "isDefault": true, "state": true, "cidr": true, "cidr-block": true, "owner-id": true, "tag-key": true}

// ParseDescribeVpcs decodes DescribeVpcs.
func ParseDescribeVpcs(form url.Values) (DescribeInput, error) {
	return parseDescribe(form, "VpcId", "vpc", "InvalidVpcID.Malformed", vpcFilters, 5)
}

var subnetFilters = map[string]bool{
	"subnet-id": true, "vpc-id": true, "vpcId": true, "state": true, "availability-zone": true, "availabilityZone": true,
	"default-for-az": true, "defaultForAz": true, "cidr-block": true, "owner-id": true, "tag-key": true,
}

// ParseDescribeSubnets decodes DescribeSubnets.
func ParseDescribeSubnets(form url.Values) (DescribeInput, error) {
	return parseDescribe(form, "SubnetId", "subnet", "InvalidSubnetID.Malformed", subnetFilters, 5)
}

// DescribeRegionsInput is the decoded form of DescribeRegions.
type DescribeRegionsInput struct {
	RegionNames []string
	Filters     []Filter
	AllRegions  bool
}

var regionFilters = map[string]bool{"region-name": true, "endpoint": true, "opt-in-status": true}

// ParseDescribeRegions decodes DescribeRegions.
func ParseDescribeRegions(form url.Values) (DescribeRegionsInput, error) {
	in := DescribeRegionsInput{RegionNames: indexedList(form, "RegionName")}
	var err error
	if in.AllRegions, err = boolParam(form, "AllRegions"); err != nil {
		return in, err
	}
	in.Filters, err = parseFilters(form, regionFilters, false)
	return in, err
}

// DescribeOfferingsInput is the decoded form of DescribeInstanceTypeOfferings.
type DescribeOfferingsInput struct {
	LocationType string
	Filters      []Filter
}

var offeringFilters = map[string]bool{"location": true, "instance-type": true}

// ParseDescribeInstanceTypeOfferings decodes DescribeInstanceTypeOfferings.
func ParseDescribeInstanceTypeOfferings(form url.Values) (DescribeOfferingsInput, error) {
	in := DescribeOfferingsInput{LocationType: orDefault(form.Get("LocationType"), "region")}
	switch in.LocationType {
	case "region", "availability-zone", "availability-zone-id":
	default:
		return in, inputError("InvalidParameterValue", "Value (%s) for parameter locationType is invalid. Valid values: region, availability-zone, availability-zone-id", in.LocationType)
	}
	var err error
	if in.Filters, err = parseFilters(form, offeringFilters, false); err != nil {
		return in, err
	}
	_, err = intParam(form, "MaxResults", 0, 5, 1000)
	return in, err
}

// TagsInput is the decoded form of CreateTags.
type TagsInput struct {
	ResourceIDs []string
	Tags        []Tag
}

// ParseCreateTags decodes CreateTags.
func ParseCreateTags(form url.Values) (TagsInput, error) {
	in := TagsInput{ResourceIDs: indexedList(form, "ResourceId")}
	if len(in.ResourceIDs) == 0 {
		return in, inputError("MissingParameter", "The request must contain the parameter ResourceId")
	}
	for _, id := range in.ResourceIDs {
		if _, ok := resourceTypeOf(id); !ok {
			return in, inputError("InvalidID", "The ID '%s' is not valid", id)
		}
	}
	var err error
	in.Tags, err = parseTags(form, "Tag")
	return in, err
}

var tagFilters = map[string]bool{"resource-id": true, "resource-type": true, "key": true, "value": true}

// ParseDescribeTags decodes DescribeTags.
func ParseDescribeTags(form url.Values) (DescribeInput, error) {
	var in DescribeInput
	var err error
	if in.Filters, err = parseFilters(form, tagFilters, false); err != nil {
		return in, err
	}
	if in.MaxResults, err = intParam(form, "MaxResults", 0, 5, 1000); err != nil {
		return in, err
	}
	in.NextToken = form.Get("NextToken")
	return in, nil
}

// CreateImageInput is the decoded form of CreateImage.
type CreateImageInput struct {
	InstanceID   string
	Name         string
	Description  string
	NoReboot     bool
	BlockDevices []BlockDevice
	TagSpecs     []TagSpecification
}

// amiNameShape is EC2's rule: 3-128 characters from letters, digits,
// ()[] ./-'@_ (and spaces).
var amiNameShape = regexp.MustCompile(`^[a-zA-Z0-9()\[\] ./\-'@_]{3,128}$`)

func checkAMIName(name string) error {
	if !amiNameShape.MatchString(name) {
		return inputError("InvalidAMIName.Malformed", "AMI names must be between 3 and 128 characters long, and may contain letters, numbers, '(', ')', '.', '-', '/' and '_' (got %q)", name)
	}
	return nil
}

// ParseCreateImage decodes CreateImage.
func ParseCreateImage(form url.Values) (CreateImageInput, error) {
	in := CreateImageInput{InstanceID: form.Get("InstanceId"), Name: form.Get("Name"), Description: form.Get("Description")}
	if in.InstanceID == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter InstanceId")
	}
	if err := checkID(in.InstanceID, "i", "InvalidInstanceID.Malformed"); err != nil {
		return in, err
	}
	if err := checkAMIName(in.Name); err != nil {
		return in, err
	}
	if len(in.Description) > 255 {
		return in, inputError("InvalidParameterValue", "AMI descriptions are at most 255 characters")
	}
	var err error
	if in.NoReboot, err = boolParam(form, "NoReboot"); err != nil {
		return in, err
	}
	if in.BlockDevices, err = parseBlockDevices(form); err != nil {
		return in, err
	}
	in.TagSpecs, err = parseTagSpecifications(form, "image", "snapshot")
	return in, err
}

// CopyImageInput is the decoded form of CopyImage.
type CopyImageInput struct {
	SourceRegion  string
	SourceImageID string
	Name          string
	Description   string
	CopyImageTags bool
	Encrypted     bool
	TagSpecs      []TagSpecification
}

var regionShape = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d$`)

// ParseCopyImage decodes CopyImage.
func ParseCopyImage(form url.Values) (CopyImageInput, error) {
	in := CopyImageInput{SourceRegion: form.Get("SourceRegion"), SourceImageID: form.Get("SourceImageId"), Name: form.Get("Name"), Description: form.Get("Description")}
	if !regionShape.MatchString(in.SourceRegion) {
		return in, inputError("InvalidParameterValue", "Invalid source region '%s'", in.SourceRegion)
	}
	if in.SourceImageID == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter SourceImageId")
	}
	if err := checkID(in.SourceImageID, "ami", "InvalidAMIID.Malformed"); err != nil {
		return in, err
	}
	if err := checkAMIName(in.Name); err != nil {
		return in, err
	}
	var err error
	if in.CopyImageTags, err = boolParam(form, "CopyImageTags"); err != nil {
		return in, err
	}
	if in.Encrypted, err = boolParam(form, "Encrypted"); err != nil {
		return in, err
	}
	in.TagSpecs, err = parseTagSpecifications(form, "image", "snapshot")
	return in, err
}

// ImageIDInput is the decoded form of calls that name one image:
// DeregisterImage, EnableImageDeprecation, DescribeImageAttribute.
type ImageIDInput struct {
	ImageID                   string
	DeleteAssociatedSnapshots bool
	DeprecateAt               string // RFC 3339, EnableImageDeprecation
}

// ParseImageID decodes the ImageId of DeregisterImage and friends.
func ParseImageID(form url.Values) (ImageIDInput, error) {
	in := ImageIDInput{ImageID: form.Get("ImageId"), DeprecateAt: form.Get("DeprecateAt")}
	if in.ImageID == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter ImageId")
	}
	if err := checkID(in.ImageID, "ami", "InvalidAMIID.Malformed"); err != nil {
		return in, err
	}
	var err error
	in.DeleteAssociatedSnapshots, err = boolParam(form, "DeleteAssociatedSnapshots")
	return in, err
}

// AttributeInput is the decoded form of ModifyImageAttribute and
// ModifySnapshotAttribute: add/remove launch (or create-volume) permissions,
// or set the description.
type AttributeInput struct {
	ResourceID   string
	AddUsers     []string
	RemoveUsers  []string
	AddGroups    []string // "all" makes an image public
	RemoveGroups []string
	Description  *string
}

var accountShape = regexp.MustCompile(`^\d{12}$`)

func parsePermissionList(form url.Values, prefix string) (users, groups []string, err error) {
	for _, i := range listIndices(form, prefix) {
		if u := form.Get(fmt.Sprintf("%s.%d.UserId", prefix, i)); u != "" {
			if !accountShape.MatchString(u) {
				return nil, nil, inputError("InvalidAMIAttributeItemValue", "Invalid attribute item value \"%s\" for userId item type.", u)
			}
			users = append(users, u)
		}
		if g := form.Get(fmt.Sprintf("%s.%d.Group", prefix, i)); g != "" {
			if g != "all" {
				return nil, nil, inputError("InvalidAMIAttributeItemValue", "Invalid attribute item value \"%s\" for group item type.", g)
			}
			groups = append(groups, g)
		}
	}
	return users, groups, nil
}

func parseAttribute(form url.Values, idParam, prefix, malformedCode, perm string) (AttributeInput, error) {
	in := AttributeInput{ResourceID: form.Get(idParam)}
	if in.ResourceID == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter %s", idParam)
	}
	if err := checkID(in.ResourceID, prefix, malformedCode); err != nil {
		return in, err
	}
	var err error
	if in.AddUsers, in.AddGroups, err = parsePermissionList(form, perm+".Add"); err != nil {
		return in, err
	}
	if in.RemoveUsers, in.RemoveGroups, err = parsePermissionList(form, perm+".Remove"); err != nil {
		return in, err
	}
	// The flat form: Attribute=launchPermission&OperationType=add&UserId.1=...
	users, groups := indexedList(form, "UserId"), indexedList(form, "UserGroup")
	for _, u := range users {
		if !accountShape.MatchString(u) {
			return in, inputError("InvalidAMIAttributeItemValue", "Invalid attribute item value \"%s\" for userId item type.", u)
		}
	}
	switch form.Get("OperationType") {
	case "add":
		in.AddUsers, in.AddGroups = append(in.AddUsers, users...), append(in.AddGroups, groups...)
	case "remove":
		in.RemoveUsers, in.RemoveGroups = append(in.RemoveUsers, users...), append(in.RemoveGroups, groups...)
	case "":
		if len(users)+len(groups) > 0 {
			return in, inputError("MissingParameter", "UserId/UserGroup need OperationType add or remove")
		}
	default:
		return in, inputError("InvalidParameterValue", "Value (%s) for parameter operationType is invalid. Valid values: add, remove", form.Get("OperationType"))
	}
	if d, ok := form["Description.Value"]; ok && len(d) > 0 {
		in.Description = &d[0]
	}
	if len(in.AddUsers)+len(in.AddGroups)+len(in.RemoveUsers)+len(in.RemoveGroups) == 0 && in.Description == nil {
		return in, inputError("MissingParameter", "The request must change a permission or the description")
	}
	return in, nil
}

// ParseModifyImageAttribute decodes ModifyImageAttribute.
func ParseModifyImageAttribute(form url.Values) (AttributeInput, error) {
	return parseAttribute(form, "ImageId", "ami", "InvalidAMIID.Malformed", "LaunchPermission")
}

// ParseModifySnapshotAttribute decodes ModifySnapshotAttribute.
func ParseModifySnapshotAttribute(form url.Values) (AttributeInput, error) {
	in, err := parseAttribute(form, "SnapshotId", "snap", "InvalidSnapshotID.Malformed", "CreateVolumePermission")
	if err == nil && in.Description != nil {
		return in, inputError("InvalidParameterValue", "Snapshots have no description attribute to modify")
	}
	return in, err
}

// DescribeSnapshotsInput is the decoded form of DescribeSnapshots.
type DescribeSnapshotsInput struct {
	DescribeInput
	Owners []string
}

var snapshotFilters = map[string]bool{"snapshot-id": true, "volume-id": true, "status": true, "owner-id": true, "description": true, "tag-key": true}

// ParseDescribeSnapshots decodes DescribeSnapshots.
func ParseDescribeSnapshots(form url.Values) (DescribeSnapshotsInput, error) {
	d, err := parseDescribe(form, "SnapshotId", "snap", "InvalidSnapshotID.Malformed", snapshotFilters, 5)
	return DescribeSnapshotsInput{DescribeInput: d, Owners: indexedList(form, "Owner")}, err
}

// ParseSnapshotID decodes DeleteSnapshot.
func ParseSnapshotID(form url.Values) (string, error) {
	id := form.Get("SnapshotId")
	if id == "" {
		return "", inputError("MissingParameter", "The request must contain the parameter SnapshotId")
	}
	return id, checkID(id, "snap", "InvalidSnapshotID.Malformed")
}

var volumeFilters = map[string]bool{"volume-id": true, "status": true, "attachment.instance-id": true, "snapshot-id": true, "tag-key": true}

// ParseDescribeVolumes decodes DescribeVolumes.
func ParseDescribeVolumes(form url.Values) (DescribeInput, error) {
	return parseDescribe(form, "VolumeId", "vol", "InvalidVolumeID.Malformed", volumeFilters, 5)
}

// ParseVolumeID decodes DeleteVolume.
func ParseVolumeID(form url.Values) (string, error) {
	id := form.Get("VolumeId")
	if id == "" {
		return "", inputError("MissingParameter", "The request must contain the parameter VolumeId")
	}
	return id, checkID(id, "vol", "InvalidVolumeID.Malformed")
}

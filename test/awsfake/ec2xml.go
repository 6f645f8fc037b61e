package awsfake

import (
	"encoding/xml"
	"net/http"
	"strconv"
)

// The structs below render EC2 query-API answers. Element names follow the
// aws-sdk-go-v2 ec2 deserialisers (awsEc2query_deserializeDocument*), which
// read EC2's own wire names.

// ec2Meta carries the namespace and request id every EC2 answer has.
type ec2Meta struct {
	Xmlns     string `xml:"xmlns,attr"`
	RequestID string `xml:"requestId"`
}

func meta() ec2Meta { return ec2Meta{Xmlns: ec2Namespace, RequestID: requestID()} }

// xmlOK renders v (a struct with an XMLName) as a 200 answer.
func xmlOK(v any) response {
	b, err := xml.MarshalIndent(v, "", "  ")
	if err != nil {
		return ec2Error(http.StatusInternalServerError, "InternalError", "rendering the answer: "+err.Error())
	}
	return response{status: http.StatusOK, contentType: xmlType, body: `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + string(b)}
}

// xmlReturn is the answer of calls that only say whether they worked.
type xmlReturn struct {
	XMLName xml.Name
	ec2Meta
	Return bool   `xml:"return"`
	ID     string `xml:"groupId,omitempty"`
}

func returnTrue(op string) response {
	return xmlOK(xmlReturn{XMLName: xml.Name{Local: op + "Response"}, ec2Meta: meta(), Return: true})
}

func xmlTags(m map[string]string) *[]xmlTag {
	if len(m) == 0 {
		return nil
	}
	out := make([]xmlTag, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, xmlTag{k, m[k]})
	}
	return &out
}

type xmlStateReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
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
	Tenancy          string `xml:"tenancy"`
}

type xmlMonitoring struct {
	State string `xml:"state"`
}

type xmlInstance struct {
	InstanceID         string           `xml:"instanceId"`
	ImageID            string           `xml:"imageId"`
	State              xmlInstanceState `xml:"instanceState"`
	PrivateDNSName     string           `xml:"privateDnsName"`
	DNSName            string           `xml:"dnsName"`
	Reason             string           `xml:"reason"`
	KeyName            string           `xml:"keyName,omitempty"`
	AmiLaunchIndex     int              `xml:"amiLaunchIndex"`
	InstanceType       string           `xml:"instanceType"`
	LaunchTime         string           `xml:"launchTime"`
	Placement          xmlPlacement     `xml:"placement"`
	Monitoring         xmlMonitoring    `xml:"monitoring"`
	SubnetID           string           `xml:"subnetId"`
	VpcID              string           `xml:"vpcId"`
	PrivateIPAddress   string           `xml:"privateIpAddress,omitempty"`
	IPAddress          string           `xml:"ipAddress,omitempty"`
	SourceDestCheck    bool             `xml:"sourceDestCheck"`
	Groups             []xmlGroupRef    `xml:"groupSet>item"`
	StateReason        *xmlStateReason  `xml:"stateReason,omitempty"`
	Architecture       string           `xml:"architecture"`
	RootDeviceType     string           `xml:"rootDeviceType"`
	RootDeviceName     string           `xml:"rootDeviceName"`
	BlockDeviceMapping []xmlInstanceBDM `xml:"blockDeviceMapping>item"`
	VirtualizationType string           `xml:"virtualizationType"`
	ClientToken        string           `xml:"clientToken"`
	TagSet             *[]xmlTag        `xml:"tagSet>item,omitempty"`
	Hypervisor         string           `xml:"hypervisor"`
	EbsOptimized       bool             `xml:"ebsOptimized"`
	EnaSupport         bool             `xml:"enaSupport"`
	PlatformDetails    string           `xml:"platformDetails"`
	UsageOperation     string           `xml:"usageOperation"`
	BootMode           string           `xml:"currentInstanceBootMode"`
}

// renderInstance runs under s.mu.
func (s *Server) renderInstance(rd *regionData, r *instanceRec, launchIndex int) xmlInstance {
	x := xmlInstance{
		InstanceID: r.ID, ImageID: r.ImageID, State: instanceState(r.State), Reason: r.StateTransitionReason,
		KeyName: r.KeyName, AmiLaunchIndex: launchIndex, InstanceType: r.InstanceType, LaunchTime: r.LaunchTime,
		Placement: xmlPlacement{AvailabilityZone: r.AvailabilityZone, Tenancy: "default"}, Monitoring: xmlMonitoring{"disabled"},
		SubnetID: r.SubnetID, VpcID: r.VpcID, PrivateIPAddress: r.Address, IPAddress: r.Address, SourceDestCheck: true,
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

type xmlCreateKeyPair struct {
	XMLName xml.Name `xml:"CreateKeyPairResponse"`
	ec2Meta
	KeyName        string    `xml:"keyName"`
	KeyFingerprint string    `xml:"keyFingerprint"`
	KeyMaterial    string    `xml:"keyMaterial"`
	KeyPairID      string    `xml:"keyPairId"`
	TagSet         *[]xmlTag `xml:"tagSet>item,omitempty"`
}

type xmlDeleteKeyPair struct {
	XMLName xml.Name `xml:"DeleteKeyPairResponse"`
	ec2Meta
	Return    bool   `xml:"return"`
	KeyPairID string `xml:"keyPairId,omitempty"`
}

type xmlKeyPairInfo struct {
	KeyPairID      string    `xml:"keyPairId"`
	KeyName        string    `xml:"keyName"`
	KeyFingerprint string    `xml:"keyFingerprint"`
	KeyType        string    `xml:"keyType"`
	PublicKey      string    `xml:"publicKey,omitempty"`
	CreateTime     string    `xml:"createTime"`
	TagSet         *[]xmlTag `xml:"tagSet>item,omitempty"`
}

type xmlDescribeKeyPairs struct {
	XMLName xml.Name `xml:"DescribeKeyPairsResponse"`
	ec2Meta
	Keys []xmlKeyPairInfo `xml:"keySet>item"`
}

type xmlCreateSecurityGroup struct {
	XMLName xml.Name `xml:"CreateSecurityGroupResponse"`
	ec2Meta
	Return  bool      `xml:"return"`
	GroupID string    `xml:"groupId"`
	TagSet  *[]xmlTag `xml:"tagSet>item,omitempty"`
}

type xmlIPRange struct {
	CidrIP string `xml:"cidrIp"`
}

type xmlUserGroupPair struct {
	UserID  string `xml:"userId"`
	GroupID string `xml:"groupId"`
}

type xmlIPPermission struct {
	IPProtocol string             `xml:"ipProtocol"`
	FromPort   *int               `xml:"fromPort,omitempty"`
	ToPort     *int               `xml:"toPort,omitempty"`
	Groups     []xmlUserGroupPair `xml:"groups>item"`
	IPRanges   []xmlIPRange       `xml:"ipRanges>item"`
}

type xmlSecurityGroup struct {
	OwnerID          string            `xml:"ownerId"`
	GroupID          string            `xml:"groupId"`
	GroupName        string            `xml:"groupName"`
	GroupDescription string            `xml:"groupDescription"`
	VpcID            string            `xml:"vpcId"`
	IPPermissions    []xmlIPPermission `xml:"ipPermissions>item"`
	IPPermissionsOut []xmlIPPermission `xml:"ipPermissionsEgress>item"`
	TagSet           *[]xmlTag         `xml:"tagSet>item,omitempty"`
}

func renderSecurityGroup(g *SecurityGroup) xmlSecurityGroup {
	x := xmlSecurityGroup{OwnerID: g.OwnerID, GroupID: g.ID, GroupName: g.Name, GroupDescription: g.Description, VpcID: g.VpcID,
		IPPermissions: []xmlIPPermission{}, TagSet: xmlTags(g.Tags),
		IPPermissionsOut: []xmlIPPermission{{IPProtocol: "-1", IPRanges: []xmlIPRange{{"0.0.0.0/0"}}}}}
	for _, p := range g.Ingress {
		xp := xmlIPPermission{IPProtocol: p.Protocol}
		if p.FromPort >= 0 {
			from, to := p.FromPort, p.ToPort
			xp.FromPort, xp.ToPort = &from, &to
		}
		for _, c := range p.CIDRs {
			xp.IPRanges = append(xp.IPRanges, xmlIPRange{c})
		}
		for _, id := range p.GroupIDs {
			xp.Groups = append(xp.Groups, xmlUserGroupPair{UserID: g.OwnerID, GroupID: id})
		}
		x.IPPermissions = append(x.IPPermissions, xp)
	}
	return x
}

type xmlDescribeSecurityGroups struct {
	XMLName xml.Name `xml:"DescribeSecurityGroupsResponse"`
	ec2Meta
	Groups    []xmlSecurityGroup `xml:"securityGroupInfo>item"`
	NextToken string             `xml:"nextToken,omitempty"`
}

type xmlVpc struct {
	VpcID           string `xml:"vpcId"`
	OwnerID         string `xml:"ownerId"`
	State           string `xml:"state"`
	CidrBlock       string `xml:"cidrBlock"`
	DhcpOptionsID   string `xml:"dhcpOptionsId"`
	InstanceTenancy string `xml:"instanceTenancy"`
	IsDefault       bool   `xml:"isDefault"`
}

type xmlDescribeVpcs struct {
	XMLName xml.Name `xml:"DescribeVpcsResponse"`
	ec2Meta
	Vpcs []xmlVpc `xml:"vpcSet>item"`
}

type xmlSubnet struct {
	SubnetID                string `xml:"subnetId"`
	SubnetArn               string `xml:"subnetArn"`
	State                   string `xml:"state"`
	OwnerID                 string `xml:"ownerId"`
	VpcID                   string `xml:"vpcId"`
	CidrBlock               string `xml:"cidrBlock"`
	AvailableIPAddressCount int    `xml:"availableIpAddressCount"`
	AvailabilityZone        string `xml:"availabilityZone"`
	AvailabilityZoneID      string `xml:"availabilityZoneId"`
	DefaultForAz            bool   `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool   `xml:"mapPublicIpOnLaunch"`
}

type xmlDescribeSubnets struct {
	XMLName xml.Name `xml:"DescribeSubnetsResponse"`
	ec2Meta
	Subnets []xmlSubnet `xml:"subnetSet>item"`
}

type xmlRegion struct {
	RegionName     string `xml:"regionName"`
	RegionEndpoint string `xml:"regionEndpoint"`
	OptInStatus    string `xml:"optInStatus"`
}

type xmlDescribeRegions struct {
	XMLName xml.Name `xml:"DescribeRegionsResponse"`
	ec2Meta
	Regions []xmlRegion `xml:"regionInfo>item"`
}

type xmlOffering struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

type xmlDescribeOfferings struct {
	XMLName xml.Name `xml:"DescribeInstanceTypeOfferingsResponse"`
	ec2Meta
	Offerings []xmlOffering `xml:"instanceTypeOfferingSet>item"`
}

type xmlTagDescription struct {
	ResourceID   string `xml:"resourceId"`
	ResourceType string `xml:"resourceType"`
	Key          string `xml:"key"`
	Value        string `xml:"value"`
}

type xmlDescribeTags struct {
	XMLName xml.Name `xml:"DescribeTagsResponse"`
	ec2Meta
	Tags      []xmlTagDescription `xml:"tagSet>item"`
	NextToken string              `xml:"nextToken,omitempty"`
}

type xmlImageID struct {
	XMLName xml.Name
	ec2Meta
	ImageID string `xml:"imageId"`
}

type xmlSnapshot struct {
	SnapshotID    string    `xml:"snapshotId"`
	VolumeID      string    `xml:"volumeId"`
	Status        string    `xml:"status"`
	StatusMessage string    `xml:"statusMessage,omitempty"`
	StartTime     string    `xml:"startTime"`
	Progress      string    `xml:"progress"`
	OwnerID       string    `xml:"ownerId"`
	VolumeSize    int       `xml:"volumeSize"`
	Description   string    `xml:"description"`
	Encrypted     bool      `xml:"encrypted"`
	StorageTier   string    `xml:"storageTier"`
	TagSet        *[]xmlTag `xml:"tagSet>item,omitempty"`
}

func renderSnapshot(sn *Snapshot) xmlSnapshot {
	progress := "100%"
	if sn.State == "pending" {
		progress = "0%"
	}
	return xmlSnapshot{SnapshotID: sn.ID, VolumeID: sn.VolumeID, Status: sn.State, StatusMessage: sn.StateMessage, StartTime: sn.StartTime,
		Progress: progress, OwnerID: sn.OwnerID, VolumeSize: sn.VolumeSize, Description: sn.Description, Encrypted: sn.Encrypted,
		StorageTier: "standard", TagSet: xmlTags(sn.Tags)}
}

type xmlDescribeSnapshots struct {
	XMLName xml.Name `xml:"DescribeSnapshotsResponse"`
	ec2Meta
	Snapshots []xmlSnapshot `xml:"snapshotSet>item"`
	NextToken string        `xml:"nextToken,omitempty"`
}

type xmlVolumeAttachment struct {
	VolumeID            string `xml:"volumeId"`
	InstanceID          string `xml:"instanceId"`
	Device              string `xml:"device"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlVolume struct {
	VolumeID         string                `xml:"volumeId"`
	Size             int                   `xml:"size"`
	SnapshotID       string                `xml:"snapshotId"`
	AvailabilityZone string                `xml:"availabilityZone"`
	Status           string                `xml:"status"`
	CreateTime       string                `xml:"createTime"`
	Attachments      []xmlVolumeAttachment `xml:"attachmentSet>item"`
	VolumeType       string                `xml:"volumeType"`
	Encrypted        bool                  `xml:"encrypted"`
	TagSet           *[]xmlTag             `xml:"tagSet>item,omitempty"`
}

func renderVolume(v *Volume) xmlVolume {
	x := xmlVolume{VolumeID: v.ID, Size: v.Size, SnapshotID: v.SnapshotID, AvailabilityZone: v.AvailabilityZone, Status: v.State,
		CreateTime: v.CreateTime, Attachments: []xmlVolumeAttachment{}, VolumeType: v.VolumeType, TagSet: xmlTags(v.Tags)}
	if v.InstanceID != "" {
		x.Attachments = append(x.Attachments, xmlVolumeAttachment{VolumeID: v.ID, InstanceID: v.InstanceID, Device: v.DeviceName,
			Status: "attached", AttachTime: v.CreateTime, DeleteOnTermination: v.DeleteOnTermination})
	}
	return x
}

type xmlDescribeVolumes struct {
	XMLName xml.Name `xml:"DescribeVolumesResponse"`
	ec2Meta
	Volumes   []xmlVolume `xml:"volumeSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

// itoa keeps the XML builders short.
func itoa(n int) string { return strconv.Itoa(n) }

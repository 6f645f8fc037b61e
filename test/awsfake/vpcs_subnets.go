package awsfake

import (
	"encoding/xml"
	"fmt"
	"net/url"
)

// Vpc is a region's default VPC; Subnet its default subnet.
type Vpc struct {
	ID        string `json:"id"`
	CIDRBlock string `json:"cidr_block"`
	IsDefault bool   `json:"is_default"`
}

// Subnet is one subnet of a VPC.
type Subnet struct {
	ID               string `json:"id"`
	VpcID            string `json:"vpc_id"`
	AvailabilityZone string `json:"availability_zone"`
	CIDRBlock        string `json:"cidr_block"`
	DefaultForAz     bool   `json:"default_for_az"`
}

var vpcFilters = map[string]bool{"vpc-id": true, "is-default": true, "isDefault": true, "state": true, "cidr": true, "cidr-block": true, "owner-id": true, "tag-key": true}

// ParseDescribeVpcs decodes DescribeVpcs.
func ParseDescribeVpcs(form url.Values) (DescribeInput, error) {
	return parseDescribe(form, describeParams{idParam: "VpcId", idPrefix: "vpc", malformedCode: "InvalidVpcID.Malformed",
		filters: vpcFilters, tagFilters: true, maxResultsLo: 5})
}

var subnetFilters = map[string]bool{
	"subnet-id": true, "vpc-id": true, "vpcId": true, "state": true, "availability-zone": true, "availabilityZone": true,
	"default-for-az": true, "defaultForAz": true, "cidr-block": true, "owner-id": true, "tag-key": true,
}

// ParseDescribeSubnets decodes DescribeSubnets.
func ParseDescribeSubnets(form url.Values) (DescribeInput, error) {
	return parseDescribe(form, describeParams{idParam: "SubnetId", idPrefix: "subnet", malformedCode: "InvalidSubnetID.Malformed",
		filters: subnetFilters, tagFilters: true, maxResultsLo: 5})
}

func (s *Server) describeVpcs(region string, in DescribeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	vpcs, _, errResp, ok := describe(describeSpec[Vpc]{
		in: in, all: []Vpc{rd.vpc}, id: func(v Vpc) string { return v.ID },
		notFound: notFoundFirst("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist"),
		field: func(v Vpc, name string) []string {
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
		},
	})
	if !ok {
		return errResp
	}
	out := xmlDescribeVpcs{ec2Meta: meta(), Vpcs: []xmlVpc{}}
	for _, v := range vpcs {
		out.Vpcs = append(out.Vpcs, xmlVpc{VpcID: v.ID, OwnerID: s.account, State: "available", CidrBlock: v.CIDRBlock,
			DhcpOptionsID: "dopt-0" + v.ID[len("vpc-0"):], InstanceTenancy: "default", IsDefault: v.IsDefault})
	}
	return xmlOK(out)
}

func (s *Server) describeSubnets(region string, in DescribeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	subnets, _, errResp, ok := describe(describeSpec[Subnet]{
		in: in, all: []Subnet{rd.subnet}, id: func(sn Subnet) string { return sn.ID },
		notFound: notFoundFirst("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist"),
		field: func(sn Subnet, name string) []string {
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
		},
	})
	if !ok {
		return errResp
	}
	out := xmlDescribeSubnets{ec2Meta: meta(), Subnets: []xmlSubnet{}}
	for _, sn := range subnets {
		out.Subnets = append(out.Subnets, xmlSubnet{SubnetID: sn.ID, State: "available", OwnerID: s.account, VpcID: sn.VpcID,
			SubnetArn:               fmt.Sprintf("arn:%s:ec2:%s:%s:subnet/%s", partition(region), region, s.account, sn.ID),
			CidrBlock:               sn.CIDRBlock,
			AvailableIPAddressCount: 4091 - s.liveInstances(rd), AvailabilityZone: sn.AvailabilityZone,
			AvailabilityZoneID: "use1-az1", DefaultForAz: sn.DefaultForAz, MapPublicIPOnLaunch: true})
	}
	return xmlOK(out)
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

package awsfake

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func form(t *testing.T, body string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(body)
	if err != nil {
		t.Fatalf("test body %q: %v", body, err)
	}
	return v
}

// The request bodies below are what aws-sdk-go-v2 sends (ec2query
// serialisation: Name.N, Name.N.Member, Filter.N.Value.M).
func TestParseRunInstances(t *testing.T) {
	const base = "Action=RunInstances&Version=2016-11-15&ImageId=ami-0abc&InstanceType=p6-b200.48xlarge&MinCount=1&MaxCount=1"
	tests := []struct {
		name, body string
		check      func(RunInstancesInput) bool
		wantErr    string
	}{
		{"amazon-ebs launch", base + "&KeyName=packer_1&SecurityGroupId.1=sg-0a&SubnetId=&UserData=I2Nsb3VkLWNvbmZpZwo%3D" +
			"&TagSpecification.1.ResourceType=instance&TagSpecification.1.Tag.1.Key=Name&TagSpecification.1.Tag.1.Value=Packer+Builder" +
			"&TagSpecification.2.ResourceType=volume&TagSpecification.2.Tag.1.Key=team&TagSpecification.2.Tag.1.Value=ml" +
			"&BlockDeviceMapping.1.DeviceName=%2Fdev%2Fsda1&BlockDeviceMapping.1.Ebs.VolumeSize=200&BlockDeviceMapping.1.Ebs.DeleteOnTermination=false",
			func(in RunInstancesInput) bool {
				return in.KeyName == "packer_1" && len(in.SecurityGroupIDs) == 1 && in.SubnetID == "" && string(in.UserData) == "#cloud-config\n" &&
					len(in.TagSpecs) == 2 && in.TagSpecs[0].Tags[0] == (Tag{"Name", "Packer Builder"}) &&
					len(in.BlockDevices) == 1 && in.BlockDevices[0].VolumeSize == 200 && !in.BlockDevices[0].DeleteOnTermination
			}, ""},
		{"network interface carries subnet and groups", base + "&NetworkInterface.1.DeviceIndex=0&NetworkInterface.1.SubnetId=subnet-0a&NetworkInterface.1.SecurityGroupId.1=sg-0b",
			func(in RunInstancesInput) bool {
				return in.SubnetID == "" && len(in.SecurityGroupIDs) == 0 && len(in.Interfaces) == 1 && in.Interfaces[0].SubnetID == "subnet-0a" &&
					slices.Equal(in.Interfaces[0].SecurityGroupIDs, []string{"sg-0b"}) && in.Interfaces[0].InterfaceType == InterfaceENA &&
					in.Interfaces[0].DeleteOnTermination && in.Interfaces[0].AssociatePublicIP == nil
			}, ""},
		{"P5 layout, current User Guide", base + p5Layout(false),
			func(in RunInstancesInput) bool {
				efa := 0
				for _, sp := range in.Interfaces {
					if sp.EFA() {
						efa++
					}
				}
				return len(in.Interfaces) == 33 && efa == 32 && in.Interfaces[1].InterfaceType == InterfaceEFAOnly && in.Interfaces[1].DeviceIndex == 1
			}, ""},
		{"P5 layout, older User Guide", base + p5Layout(true),
			func(in RunInstancesInput) bool {
				return len(in.Interfaces) == 32 && in.Interfaces[0].InterfaceType == InterfaceEFA
			}, ""},
		{"public IP false on several interfaces", base + "&NetworkInterface.1.DeviceIndex=0&NetworkInterface.1.AssociatePublicIpAddress=false" +
			"&NetworkInterface.2.DeviceIndex=0&NetworkInterface.2.NetworkCardIndex=1&NetworkInterface.2.InterfaceType=efa-only&NetworkInterface.2.AssociatePublicIpAddress=false",
			func(in RunInstancesInput) bool {
				return len(in.Interfaces) == 2 && !*in.Interfaces[1].AssociatePublicIP
			}, ""},
		{"keep the interface", base + "&NetworkInterface.1.DeviceIndex=0&NetworkInterface.1.DeleteOnTermination=false",
			func(in RunInstancesInput) bool { return !in.Interfaces[0].DeleteOnTermination }, ""},
		{"placement group", base + "&Placement.GroupName=dlami-cluster", func(in RunInstancesInput) bool { return in.PlacementGroup == "dlami-cluster" }, ""},
		{"no device index", base + "&NetworkInterface.1.SubnetId=subnet-0a", nil, "Each network interface requires a device index."},
		{"bad interface type", base + "&NetworkInterface.1.DeviceIndex=0&NetworkInterface.1.InterfaceType=trunk", nil, "'trunk' is not a valid value for interface type"},
		{"existing interface", base + "&NetworkInterface.1.DeviceIndex=0&NetworkInterface.1.NetworkInterfaceId=eni-0a", nil, "does not launch with existing network interfaces"},
		{"no primary", base + "&NetworkInterface.1.DeviceIndex=1", nil, "you must include a device at index 0 and network card at index 0"},
		{"primary on card 1 only", base + "&NetworkInterface.1.DeviceIndex=0&NetworkInterface.1.NetworkCardIndex=1", nil, "you must include a device at index 0 and network card at index 0"},
		{"efa-only primary", base + "&NetworkInterface.1.DeviceIndex=0&NetworkInterface.1.InterfaceType=efa-only", nil, "InvalidParameterCombination: You can't use an EFA-only network interface as the primary"},
		{"two interfaces on one card and device", base + "&NetworkInterface.1.DeviceIndex=0&NetworkInterface.2.DeviceIndex=1&NetworkInterface.3.DeviceIndex=1&NetworkInterface.3.InterfaceType=efa-only",
			nil, "InvalidParameterValue: Two network interfaces are specified at network card index 0 and device index 1"},
		{"public IP with several interfaces", base + "&NetworkInterface.1.DeviceIndex=0&NetworkInterface.1.AssociatePublicIpAddress=true&NetworkInterface.2.DeviceIndex=1&NetworkInterface.2.InterfaceType=efa-only",
			nil, "InvalidParameterCombination: The associatePublicIPAddress parameter cannot be specified when launching with multiple network interfaces."},
		{"instance-level groups beside interfaces", base + "&SecurityGroupId.1=sg-0a&NetworkInterface.1.DeviceIndex=0", nil,
			"InvalidParameterCombination: Network interfaces and an instance-level security groups may not be specified on the same request"},
		{"group name and id", base + "&Placement.GroupName=a&Placement.GroupId=pg-0a", nil, "InvalidParameterCombination"},
		{"delete on termination defaults to true", base + "&BlockDeviceMapping.1.DeviceName=%2Fdev%2Fsdb&BlockDeviceMapping.1.Ebs.VolumeSize=10",
			func(in RunInstancesInput) bool { return in.BlockDevices[0].DeleteOnTermination }, ""},
		{"no image", "MinCount=1&MaxCount=1", nil, "MissingParameter"},
		{"malformed image", strings.Replace(base, "ami-0abc", "img-1", 1), nil, "InvalidAMIID.Malformed"},
		{"bad type", strings.Replace(base, "p6-b200.48xlarge", "p6+b200", 1), nil, "InvalidParameterValue"},
		{"min over max", strings.Replace(base, "MinCount=1", "MinCount=2", 1), nil, "InvalidParameterValue"},
		{"too many", strings.Replace(base, "MaxCount=1", "MaxCount=17", 1), nil, "InvalidParameterValue"},
		{"no counts", "ImageId=ami-0abc", nil, "MissingParameter"},
		{"bad user data", base + "&UserData=%%%", nil, ""}, // not even a query string: checked below
		{"bad base64", base + "&UserData=not*base64", nil, "InvalidParameterValue"},
		{"reserved tag", base + "&TagSpecification.1.ResourceType=instance&TagSpecification.1.Tag.1.Key=aws%3Ax&TagSpecification.1.Tag.1.Value=v", nil, "reserved"},
		{"bad tag resource", base + "&TagSpecification.1.ResourceType=image&TagSpecification.1.Tag.1.Key=k", nil, "not a valid taggable"},
		{"bad volume type", base + "&BlockDeviceMapping.1.DeviceName=%2Fdev%2Fsda1&BlockDeviceMapping.1.Ebs.VolumeType=ssd", nil, "volumeType"},
		{"instance-level subnet beside interfaces", base + "&SubnetId=subnet-0a&NetworkInterface.1.DeviceIndex=0&NetworkInterface.1.SubnetId=subnet-0a", nil,
			"InvalidParameterCombination: Network interfaces and an instance-level subnet ID may not be specified on the same request"},
		{"metadata options", base + "&MetadataOptions.HttpEndpoint=enabled&MetadataOptions.HttpTokens=required&MetadataOptions.HttpPutResponseHopLimit=2&MetadataOptions.InstanceMetadataTags=enabled",
			func(in RunInstancesInput) bool {
				return in.MetadataOptions != nil && *in.MetadataOptions == MetadataOptions{HTTPEndpoint: "enabled", HTTPTokens: "required", HTTPPutResponseHopLimit: 2, InstanceMetadataTags: "enabled"}
			}, ""},
		{"no metadata options", base, func(in RunInstancesInput) bool { return in.MetadataOptions == nil }, ""},
		{"bad http tokens", base + "&MetadataOptions.HttpTokens=yes", nil, "MetadataOptions.HttpTokens"},
		{"bad http endpoint", base + "&MetadataOptions.HttpEndpoint=on", nil, "MetadataOptions.HttpEndpoint"},
		{"hop limit over 64", base + "&MetadataOptions.HttpPutResponseHopLimit=65", nil, "HttpPutResponseHopLimit"},
		{"hop limit 0", base + "&MetadataOptions.HttpPutResponseHopLimit=0", nil, "HttpPutResponseHopLimit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := url.ParseQuery(tc.body)
			if tc.name == "bad user data" {
				if err == nil {
					t.Fatal("expected the query itself to be malformed")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			in, err := ParseRunInstances(v)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(in) {
				t.Fatalf("ParseRunInstances = %+v, %v", in, err)
			}
		})
	}
}

func TestParseAuthorizeIngress(t *testing.T) {
	tests := []struct {
		body    string
		want    []Permission
		wantErr string
	}{
		{"GroupId=sg-0a&IpPermissions.1.IpProtocol=tcp&IpPermissions.1.FromPort=22&IpPermissions.1.ToPort=22&IpPermissions.1.IpRanges.1.CidrIp=0.0.0.0%2F0",
			[]Permission{{Protocol: "tcp", FromPort: 22, ToPort: 22, CIDRs: []string{"0.0.0.0/0"}}}, ""},
		{"GroupName=packer&CidrIp=10.0.0.0%2F8&IpProtocol=tcp&FromPort=22&ToPort=22",
			[]Permission{{Protocol: "tcp", FromPort: 22, ToPort: 22, CIDRs: []string{"10.0.0.0/8"}}}, ""},
		{"GroupId=sg-0a&IpPermissions.1.IpProtocol=-1&IpPermissions.1.Groups.1.GroupId=sg-0b",
			[]Permission{{Protocol: "-1", FromPort: -1, ToPort: -1, GroupIDs: []string{"sg-0b"}}}, ""},
		{"IpPermissions.1.IpProtocol=tcp", nil, "GroupId or GroupName"},
		{"GroupId=sg-0a", nil, "IpPermissions"},
		{"GroupId=sg-0a&IpPermissions.1.IpProtocol=tcp&IpPermissions.1.FromPort=23&IpPermissions.1.ToPort=22", nil, "port range"},
		{"GroupId=sg-0a&IpPermissions.1.IpProtocol=gre&IpPermissions.1.FromPort=1&IpPermissions.1.ToPort=1", nil, "Unknown protocol"},
		{"GroupId=sg-0a&IpPermissions.1.IpProtocol=tcp&IpPermissions.1.FromPort=22&IpPermissions.1.ToPort=22&IpPermissions.1.IpRanges.1.CidrIp=anywhere", nil, "malformed"},
		{"GroupId=sg-0a&IpPermissions.1.IpProtocol=tcp&IpPermissions.1.FromPort=22&IpPermissions.1.ToPort=70000", nil, "ToPort"},
	}
	for _, tc := range tests {
		in, err := ParseAuthorizeIngress(form(t, tc.body))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.body, err, tc.wantErr)
			}
			continue
		}
		if err != nil || len(in.Permissions) != len(tc.want) {
			t.Errorf("%s: %+v %v", tc.body, in, err)
			continue
		}
		for i, p := range in.Permissions {
			w := tc.want[i]
			if p.Protocol != w.Protocol || p.FromPort != w.FromPort || p.ToPort != w.ToPort || strings.Join(p.CIDRs, ",") != strings.Join(w.CIDRs, ",") || strings.Join(p.GroupIDs, ",") != strings.Join(w.GroupIDs, ",") {
				t.Errorf("%s: permission %+v, want %+v", tc.body, p, w)
			}
		}
	}
}

// Each parser rejects what EC2 rejects, naming the EC2 error code.
func TestEC2ParsersReject(t *testing.T) {
	parsers := map[string]func(url.Values) error{
		"CreateKeyPair":           func(v url.Values) error { _, err := ParseCreateKeyPair(v); return err },
		"DeleteKeyPair":           func(v url.Values) error { _, err := ParseDeleteKeyPair(v); return err },
		"DescribeKeyPairs":        func(v url.Values) error { _, err := ParseDescribeKeyPairs(v); return err },
		"CreateSecurityGroup":     func(v url.Values) error { _, err := ParseCreateSecurityGroup(v); return err },
		"DeleteSecurityGroup":     func(v url.Values) error { _, err := ParseDeleteSecurityGroup(v); return err },
		"DescribeSecurityGroups":  func(v url.Values) error { _, err := ParseDescribeSecurityGroups(v); return err },
		"DescribeInstances":       func(v url.Values) error { _, err := ParseDescribeInstances(v); return err },
		"InstanceIDs":             func(v url.Values) error { _, err := ParseInstanceIDs(v); return err },
		"DescribeVpcs":            func(v url.Values) error { _, err := ParseDescribeVpcs(v); return err },
		"DescribeSubnets":         func(v url.Values) error { _, err := ParseDescribeSubnets(v); return err },
		"DescribeRegions":         func(v url.Values) error { _, err := ParseDescribeRegions(v); return err },
		"DescribeOfferings":       func(v url.Values) error { _, err := ParseDescribeInstanceTypeOfferings(v); return err },
		"CreateTags":              func(v url.Values) error { _, err := ParseCreateTags(v); return err },
		"DescribeTags":            func(v url.Values) error { _, err := ParseDescribeTags(v); return err },
		"CreateImage":             func(v url.Values) error { _, err := ParseCreateImage(v); return err },
		"CopyImage":               func(v url.Values) error { _, err := ParseCopyImage(v); return err },
		"ImageID":                 func(v url.Values) error { _, err := ParseImageID(v); return err },
		"ModifyImageAttribute":    func(v url.Values) error { _, err := ParseModifyImageAttribute(v); return err },
		"ModifySnapshotAttribute": func(v url.Values) error { _, err := ParseModifySnapshotAttribute(v); return err },
		"DescribeSnapshots":       func(v url.Values) error { _, err := ParseDescribeSnapshots(v); return err },
		"SnapshotID":              func(v url.Values) error { _, err := ParseSnapshotID(v); return err },
		"DescribeVolumes":         func(v url.Values) error { _, err := ParseDescribeVolumes(v); return err },
		"VolumeID":                func(v url.Values) error { _, err := ParseVolumeID(v); return err },
	}
	tests := []struct {
		parser, body, code string // code "" = accepted
	}{
		{"CreateKeyPair", "KeyName=packer_6789&KeyType=ed25519", ""},
		{"CreateKeyPair", "KeyName=packer&KeyType=dsa", "InvalidParameterValue"},
		{"CreateKeyPair", "KeyName=packer&KeyFormat=ppk", "InvalidParameterValue"},
		{"CreateKeyPair", "KeyType=rsa", "MissingParameter"},
		{"CreateKeyPair", "KeyName=%00bad", "InvalidKeyPair.Format"},
		{"DeleteKeyPair", "KeyPairId=key-0abc", ""},
		{"DeleteKeyPair", "KeyPairId=kp-1", "InvalidKeyPair.Malformed"},
		{"DeleteKeyPair", "", "MissingParameter"},
		{"DescribeKeyPairs", "KeyName.1=a&Filter.1.Name=fingerprint&Filter.1.Value.1=x", ""},
		{"DescribeKeyPairs", "Filter.1.Name=color", "InvalidParameterValue"},
		{"CreateSecurityGroup", "GroupName=packer_x&GroupDescription=Temporary+group&VpcId=vpc-0a", ""},
		{"CreateSecurityGroup", "GroupName=sg-x&GroupDescription=d", "InvalidParameterValue"},
		{"CreateSecurityGroup", "GroupName=x", "MissingParameter"},
		{"CreateSecurityGroup", "GroupName=x&GroupDescription=d&VpcId=net-1", "InvalidVpcID.Malformed"},
		{"DeleteSecurityGroup", "GroupId=group-1", "InvalidGroupId.Malformed"},
		{"DescribeSecurityGroups", "GroupId.1=sg-0a&Filter.1.Name=vpc-id&Filter.1.Value.1=vpc-0a", ""},
		{"DescribeSecurityGroups", "GroupId.1=sg-0a&MaxResults=10", "InvalidParameterCombination"},
		{"DescribeInstances", "InstanceId.1=i-0a&Filter.1.Name=tag%3AName&Filter.1.Value.1=x", ""},
		{"DescribeInstances", "Filter.1.Name=tag%3A", "InvalidParameterValue"},
		{"DescribeInstances", "MaxResults=2", "InvalidParameterValue"},
		{"DescribeInstances", "Filter.2.Name=instance-id", ""},
		{"DescribeInstances", "Filter.1.Value.1=x", "InvalidParameterValue"},
		{"InstanceIDs", "", "MissingParameter"},
		{"DescribeVpcs", "Filter.1.Name=is-default&Filter.1.Value.1=true", ""},
		{"DescribeSubnets", "Filter.1.Name=availabilityZone&Filter.1.Value.1=us-east-1a", ""},
		{"DescribeSubnets", "SubnetId.1=vpc-0a", "InvalidSubnetID.Malformed"},
		{"DescribeRegions", "AllRegions=yes", "InvalidParameterValue"},
		{"DescribeOfferings", "LocationType=galaxy", "InvalidParameterValue"},
		{"CreateTags", "ResourceId.1=ami-0a&Tag.1.Key=team&Tag.1.Value=ml", ""},
		{"CreateTags", "Tag.1.Key=team", "MissingParameter"},
		{"CreateTags", "ResourceId.1=igw-0a&Tag.1.Key=team", "InvalidID"},
		{"CreateTags", "ResourceId.1=ami-0a&Tag.1.Value=v", "InvalidParameterValue"},
		{"DescribeTags", "Filter.1.Name=resource-id&Filter.1.Value.1=ami-0a", ""},
		{"DescribeTags", "Filter.1.Name=tag%3Ax", "InvalidParameterValue"},
		{"CreateImage", "InstanceId=i-0a&Name=ml-golden-1&NoReboot=true", ""},
		{"CreateImage", "InstanceId=i-0a&Name=ml+golden%21", "InvalidAMIName.Malformed"},
		{"CreateImage", "Name=ml-golden", "MissingParameter"},
		{"CreateImage", "InstanceId=i-0a&Name=ml-golden&NoReboot=maybe", "InvalidParameterValue"},
		{"CopyImage", "SourceRegion=us-east-1&SourceImageId=ami-0a&Name=copy&CopyImageTags=true", ""},
		{"CopyImage", "SourceRegion=the-moon&SourceImageId=ami-0a&Name=copy", "InvalidParameterValue"},
		{"CopyImage", "SourceRegion=us-east-1&Name=copy", "MissingParameter"},
		{"ImageID", "ImageId=ami-0a&DeleteAssociatedSnapshots=true", ""},
		{"ImageID", "ImageId=snap-0a", "InvalidAMIID.Malformed"},
		{"ModifyImageAttribute", "ImageId=ami-0a&LaunchPermission.Add.1.UserId=111122223333", ""},
		{"ModifyImageAttribute", "ImageId=ami-0a&Attribute=launchPermission&OperationType=add&UserGroup.1=all", ""},
		{"ModifyImageAttribute", "ImageId=ami-0a&Description.Value=golden", ""},
		{"ModifyImageAttribute", "ImageId=ami-0a&LaunchPermission.Add.1.UserId=me", "InvalidAMIAttributeItemValue"},
		{"ModifyImageAttribute", "ImageId=ami-0a&LaunchPermission.Add.1.Group=friends", "InvalidAMIAttributeItemValue"},
		{"ModifyImageAttribute", "ImageId=ami-0a", "MissingParameter"},
		{"ModifyImageAttribute", "ImageId=ami-0a&OperationType=share&UserId.1=111122223333", "InvalidParameterValue"},
		// Issue 20: FuzzParseModifyImageAttribute found an empty UserGroup.N accepted.
		{"ModifyImageAttribute", "ImageId=ami-0a&OperationType=add&UserGroup.1=", "InvalidParameterValue"},
		{"ModifyImageAttribute", "ImageId=ami-0a&OperationType=remove&UserGroup.1=all&UserGroup.2=", "InvalidParameterValue"},
		{"ModifyImageAttribute", "ImageId=ami-0a&OperationType=add&UserGroup.1=friends", "InvalidAMIAttributeItemValue"},
		{"ModifySnapshotAttribute", "SnapshotId=snap-0a&CreateVolumePermission.Add.1.UserId=111122223333", ""},
		{"ModifySnapshotAttribute", "SnapshotId=snap-0a&Description.Value=x", "InvalidParameterValue"},
		{"DescribeSnapshots", "Owner.1=self&SnapshotId.1=snap-0a", ""},
		{"DescribeSnapshots", "Filter.1.Name=size", "InvalidParameterValue"},
		{"SnapshotID", "SnapshotId=vol-0a", "InvalidSnapshotID.Malformed"},
		{"DescribeVolumes", "Filter.1.Name=volume-id&Filter.1.Value.1=vol-0a", ""},
		{"VolumeID", "", "MissingParameter"},
	}
	for _, tc := range tests {
		err := parsers[tc.parser](form(t, tc.body))
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%s(%s) rejected: %v", tc.parser, tc.body, err)
		case tc.code != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.code+": ")):
			t.Errorf("%s(%s) = %v, want %s", tc.parser, tc.body, err, tc.code)
		}
	}
}

// fuzzParser feeds arbitrary query strings to parse: it must not panic, its
// errors must be "Code: message" (the handler answers with that code), and
// check holds for what it accepts.
func fuzzParser[T any](f *testing.F, seeds []string, parse func(url.Values) (T, error), check func(*testing.T, T)) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add("Filter.99999999999.Name=x&Tag.0.Key=&TagSpecification.1000.Tag.1001.Key=k")
	f.Fuzz(func(t *testing.T, body string) {
		v, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		got, err := parse(v)
		if err != nil {
			code, msg, ok := strings.Cut(err.Error(), ": ")
			if !ok || code == "" || msg == "" || strings.ContainsAny(code, " \n\t") {
				t.Fatalf("error %q is not 'Code: message'", err)
			}
			return
		}
		check(t, got)
	})
}

func checkTagSpecs(t *testing.T, specs []TagSpecification) {
	for _, s := range specs {
		if len(s.Tags) > maxTagsPer {
			t.Fatalf("accepted %d tags", len(s.Tags))
		}
		for _, tg := range s.Tags {
			if tg.Key == "" || len(tg.Key) > maxTagKey || len(tg.Value) > maxTagValue || strings.HasPrefix(strings.ToLower(tg.Key), "aws:") {
				t.Fatalf("accepted tag %+v", tg)
			}
		}
	}
}

func FuzzParseRunInstances(f *testing.F) {
	fuzzParser(f, []string{
		"ImageId=ami-0abc&InstanceType=p6-b200.48xlarge&MinCount=1&MaxCount=1&KeyName=k&SecurityGroupId.1=sg-0a",
		"ImageId=ami-0abc&MinCount=1&MaxCount=2&NetworkInterface.1.SubnetId=subnet-0a&BlockDeviceMapping.1.DeviceName=%2Fdev%2Fsda1&BlockDeviceMapping.1.Ebs.VolumeSize=9",
		"ImageId=ami-0abc&MinCount=1&MaxCount=1&Placement.GroupName=g" + p5Layout(false),
		"ImageId=ami-0abc&MinCount=1&MaxCount=1" + p5Layout(true) + "&NetworkInterface.1.SecurityGroupId.1=sg-0a&NetworkInterface.1.AssociatePublicIpAddress=false",
		"ImageId=ami-0abc&MinCount=1&MaxCount=1&MetadataOptions.HttpTokens=required&MetadataOptions.HttpEndpoint=enabled&MetadataOptions.HttpPutResponseHopLimit=2&MetadataOptions.InstanceMetadataTags=disabled&UserData=IyEvYmluL3NoCg%3D%3D",
	}, ParseRunInstances, func(t *testing.T, in RunInstancesInput) {
		if !strings.HasPrefix(in.ImageID, "ami-") || in.MinCount < 1 || in.MinCount > in.MaxCount || in.MaxCount > MaxInstancesPerLaunch ||
			!instanceTypeShape.MatchString(in.InstanceType) || len(in.UserData) > 16<<10 {
			t.Fatalf("accepted %+v", in)
		}
		for _, id := range in.SecurityGroupIDs {
			if !strings.HasPrefix(id, "sg-") {
				t.Fatalf("accepted group %q", id)
			}
		}
		for _, bd := range in.BlockDevices {
			if bd.DeviceName == "" || bd.VolumeSize < 0 {
				t.Fatalf("accepted block device %+v", bd)
			}
		}
		if m := in.MetadataOptions; m != nil {
			if m.HTTPPutResponseHopLimit < 0 || m.HTTPPutResponseHopLimit > 64 || !validIMDS(m.HTTPEndpoint, "enabled", "disabled") ||
				!validIMDS(m.HTTPTokens, "optional", "required") || !validIMDS(m.InstanceMetadataTags, "enabled", "disabled") {
				t.Fatalf("accepted metadata options %+v", m)
			}
		}
		checkTagSpecs(t, in.TagSpecs)
		if len(in.Interfaces) > 0 && (in.SubnetID != "" || len(in.SecurityGroupIDs)+len(in.SecurityGroups) > 0) {
			t.Fatalf("accepted interfaces beside instance-level subnet or groups: %+v", in)
		}
		seen := map[[2]int]bool{}
		for _, sp := range in.Interfaces {
			k := [2]int{sp.NetworkCardIndex, sp.DeviceIndex}
			if seen[k] || !slices.Contains([]string{InterfaceENA, InterfaceEFA, InterfaceEFAOnly}, sp.InterfaceType) ||
				k == [2]int{0, 0} && sp.InterfaceType == InterfaceEFAOnly ||
				len(in.Interfaces) > 1 && sp.AssociatePublicIP != nil && *sp.AssociatePublicIP {
				t.Fatalf("accepted interfaces %+v", in.Interfaces)
			}
			seen[k] = true
		}
		if len(in.Interfaces) > 0 && !seen[[2]int{0, 0}] {
			t.Fatalf("accepted interfaces without a primary: %+v", in.Interfaces)
		}
	})
}

func validIMDS(v string, want ...string) bool { return v == "" || slices.Contains(want, v) }

func FuzzParseDescribeInstances(f *testing.F) {
	fuzzParser(f, []string{"InstanceId.1=i-0a&InstanceId.2=i-0b", "Filter.1.Name=instance-state-name&Filter.1.Value.1=running&MaxResults=5&NextToken=fake-next-5"},
		ParseDescribeInstances, func(t *testing.T, in DescribeInput) {
			for _, id := range in.IDs {
				if !strings.HasPrefix(id, "i-") {
					t.Fatalf("accepted id %q", id)
				}
			}
			for _, fl := range in.Filters {
				if !instanceFilters[fl.Name] && !strings.HasPrefix(fl.Name, "tag:") {
					t.Fatalf("accepted filter %q", fl.Name)
				}
			}
			if in.MaxResults != 0 && (in.MaxResults < 5 || len(in.IDs) > 0) {
				t.Fatalf("accepted MaxResults %d with %d ids", in.MaxResults, len(in.IDs))
			}
		})
}

func FuzzParseInstanceIDs(f *testing.F) {
	fuzzParser(f, []string{"InstanceId.1=i-0a", "InstanceId.2=i-0b&InstanceId.1=x"}, ParseInstanceIDs, func(t *testing.T, ids []string) {
		if len(ids) == 0 {
			t.Fatal("accepted no ids")
		}
	})
}

func FuzzParseCreateKeyPair(f *testing.F) {
	fuzzParser(f, []string{"KeyName=packer_1&KeyType=ed25519", "KeyName=x&KeyFormat=ppk"}, ParseCreateKeyPair, func(t *testing.T, in KeyPairInput) {
		if !keyNameShape.MatchString(in.KeyName) || (in.KeyType != "rsa" && in.KeyType != "ed25519") || in.KeyFormat != "pem" {
			t.Fatalf("accepted %+v", in)
		}
		checkTagSpecs(t, in.TagSpecs)
	})
}

func FuzzParseDeleteKeyPair(f *testing.F) {
	fuzzParser(f, []string{"KeyName=packer_1", "KeyPairId=key-0a"}, ParseDeleteKeyPair, func(t *testing.T, in KeyPairInput) {
		if in.KeyName == "" && in.KeyPairID == "" {
			t.Fatal("accepted neither name nor id")
		}
	})
}

func FuzzParseDescribeKeyPairs(f *testing.F) {
	fuzzParser(f, []string{"KeyName.1=a&KeyPairId.1=key-0a"}, ParseDescribeKeyPairs, func(t *testing.T, in DescribeKeyPairsInput) {
		for _, id := range in.KeyPairIDs {
			if !strings.HasPrefix(id, "key-") {
				t.Fatalf("accepted %q", id)
			}
		}
	})
}

func FuzzParseCreateSecurityGroup(f *testing.F) {
	fuzzParser(f, []string{"GroupName=packer_x&GroupDescription=Temporary&VpcId=vpc-0a"}, ParseCreateSecurityGroup, func(t *testing.T, in SecurityGroupInput) {
		if in.GroupName == "" || in.Description == "" || strings.HasPrefix(in.GroupName, "sg-") || (in.VpcID != "" && !strings.HasPrefix(in.VpcID, "vpc-")) {
			t.Fatalf("accepted %+v", in)
		}
	})
}

func FuzzParseDeleteSecurityGroup(f *testing.F) {
	fuzzParser(f, []string{"GroupId=sg-0a", "GroupName=x"}, ParseDeleteSecurityGroup, func(t *testing.T, in SecurityGroupInput) {
		if in.GroupID == "" && in.GroupName == "" {
			t.Fatal("accepted neither id nor name")
		}
	})
}

func FuzzParseAuthorizeIngress(f *testing.F) {
	fuzzParser(f, []string{"GroupId=sg-0a&IpPermissions.1.IpProtocol=tcp&IpPermissions.1.FromPort=22&IpPermissions.1.ToPort=22&IpPermissions.1.IpRanges.1.CidrIp=0.0.0.0%2F0",
		"GroupName=g&CidrIp=1.2.3.4%2F32&IpProtocol=udp&FromPort=1&ToPort=2"}, ParseAuthorizeIngress, func(t *testing.T, in AuthorizeIngressInput) {
		if len(in.Permissions) == 0 {
			t.Fatal("accepted no permissions")
		}
		for _, p := range in.Permissions {
			if (p.Protocol == "tcp" || p.Protocol == "udp") && (p.FromPort < 0 || p.ToPort < p.FromPort || p.ToPort > 65535) {
				t.Fatalf("accepted %+v", p)
			}
		}
	})
}

func FuzzParseDescribeSecurityGroups(f *testing.F) {
	fuzzParser(f, []string{"GroupId.1=sg-0a&GroupName.1=default&Filter.1.Name=vpc-id&Filter.1.Value.1=vpc-0a"}, ParseDescribeSecurityGroups, func(t *testing.T, in DescribeSecurityGroupsInput) {
		for _, fl := range in.Filters {
			if !securityGroupFilters[fl.Name] && !strings.HasPrefix(fl.Name, "tag:") {
				t.Fatalf("accepted filter %q", fl.Name)
			}
		}
	})
}

func FuzzParseDescribeVpcs(f *testing.F) {
	fuzzParser(f, []string{"Filter.1.Name=is-default&Filter.1.Value.1=true", "VpcId.1=vpc-0a"}, ParseDescribeVpcs, func(t *testing.T, in DescribeInput) {
		for _, id := range in.IDs {
			if !strings.HasPrefix(id, "vpc-") {
				t.Fatalf("accepted %q", id)
			}
		}
	})
}

func FuzzParseDescribeSubnets(f *testing.F) {
	fuzzParser(f, []string{"Filter.1.Name=vpc-id&Filter.1.Value.1=vpc-0a&Filter.2.Name=state&Filter.2.Value.1=available"}, ParseDescribeSubnets, func(t *testing.T, in DescribeInput) {
		for _, id := range in.IDs {
			if !strings.HasPrefix(id, "subnet-") {
				t.Fatalf("accepted %q", id)
			}
		}
	})
}

func FuzzParseDescribeRegions(f *testing.F) {
	fuzzParser(f, []string{"RegionName.1=us-west-2&AllRegions=true"}, ParseDescribeRegions, func(t *testing.T, in DescribeRegionsInput) {
		for _, fl := range in.Filters {
			if !regionFilters[fl.Name] {
				t.Fatalf("accepted filter %q", fl.Name)
			}
		}
	})
}

func FuzzParseDescribeInstanceTypeOfferings(f *testing.F) {
	fuzzParser(f, []string{"LocationType=availability-zone&Filter.1.Name=location&Filter.1.Value.1=us-east-1a"}, ParseDescribeInstanceTypeOfferings, func(t *testing.T, in DescribeOfferingsInput) {
		if in.LocationType != "region" && in.LocationType != "availability-zone" && in.LocationType != "availability-zone-id" {
			t.Fatalf("accepted location type %q", in.LocationType)
		}
	})
}

func FuzzParseCreateTags(f *testing.F) {
	fuzzParser(f, []string{"ResourceId.1=ami-0a&ResourceId.2=snap-0b&Tag.1.Key=team&Tag.1.Value=ml"}, ParseCreateTags, func(t *testing.T, in TagsInput) {
		if len(in.ResourceIDs) == 0 {
			t.Fatal("accepted no resources")
		}
		for _, id := range in.ResourceIDs {
			if _, ok := resourceTypeOf(id); !ok {
				t.Fatalf("accepted resource %q", id)
			}
		}
		checkTagSpecs(t, []TagSpecification{{Tags: in.Tags}})
	})
}

func FuzzParseDescribeTags(f *testing.F) {
	fuzzParser(f, []string{"Filter.1.Name=resource-type&Filter.1.Value.1=image&MaxResults=5"}, ParseDescribeTags, func(t *testing.T, in DescribeInput) {
		for _, fl := range in.Filters {
			if !tagFilters[fl.Name] {
				t.Fatalf("accepted filter %q", fl.Name)
			}
		}
	})
}

func FuzzParseCreateImage(f *testing.F) {
	fuzzParser(f, []string{"InstanceId=i-0a&Name=ml-golden-1&TagSpecification.1.ResourceType=image&TagSpecification.1.Tag.1.Key=k&TagSpecification.1.Tag.1.Value=v"},
		ParseCreateImage, func(t *testing.T, in CreateImageInput) {
			if !strings.HasPrefix(in.InstanceID, "i-") || !amiNameShape.MatchString(in.Name) || len(in.Description) > 255 {
				t.Fatalf("accepted %+v", in)
			}
			checkTagSpecs(t, in.TagSpecs)
		})
}

func FuzzParseCopyImage(f *testing.F) {
	fuzzParser(f, []string{"SourceRegion=us-east-1&SourceImageId=ami-0a&Name=copy&CopyImageTags=true"}, ParseCopyImage, func(t *testing.T, in CopyImageInput) {
		if !regionShape.MatchString(in.SourceRegion) || !strings.HasPrefix(in.SourceImageID, "ami-") || !amiNameShape.MatchString(in.Name) {
			t.Fatalf("accepted %+v", in)
		}
	})
}

func FuzzParseImageID(f *testing.F) {
	fuzzParser(f, []string{"ImageId=ami-0a&DeleteAssociatedSnapshots=true", "ImageId=ami-0a&DeprecateAt=2026-12-01T00:00:00Z"}, ParseImageID, func(t *testing.T, in ImageIDInput) {
		if !strings.HasPrefix(in.ImageID, "ami-") {
			t.Fatalf("accepted %+v", in)
		}
	})
}

func checkAttribute(t *testing.T, in AttributeInput) {
	for _, u := range append(append([]string(nil), in.AddUsers...), in.RemoveUsers...) {
		if !accountShape.MatchString(u) {
			t.Fatalf("accepted user %q", u)
		}
	}
	if len(in.AddUsers)+len(in.RemoveUsers)+len(in.AddGroups)+len(in.RemoveGroups) == 0 && in.Description == nil {
		t.Fatal("accepted a change of nothing")
	}
}

func FuzzParseModifyImageAttribute(f *testing.F) {
	fuzzParser(f, []string{"ImageId=ami-0a&LaunchPermission.Add.1.UserId=111122223333", "ImageId=ami-0a&OperationType=remove&UserGroup.1=all"},
		ParseModifyImageAttribute, func(t *testing.T, in AttributeInput) {
			for _, g := range append(append([]string(nil), in.AddGroups...), in.RemoveGroups...) {
				if g != "all" {
					t.Fatalf("accepted group %q", g)
				}
			}
			checkAttribute(t, in)
		})
}

func FuzzParseModifySnapshotAttribute(f *testing.F) {
	fuzzParser(f, []string{"SnapshotId=snap-0a&CreateVolumePermission.Add.1.UserId=111122223333"}, ParseModifySnapshotAttribute, func(t *testing.T, in AttributeInput) {
		if !strings.HasPrefix(in.ResourceID, "snap-") || in.Description != nil {
			t.Fatalf("accepted %+v", in)
		}
		checkAttribute(t, in)
	})
}

func FuzzParseDescribeSnapshots(f *testing.F) {
	fuzzParser(f, []string{"SnapshotId.1=snap-0a&Owner.1=self"}, ParseDescribeSnapshots, func(t *testing.T, in DescribeSnapshotsInput) {
		for _, id := range in.IDs {
			if !strings.HasPrefix(id, "snap-") {
				t.Fatalf("accepted %q", id)
			}
		}
	})
}

func FuzzParseSnapshotID(f *testing.F) {
	fuzzParser(f, []string{"SnapshotId=snap-0a"}, ParseSnapshotID, func(t *testing.T, id string) {
		if !strings.HasPrefix(id, "snap-") {
			t.Fatalf("accepted %q", id)
		}
	})
}

func FuzzParseDescribeVolumes(f *testing.F) {
	fuzzParser(f, []string{"Filter.1.Name=volume-id&Filter.1.Value.1=vol-0a"}, ParseDescribeVolumes, func(t *testing.T, in DescribeInput) {
		for _, id := range in.IDs {
			if !strings.HasPrefix(id, "vol-") {
				t.Fatalf("accepted %q", id)
			}
		}
	})
}

func FuzzParseVolumeID(f *testing.F) {
	fuzzParser(f, []string{"VolumeId=vol-0a"}, ParseVolumeID, func(t *testing.T, id string) {
		if !strings.HasPrefix(id, "vol-") {
			t.Fatalf("accepted %q", id)
		}
	})
}

// p5Layout is the NetworkInterface.N part of a p5.48xlarge launch with 32 EFA interfaces: the
// User Guide's current use case 1 (0/0 interface, 0/1 efa-only, cards 1-31 device 0 efa-only;
// 33 entries) or, with old, its older text (0/0 efa, cards 1-31 device 1 efa-only; 32 entries).
func p5Layout(old bool) string {
	var b strings.Builder
	n := 0
	add := func(card, dev int, typ string) {
		n++
		fmt.Fprintf(&b, "&NetworkInterface.%d.NetworkCardIndex=%d&NetworkInterface.%d.DeviceIndex=%d&NetworkInterface.%d.InterfaceType=%s", n, card, n, dev, n, typ)
	}
	if old {
		add(0, 0, "efa")
		for c := 1; c < 32; c++ {
			add(c, 1, "efa-only")
		}
		return b.String()
	}
	add(0, 0, "interface")
	add(0, 1, "efa-only")
	for c := 1; c < 32; c++ {
		add(c, 0, "efa-only")
	}
	return b.String()
}

func FuzzParseDescribeInstanceTypes(f *testing.F) {
	fuzzParser(f, []string{"InstanceType.1=p5.48xlarge&InstanceType.2=p6-b200.48xlarge",
		"Filter.1.Name=network-info.efa-supported&Filter.1.Value.1=true&MaxResults=5&NextToken=fake-next-5"},
		ParseDescribeInstanceTypes, func(t *testing.T, in DescribeInstanceTypesInput) {
			for _, id := range in.IDs {
				if !instanceTypeShape.MatchString(id) {
					t.Fatalf("accepted type %q", id)
				}
			}
			if in.MaxResults > 100 {
				t.Fatalf("accepted MaxResults %d", in.MaxResults)
			}
		})
}

func FuzzParseDescribeNetworkInterfaces(f *testing.F) {
	fuzzParser(f, []string{"NetworkInterfaceId.1=eni-0a", "Filter.1.Name=attachment.instance-id&Filter.1.Value.1=i-0a&Filter.2.Name=interface-type&Filter.2.Value.1=efa-only"},
		ParseDescribeNetworkInterfaces, func(t *testing.T, in DescribeInput) {
			for _, id := range in.IDs {
				if !strings.HasPrefix(id, "eni-") {
					t.Fatalf("accepted id %q", id)
				}
			}
		})
}

func FuzzParseNetworkInterfaceID(f *testing.F) {
	fuzzParser(f, []string{"NetworkInterfaceId=eni-0a"}, ParseNetworkInterfaceID, func(t *testing.T, id string) {
		if !strings.HasPrefix(id, "eni-") {
			t.Fatalf("accepted %q", id)
		}
	})
}

func FuzzParseCreatePlacementGroup(f *testing.F) {
	fuzzParser(f, []string{"GroupName=dlami&Strategy=cluster&TagSpecification.1.ResourceType=placement-group&TagSpecification.1.Tag.1.Key=k",
		"GroupName=p&Strategy=partition&PartitionCount=3", "GroupName=s&Strategy=spread&SpreadLevel=host"},
		ParseCreatePlacementGroup, func(t *testing.T, in PlacementGroupInput) {
			if in.GroupName == "" || len(in.GroupName) > 255 || !slices.Contains([]string{"cluster", "spread", "partition"}, in.Strategy) ||
				in.PartitionCount < 0 || in.PartitionCount > 7 || in.PartitionCount > 0 && in.Strategy != "partition" {
				t.Fatalf("accepted %+v", in)
			}
			checkTagSpecs(t, in.TagSpecs)
		})
}

func FuzzParseDeletePlacementGroup(f *testing.F) {
	fuzzParser(f, []string{"GroupName=dlami"}, ParseDeletePlacementGroup, func(t *testing.T, in PlacementGroupInput) {
		if in.GroupName == "" {
			t.Fatalf("accepted %+v", in)
		}
	})
}

func FuzzParseDescribePlacementGroups(f *testing.F) {
	fuzzParser(f, []string{"GroupName.1=dlami", "GroupId.1=pg-0a&Filter.1.Name=strategy&Filter.1.Value.1=cluster"},
		ParseDescribePlacementGroups, func(t *testing.T, in DescribePlacementGroupsInput) {
			for _, id := range in.IDs {
				if !strings.HasPrefix(id, "pg-") {
					t.Fatalf("accepted id %q", id)
				}
			}
		})
}

func FuzzParseAllocateAddress(f *testing.F) {
	fuzzParser(f, []string{"Domain=vpc&TagSpecification.1.ResourceType=elastic-ip&TagSpecification.1.Tag.1.Key=k"}, ParseAllocateAddress,
		func(t *testing.T, in AllocateAddressInput) { checkTagSpecs(t, in.TagSpecs) })
}

func FuzzParseAssociateAddress(f *testing.F) {
	fuzzParser(f, []string{"AllocationId=eipalloc-0a&InstanceId=i-0a", "AllocationId=eipalloc-0a&NetworkInterfaceId=eni-0a&AllowReassociation=true"},
		ParseAssociateAddress, func(t *testing.T, in AssociateAddressInput) {
			if !strings.HasPrefix(in.AllocationID, "eipalloc-") || in.InstanceID == "" && in.NetworkInterfaceID == "" ||
				in.InstanceID != "" && !strings.HasPrefix(in.InstanceID, "i-") || in.NetworkInterfaceID != "" && !strings.HasPrefix(in.NetworkInterfaceID, "eni-") {
				t.Fatalf("accepted %+v", in)
			}
		})
}

func FuzzParseDisassociateAddress(f *testing.F) {
	fuzzParser(f, []string{"AssociationId=eipassoc-0a"}, ParseDisassociateAddress, func(t *testing.T, id string) {
		if !strings.HasPrefix(id, "eipassoc-") {
			t.Fatalf("accepted %q", id)
		}
	})
}

func FuzzParseReleaseAddress(f *testing.F) {
	fuzzParser(f, []string{"AllocationId=eipalloc-0a", "PublicIp=127.1.0.1"}, ParseReleaseAddress, func(t *testing.T, id string) {
		if !strings.HasPrefix(id, "eipalloc-") {
			t.Fatalf("accepted %q", id)
		}
	})
}

func FuzzParseDescribeAddresses(f *testing.F) {
	fuzzParser(f, []string{"AllocationId.1=eipalloc-0a", "PublicIp.1=127.1.0.1&Filter.1.Name=instance-id&Filter.1.Value.1=i-0a"},
		ParseDescribeAddresses, func(t *testing.T, in DescribeAddressesInput) {
			for _, id := range in.IDs {
				if !strings.HasPrefix(id, "eipalloc-") {
					t.Fatalf("accepted id %q", id)
				}
			}
		})
}

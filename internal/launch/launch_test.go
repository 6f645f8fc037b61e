package launch

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

const region = "us-east-1"

// fakeEC2 is the local EC2 endpoint (test/awsfake) with the seeded DLAMIs, reached by the
// real SDK client over HTTP.
type fakeEC2 struct {
	srv *awsfake.Server
	url string
}

func newFake(t *testing.T, regions ...string) fakeEC2 {
	t.Helper()
	if len(regions) == 0 {
		regions = []string{region}
	}
	srv := awsfake.NewSeeded(regions...)
	srv.SetTransitionPolls(0)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return fakeEC2{srv: srv, url: hs.URL}
}

func (f fakeEC2) client(region string) *ec2.Client {
	return ec2.NewFromConfig(aws.Config{
		Region:           region,
		Credentials:      credentials.NewStaticCredentialsProvider("AKIAFAKELAUNCHTEST00", "secret", ""),
		BaseEndpoint:     aws.String(f.url),
		RetryMaxAttempts: 1,
	})
}

func (f fakeEC2) state(region string) awsfake.RegionState {
	return f.srv.State(region, false).Regions[region]
}

// seedAMI is a seeded Base OSS DLAMI of the region.
func seedAMI(region string) string {
	return awsfake.SeedAMIID(region, awsfake.SeedName("x86_64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", awsfake.SeedBuilds[len(awsfake.SeedBuilds)-1]))
}

func spec(region string) Spec {
	return Spec{ImageID: seedAMI(region), InstanceType: "p5.48xlarge", SSHCIDR: "203.0.113.0/24",
		Tags: map[string]string{"Name": "dlami-verify test", "team": "ml"}, Poll: 10 * time.Millisecond}
}

func discard(string) {}

func TestLaunchAndCleanup(t *testing.T) {
	f := newFake(t)
	api := f.client(region)
	ctx := context.Background()
	in, err := Launch(ctx, api, spec(region), discard)
	if err != nil {
		t.Fatal(err)
	}
	if in.Signer == nil || in.Signer.PublicKey().Type() != "ssh-ed25519" {
		t.Errorf("signer %v: want the temporary ed25519 key", in.Signer)
	}
	addr, err := in.Address("")
	if err != nil || addr == "" {
		t.Errorf("address %q %v", addr, err)
	}
	rs := f.state(region)
	if len(rs.Instances) != 1 || rs.Instances[0].State != "running" || rs.Instances[0].InstanceType != "p5.48xlarge" ||
		rs.Instances[0].ImageID != seedAMI(region) || rs.Instances[0].Tags["team"] != "ml" {
		t.Fatalf("instances %+v", rs.Instances)
	}
	if len(rs.KeyPairs) != 1 || rs.KeyPairs[0].Type != "ed25519" || rs.Instances[0].KeyName != rs.KeyPairs[0].Name || rs.KeyPairs[0].Tags["team"] != "ml" {
		t.Errorf("key pairs %+v", rs.KeyPairs)
	}
	var sg *awsfake.SecurityGroup
	for i, g := range rs.SecurityGroups {
		if g.Name != "default" {
			sg = &rs.SecurityGroups[i]
		}
	}
	if sg == nil || !slices.Equal(rs.Instances[0].SecurityGroupIDs, []string{sg.ID}) {
		t.Fatalf("temporary security group %+v, instance groups %v", sg, rs.Instances[0].SecurityGroupIDs)
	}
	if len(sg.Ingress) != 1 || sg.Ingress[0].FromPort != 22 || sg.Ingress[0].ToPort != 22 || !slices.Equal(sg.Ingress[0].CIDRs, []string{"203.0.113.0/24"}) {
		t.Errorf("ingress %+v: want tcp 22 from the configured CIDR only", sg.Ingress)
	}

	if err := Cleanup(ctx, in, discard); err != nil {
		t.Fatal(err)
	}
	rs = f.state(region)
	if rs.Instances[0].State != "terminated" {
		t.Errorf("instance %s after Cleanup", rs.Instances[0].State)
	}
	if len(rs.KeyPairs) != 0 {
		t.Errorf("key pairs left: %+v", rs.KeyPairs)
	}
	for _, g := range rs.SecurityGroups {
		if g.Name != "default" {
			t.Errorf("security group left: %+v", g)
		}
	}
	if err := Cleanup(ctx, nil, discard); err != nil {
		t.Errorf("Cleanup(nil): %v", err)
	}
}

// A launch that fails removes the temporaries it made, and a capacity error says what to do.
func TestLaunchFailureCleansUp(t *testing.T) {
	f := newFake(t)
	f.srv.SetFault("RunInstances", region, awsfake.Fault{InsufficientCapacity: 5})
	_, err := Launch(context.Background(), f.client(region), spec(region), discard)
	if err == nil {
		t.Fatal("launch passed with no capacity")
	}
	for _, want := range []string{"InsufficientInstanceCapacity", "capacity_reservation_id"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	rs := f.state(region)
	if len(rs.KeyPairs) != 0 || len(rs.Instances) != 0 {
		t.Errorf("left behind: key pairs %+v instances %+v", rs.KeyPairs, rs.Instances)
	}
	for _, g := range rs.SecurityGroups {
		if g.Name != "default" {
			t.Errorf("security group left: %+v", g)
		}
	}
}

// An instance that never leaves pending is given up at the deadline, and terminated.
func TestLaunchStuckPendingIsTerminated(t *testing.T) {
	f := newFake(t)
	f.srv.SetFault("RunInstances", region, awsfake.Fault{StuckPending: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := Launch(ctx, f.client(region), spec(region), discard)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not reach running") {
		t.Fatalf("err %v", err)
	}
	rs := f.state(region)
	if len(rs.Instances) != 1 || rs.Instances[0].State == "pending" || rs.Instances[0].State == "running" {
		t.Errorf("instances after the failed launch: %+v", rs.Instances)
	}
	if len(rs.KeyPairs) != 0 {
		t.Errorf("key pairs left: %+v", rs.KeyPairs)
	}
}

func TestLaunchSettingsReachRunInstances(t *testing.T) {
	f := newFake(t)
	api := &recordingEC2{EC2API: f.client(region)}
	s := spec(region)
	s.SecurityGroupIDs = []string{"sg-0123456789abcdef0"}
	s.SubnetID = f.state(region).Subnet.ID
	s.AssociatePublicIPAddress = aws.Bool(false)
	s.CapacityReservationPreference = "capacity-reservations-only"
	s.CapacityReservationID = "cr-0123456789abcdef0"
	s.IAMInstanceProfile = "dlami-verify"
	// The fake does not know the group or the reservation; only the request matters here.
	_, _ = Launch(context.Background(), api, s, discard)
	if api.run == nil {
		t.Fatal("RunInstances was not called")
	}
	r := api.run
	if len(r.NetworkInterfaces) != 1 || aws.ToString(r.NetworkInterfaces[0].SubnetId) != s.SubnetID ||
		!slices.Equal(r.NetworkInterfaces[0].Groups, s.SecurityGroupIDs) || aws.ToBool(r.NetworkInterfaces[0].AssociatePublicIpAddress) {
		t.Errorf("network interfaces %+v", r.NetworkInterfaces)
	}
	if r.CapacityReservationSpecification == nil || r.CapacityReservationSpecification.CapacityReservationPreference != types.CapacityReservationPreferenceCapacityReservationsOnly ||
		aws.ToString(r.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId) != "cr-0123456789abcdef0" {
		t.Errorf("capacity reservation %+v", r.CapacityReservationSpecification)
	}
	if r.IamInstanceProfile == nil || aws.ToString(r.IamInstanceProfile.Name) != "dlami-verify" {
		t.Errorf("instance profile %+v", r.IamInstanceProfile)
	}
	if api.createdGroups != 0 {
		t.Errorf("a temporary security group was made although security_group_ids was set")
	}
}

type recordingEC2 struct {
	EC2API
	run           *ec2.RunInstancesInput
	createdGroups int
}

func (r *recordingEC2) RunInstances(ctx context.Context, in *ec2.RunInstancesInput, o ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	r.run = in
	return r.EC2API.RunInstances(ctx, in, o...)
}

func (r *recordingEC2) CreateSecurityGroup(ctx context.Context, in *ec2.CreateSecurityGroupInput, o ...func(*ec2.Options)) (*ec2.CreateSecurityGroupOutput, error) {
	r.createdGroups++
	return r.EC2API.CreateSecurityGroup(ctx, in, o...)
}

func TestAddress(t *testing.T) {
	in := &Instance{ID: "i-1", PrivateIP: "10.0.0.5", PrivateDNS: "ip-10-0-0-5.ec2.internal"}
	for _, tc := range []struct{ iface, want, err string }{
		{"", "10.0.0.5", ""},
		{"private_ip", "10.0.0.5", ""},
		{"private_dns", "ip-10-0-0-5.ec2.internal", ""},
		{"public_ip", "", "has no public_ip address"},
		{"public_dns", "", "has no public_dns address"},
		{"eth0", "", `ssh_interface "eth0"`},
	} {
		got, err := in.Address(tc.iface)
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Address(%q) = %q, %v; want %q, %q", tc.iface, got, err, tc.want, tc.err)
		}
	}
}

// An image baked from an instance, with its snapshot, copied to a second region: what
// amazon-ebs leaves for the post-processor.
func bakedImage(t *testing.T, f fakeEC2) (string, string) {
	t.Helper()
	ctx := context.Background()
	api := f.client(region)
	in, err := Launch(ctx, api, spec(region), discard)
	if err != nil {
		t.Fatal(err)
	}
	img, err := api.CreateImage(ctx, &ec2.CreateImageInput{InstanceId: aws.String(in.ID), Name: aws.String("golden-test")})
	if err != nil {
		t.Fatal(err)
	}
	if err := Cleanup(ctx, in, discard); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		out, err := api.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{aws.ToString(img.ImageId)}})
		if err == nil && len(out.Images) == 1 && out.Images[0].State == types.ImageStateAvailable {
			break
		}
		if i == 100 {
			t.Fatalf("image %s never became available: %v", aws.ToString(img.ImageId), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cp, err := f.client("us-west-2").CopyImage(ctx, &ec2.CopyImageInput{SourceImageId: img.ImageId, SourceRegion: aws.String(region), Name: aws.String("golden-test")})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(img.ImageId), aws.ToString(cp.ImageId)
}

func TestTagAndDeregister(t *testing.T) {
	f := newFake(t, region, "us-west-2")
	ctx := context.Background()
	east, west := bakedImage(t, f)
	if err := TagImage(ctx, f.client(region), east, map[string]string{"dlami:verified": "true"}); err != nil {
		t.Fatal(err)
	}
	var tagged bool
	for _, img := range f.state(region).Images {
		if img.ID == east {
			tagged = img.Tags["dlami:verified"] == "true"
		}
	}
	if !tagged {
		t.Error("the tag did not reach the image")
	}
	for _, tc := range []struct{ region, image string }{{region, east}, {"us-west-2", west}} {
		before := f.state(tc.region)
		var snaps []string
		for _, img := range before.Images {
			if img.ID == tc.image {
				for _, bd := range img.BlockDevices {
					if bd.SnapshotID != "" {
						snaps = append(snaps, bd.SnapshotID)
					}
				}
			}
		}
		if len(snaps) == 0 {
			t.Fatalf("%s: image %s has no snapshot to delete", tc.region, tc.image)
		}
		if err := Deregister(ctx, f.client(tc.region), tc.image); err != nil {
			t.Fatalf("%s: %v", tc.region, err)
		}
		after := f.state(tc.region)
		for _, img := range after.Images {
			if img.ID == tc.image {
				t.Errorf("%s: image %s still registered", tc.region, tc.image)
			}
		}
		for _, sn := range after.Snapshots {
			if slices.Contains(snaps, sn.ID) {
				t.Errorf("%s: snapshot %s of the deregistered image still exists", tc.region, sn.ID)
			}
		}
	}
	if err := Deregister(ctx, f.client(region), "ami-0000000000000dead"); err == nil {
		t.Error("deregistering an unknown image passed")
	}
}

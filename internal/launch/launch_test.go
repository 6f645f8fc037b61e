package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"golang.org/x/crypto/ssh"

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

// quick is the patience of a test: fast polls, a deadline a loaded CI machine still meets.
var quick = Patience{Poll: 10 * time.Millisecond, Timeout: 10 * time.Second, CallTimeout: 5 * time.Second}

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
	for _, ni := range rs.NetworkInterfaces {
		t.Errorf("network interface left: %+v", ni)
	}
	for _, a := range rs.ElasticIPs {
		t.Errorf("Elastic IP left: %+v", a)
	}
	for _, pg := range rs.PlacementGroups {
		if pg.Tags[LaunchTag] != "" {
			t.Errorf("temporary placement group left: %+v", pg)
		}
	}
}

// An instance that never leaves pending is given up at the deadline, and terminated.
func TestLaunchStuckPendingIsTerminated(t *testing.T) {
	f := newFake(t)
	f.srv.SetFault("RunInstances", region, awsfake.Fault{StuckPending: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
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
	if err := TagImage(ctx, f.client(region), east, map[string]string{"dlami:verified": "true"}, quick); err != nil {
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
		if err := Deregister(ctx, f.client(tc.region), tc.image, quick); err != nil {
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
	if err := Deregister(ctx, f.client(region), "ami-0000000000000dead", quick); err == nil {
		t.Error("deregistering an unknown image passed")
	}
}

// assertNothingLeft fails the test when an instance is not terminated, or a key pair or a
// temporary security group is left in the region.
func assertNothingLeft(t *testing.T, f fakeEC2) {
	t.Helper()
	rs := f.state(region)
	for _, i := range rs.Instances {
		if i.State != "terminated" {
			t.Errorf("instance %s left %s", i.ID, i.State)
		}
	}
	if len(rs.KeyPairs) != 0 {
		t.Errorf("key pairs left: %+v", rs.KeyPairs)
	}
	for _, g := range rs.SecurityGroups {
		if g.Name != "default" {
			t.Errorf("security group left: %+v", g)
		}
	}
	for _, v := range rs.Volumes {
		t.Errorf("volume left: %+v", v)
	}
	for _, a := range rs.ElasticIPs {
		t.Errorf("Elastic IP left: %+v", a)
	}
	for _, pg := range rs.PlacementGroups {
		t.Errorf("placement group left: %+v", pg)
	}
	for _, ni := range rs.NetworkInterfaces {
		if ni.Status == "available" {
			t.Errorf("network interface left: %+v", ni)
		}
	}
}

// A throttled TerminateInstances (or DeleteSecurityGroup, or a DescribeInstances failing while
// the cleanup waits) is retried with backoff until the cleanup's deadline, not given up at the
// first answer: the instance ends terminated and the temporaries deleted.
func TestCleanupRetriesUntilTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		op    string
		fault awsfake.Fault
	}{
		{"TerminateInstances", awsfake.Fault{Throttle: 3}},
		{"DeleteSecurityGroup", awsfake.Fault{Throttle: 3}},
		{"DescribeInstances", awsfake.Fault{ServerError: 3}},
		{"DeleteKeyPair", awsfake.Fault{ServerError: 2}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			f := newFake(t)
			in, err := Launch(context.Background(), f.client(region), spec(region), discard)
			if err != nil {
				t.Fatal(err)
			}
			before := f.srv.CallCount(tc.op, region)
			f.srv.SetFault(tc.op, region, tc.fault)
			if err := Cleanup(context.Background(), in, discard); err != nil {
				t.Fatalf("Cleanup: %v", err)
			}
			if n := f.srv.CallCount(tc.op, region) - before; n < tc.fault.Throttle+tc.fault.ServerError+1 {
				t.Errorf("%s sent %d times, want a retry after each of the %d faults", tc.op, n, tc.fault.Throttle+tc.fault.ServerError)
			}
			assertNothingLeft(t, f)
		})
	}
}

// A cleanup that cannot terminate by its deadline says which instance is still running.
func TestCleanupNamesTheInstanceItCouldNotTerminate(t *testing.T) {
	f := newFake(t)
	s := spec(region)
	// Long enough that the first answer (the refusal the error must carry) arrives on a
	// loaded 2-core CI machine; at 200 ms it sometimes did not.
	s.CleanupTimeout = 3 * time.Second
	in, err := Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.SetFault("TerminateInstances", region, awsfake.Fault{AccessDenied: true})
	err = Cleanup(context.Background(), in, discard)
	if got := NotTerminated(err); !slices.Equal(got, []string{in.ID}) || !strings.Contains(err.Error(), "UnauthorizedOperation") {
		t.Fatalf("err %v: NotTerminated = %v, want [%s]", err, got, in.ID)
	}
}

// lostAnswer sends a call and then loses EC2's answer, as a connection that drops after the
// request went out does; cancel, when set, is the run's Ctrl-C arriving at that moment.
type lostAnswer struct {
	EC2API
	op     string
	cancel context.CancelFunc
	lost   bool
}

// lose loses the first answer of l.op; later calls are answered.
func (l *lostAnswer) lose(ctx context.Context, op string, out any, err error) error {
	if op != l.op || err != nil || l.lost {
		return err
	}
	l.lost = true
	if l.cancel != nil {
		l.cancel()
		return ctx.Err()
	}
	return &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

func (l *lostAnswer) CreateKeyPair(ctx context.Context, in *ec2.CreateKeyPairInput, o ...func(*ec2.Options)) (*ec2.CreateKeyPairOutput, error) {
	out, err := l.EC2API.CreateKeyPair(ctx, in, o...)
	if err := l.lose(ctx, "CreateKeyPair", out, err); err != nil {
		return nil, err
	}
	return out, nil
}

func (l *lostAnswer) CreateSecurityGroup(ctx context.Context, in *ec2.CreateSecurityGroupInput, o ...func(*ec2.Options)) (*ec2.CreateSecurityGroupOutput, error) {
	out, err := l.EC2API.CreateSecurityGroup(ctx, in, o...)
	if err := l.lose(ctx, "CreateSecurityGroup", out, err); err != nil {
		return nil, err
	}
	return out, nil
}

func (l *lostAnswer) RunInstances(ctx context.Context, in *ec2.RunInstancesInput, o ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	out, err := l.EC2API.RunInstances(ctx, in, o...)
	if err := l.lose(ctx, "RunInstances", out, err); err != nil {
		return nil, err
	}
	return out, nil
}

// A RunInstances, CreateKeyPair or CreateSecurityGroup whose answer is lost (the connection
// dropped) is tried again, and the retry meets what the first call made: the launch goes on
// with one key pair (replaced: its private key went with the lost answer), one security group
// (looked up by name) and one instance (the client token), and its cleanup leaves nothing.
// When the run is cancelled as the answer is lost, the launch fails and still leaves nothing:
// the cleanup finds what the call made by the launch tag and by name.
func TestLostAnswerLeavesNothing(t *testing.T) {
	for _, op := range []string{"RunInstances", "CreateKeyPair", "CreateSecurityGroup"} {
		for _, cancelled := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s cancelled=%v", op, cancelled), func(t *testing.T) {
				f := newFake(t)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				api := &lostAnswer{EC2API: f.client(region), op: op}
				if cancelled {
					api.cancel = cancel
				}
				in, err := Launch(ctx, api, spec(region), discard)
				if !api.lost {
					t.Fatalf("%s was never called", op)
				}
				if cancelled {
					if !errors.Is(err, context.Canceled) {
						t.Errorf("err %v, want the cancellation", err)
					}
				} else {
					if err != nil {
						t.Fatalf("launch after a lost %s answer: %v", op, err)
					}
					rs := f.state(region)
					groups := 0
					for _, g := range rs.SecurityGroups {
						if g.Name != "default" {
							groups++
						}
					}
					if len(rs.Instances) != 1 || len(rs.KeyPairs) != 1 || groups != 1 || rs.Instances[0].ID != in.ID {
						t.Errorf("after the retry: %d instances, %d key pairs, %d groups; want one of each", len(rs.Instances), len(rs.KeyPairs), groups)
					}
					if in.Signer == nil || !strings.HasPrefix(rs.KeyPairs[0].PublicKey, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(in.Signer.PublicKey())))+" ") {
						t.Errorf("the launch's private key does not match the key pair EC2 holds")
					}
					if err := Cleanup(ctx, in, discard); err != nil {
						t.Fatal(err)
					}
				}
				if op == "RunInstances" && len(f.state(region).Instances) != 1 {
					t.Errorf("instances %+v, want the one the lost call made", f.state(region).Instances)
				}
				assertNothingLeft(t, f)
			})
		}
	}
}

// dropFirstRun is an HTTP client that forwards every request to the fake but loses the answer
// of the first RunInstances, as a connection reset after the request went out does.
type dropFirstRun struct{ dropped bool }

func (d *dropFirstRun) Do(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err == nil && !d.dropped && strings.Contains(string(body), "Action=RunInstances") {
		d.dropped = true
		resp.Body.Close()
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return resp, err
}

// The SDK retries a RunInstances whose answer was lost; the client token makes that retry the
// same launch instead of a second instance, and the instance carries the run's tags.
func TestRetriedRunInstancesLaunchesOnce(t *testing.T) {
	f := newFake(t)
	api := ec2.NewFromConfig(aws.Config{
		Region: region, Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKELAUNCHTEST00", "secret", ""),
		BaseEndpoint: aws.String(f.url), RetryMaxAttempts: 3, HTTPClient: &dropFirstRun{},
	})
	s := spec(region)
	s.RunID = "0f7c-run"
	in, err := Launch(context.Background(), api, s, discard)
	if err != nil {
		t.Fatal(err)
	}
	rs := f.state(region)
	if len(rs.Instances) != 1 || rs.Instances[0].ID != in.ID {
		t.Fatalf("instances %+v, want the one launch %s", rs.Instances, in.ID)
	}
	if tags := rs.Instances[0].Tags; tags[RunTag] != "0f7c-run" || tags[LaunchTag] == "" || rs.Instances[0].ClientToken != tags[LaunchTag] {
		t.Errorf("tags %v, client token %q: want %s = the run, %s = the client token", tags, rs.Instances[0].ClientToken, RunTag, LaunchTag)
	}
	if err := Cleanup(context.Background(), in, discard); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, f)
}

// What a real account needs of the verification launch reaches EC2: IMDSv2 metadata options,
// the fleet's user data, and every source CIDR of the temporary group's SSH rule.
func TestLaunchSendsMetadataUserDataAndCIDRs(t *testing.T) {
	f := newFake(t)
	api := f.client(region)
	ctx := context.Background()
	s := spec(region)
	s.SSHCIDR = ""
	s.SSHCIDRs = []string{"203.0.113.0/24", "198.51.100.7/32"}
	s.Metadata = &Metadata{HTTPEndpoint: "enabled", HTTPTokens: "required", HTTPPutResponseHopLimit: 2, InstanceMetadataTags: "enabled"}
	s.UserData = []byte("#!/bin/sh\necho 'nodeadm init' >/run/ud\n")
	in, err := Launch(ctx, api, s, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer Cleanup(ctx, in, discard)
	rs := f.state(region)
	got := rs.Instances[0]
	want := awsfake.MetadataOptions{HTTPEndpoint: "enabled", HTTPTokens: "required", HTTPPutResponseHopLimit: 2, InstanceMetadataTags: "enabled"}
	if got.MetadataOptions == nil || *got.MetadataOptions != want {
		t.Errorf("metadata options %+v, want %+v", got.MetadataOptions, want)
	}
	if got.UserData != string(s.UserData) {
		t.Errorf("user data %q, want %q", got.UserData, s.UserData)
	}
	for _, g := range rs.SecurityGroups {
		if g.Name == "default" {
			continue
		}
		if len(g.Ingress) != 1 || g.Ingress[0].FromPort != 22 || g.Ingress[0].ToPort != 22 || !slices.Equal(g.Ingress[0].CIDRs, s.SSHCIDRs) {
			t.Errorf("ingress %+v: want one tcp 22 rule from %v", g.Ingress, s.SSHCIDRs)
		}
	}

	// Without them: no metadata options (the account's defaults), no user data, 0.0.0.0/0.
	f = newFake(t)
	api = f.client(region)
	s = spec(region)
	s.SSHCIDR = ""
	in, err = Launch(ctx, api, s, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer Cleanup(ctx, in, discard)
	rs = f.state(region)
	if rs.Instances[0].MetadataOptions != nil || rs.Instances[0].UserData != "" {
		t.Errorf("unset: metadata %+v user data %q", rs.Instances[0].MetadataOptions, rs.Instances[0].UserData)
	}
	for _, g := range rs.SecurityGroups {
		if g.Name != "default" && (len(g.Ingress) != 1 || !slices.Equal(g.Ingress[0].CIDRs, []string{"0.0.0.0/0"})) {
			t.Errorf("default ingress %+v", g.Ingress)
		}
	}
}

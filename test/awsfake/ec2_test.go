package awsfake

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"golang.org/x/crypto/ssh"
)

// testMachines is a Machines backend that records calls; Start blocks on
// gate when one is set, and the err fields make calls fail.
type testMachines struct {
	mu       sync.Mutex
	calls    []string
	specs    []MachineSpec
	networks []MachineNetwork
	gate     chan struct{}
	startErr error
	snapErr  error
	closed   int
}

func (m *testMachines) record(call string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, call)
}

func (m *testMachines) Calls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.calls...)
}

func (m *testMachines) Start(ctx context.Context, spec MachineSpec) error {
	m.mu.Lock()
	m.specs = append(m.specs, spec)
	gate, err := m.gate, m.startErr
	m.mu.Unlock()
	m.record("Start " + spec.InstanceID)
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

func (m *testMachines) Stop(_ context.Context, id string) error {
	m.record("Stop " + id)
	return nil
}

func (m *testMachines) Snapshot(_ context.Context, id string) (string, error) {
	m.record("Snapshot " + id)
	if m.snapErr != nil {
		return "", m.snapErr
	}
	return "/fleet/layers/" + id, nil
}

func (m *testMachines) Terminate(_ context.Context, id string) error {
	m.record("Terminate " + id)
	return nil
}

func (m *testMachines) SetNetwork(_ context.Context, id string, n MachineNetwork) error {
	m.mu.Lock()
	m.networks = append(m.networks, n)
	m.mu.Unlock()
	m.record(fmt.Sprintf("SetNetwork %s efa-traffic=%t", id, n.EFATraffic))
	return nil
}

func (m *testMachines) Close(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed++
	return nil
}

// waitCalls waits until the backend has seen call (background goroutines
// make machine calls asynchronously).
func (m *testMachines) waitCalls(t *testing.T, call string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if slices.Contains(m.Calls(), call) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("machine call %q never came; calls: %q", call, m.Calls())
}

type ec2Env struct {
	fake *Server
	url  string
	m    *testMachines
}

func newEC2Env(t *testing.T, m *testMachines) *ec2Env {
	t.Helper()
	f := NewSeeded("us-east-1", "us-west-2")
	// Addresses are the fake's alone here, whatever else runs on this host.
	f.addrBusy = func(string) bool { return false }
	if m != nil {
		f.SetMachines(m)
	}
	srv := f.Start()
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := f.Close(ctx); err != nil {
			t.Errorf("closing the fake: %v", err)
		}
	})
	return &ec2Env{fake: f, url: srv.URL, m: m}
}

func (e *ec2Env) client(region string) *ec2.Client {
	return ec2.New(ec2.Options{
		Region: region, BaseEndpoint: aws.String(e.url), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKEFAKEFAKE0001", "fakeSecret", ""),
	})
}

func dlamiID(region, build string) string {
	return SeedAMIID(region, SeedName("x86_64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", build))
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func (e *ec2Env) run(t *testing.T, c *ec2.Client, in *ec2.RunInstancesInput) ec2types.Instance {
	t.Helper()
	if in.ImageId == nil {
		in.ImageId = aws.String(dlamiID("us-east-1", "20261002"))
	}
	if in.InstanceType == "" {
		in.InstanceType = "p6-b200.48xlarge"
	}
	in.MinCount, in.MaxCount = aws.Int32(1), aws.Int32(1)
	out, err := c.RunInstances(context.Background(), in)
	if err != nil {
		t.Fatalf("RunInstances: %v", err)
	}
	if len(out.Instances) != 1 {
		t.Fatalf("RunInstances launched %d instances", len(out.Instances))
	}
	return out.Instances[0]
}

func instanceOf(t *testing.T, c *ec2.Client, id string) ec2types.Instance {
	t.Helper()
	out, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatalf("DescribeInstances %s: %v", id, err)
	}
	if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("DescribeInstances %s: %d reservations", id, len(out.Reservations))
	}
	return out.Reservations[0].Instances[0]
}

// polls returns the instance's state on n consecutive DescribeInstances.
func polls(t *testing.T, c *ec2.Client, id string, n int) []string {
	t.Helper()
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, string(instanceOf(t, c, id).State.Name))
	}
	return out
}

func imageOf(t *testing.T, c *ec2.Client, id string) ec2types.Image {
	t.Helper()
	out, err := c.DescribeImages(context.Background(), &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil || len(out.Images) != 1 {
		t.Fatalf("DescribeImages %s: %v (%d images)", id, err, len(out.Images))
	}
	return out.Images[0]
}

// The whole life of a baked instance with a machine backend: every state
// shows on a DescribeInstances poll, in order, and each machine call happens
// once, with the spec RunInstances was given.
func TestInstanceLifecycleWithMachines(t *testing.T) {
	m := &testMachines{gate: make(chan struct{})}
	e := newEC2Env(t, m)
	c := e.client("us-east-1")
	ctx := context.Background()

	kp, err := c.CreateKeyPair(ctx, &ec2.CreateKeyPairInput{KeyName: aws.String("packer_1"), KeyType: ec2types.KeyTypeEd25519})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey([]byte(aws.ToString(kp.KeyMaterial)))
	if err != nil {
		t.Fatalf("key material is not an OpenSSH private key: %v", err)
	}
	parent := dlamiID("us-east-1", "20261002")
	inst := e.run(t, c, &ec2.RunInstancesInput{KeyName: kp.KeyName, UserData: aws.String(base64.StdEncoding.EncodeToString([]byte("#cloud-config\n")))})
	id := aws.ToString(inst.InstanceId)
	if inst.State.Name != ec2types.InstanceStateNamePending || aws.ToString(inst.PublicIpAddress) != "127.0.0.2" || aws.ToString(inst.PrivateIpAddress) != "127.0.0.2" {
		t.Fatalf("RunInstances answered %s at %s/%s", inst.State.Name, aws.ToString(inst.PublicIpAddress), aws.ToString(inst.PrivateIpAddress))
	}
	if len(id) != len("i-")+17 || aws.ToString(inst.PublicDnsName) != "" || aws.ToString(inst.VpcId) == "" {
		t.Errorf("instance id %q, dns %q, vpc %q", id, aws.ToString(inst.PublicDnsName), aws.ToString(inst.VpcId))
	}
	m.waitCalls(t, "Start "+id)
	if got := polls(t, c, id, 3); !slices.Equal(got, []string{"pending", "pending", "pending"}) {
		t.Fatalf("while the host boots: %v, want pending throughout", got)
	}
	close(m.gate)
	m.waitCalls(t, "Start "+id) // recorded before the gate; wait for the goroutine to finish:
	waitFor(t, func() bool {
		e.fake.mu.Lock()
		defer e.fake.mu.Unlock()
		return e.fake.region("us-east-1").instances[id].settle.work.done
	})
	if got := polls(t, c, id, 2); !slices.Equal(got, []string{"pending", "running"}) {
		t.Fatalf("after the boot: %v, want pending once more, then running", got)
	}
	spec := m.specs[0]
	wantKey := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " packer_1"
	if spec.InstanceID != id || spec.InstanceType != "p6-b200.48xlarge" || spec.ImageID != parent || spec.Address != "127.0.0.2" ||
		len(spec.Layers) != 0 || spec.AuthorizedKey != wantKey || string(spec.UserData) != "#cloud-config\n" {
		t.Errorf("Start spec %+v; want the key %q and no layers", spec, wantKey)
	}

	stop, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}})
	if err != nil || stop.StoppingInstances[0].CurrentState.Name != "stopping" || stop.StoppingInstances[0].PreviousState.Name != "running" {
		t.Fatalf("StopInstances: %v %+v", err, stop)
	}
	m.waitCalls(t, "Stop "+id)
	waitFor(t, func() bool {
		e.fake.mu.Lock()
		defer e.fake.mu.Unlock()
		return e.fake.region("us-east-1").instances[id].settle.work.done
	})
	if got := polls(t, c, id, 3); !slices.Equal(got, []string{"stopping", "stopped", "stopped"}) {
		t.Fatalf("stop: %v", got)
	}
	if r := instanceOf(t, c, id).StateReason; r == nil || aws.ToString(r.Code) != "Client.UserInitiatedShutdown" {
		t.Errorf("stopped state reason %+v", r)
	}

	img, err := c.CreateImage(ctx, &ec2.CreateImageInput{InstanceId: aws.String(id), Name: aws.String("ml-golden-1"),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: "image", Tags: []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("ml")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	amiID := aws.ToString(img.ImageId)
	m.waitCalls(t, "Snapshot "+id)
	waitFor(t, func() bool {
		e.fake.mu.Lock()
		defer e.fake.mu.Unlock()
		return e.fake.region("us-east-1").imageSettle[amiID].work.done
	})
	first := imageOf(t, c, amiID)
	if first.State != "pending" || len(first.BlockDeviceMappings) != 1 {
		t.Fatalf("new image: %s with %d block devices, want pending with the root snapshot", first.State, len(first.BlockDeviceMappings))
	}
	snapID := aws.ToString(first.BlockDeviceMappings[0].Ebs.SnapshotId)
	snapState := func() string {
		snaps, err := c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{snapID}})
		if err != nil || len(snaps.Snapshots) != 1 || aws.ToInt32(snaps.Snapshots[0].VolumeSize) != defaultRootVolumeGiB {
			t.Fatalf("DescribeSnapshots %s: %v %+v", snapID, err, snaps)
		}
		return string(snaps.Snapshots[0].State)
	}
	if s := snapState(); s != "pending" {
		t.Errorf("snapshot while its image is pending: %s", s)
	}
	got := imageOf(t, c, amiID)
	if got.State != "available" || aws.ToString(got.OwnerId) != DefaultAccount || aws.ToString(got.RootDeviceName) != "/dev/sda1" || len(got.Tags) != 1 {
		t.Fatalf("image after the snapshot: %+v", got)
	}
	if s := snapState(); s != "completed" {
		t.Errorf("snapshot of an available image: %s, want completed", s)
	}
	st := e.fake.State("us-east-1", true)
	var layers []string
	for _, i := range st.Regions["us-east-1"].Images {
		if i.ID == amiID {
			layers = i.Layers
		}
	}
	if !slices.Equal(layers, []string{"/fleet/layers/" + id}) {
		t.Errorf("image layers %q, want the parent's (none) plus the snapshot layer", layers)
	}

	// A second instance from the new image boots its layers.
	second := e.run(t, c, &ec2.RunInstancesInput{ImageId: aws.String(amiID)})
	if aws.ToString(second.PublicIpAddress) != "127.0.0.3" {
		t.Errorf("second instance at %s, want the next free address 127.0.0.3", aws.ToString(second.PublicIpAddress))
	}
	m.waitCalls(t, "Start "+aws.ToString(second.InstanceId))
	m.mu.Lock()
	secondLayers := m.specs[1].Layers
	m.mu.Unlock()
	if !slices.Equal(secondLayers, layers) {
		t.Errorf("Start of an instance of %s got layers %q, want %q", amiID, secondLayers, layers)
	}

	term, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err != nil || term.TerminatingInstances[0].CurrentState.Name != "shutting-down" || term.TerminatingInstances[0].PreviousState.Name != "stopped" {
		t.Fatalf("TerminateInstances: %v %+v", err, term)
	}
	m.waitCalls(t, "Terminate "+id)
	waitFor(t, func() bool {
		e.fake.mu.Lock()
		defer e.fake.mu.Unlock()
		return e.fake.region("us-east-1").instances[id].settle.work.done
	})
	if got := polls(t, c, id, 3); !slices.Equal(got, []string{"shutting-down", "terminated", "terminated"}) {
		t.Fatalf("terminate: %v", got)
	}
	if ip := aws.ToString(instanceOf(t, c, id).PublicIpAddress); ip != "" {
		t.Errorf("terminated instance still has address %s", ip)
	}
	third := e.run(t, c, &ec2.RunInstancesInput{})
	if aws.ToString(third.PublicIpAddress) != "127.0.0.2" {
		t.Errorf("third instance at %s, want the released 127.0.0.2", aws.ToString(third.PublicIpAddress))
	}
	if n := countPrefix(m.Calls(), "Start "+id) + countPrefix(m.Calls(), "Stop "+id) + countPrefix(m.Calls(), "Snapshot "+id) + countPrefix(m.Calls(), "Terminate "+id); n != 4 {
		t.Errorf("machine calls for %s: %q, want one each of Start, Stop, Snapshot, Terminate", id, m.Calls())
	}
}

func countPrefix(list []string, p string) int {
	n := 0
	for _, s := range list {
		if s == p {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("condition not reached in 2.5 s")
}

// Without a machine backend instances are EC2 state only, and the SDK's own
// waiters see them through their states.
func TestInstanceStatesWithoutMachinesSatisfyWaiters(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	ctx := context.Background()
	id := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).InstanceId)
	in := &ec2.DescribeInstancesInput{InstanceIds: []string{id}}
	if err := ec2.NewInstanceRunningWaiter(c, func(o *ec2.InstanceRunningWaiterOptions) {
		o.MinDelay, o.MaxDelay = time.Millisecond, 2*time.Millisecond
	}).Wait(ctx, in, 5*time.Second); err != nil {
		t.Fatalf("running waiter: %v", err)
	}
	if _, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	if err := ec2.NewInstanceStoppedWaiter(c, func(o *ec2.InstanceStoppedWaiterOptions) {
		o.MinDelay, o.MaxDelay = time.Millisecond, 2*time.Millisecond
	}).Wait(ctx, in, 5*time.Second); err != nil {
		t.Fatalf("stopped waiter: %v", err)
	}
	img, err := c.CreateImage(ctx, &ec2.CreateImageInput{InstanceId: aws.String(id), Name: aws.String("state-only")})
	if err != nil {
		t.Fatal(err)
	}
	if err := ec2.NewImageAvailableWaiter(c, func(o *ec2.ImageAvailableWaiterOptions) {
		o.MinDelay, o.MaxDelay = time.Millisecond, 2*time.Millisecond
	}).Wait(ctx, &ec2.DescribeImagesInput{ImageIds: []string{aws.ToString(img.ImageId)}}, 5*time.Second); err != nil {
		t.Fatalf("image waiter: %v", err)
	}
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	if err := ec2.NewInstanceTerminatedWaiter(c, func(o *ec2.InstanceTerminatedWaiterOptions) {
		o.MinDelay, o.MaxDelay = time.Millisecond, 2*time.Millisecond
	}).Wait(ctx, in, 5*time.Second); err != nil {
		t.Fatalf("terminated waiter: %v", err)
	}
	vols, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{})
	if err != nil || len(vols.Volumes) != 0 {
		t.Errorf("delete-on-termination root volume left behind: %v %+v", err, vols)
	}
}

func TestTransitionPollsZeroAdvancesOnFirstPoll(t *testing.T) {
	e := newEC2Env(t, nil)
	e.fake.SetTransitionPolls(0)
	c := e.client("us-east-1")
	id := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).InstanceId)
	if got := polls(t, c, id, 1); got[0] != "running" {
		t.Errorf("first poll with 0 transition polls: %s, want running", got[0])
	}
}

// A boot that fails moves the instance to terminated with EC2's state reason,
// tears the half-booted host down and frees the address.
func TestFailedBootTerminates(t *testing.T) {
	m := &testMachines{startErr: errors.New("sshd did not come up")}
	e := newEC2Env(t, m)
	c := e.client("us-east-1")
	id := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).InstanceId)
	m.waitCalls(t, "Terminate "+id)
	if got := polls(t, c, id, 2); !slices.Equal(got, []string{"pending", "terminated"}) {
		t.Fatalf("failed boot: %v", got)
	}
	r := instanceOf(t, c, id).StateReason
	if r == nil || aws.ToString(r.Code) != "Server.InternalError" || !strings.Contains(aws.ToString(r.Message), "sshd did not come up") {
		t.Errorf("state reason %+v", r)
	}
	if ip := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).PublicIpAddress); ip != "127.0.0.2" {
		t.Errorf("address not released: next instance at %s", ip)
	}
}

func TestFailedSnapshotFailsImage(t *testing.T) {
	m := &testMachines{snapErr: errors.New("upper dir unreadable")}
	e := newEC2Env(t, m)
	c := e.client("us-east-1")
	ctx := context.Background()
	id := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).InstanceId)
	waitFor(t, func() bool { return instanceOfState(t, c, id) == "running" })
	if _, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return instanceOfState(t, c, id) == "stopped" })
	img, err := c.CreateImage(ctx, &ec2.CreateImageInput{InstanceId: aws.String(id), Name: aws.String("doomed")})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return imageOf(t, c, aws.ToString(img.ImageId)).State != "pending" })
	got := imageOf(t, c, aws.ToString(img.ImageId))
	if got.State != "failed" || got.StateReason == nil || !strings.Contains(aws.ToString(got.StateReason.Message), "upper dir unreadable") {
		t.Errorf("image after a failed snapshot: %s %+v", got.State, got.StateReason)
	}
}

func instanceOfState(t *testing.T, c *ec2.Client, id string) string {
	return string(instanceOf(t, c, id).State.Name)
}

// stuck-pending keeps the next launch pending (its host is never booted)
// until it is terminated.
func TestStuckPendingFault(t *testing.T) {
	m := &testMachines{}
	e := newEC2Env(t, m)
	op, region, f, err := ParseFault("RunInstances=stuck-pending:1")
	if err != nil {
		t.Fatal(err)
	}
	e.fake.SetFault(op, region, f)
	c := e.client("us-east-1")
	stuck := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).InstanceId)
	normal := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).InstanceId)
	m.waitCalls(t, "Start "+normal)
	if got := polls(t, c, stuck, 5); !slices.Equal(got, []string{"pending", "pending", "pending", "pending", "pending"}) {
		t.Errorf("stuck instance: %v", got)
	}
	if slices.Contains(m.Calls(), "Start "+stuck) {
		t.Errorf("the stuck instance's host was booted: %q", m.Calls())
	}
	if _, err := c.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{stuck}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return instanceOfState(t, c, stuck) == "terminated" })
}

// Every error code the fake promises, each from the call that provokes it,
// in EC2's wire format as the SDK parses it.
func TestEC2ErrorCodes(t *testing.T) {
	e := newEC2Env(t, &testMachines{})
	c := e.client("us-east-1")
	west := e.client("us-west-2")
	ctx := context.Background()
	dlami := dlamiID("us-east-1", "20261002")

	if _, err := c.CreateKeyPair(ctx, &ec2.CreateKeyPairInput{KeyName: aws.String("taken")}); err != nil {
		t.Fatal(err)
	}
	sg, err := c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("packer_sg"), Description: aws.String("tmp")})
	if err != nil {
		t.Fatal(err)
	}
	rule := &ec2.AuthorizeSecurityGroupIngressInput{GroupId: sg.GroupId, IpPermissions: []ec2types.IpPermission{{
		IpProtocol: aws.String("tcp"), FromPort: aws.Int32(22), ToPort: aws.Int32(22), IpRanges: []ec2types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}}}}}
	if _, err := c.AuthorizeSecurityGroupIngress(ctx, rule); err != nil {
		t.Fatal(err)
	}
	running := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{SecurityGroupIds: []string{aws.ToString(sg.GroupId)}}).InstanceId)
	waitFor(t, func() bool { return instanceOfState(t, c, running) == "running" })
	pending := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).InstanceId)
	stopped := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).InstanceId)
	waitFor(t, func() bool { return instanceOfState(t, c, stopped) == "running" })
	if _, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{stopped}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return instanceOfState(t, c, stopped) == "stopped" })
	golden, err := c.CreateImage(ctx, &ec2.CreateImageInput{InstanceId: aws.String(stopped), Name: aws.String("golden")})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return imageOf(t, c, aws.ToString(golden.ImageId)).State == "available" })
	goldenSnap := aws.ToString(imageOf(t, c, aws.ToString(golden.ImageId)).BlockDeviceMappings[0].Ebs.SnapshotId)
	if _, err := west.CopyImage(ctx, &ec2.CopyImageInput{SourceRegion: aws.String("us-east-1"), SourceImageId: golden.ImageId, Name: aws.String("golden")}); err != nil {
		t.Fatal(err)
	}
	terminated := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).InstanceId)
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{terminated}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return instanceOfState(t, c, terminated) == "terminated" })
	// The pending instance stays pending: it is never polled before its cases run.

	run := func(in ec2.RunInstancesInput) error {
		if in.ImageId == nil {
			in.ImageId = aws.String(dlami)
		}
		in.InstanceType, in.MinCount, in.MaxCount = "p6-b200.48xlarge", aws.Int32(1), aws.Int32(1)
		_, err := c.RunInstances(ctx, &in)
		return err
	}
	tests := []struct {
		name       string
		call       func() error
		code       string
		status     int
		msgContain string
	}{
		{"unknown AMI", func() error { return run(ec2.RunInstancesInput{ImageId: aws.String("ami-0123456789abcdef0")}) }, "InvalidAMIID.NotFound", 400, "ami-0123456789abcdef0"},
		{"malformed AMI id", func() error { return run(ec2.RunInstancesInput{ImageId: aws.String("image-1")}) }, "InvalidAMIID.Malformed", 400, "image-1"},
		{"unknown key pair", func() error { return run(ec2.RunInstancesInput{KeyName: aws.String("nope")}) }, "InvalidKeyPair.NotFound", 400, "nope"},
		{"unknown security group", func() error { return run(ec2.RunInstancesInput{SecurityGroupIds: []string{"sg-0123456789abcdef0"}}) }, "InvalidGroup.NotFound", 400, "sg-0123456789abcdef0"},
		{"unknown subnet", func() error { return run(ec2.RunInstancesInput{SubnetId: aws.String("subnet-0123456789abcdef0")}) }, "InvalidSubnetID.NotFound", 400, "subnet-0123456789abcdef0"},
		{"bad instance type", func() error {
			_, err := c.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(dlami), InstanceType: "P6 B200", MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
			return err
		}, "InvalidParameterValue", 400, "InstanceType"},
		{"duplicate key pair", func() error {
			_, err := c.CreateKeyPair(ctx, &ec2.CreateKeyPairInput{KeyName: aws.String("taken")})
			return err
		}, "InvalidKeyPair.Duplicate", 400, "taken"},
		{"unknown key pair described", func() error {
			_, err := c.DescribeKeyPairs(ctx, &ec2.DescribeKeyPairsInput{KeyNames: []string{"nope"}})
			return err
		}, "InvalidKeyPair.NotFound", 400, "nope"},
		{"duplicate security group", func() error {
			_, err := c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("packer_sg"), Description: aws.String("again")})
			return err
		}, "InvalidGroup.Duplicate", 400, "packer_sg"},
		{"unknown security group described", func() error {
			_, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-0123456789abcdef0"}})
			return err
		}, "InvalidGroup.NotFound", 400, "sg-0123456789abcdef0"},
		{"duplicate ingress rule", func() error { _, err := c.AuthorizeSecurityGroupIngress(ctx, rule); return err }, "InvalidPermission.Duplicate", 400, "0.0.0.0/0"},
		{"security group in use", func() error {
			_, err := c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: sg.GroupId})
			return err
		}, "DependencyViolation", 400, aws.ToString(sg.GroupId)},
		{"unknown instance", func() error {
			_, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
			return err
		}, "InvalidInstanceID.NotFound", 400, "i-0123456789abcdef0"},
		{"malformed instance id", func() error {
			_, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{"instance-1"}})
			return err
		}, "InvalidInstanceID.Malformed", 400, "instance-1"},
		{"stop a pending instance", func() error {
			_, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{pending}})
			return err
		}, "IncorrectInstanceState", 400, pending},
		{"stop a terminated instance", func() error {
			_, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{terminated}})
			return err
		}, "IncorrectInstanceState", 400, terminated},
		{"image a pending instance (amazon-ebs retries this)", func() error {
			_, err := c.CreateImage(ctx, &ec2.CreateImageInput{InstanceId: aws.String(pending), Name: aws.String("early")})
			return err
		}, "InvalidParameterValue", 400, "Instance is not in state"},
		{"image a running instance with hosts", func() error {
			_, err := c.CreateImage(ctx, &ec2.CreateImageInput{InstanceId: aws.String(running), Name: aws.String("hot")})
			return err
		}, "IncorrectInstanceState", 400, "stop it first"},
		{"image a terminated instance", func() error {
			_, err := c.CreateImage(ctx, &ec2.CreateImageInput{InstanceId: aws.String(terminated), Name: aws.String("late")})
			return err
		}, "IncorrectInstanceState", 400, terminated},
		{"duplicate image name", func() error {
			_, err := c.CreateImage(ctx, &ec2.CreateImageInput{InstanceId: aws.String(stopped), Name: aws.String("golden")})
			return err
		}, "InvalidAMIName.Duplicate", 400, "golden"},
		{"malformed image name", func() error {
			_, err := c.CreateImage(ctx, &ec2.CreateImageInput{InstanceId: aws.String(stopped), Name: aws.String("x")})
			return err
		}, "InvalidAMIName.Malformed", 400, "3 and 128"},
		{"copy an unknown image", func() error {
			_, err := west.CopyImage(ctx, &ec2.CopyImageInput{SourceRegion: aws.String("us-east-1"), SourceImageId: aws.String("ami-0123456789abcdef0"), Name: aws.String("copy")})
			return err
		}, "InvalidAMIID.NotFound", 400, "ami-0123456789abcdef0"},
		{"copy onto a taken name", func() error {
			_, err := west.CopyImage(ctx, &ec2.CopyImageInput{SourceRegion: aws.String("us-east-1"), SourceImageId: golden.ImageId, Name: aws.String("golden")})
			return err
		}, "InvalidAMIName.Duplicate", 400, "golden"},
		{"deregister someone else's image", func() error {
			_, err := c.DeregisterImage(ctx, &ec2.DeregisterImageInput{ImageId: aws.String(dlami)})
			return err
		}, "AuthFailure", 400, dlami},
		{"tag someone else's image", func() error {
			_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{dlami}, Tags: []ec2types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
			return err
		}, "UnauthorizedOperation", 403, dlami},
		{"tag an unknown snapshot", func() error {
			_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"snap-0123456789abcdef0"}, Tags: []ec2types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
			return err
		}, "InvalidSnapshot.NotFound", 400, "snap-0123456789abcdef0"},
		{"delete a snapshot in use", func() error {
			_, err := c.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: aws.String(goldenSnap)})
			return err
		}, "InvalidSnapshot.InUse", 400, aws.ToString(golden.ImageId)},
		{"describe an unknown snapshot", func() error {
			_, err := c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{"snap-0123456789abcdef0"}})
			return err
		}, "InvalidSnapshot.NotFound", 400, "snap-0123456789abcdef0"},
		{"delete an attached volume", func() error {
			v := instanceOf(t, c, running).BlockDeviceMappings[0].Ebs.VolumeId
			_, err := c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: v})
			return err
		}, "VolumeInUse", 400, running},
		{"unknown region", func() error {
			_, err := c.DescribeRegions(ctx, &ec2.DescribeRegionsInput{RegionNames: []string{"mars-north-1"}})
			return err
		}, "InvalidParameterValue", 400, "mars-north-1"},
		{"dry run", func() error { return run(ec2.RunInstancesInput{DryRun: aws.Bool(true)}) }, "DryRunOperation", 412, "DryRun"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if code := errorCode(err); code != tc.code || httpStatus(err) != tc.status || !strings.Contains(err.Error(), tc.msgContain) {
				t.Errorf("got %v (code %q, HTTP %d), want %s, HTTP %d, mentioning %q", err, code, httpStatus(err), tc.code, tc.status, tc.msgContain)
			}
		})
	}
	if s := instanceOfState(t, c, pending); s != "pending" && s != "running" {
		t.Errorf("pending instance is %s", s)
	}
}

func TestInsufficientCapacityAndThrottleFaults(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	for _, spec := range []string{"RunInstances@us-east-1=capacity:1", "DescribeInstances=throttle:1"} {
		op, region, f, err := ParseFault(spec)
		if err != nil {
			t.Fatal(err)
		}
		e.fake.SetFault(op, region, f)
	}
	in := &ec2.RunInstancesInput{ImageId: aws.String(dlamiID("us-east-1", "20261002")), InstanceType: "p6-b200.48xlarge", MinCount: aws.Int32(1), MaxCount: aws.Int32(1)}
	_, err := c.RunInstances(context.Background(), in)
	if errorCode(err) != "InsufficientInstanceCapacity" || httpStatus(err) != 500 ||
		!strings.Contains(err.Error(), "We currently do not have sufficient p6-b200.48xlarge capacity in the Availability Zone you requested (us-east-1a)") {
		t.Fatalf("capacity fault: %v", err)
	}
	out, err := c.RunInstances(context.Background(), in)
	if err != nil {
		t.Fatalf("second RunInstances after capacity:1: %v", err)
	}
	_, err = c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{aws.ToString(out.Instances[0].InstanceId)}})
	if errorCode(err) != "RequestLimitExceeded" || httpStatus(err) != 503 {
		t.Fatalf("throttle: %v", err)
	}
	if n := e.fake.CallCount(OpRunInstances, "us-east-1"); n != 2 {
		t.Errorf("RunInstances calls recorded: %d, want 2", n)
	}
}

// CopyImage makes an image in the target region with the source's tags (when
// asked), its own snapshots, the same layers, pending until polled.
func TestCopyImage(t *testing.T) {
	m := &testMachines{}
	e := newEC2Env(t, m)
	c, west := e.client("us-east-1"), e.client("us-west-2")
	ctx := context.Background()
	id := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).InstanceId)
	waitFor(t, func() bool { return instanceOfState(t, c, id) == "running" })
	if _, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return instanceOfState(t, c, id) == "stopped" })
	img, err := c.CreateImage(ctx, &ec2.CreateImageInput{InstanceId: aws.String(id), Name: aws.String("ml-golden-20261130")})
	if err != nil {
		t.Fatal(err)
	}
	src := aws.ToString(img.ImageId)
	waitFor(t, func() bool { return imageOf(t, c, src).State == "available" })
	if _, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{src}, Tags: []ec2types.Tag{
		{Key: aws.String("team"), Value: aws.String("ml-platform")}, {Key: aws.String("build"), Value: aws.String("golden")}}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		copyTags bool
		wantTags map[string]string
	}{
		{"with tags", true, map[string]string{"team": "ml-platform", "build": "golden", "copied": "yes"}},
		{"without tags", false, map[string]string{"copied": "yes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cp, err := west.CopyImage(ctx, &ec2.CopyImageInput{SourceRegion: aws.String("us-east-1"), SourceImageId: aws.String(src),
				Name: aws.String("ml-golden-" + strings.ReplaceAll(tc.name, " ", "-")), CopyImageTags: aws.Bool(tc.copyTags),
				TagSpecifications: []ec2types.TagSpecification{{ResourceType: "image", Tags: []ec2types.Tag{{Key: aws.String("copied"), Value: aws.String("yes")}}}}})
			if err != nil {
				t.Fatal(err)
			}
			dst := aws.ToString(cp.ImageId)
			if _, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{dst}}); errorCode(err) != "InvalidAMIID.NotFound" {
				t.Errorf("the copy is visible in the source region: %v", err)
			}
			if got := imageOf(t, west, dst); got.State != "pending" {
				t.Errorf("copy on first poll: %s, want pending", got.State)
			}
			got := imageOf(t, west, dst)
			tags := map[string]string{}
			for _, tg := range got.Tags {
				tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
			}
			srcSnap := aws.ToString(imageOf(t, c, src).BlockDeviceMappings[0].Ebs.SnapshotId)
			dstSnap := aws.ToString(got.BlockDeviceMappings[0].Ebs.SnapshotId)
			if got.State != "available" || fmt.Sprint(tags) != fmt.Sprint(tc.wantTags) || dstSnap == "" || dstSnap == srcSnap {
				t.Fatalf("copy: state %s tags %v snapshot %s (source's %s)", got.State, tags, dstSnap, srcSnap)
			}
			snaps, err := west.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{dstSnap}, OwnerIds: []string{"self"}})
			if err != nil || len(snaps.Snapshots) != 1 {
				t.Fatalf("the copy's snapshot in us-west-2: %v", err)
			}
			st := e.fake.State("us-west-2", true).Regions["us-west-2"]
			for _, i := range st.Images {
				if i.ID == dst && (!slices.Equal(i.Layers, []string{"/fleet/layers/" + id}) || i.SourceImageID != src || i.SourceRegion != "us-east-1") {
					t.Errorf("copy in state: layers %q source %s@%s", i.Layers, i.SourceImageID, i.SourceRegion)
				}
			}
		})
	}
}

func TestKeyPairs(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	ctx := context.Background()
	tests := []struct {
		keyType     ec2types.KeyType
		pemHeader   string
		fingerprint func(string) bool
	}{
		{ec2types.KeyTypeRsa, "-----BEGIN RSA PRIVATE KEY-----", func(f string) bool { return len(f) == 59 && strings.Count(f, ":") == 19 }},
		{ec2types.KeyTypeEd25519, "-----BEGIN OPENSSH PRIVATE KEY-----", func(f string) bool { return len(f) == 44 && strings.HasSuffix(f, "=") }},
	}
	for _, tc := range tests {
		t.Run(string(tc.keyType), func(t *testing.T) {
			name := "packer_" + string(tc.keyType)
			out, err := c.CreateKeyPair(ctx, &ec2.CreateKeyPairInput{KeyName: aws.String(name), KeyType: tc.keyType})
			if err != nil {
				t.Fatal(err)
			}
			material := aws.ToString(out.KeyMaterial)
			signer, err := ssh.ParsePrivateKey([]byte(material))
			if !strings.HasPrefix(material, tc.pemHeader) || err != nil {
				t.Fatalf("key material %.40q: %v", material, err)
			}
			if !strings.HasPrefix(aws.ToString(out.KeyPairId), "key-") || !tc.fingerprint(aws.ToString(out.KeyFingerprint)) {
				t.Errorf("id %q fingerprint %q", aws.ToString(out.KeyPairId), aws.ToString(out.KeyFingerprint))
			}
			var stored KeyPair
			for _, kp := range e.fake.State("us-east-1", false).Regions["us-east-1"].KeyPairs {
				if kp.Name == name {
					stored = kp
				}
			}
			pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(stored.PublicKey))
			if err != nil || string(pub.Marshal()) != string(signer.PublicKey().Marshal()) {
				t.Errorf("stored public key %q does not match the private key: %v", stored.PublicKey, err)
			}
			if strings.Contains(fmt.Sprintf("%+v", e.fake.State("", false)), "PRIVATE KEY") {
				t.Error("the private key is kept in the fake's state")
			}
			desc, err := c.DescribeKeyPairs(ctx, &ec2.DescribeKeyPairsInput{KeyNames: []string{name}})
			if err != nil || len(desc.KeyPairs) != 1 || desc.KeyPairs[0].KeyType != tc.keyType {
				t.Fatalf("DescribeKeyPairs: %v %+v", err, desc)
			}
			if _, err := c.DeleteKeyPair(ctx, &ec2.DeleteKeyPairInput{KeyName: aws.String(name)}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.DescribeKeyPairs(ctx, &ec2.DescribeKeyPairsInput{KeyNames: []string{name}}); errorCode(err) != "InvalidKeyPair.NotFound" {
				t.Errorf("after delete: %v", err)
			}
			// EC2 answers success for deleting a key pair that is gone.
			if _, err := c.DeleteKeyPair(ctx, &ec2.DeleteKeyPairInput{KeyName: aws.String(name)}); err != nil {
				t.Errorf("deleting again: %v", err)
			}
		})
	}
}

// The network amazon-ebs finds without vpc_id/subnet_id: one default VPC and
// subnet per region, the default group, and offerings for the AZ.
func TestDefaultNetwork(t *testing.T) {
	e := newEC2Env(t, nil)
	ctx := context.Background()
	for _, region := range []string{"us-east-1", "eu-west-1"} {
		c := e.client(region)
		vpcs, err := c.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []ec2types.Filter{{Name: aws.String("is-default"), Values: []string{"true"}}}})
		if err != nil || len(vpcs.Vpcs) != 1 || !aws.ToBool(vpcs.Vpcs[0].IsDefault) {
			t.Fatalf("%s default VPC: %v %+v", region, err, vpcs)
		}
		vpc := aws.ToString(vpcs.Vpcs[0].VpcId)
		subnets, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
			{Name: aws.String("vpc-id"), Values: []string{vpc}}, {Name: aws.String("state"), Values: []string{"available"}}}})
		if err != nil || len(subnets.Subnets) != 1 || aws.ToString(subnets.Subnets[0].AvailabilityZone) != region+"a" {
			t.Fatalf("%s subnets: %v %+v", region, err, subnets)
		}
		off, err := c.DescribeInstanceTypeOfferings(ctx, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: "availability-zone", Filters: []ec2types.Filter{
			{Name: aws.String("location"), Values: []string{region + "a"}}, {Name: aws.String("instance-type"), Values: []string{"p6-b200.48xlarge"}}}})
		if err != nil || len(off.InstanceTypeOfferings) != 1 {
			t.Fatalf("%s offerings: %v %+v", region, err, off)
		}
		groups, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{"default"}}}})
		if err != nil || len(groups.SecurityGroups) != 1 || aws.ToString(groups.SecurityGroups[0].VpcId) != vpc {
			t.Fatalf("%s default group: %v %+v", region, err, groups)
		}
		if _, err := c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: groups.SecurityGroups[0].GroupId}); errorCode(err) != "CannotDelete" {
			t.Errorf("%s deleting the default group: %v", region, err)
		}
	}
	regions, err := e.client("us-east-1").DescribeRegions(ctx, &ec2.DescribeRegionsInput{})
	if err != nil || len(regions.Regions) != len(FakeRegions()) {
		t.Fatalf("DescribeRegions: %v %+v", err, regions)
	}
}

func TestTagsAndSecurityGroupCleanup(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	ctx := context.Background()
	sg, err := c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("packer_x"), Description: aws.String("Temporary group for Packer"),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: "security-group", Tags: []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("ml")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{SecurityGroupIds: []string{aws.ToString(sg.GroupId)},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: "instance", Tags: []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String("Packer Builder")}}}}}).InstanceId)
	if _, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []ec2types.Tag{{Key: aws.String("stage"), Value: aws.String("bake")}}}); err != nil {
		t.Fatal(err)
	}
	tags, err := c.DescribeTags(ctx, &ec2.DescribeTagsInput{Filters: []ec2types.Filter{{Name: aws.String("resource-id"), Values: []string{id}}}})
	if err != nil || len(tags.Tags) != 2 {
		t.Fatalf("DescribeTags: %v %+v", err, tags)
	}
	byTag, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:Name"), Values: []string{"Packer*"}}}})
	if err != nil || len(byTag.Reservations) != 1 {
		t.Fatalf("DescribeInstances by tag: %v", err)
	}
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return instanceOfState(t, c, id) == "terminated" })
	if _, err := c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: sg.GroupId}); err != nil {
		t.Fatalf("deleting the group once its instance is terminated: %v", err)
	}
	if _, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{aws.ToString(sg.GroupId)}}); errorCode(err) != "InvalidGroup.NotFound" {
		t.Errorf("deleted group still described: %v", err)
	}
}

// Close waits for in-flight machine calls, marks every instance terminated
// and closes the backend once.
func TestCloseTerminatesEverything(t *testing.T) {
	m := &testMachines{gate: make(chan struct{})}
	f := NewSeeded("us-east-1")
	f.addrBusy = func(string) bool { return false }
	f.SetMachines(m)
	srv := f.Start()
	defer srv.Close()
	e := &ec2Env{fake: f, url: srv.URL, m: m}
	c := e.client("us-east-1")
	id := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).InstanceId)
	m.waitCalls(t, "Start "+id)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The gated Start returns when Close cancels the machine context.
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if m.closed != 1 {
		t.Errorf("Machines.Close called %d times, want 1", m.closed)
	}
	if st := f.State("us-east-1", false).Regions["us-east-1"].Instances[0]; st.State != StateTerminated || st.Address != "" {
		t.Errorf("after Close: %+v", st)
	}
}

func TestEC2RequestsNeedSignatureAndVersion(t *testing.T) {
	e := newEC2Env(t, nil)
	tests := []struct {
		hdr  map[string]string
		body string
		code int
		want string
	}{
		{map[string]string{}, "Action=RunInstances&Version=2016-11-15", http.StatusUnauthorized, "AuthFailure"},
		{map[string]string{"Authorization": testAuth}, "Action=RunInstances&Version=2014-01-01", http.StatusBadRequest, "Unsupported Version"},
		{map[string]string{"Authorization": testAuth}, "Action=RunInstances&Version=2016-11-15&ImageId=ami-1&MinCount=1", http.StatusBadRequest, "MissingParameter"},
		{map[string]string{"Authorization": testAuth}, "Action=CreateTags&Version=2016-11-15&ResourceId.1=bogus-1&Tag.1.Key=k", http.StatusBadRequest, "InvalidID"},
	}
	for _, tc := range tests {
		code, body, _ := post(t, e.url, tc.hdr, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want %d %s", tc.body, code, body, tc.code, tc.want)
		}
	}
}

// With simulated hosts, an address where something already listens on port
// 22 is skipped; a launch that cannot get MinCount addresses is EC2's
// capacity error and takes none.
func TestAddressAllocationSkipsBusyAddresses(t *testing.T) {
	e := newEC2Env(t, &testMachines{})
	e.fake.addrBusy = func(addr string) bool { return addr == "127.0.0.2" || addr == "127.0.0.4" }
	c := e.client("us-east-1")
	if ip := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).PublicIpAddress); ip != "127.0.0.3" {
		t.Errorf("first instance at %s, want 127.0.0.3 (127.0.0.2 is busy)", ip)
	}
	if ip := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).PublicIpAddress); ip != "127.0.0.5" {
		t.Errorf("second instance at %s, want 127.0.0.5", ip)
	}
	e.fake.addrBusy = func(string) bool { return true }
	_, err := c.RunInstances(context.Background(), &ec2.RunInstancesInput{ImageId: aws.String(dlamiID("us-east-1", "20261002")),
		InstanceType: "p5.48xlarge", MinCount: aws.Int32(1), MaxCount: aws.Int32(2)})
	if errorCode(err) != "InsufficientInstanceCapacity" {
		t.Fatalf("no free address: %v", err)
	}
	e.fake.addrBusy = func(string) bool { return false }
	out, err := c.RunInstances(context.Background(), &ec2.RunInstancesInput{ImageId: aws.String(dlamiID("us-east-1", "20261002")),
		InstanceType: "p5.48xlarge", MinCount: aws.Int32(2), MaxCount: aws.Int32(3)})
	if err != nil || len(out.Instances) != 3 || aws.ToString(out.Instances[0].PublicIpAddress) != "127.0.0.2" {
		t.Fatalf("launch of 3 after the busy spell: %v %+v", err, out)
	}
	if len(e.fake.State("us-east-1", false).Regions["us-east-1"].Instances) != 5 {
		t.Errorf("the failed launch left instances behind")
	}
}

func TestListeningProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if !listening("127.0.0.1", port) {
		t.Errorf("a listening port reads as free")
	}
	ln.Close()
	if listening("127.0.0.1", port) {
		t.Errorf("a closed port reads as busy")
	}
}

// A deregistered image still answers a lookup by id, as "deregistered", for a short interval
// (amazon-ebs's artifact cleanup describes it right after a post-processor deregistered it),
// never a filter search; afterwards the id is unknown.
func TestDeregisteredImageLingers(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e.fake.SetNow(func() time.Time { return now })
	id := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{}).InstanceId)
	waitFor(t, func() bool { return instanceOfState(t, c, id) == "running" })
	img, err := c.CreateImage(ctx, &ec2.CreateImageInput{InstanceId: aws.String(id), Name: aws.String("golden-doomed")})
	if err != nil {
		t.Fatal(err)
	}
	ami := aws.ToString(img.ImageId)
	waitFor(t, func() bool { return imageOf(t, c, ami).State == "available" })
	if _, err := c.DeregisterImage(ctx, &ec2.DeregisterImageInput{ImageId: aws.String(ami)}); err != nil {
		t.Fatal(err)
	}
	if got := imageOf(t, c, ami); got.State != "deregistered" {
		t.Errorf("lookup right after deregistering: %s, want deregistered", got.State)
	}
	out, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"self"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range out.Images {
		if aws.ToString(i.ImageId) == ami {
			t.Errorf("a search lists the deregistered image")
		}
	}
	if _, err := c.DeregisterImage(ctx, &ec2.DeregisterImageInput{ImageId: aws.String(ami)}); errorCode(err) != "InvalidAMIID.Unavailable" {
		t.Errorf("deregistering twice: %v, want InvalidAMIID.Unavailable", err)
	}
	now = now.Add(DeregisteredVisible)
	if _, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{ami}}); errorCode(err) != "InvalidAMIID.NotFound" {
		t.Errorf("lookup after the interval: %v, want InvalidAMIID.NotFound", err)
	}
	if _, err := c.DeregisterImage(ctx, &ec2.DeregisterImageInput{ImageId: aws.String(ami)}); errorCode(err) != "InvalidAMIID.NotFound" {
		t.Errorf("deregistering after the interval: %v, want InvalidAMIID.NotFound", err)
	}
}

package launch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// keptVolumesImage registers an image whose root mapping has DeleteOnTermination = false, as
// amazon-ebs records it when a template leaves it unset, and returns its id.
func keptVolumesImage(t *testing.T, f fakeEC2) string {
	t.Helper()
	const id, snap = "ami-00000000000000d01", "snap-0000000000000d001"
	account := f.srv.State(region, false).Account
	f.srv.PutSnapshot(region, awsfake.Snapshot{ID: snap, State: "completed", OwnerID: account, VolumeSize: 100})
	f.srv.PutImage(region, awsfake.Image{ID: id, Name: "kept-volumes", OwnerID: account, Architecture: "x86_64", RootDeviceName: "/dev/sda1",
		BlockDevices: []awsfake.BlockDevice{{DeviceName: "/dev/sda1", SnapshotID: snap, VolumeSize: 100, DeleteOnTermination: false}}})
	return id
}

// A verification launches the image's EBS volumes with DeleteOnTermination = true and the
// launch's tags, whatever the image records: nothing is left once the instances are gone.
func TestVolumesGoWithTheInstances(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		f := newFake(t)
		s := efaSpec("p5.48xlarge")
		s.ImageID, s.Count = keptVolumesImage(t, f), nodes
		in, err := Launch(context.Background(), f.client(region), s, discard)
		if err != nil {
			t.Fatal(err)
		}
		vols := f.state(region).Volumes
		if len(vols) != nodes {
			t.Fatalf("%d nodes: %d volumes %+v", nodes, len(vols), vols)
		}
		for _, v := range vols {
			if !v.DeleteOnTermination || v.Tags[LaunchTag] != in.launchID || v.Tags["team"] != "ml" {
				t.Errorf("volume %s: delete on termination %v, tags %v", v.ID, v.DeleteOnTermination, v.Tags)
			}
		}
		if err := Cleanup(context.Background(), in, discard); err != nil {
			t.Fatal(err)
		}
		assertNothingLeft(t, f)
	}
}

// An image whose mappings cannot be read launches as it is: the volumes EC2 keeps are found by
// the launch tag and deleted; one the cleanup may not delete is named with its command.
func TestCleanupDeletesVolumesLeftAfterTheInstance(t *testing.T) {
	f := newFake(t)
	s := spec(region)
	s.ImageID = keptVolumesImage(t, f)
	f.srv.SetFault(awsfake.OpDescribeImages, region, awsfake.Fault{AccessDenied: true})
	in, err := Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	if vols := f.state(region).Volumes; len(vols) != 1 || vols[0].DeleteOnTermination {
		t.Fatalf("volumes %+v: want the image's own mapping", vols)
	}
	if err := Cleanup(context.Background(), in, discard); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, f)

	f = newFake(t)
	s.ImageID = keptVolumesImage(t, f)
	f.srv.SetFault(awsfake.OpDescribeImages, region, awsfake.Fault{AccessDenied: true})
	in, err = Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.SetFault(awsfake.OpDeleteVolume, region, awsfake.Fault{AccessDenied: true})
	err = Cleanup(context.Background(), in, discard)
	leaks := Leaks(err)
	vols := f.state(region).Volumes
	if len(leaks) != 1 || leaks[0].Kind != KindVolume || len(vols) != 1 ||
		leaks[0].Command(region) != "aws ec2 delete-volume --region us-east-1 --volume-id "+vols[0].ID {
		t.Fatalf("leaks %+v, volumes %+v (%v)", leaks, vols, err)
	}
}

// An answer to RunInstances that names fewer instances than the launch made: the launch fails,
// and its cleanup terminates every instance carrying the launch tag, not only those named.
func TestPartialRunInstancesAnswerLeavesNothing(t *testing.T) {
	for _, nodes := range []int{2, 4} {
		f := newFake(t)
		s := efaSpec("p5.48xlarge")
		s.Count, s.CleanupTimeout = nodes, 5*time.Second
		f.srv.SetFault(awsfake.OpRunInstances, region, awsfake.Fault{PartialAnswer: 1})
		_, err := Launch(context.Background(), f.client(region), s, discard)
		if err == nil || !strings.Contains(err.Error(), "RunInstances returned 1 instances") {
			t.Fatalf("err %v", err)
		}
		if rs := f.state(region); len(rs.Instances) != nodes {
			t.Fatalf("%d instances, want %d launched", len(rs.Instances), nodes)
		}
		assertNothingLeft(t, f)
	}
}

// AllocateAddress's answer is lost after EC2 allocated, and DescribeAddresses does not list
// the address yet when the step looks before allocating again: a second is allocated. The
// cleanup releases both, every address carrying the launch's and the node's tags.
func TestElasticIPAllocatedTwiceIsReleasedTwice(t *testing.T) {
	for _, lag := range []int{1, 2} {
		f := newFake(t)
		f.srv.SetAddressListingLag(lag)
		f.srv.SetFault(awsfake.OpAllocateAddress, region, awsfake.Fault{LoseAnswer: 1})
		s := efaSpec("p5.48xlarge")
		s.Count, s.ElasticIP = 2, AlwaysElasticIP
		in, err := Launch(context.Background(), f.client(region), s, discard)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(f.state(region).ElasticIPs); n != 3 {
			t.Fatalf("lag %d: %d Elastic IPs, want 3 (one lost answer, one each node)", lag, n)
		}
		if err := Cleanup(context.Background(), in, func(s string) { t.Logf("lag %d: %s", lag, s) }); err != nil {
			t.Fatal(err)
		}
		assertNothingLeft(t, f)
	}
}

// At the production ratio of call bound to cleanup deadline (a minute to ten), for 2 to 8
// nodes, one call of each removal that never answers uses up that resource's share: what
// failed gets a second pass with the time the others left, and nothing is left.
//
// Only the cleanup runs at the ratio. The launch is not under test and keeps the default
// bounds: under the race detector on a loaded CI machine, decoding RunInstances' answer for 8
// nodes of 32 interfaces each outlasted a 200 ms call bound on every try.
func TestCleanupAtTheProductionRatio(t *testing.T) {
	ratio := Patience{Poll: 10 * time.Millisecond, CallTimeout: time.Second, Timeout: 10 * time.Second}
	for _, nodes := range []int{2, 5, 8} {
		for _, op := range []string{awsfake.OpDeleteKeyPair, awsfake.OpReleaseAddress, awsfake.OpDeletePlacementGroup, awsfake.OpDeleteSecurityGroup, awsfake.OpDescribeVolumes} {
			f := newFake(t)
			s := efaSpec("p5.48xlarge")
			s.Count, s.ElasticIP, s.TemporaryPlacementGroup = nodes, AlwaysElasticIP, true
			in, err := Launch(context.Background(), f.client(region), s, discard)
			if err != nil {
				t.Fatal(err)
			}
			in.setPatience(ratio)
			f.srv.SetFault(op, region, awsfake.Fault{Hang: 1})
			if err := Cleanup(context.Background(), in, discard); err != nil {
				t.Errorf("%d nodes, %s hung once: %v", nodes, op, err)
			}
			assertNothingLeft(t, f)
		}
	}
}

// setPatience gives the launch and each of its nodes other bounds, as a test sets them
// between the launch and the cleanup.
func (in *Instance) setPatience(p Patience) {
	for _, n := range in.Nodes() {
		n.patience = p
	}
}

// A subnet EC2 does not know is found before anything is made, with the user's security
// groups as with a temporary one.
func TestUnknownSubnetFoundBeforeAnythingIsMade(t *testing.T) {
	for _, groups := range [][]string{nil, {"sg-0000000000000aaaa"}} {
		f := newFake(t)
		s := spec(region)
		s.SubnetID, s.SecurityGroupIDs, s.EFA = "subnet-00000000000000bad", groups, 0
		_, err := Launch(context.Background(), f.client(region), s, discard)
		if err == nil || !strings.Contains(err.Error(), "subnet-00000000000000bad") {
			t.Errorf("groups %v: err %v", groups, err)
		}
		for _, op := range []string{awsfake.OpCreateKeyPair, awsfake.OpCreateSecurityGroup, awsfake.OpRunInstances} {
			if n := f.srv.CallCount(op, region); n != 0 {
				t.Errorf("groups %v: %d %s calls before the subnet was found unknown", groups, n, op)
			}
		}
	}
}

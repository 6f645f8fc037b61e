package launch

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// sdkRetrying is the fake's client with the SDK's standard retryer (3 attempts, as the
// post-processor's client has) and a backoff short enough for a test.
func (f fakeEC2) sdkRetrying(region string) *ec2.Client {
	return ec2.NewFromConfig(aws.Config{
		Region: region, BaseEndpoint: aws.String(f.url),
		Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKELAUNCHTEST00", "secret", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
			})
		},
	})
}

// imageTags are the tags of image id in region.
func (f fakeEC2) imageTags(region, id string) (map[string]string, bool) {
	for _, img := range f.state(region).Images {
		if img.ID == id {
			return img.Tags, true
		}
	}
	return nil, false
}

// The SDK retries a call whose answer was lost after EC2 acted; the retry meets what the first
// call made. Each launch step takes that for what it is: a duplicate key pair is replaced (its
// private key went with the lost answer), a duplicate group is looked up and used, a duplicate
// rule is success, and RunInstances' client token makes the retry the same launch.
func TestLaunchIsIdempotentAfterALostAnswer(t *testing.T) {
	for _, op := range []string{awsfake.OpCreateKeyPair, awsfake.OpCreateSecurityGroup, awsfake.OpAuthorizeSecurityGroupIngress, awsfake.OpRunInstances} {
		t.Run(op, func(t *testing.T) {
			f := newFake(t)
			f.srv.SetFault(op, region, awsfake.Fault{LoseAnswer: 1})
			in, err := Launch(context.Background(), f.sdkRetrying(region), spec(region), discard)
			if err != nil {
				t.Fatalf("launch after a lost %s answer: %v", op, err)
			}
			rs := f.state(region)
			var groups []awsfake.SecurityGroup
			for _, g := range rs.SecurityGroups {
				if g.Name != "default" {
					groups = append(groups, g)
				}
			}
			if len(rs.Instances) != 1 || len(rs.KeyPairs) != 1 || len(groups) != 1 {
				t.Fatalf("%d instances, %d key pairs, %d groups: want one of each", len(rs.Instances), len(rs.KeyPairs), len(groups))
			}
			if len(groups[0].Ingress) != 1 || !slices.Equal(rs.Instances[0].SecurityGroupIDs, []string{groups[0].ID}) {
				t.Errorf("group %+v, instance groups %v: want the one group with its one SSH rule", groups[0], rs.Instances[0].SecurityGroupIDs)
			}
			if err := Cleanup(context.Background(), in, discard); err != nil {
				t.Fatal(err)
			}
			assertNothingLeft(t, f)
		})
	}
}

// The key pair waits for nothing: it goes first, so an instance slow to terminate does not
// keep it. The instance and the group that waits for it are named, each with the command that
// removes it.
func TestCleanupDeletesTheKeyPairFirst(t *testing.T) {
	f := newFake(t)
	s := spec(region)
	s.CleanupTimeout = 2 * time.Second
	in, err := Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.SetTransitionPolls(1_000_000) // shutting-down, for longer than the cleanup has
	err = Cleanup(context.Background(), in, discard)
	if rs := f.state(region); len(rs.KeyPairs) != 0 {
		t.Errorf("key pairs %+v: the slow termination kept the key pair", rs.KeyPairs)
	}
	leaks := Leaks(err)
	var got []string
	for _, l := range leaks {
		got = append(got, l.Kind)
	}
	// The volume is attached to the instance still shutting down: named too (its command
	// finds it by the launch tag once the instance is gone, when EC2 did not delete it).
	if !slices.Equal(got, []string{KindInstance, KindVolume, KindSecurityGroup}) {
		t.Fatalf("leaks %v (%v): want the instance, its volume and the group", got, err)
	}
	if cmd := leaks[0].Command(region); cmd != "aws ec2 terminate-instances --region us-east-1 --instance-ids "+in.ID {
		t.Errorf("instance command %q", cmd)
	}
	if cmd := leaks[2].Command(region); cmd != "aws ec2 delete-security-group --region us-east-1 --group-id "+in.securityGroup {
		t.Errorf("group command %q", cmd)
	}
	if !slices.Equal(NotTerminated(err), []string{in.ID}) {
		t.Errorf("NotTerminated = %v", NotTerminated(err))
	}
}

// Each deletion has its own share of the deadline: a key pair EC2 keeps throttling is given up
// at the end of its share, the instance and the group are still removed, and the key pair is
// tried again in a second pass with the time left.
func TestCleanupGivesEachResourceItsShare(t *testing.T) {
	f := newFake(t)
	s := spec(region)
	s.CleanupTimeout = 4 * time.Second
	in, err := Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.SetFault(awsfake.OpDeleteKeyPair, region, awsfake.Fault{Throttle: 1_000_000})
	start := time.Now()
	err = Cleanup(context.Background(), in, discard)
	leaks := Leaks(err)
	if len(leaks) != 1 || leaks[0].Kind != KindKeyPair || leaks[0].Command(region) != "aws ec2 delete-key-pair --region us-east-1 --key-name "+in.keyName {
		t.Fatalf("leaks %+v (%v): want the key pair alone, with its command", leaks, err)
	}
	if !strings.Contains(err.Error(), "RequestLimitExceeded") {
		t.Errorf("err %v: want EC2's answer", err)
	}
	if d := time.Since(start); d < 3*time.Second {
		t.Errorf("the cleanup gave up the throttled key pair after %s of 4s: the second pass has the time left", d)
	}
	rs := f.state(region)
	if rs.Instances[0].State != "terminated" {
		t.Errorf("instance %s", rs.Instances[0].State)
	}
	for _, g := range rs.SecurityGroups {
		if g.Name != "default" {
			t.Errorf("group left: %+v", g)
		}
	}
}

// A missing permission does not grant itself by waiting: the removal is given up at once and
// named, and the rest goes on.
func TestCleanupGivesUpADeniedDeletionAtOnce(t *testing.T) {
	f := newFake(t)
	s := spec(region)
	s.CleanupTimeout = time.Minute
	in, err := Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.SetFault(awsfake.OpDeleteSecurityGroup, region, awsfake.Fault{AccessDenied: true})
	start := time.Now()
	err = Cleanup(context.Background(), in, discard)
	if leaks := Leaks(err); len(leaks) != 1 || leaks[0].Kind != KindSecurityGroup || !strings.Contains(err.Error(), "UnauthorizedOperation") {
		t.Fatalf("leaks %+v (%v)", leaks, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a denied deletion took %s", d)
	}
	if rs := f.state(region); rs.Instances[0].State != "terminated" || len(rs.KeyPairs) != 0 {
		t.Errorf("instance %s, key pairs %+v", rs.Instances[0].State, rs.KeyPairs)
	}
}

// Leak commands for what the cleanup never learned the id of.
func TestLeakCommandsWithoutAnID(t *testing.T) {
	for _, tc := range []struct {
		leak Leak
		want string
	}{
		{Leak{Kind: KindInstance, LaunchID: "dlami-verify-0a1b"},
			"aws ec2 terminate-instances --region us-east-1 --instance-ids $(aws ec2 describe-instances --region us-east-1 --filters Name=tag:dlami:launch,Values=dlami-verify-0a1b Name=instance-state-name,Values=pending,running,stopping,stopped --query 'Reservations[].Instances[].InstanceId' --output text)"},
		{Leak{Kind: KindSecurityGroup, Name: "dlami-verify-0a1b", VPC: "vpc-1"},
			"aws ec2 delete-security-group --region us-east-1 --group-id $(aws ec2 describe-security-groups --region us-east-1 --filters Name=group-name,Values=dlami-verify-0a1b Name=vpc-id,Values=vpc-1 --query 'SecurityGroups[0].GroupId' --output text)"},
		{Leak{Kind: KindImage, IDs: []string{"ami-1"}}, "aws ec2 deregister-image --region us-east-1 --image-id ami-1 --delete-associated-snapshots"},
		{Leak{Kind: KindSnapshot, IDs: []string{"snap-1", "snap-2"}}, "aws ec2 delete-snapshot --region us-east-1 --snapshot-id snap-1; aws ec2 delete-snapshot --region us-east-1 --snapshot-id snap-2"},
	} {
		if got := tc.leak.Command(region); got != tc.want {
			t.Errorf("%s: %q\nwant %q", tc.leak.What(), got, tc.want)
		}
	}
}

// A new kind slots into the cleanup by naming what must be gone before it.
func TestResourcesAreOrderedByWhatTheyWaitFor(t *testing.T) {
	rs := []resource{
		{kind: "security group", after: []string{"instance", "network interface"}},
		{kind: "placement group", after: []string{"instance"}},
		{kind: "network interface", after: []string{"instance"}},
		{kind: "instance"},
		{kind: "key pair"},
		{kind: "elastic ip", after: []string{"nat gateway"}}, // waits for a kind that is not there
	}
	got := kinds(ordered(rs))
	want := []string{"instance", "key pair", "elastic ip", "placement group", "network interface", "security group"}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	a := kinds(ordered([]resource{{kind: "a", after: []string{"b"}}, {kind: "b", after: []string{"a"}}}))
	if len(a) != 2 {
		t.Errorf("a cycle lost resources: %v", a)
	}
	// Two resources of one kind: what waits for the kind waits for both.
	two := kinds(ordered([]resource{{kind: "security group", after: []string{"network interface"}},
		{kind: "network interface", after: []string{"instance"}}, {kind: "instance"}, {kind: "network interface", after: []string{"instance"}}}))
	if want := []string{"instance", "network interface", "network interface", "security group"}; !slices.Equal(two, want) {
		t.Errorf("order %v, want %v", two, want)
	}
}

// kinds names the kinds of rs, in order.
func kinds(rs []resource) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.kind)
	}
	return out
}

// Tagging retries throttling and 500s past the SDK's attempts, waits out a call that does not
// answer, and takes a lost answer for success when the tags read back.
func TestTagImageRetriesAndReadsBack(t *testing.T) {
	tags := map[string]string{"dlami:verified": "true", "dlami:verified_at": "2026-11-30T12:00:00Z"}
	for _, tc := range []struct {
		name  string
		fault awsfake.Fault
		sdk   bool // the SDK's own retries, else one attempt per call
		calls int  // CreateTags requests, at most (0: any)
	}{
		{"throttled past the SDK", awsfake.Fault{Throttle: 5}, true, 0},
		{"500s past the SDK", awsfake.Fault{ServerError: 5}, true, 0},
		{"answer lost, read back", awsfake.Fault{LoseAnswer: 1}, false, 1},
		{"hang", awsfake.Fault{Hang: 1}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, region, "us-west-2")
			east, _ := bakedImage(t, f)
			api := EC2API(f.client(region))
			if tc.sdk {
				api = f.sdkRetrying(region)
			}
			f.srv.SetFault(awsfake.OpCreateTags, region, tc.fault)
			p := quick
			if tc.fault.Hang > 0 {
				p.CallTimeout = 300 * time.Millisecond
			}
			before := f.srv.CallCount(awsfake.OpCreateTags, region)
			if err := TagImage(context.Background(), api, east, tags, p); err != nil {
				t.Fatal(err)
			}
			if got, _ := f.imageTags(region, east); got["dlami:verified"] != "true" || got["dlami:verified_at"] == "" {
				t.Errorf("tags %v", got)
			}
			if n := f.srv.CallCount(awsfake.OpCreateTags, region) - before; tc.calls > 0 && n > tc.calls {
				t.Errorf("%d CreateTags sent: the read-back should have ended it after %d", n, tc.calls)
			}
		})
	}
	// A missing permission ends it at once, untagged.
	f := newFake(t, region, "us-west-2")
	east, _ := bakedImage(t, f)
	f.srv.SetFault(awsfake.OpCreateTags, region, awsfake.Fault{AccessDenied: true})
	start := time.Now()
	if err := TagImage(context.Background(), f.client(region), east, tags, Patience{Poll: 10 * time.Millisecond, Timeout: time.Minute}); err == nil || !strings.Contains(err.Error(), "UnauthorizedOperation") {
		t.Errorf("denied: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a denied tagging took %s", d)
	}
}

// Deregistration is retried to its deadline and is idempotent: a retry that meets
// InvalidAMIID.Unavailable (the first call's answer was lost) is done and the snapshots are
// gone; without DescribeImages the image still goes, with its snapshots
// (DeleteAssociatedSnapshots); what it cannot deregister is named with the command.
func TestDeregisterRetriesAndIsIdempotent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		op    string
		fault awsfake.Fault
		sdk   bool
		leak  string // the leak kind expected, "" for none
	}{
		{"answer lost, the SDK's retry meets Unavailable", awsfake.OpDeregisterImage, awsfake.Fault{LoseAnswer: 1}, true, ""},
		{"answer lost, our retry meets Unavailable", awsfake.OpDeregisterImage, awsfake.Fault{LoseAnswer: 1}, false, ""},
		{"throttled past the SDK", awsfake.OpDeregisterImage, awsfake.Fault{Throttle: 5}, true, ""},
		{"hang", awsfake.OpDeregisterImage, awsfake.Fault{Hang: 1}, false, ""},
		{"snapshot deletion throttled", awsfake.OpDeleteSnapshot, awsfake.Fault{Throttle: 5}, false, ""},
		{"describe denied", awsfake.OpDescribeImages, awsfake.Fault{AccessDenied: true}, false, ""},
		{"deregistration denied", awsfake.OpDeregisterImage, awsfake.Fault{AccessDenied: true}, false, KindImage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, region, "us-west-2")
			east, _ := bakedImage(t, f)
			var snaps []string
			for _, img := range f.state(region).Images {
				if img.ID == east {
					for _, bd := range img.BlockDevices {
						snaps = append(snaps, bd.SnapshotID)
					}
				}
			}
			api := EC2API(f.client(region))
			if tc.sdk {
				api = f.sdkRetrying(region)
			}
			f.srv.SetFault(tc.op, region, tc.fault)
			p := quick
			if tc.fault.Hang > 0 {
				p.CallTimeout = 300 * time.Millisecond
			}
			err := Deregister(context.Background(), api, east, p)
			_, registered := f.imageTags(region, east)
			if tc.leak != "" {
				leaks := Leaks(err)
				if !registered || len(leaks) != 1 || leaks[0].Kind != tc.leak ||
					leaks[0].Command(region) != "aws ec2 deregister-image --region us-east-1 --image-id "+east+" --delete-associated-snapshots" {
					t.Errorf("registered %v, leaks %+v (%v)", registered, leaks, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if registered {
				t.Errorf("%s still registered", east)
			}
			for _, sn := range f.state(region).Snapshots {
				if slices.Contains(snaps, sn.ID) {
					t.Errorf("snapshot %s of the deregistered image left", sn.ID)
				}
			}
		})
	}
}

// An image EC2 does not know is an error, not a deregistration.
func TestDeregisterUnknownImage(t *testing.T) {
	f := newFake(t)
	err := Deregister(context.Background(), f.client(region), "ami-0000000000000dead", quick)
	if !errors.Is(err, errNoImage) || Leaks(err) != nil {
		t.Errorf("err %v", err)
	}
}

// A CreateTags answered 200 with a body that cannot be read is not a tagging: the tags are
// read back after every CreateTags, and an image they never reach is not said tagged.
func TestTagImageReadsBackAfterEveryTagging(t *testing.T) {
	tags := map[string]string{"dlami:verified": "true"}
	f := newFake(t, region, "us-west-2")
	east, _ := bakedImage(t, f)
	f.srv.SetFault(awsfake.OpCreateTags, region, awsfake.Fault{Malformed: true})
	p := Patience{Poll: 10 * time.Millisecond, Timeout: 500 * time.Millisecond, CallTimeout: 200 * time.Millisecond}
	err := TagImage(context.Background(), f.client(region), east, tags, p)
	if got, _ := f.imageTags(region, east); got["dlami:verified"] == "true" {
		t.Fatalf("the fake set the tags on a malformed answer: %v", got)
	}
	if err == nil || !errors.Is(err, errNotTagged) {
		t.Errorf("err %v: a 200 with a broken body counted as tagged", err)
	}
	// Answered and there: done, with one CreateTags.
	f.srv.SetFault(awsfake.OpCreateTags, region, awsfake.Fault{})
	before := f.srv.CallCount(awsfake.OpCreateTags, region)
	if err := TagImage(context.Background(), f.client(region), east, tags, p); err != nil {
		t.Fatal(err)
	}
	if n := f.srv.CallCount(awsfake.OpCreateTags, region) - before; n != 1 {
		t.Errorf("%d CreateTags for one tagging", n)
	}
}

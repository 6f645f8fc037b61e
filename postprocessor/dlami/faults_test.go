package dlami

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/dlami-bake/packer-plugin-dlami/internal/amitags"
	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
	"github.com/dlami-bake/packer-plugin-dlami/test/awstest"
)

// The fault matrix's timing: fast polls, and a call that does not answer given up after
// matrixCall; the cleanup's deadline (and each launch step's) is matrixCall times the
// production ratio of the two (launch.CleanupTimeout to launch.CallTimeout, ten), so that one
// call that never answers takes the share of the deadline it would take in production.
const (
	matrixPoll    = 5 * time.Millisecond
	matrixCall    = 500 * time.Millisecond
	matrixCleanup = matrixCall * time.Duration(launch.CleanupTimeout/launch.CallTimeout)
)

// matrixNodes are the launch sizes the matrix cycles through: one instance, and the test
// across nodes of 2 to 8, each with its Elastic IP, in one temporary placement group.
var matrixNodes = []int{1, 2, 3, 4, 5, 6, 7, 8}

// sdkClients makes each region's EC2 client as the post-processor does (awsaccess.LoadConfig,
// the credential check with sts:GetCallerIdentity, the SDK's standard retryer with its 3
// attempts) against the fake at url, with a backoff of a millisecond so that the matrix spends
// no time waiting.
func sdkClients(url string) func(context.Context, string) (launch.EC2API, error) {
	return func(ctx context.Context, region string) (launch.EC2API, error) {
		o := awsaccess.Options{AccessKey: "AKIAFAKEPPTEST000000", SecretKey: "secret", EC2Endpoint: url, STSEndpoint: url, Region: region,
			Retry: awsaccess.RetryPolicy{MaxBackoff: time.Millisecond}}
		cfg, err := awsaccess.LoadConfig(ctx, o)
		if err != nil {
			return nil, err
		}
		if _, err := awsaccess.ValidateCredentials(ctx, cfg, o, region, time.Second); err != nil {
			return nil, err
		}
		return awsaccess.NewEC2Client(cfg, o, region), nil
	}
}

// matrixVerdict is what the first boot's check says in a case of the matrix.
type matrixVerdict struct {
	name      string
	onFailure string
	check     error
}

var matrixVerdicts = []matrixVerdict{
	{"verified", OnFailureTag, nil},
	{"bad-deregister", OnFailureDeregister, &engine.DriftError{Stage: "first boot", Failed: []string{"first-boot-kernel"}}},
	{"bad-tag", OnFailureTag, &engine.DriftError{Stage: "first boot", Failed: []string{"first-boot-kernel"}}},
	{"unjudged", OnFailureDeregister, errors.New("SSH did not answer")},
}

// matrixFaults are the faults every action meets: more throttles and 500s than the SDK's three
// attempts, an answer lost after the fake acted, a call that never answers, and a permission
// that is missing for good.
var matrixFaults = []struct {
	name       string
	fault      awsfake.Fault
	persistent bool
}{
	{"throttle", awsfake.Fault{Throttle: 4}, false},
	{"500", awsfake.Fault{ServerError: 4}, false},
	{"lost-answer", awsfake.Fault{LoseAnswer: 1}, false},
	{"hang", awsfake.Fault{Hang: 1}, false},
	{"denied", awsfake.Fault{AccessDenied: true}, true},
}

// matrixOps are the actions the post-processor calls: STS's credential check, the launch,
// the check's wait, the cleanup, tagging and deregistration.
var matrixOps = []string{
	awsfake.OpGetCallerIdentity,
	awsfake.OpCreateKeyPair, awsfake.OpDescribeVpcs, awsfake.OpDescribeSubnets, awsfake.OpCreateSecurityGroup,
	awsfake.OpDescribeSecurityGroups, awsfake.OpAuthorizeSecurityGroupIngress, awsfake.OpRunInstances, awsfake.OpDescribeInstances,
	awsfake.OpTerminateInstances, awsfake.OpDeleteSecurityGroup, awsfake.OpDeleteKeyPair,
	awsfake.OpCreateTags, awsfake.OpDescribeImages, awsfake.OpDeregisterImage, awsfake.OpDeleteSnapshot,
	// The network of a launch with EFA (p5.48xlarge, efa = "all": 33 interfaces), a temporary
	// placement group and the temporary Elastic IP that reaches it.
	awsfake.OpDescribeInstanceTypes, awsfake.OpAuthorizeSecurityGroupEgress, awsfake.OpCreatePlacementGroup, awsfake.OpDeletePlacementGroup,
	awsfake.OpAllocateAddress, awsfake.OpAssociateAddress, awsfake.OpDescribeAddresses, awsfake.OpDisassociateAddress, awsfake.OpReleaseAddress,
	awsfake.OpDescribeNetworkInterfaces, awsfake.OpDeleteNetworkInterface,
	// The volumes: found by the launch tag after the instances, deleted when EC2 kept them.
	awsfake.OpDescribeVolumes, awsfake.OpDeleteVolume,
}

// keptInterfaces is an EC2 client whose launches keep their network interfaces after the
// instance (DeleteOnTermination false), so that the cleanup has interfaces to delete.
type keptInterfaces struct{ launch.EC2API }

func (k keptInterfaces) RunInstances(ctx context.Context, in *ec2.RunInstancesInput, o ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	for i := range in.NetworkInterfaces {
		in.NetworkInterfaces[i].DeleteOnTermination = aws.Bool(false)
	}
	return k.EC2API.RunInstances(ctx, in, o...)
}

// keptVolumes is an EC2 client whose launches keep the image's own volume mappings (the
// matrix's image records DeleteOnTermination = false, as amazon-ebs does by default), so that
// the cleanup has volumes to delete.
type keptVolumes struct{ launch.EC2API }

func (k keptVolumes) RunInstances(ctx context.Context, in *ec2.RunInstancesInput, o ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	in.BlockDeviceMappings = nil
	return k.EC2API.RunInstances(ctx, in, o...)
}

// syncBuffer is a bytes.Buffer safe for the UI's writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFaultMatrix drives the post-processor through every action it calls × throttling past
// the SDK's retries, 500s, an answer lost after the fake acted, a call that never answers and
// a permission denied for good, for each verdict (a healthy first boot, a bad one with
// on_failure = deregister and with tag, one that could not be judged), with an ami_regions
// copy, through the real SDK clients against the fake. For each it asserts:
//
//   - nothing is left behind (every instance terminated, no key pair, no temporary group, no
//     snapshot of a deregistered AMI), or what is left is named with the command that removes
//     it; after a transient fault nothing at all is left, and the first boot is judged;
//   - the AMI's fate is the verdict's: a healthy one is kept (PostProcess succeeds) and both
//     copies are tagged dlami:verified = true (or named NOT TAGGED with the command, when
//     tagging is denied); a bad one is deregistered with its snapshots (else tagged false and
//     named NOT DEREGISTERED) or tagged false; one nobody could judge is left untouched; no
//     copy of a failed run carries dlami:verified = true.
func TestFaultMatrix(t *testing.T) {
	awstest.IsolateEnv(t)
	fired := map[string]bool{}
	var mu sync.Mutex
	t.Run("cases", func(t *testing.T) {
		i := 0
		for _, op := range matrixOps {
			for _, fl := range matrixFaults {
				for _, v := range matrixVerdicts {
					nodes := matrixNodes[i%len(matrixNodes)]
					i++
					t.Run(fmt.Sprintf("%s/%s/%s/%d-nodes", op, fl.name, v.name, nodes), func(t *testing.T) {
						t.Parallel()
						if faultFired(t, op, fl.fault, fl.persistent, v, nodes) {
							mu.Lock()
							fired[op] = true
							mu.Unlock()
						}
					})
				}
			}
		}
	})
	for _, op := range matrixOps {
		if !fired[op] {
			t.Errorf("no case of the matrix ever called %s: its faults were never met", op)
		}
	}
}

// faultFired runs one case of the matrix and reports whether the faulted action was called.
func faultFired(t *testing.T, op string, fault awsfake.Fault, persistent bool, v matrixVerdict, nodes int) bool {
	const east, west = "ami-0000000000000f001", "ami-0000000000000f002"
	const eastSnap, westSnap = "snap-00000000000000f01", "snap-00000000000000f02"
	srv := awsfake.NewSeeded("us-east-1", "us-west-2")
	srv.SetTransitionPolls(0)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	f := fakeEC2{srv, hs.URL}
	f.own(t, "us-east-1", east, eastSnap)
	f.own(t, "us-west-2", west, westSnap)
	raw := map[string]interface{}{"region": "us-east-1", "instance_type": "p5.48xlarge", "report_dir": t.TempDir(),
		"on_failure": v.onFailure, "ssh_timeout": "30s"}
	if nodes > 1 {
		raw["nodes"] = nodes // in a temporary placement group of its own
	} else {
		raw["temporary_placement_group"] = true
	}
	if op == awsfake.OpDescribeSubnets {
		raw["subnet_id"] = srv.State("us-east-1", false).Regions["us-east-1"].Subnet.ID
	}
	p, err := configure(t, raw)
	if err != nil {
		t.Fatal(err)
	}
	p.ec2For = sdkClients(hs.URL)
	if op == awsfake.OpDeleteNetworkInterface || op == awsfake.OpDeleteVolume {
		clients := p.ec2For
		p.ec2For = func(ctx context.Context, region string) (launch.EC2API, error) {
			api, err := clients(ctx, region)
			if err != nil {
				return nil, err
			}
			if op == awsfake.OpDeleteVolume {
				return keptVolumes{api}, nil
			}
			return keptInterfaces{api}, nil
		}
	}
	p.poll, p.callTimeout, p.cleanupTimeout = matrixPoll, matrixCall, matrixCleanup
	judged := false
	p.checkBoot = func(context.Context, packersdk.Ui, *launch.Instance, target, string, func(string)) error {
		judged = true
		return v.check
	}
	if op == awsfake.OpDescribeSecurityGroups {
		// The lookup runs after a CreateSecurityGroup whose answer was lost.
		srv.SetFault(awsfake.OpCreateSecurityGroup, "", awsfake.Fault{LoseAnswer: 1})
	}
	srv.SetFault(op, "", fault)
	out := &syncBuffer{}
	ui := &packersdk.BasicUi{Reader: new(bytes.Buffer), Writer: out, ErrorWriter: out}
	_, keep, _, err := p.PostProcess(context.Background(), ui, ebsArtifact("us-east-1:"+east+",us-west-2:"+west))
	said := out.String()
	if !keep {
		t.Errorf("keep = false: the post-processor must never ask Packer to drop the input artifact")
	}
	if !persistent && !judged && op != awsfake.OpGetCallerIdentity {
		// The credential check (internal/awsaccess) gives its one call a single deadline, and
		// the SDK three attempts: a hung or 4×500 GetCallerIdentity ends the verification
		// before any launch. Everything else rides a transient fault out.
		t.Errorf("a transient fault on %s kept the first boot from being judged: %v", op, err)
	}

	// Leftovers: none after a transient fault; after a persistent one, each named with its
	// command.
	var left []string
	for _, region := range []string{"us-east-1", "us-west-2"} {
		rs := srv.State(region, false).Regions[region]
		for _, in := range rs.Instances {
			if in.State != "terminated" {
				left = append(left, fmt.Sprintf("aws ec2 terminate-instances --region %s --instance-ids %s", region, in.ID))
			}
		}
		for _, kp := range rs.KeyPairs {
			left = append(left, fmt.Sprintf("aws ec2 delete-key-pair --region %s --key-name %s", region, kp.Name))
		}
		for _, g := range rs.SecurityGroups {
			if g.Name != "default" {
				left = append(left, fmt.Sprintf("aws ec2 delete-security-group --region %s --group-id %s", region, g.ID))
			}
		}
		for _, ni := range rs.NetworkInterfaces {
			// An interface still attached goes with its instance (named STILL RUNNING above).
			if ni.Status == "available" {
				left = append(left, fmt.Sprintf("aws ec2 delete-network-interface --region %s --network-interface-id %s", region, ni.ID))
			}
		}
		for _, a := range rs.ElasticIPs {
			left = append(left, fmt.Sprintf("aws ec2 release-address --region %s --allocation-id %s", region, a.AllocationID))
		}
		for _, pg := range rs.PlacementGroups {
			left = append(left, fmt.Sprintf("aws ec2 delete-placement-group --region %s --group-name %s", region, pg.Name))
		}
		for _, vol := range rs.Volumes {
			// A volume still attached goes with its instance (named STILL RUNNING above).
			if vol.State == "available" {
				left = append(left, fmt.Sprintf("aws ec2 delete-volume --region %s --volume-id %s", region, vol.ID))
			}
		}
	}
	for _, cmd := range left {
		if !persistent {
			t.Errorf("left behind after a transient fault: %s", cmd)
		} else if !named(said, cmd) && !strings.Contains(said, unknownIDForm(cmd)) {
			t.Errorf("left behind and not named with its command %q:\n%s", cmd, said)
		}
	}

	// The AMI's fate.
	images := map[string]awsfake.Image{}
	registered := map[string]bool{}
	for region, id := range map[string]string{"us-east-1": east, "us-west-2": west} {
		img, ok := f.image(region, id)
		images[region], registered[region] = img, ok
	}
	snapshots := func(region, id string) bool {
		for _, sn := range srv.State(region, false).Regions[region].Snapshots {
			if sn.ID == id {
				return true
			}
		}
		return false
	}
	if err != nil {
		for region, img := range images {
			if img.Tags[amitags.Verified] == "true" {
				t.Errorf("%s: the run failed (%v) and left %s = true on %s", region, err, amitags.Verified, img.ID)
			}
		}
	}
	copies := map[string]string{"us-east-1": east, "us-west-2": west}
	snaps := map[string]string{"us-east-1": eastSnap, "us-west-2": westSnap}
	switch {
	case !judged:
		if err == nil || !strings.Contains(err.Error(), "could not be verified") {
			t.Errorf("unjudged (the check never ran): err %v", err)
		}
		for region := range copies {
			if !registered[region] || images[region].Tags[amitags.Verified] != "" {
				t.Errorf("%s: an AMI nobody judged was touched: registered %v, tags %v", region, registered[region], images[region].Tags)
			}
		}
	case v.check == nil:
		if err != nil {
			t.Errorf("verified: PostProcess failed, and Packer would deregister a healthy AMI: %v", err)
		}
		for region, id := range copies {
			tags := images[region].Tags
			switch {
			case !registered[region]:
				t.Errorf("%s: the verified AMI %s is gone", region, id)
			case tags[amitags.Verified] == "true":
			case op == awsfake.OpCreateTags && persistent:
				if !strings.Contains(said, "NOT TAGGED: "+id+" in "+region) || !strings.Contains(said, "aws ec2 create-tags --region "+region+" --resources "+id+" --tags Key=dlami:verified,Value=true") {
					t.Errorf("%s: %s untagged and not named with the create-tags command:\n%s", region, id, said)
				}
			default:
				t.Errorf("%s: the verified AMI %s is not tagged: %v\n%s", region, id, tags, said)
			}
		}
		if t2 := images["us-west-2"].Tags; t2[amitags.Verified] == "true" && t2[amitags.VerifiedIn] != "us-east-1/"+east {
			t.Errorf("the copy's tags %v", t2)
		}
	case v.check != nil && engine.Judged(v.check):
		if err == nil || !strings.Contains(err.Error(), "did not boot healthy") {
			t.Errorf("judged bad: err %v", err)
		}
		for region, id := range copies {
			tags := images[region].Tags
			switch v.onFailure {
			case OnFailureDeregister:
				if registered[region] {
					if tags[amitags.Verified] != "false" && !(op == awsfake.OpCreateTags && persistent) {
						t.Errorf("%s: the bad AMI %s is kept and not tagged %s = false: %v", region, id, amitags.Verified, tags)
					}
					if !strings.Contains(said, "NOT DEREGISTERED: "+id+" in "+region) || !strings.Contains(said, "aws ec2 deregister-image --region "+region+" --image-id "+id+" --delete-associated-snapshots") {
						t.Errorf("%s: the bad AMI %s is kept and not named with its command:\n%s", region, id, said)
					}
					if !persistent {
						t.Errorf("%s: a transient fault kept the bad AMI %s registered", region, id)
					}
				} else if snapshots(region, snaps[region]) && !strings.Contains(said, "aws ec2 delete-snapshot --region "+region+" --snapshot-id "+snaps[region]) {
					t.Errorf("%s: snapshot %s of the deregistered %s left and not named", region, snaps[region], id)
				}
			case OnFailureTag:
				if !registered[region] {
					t.Errorf("%s: on_failure = tag deregistered %s", region, id)
				}
				if tags[amitags.Verified] != "false" {
					if !(op == awsfake.OpCreateTags && persistent) {
						t.Errorf("%s: the bad AMI %s is not tagged %s = false: %v", region, id, amitags.Verified, tags)
					} else if !strings.Contains(said, "NOT TAGGED: "+id+" in "+region) {
						t.Errorf("%s: %s untagged and not named:\n%s", region, id, said)
					}
				}
			}
		}
	default:
		if err == nil || images["us-east-1"].Tags[amitags.Verified] != "" || images["us-west-2"].Tags[amitags.Verified] != "" ||
			!registered["us-east-1"] || !registered["us-west-2"] {
			t.Errorf("unjudged: err %v, registered %v, tags %v / %v: want a failure and both copies untouched", err, registered, images["us-east-1"].Tags, images["us-west-2"].Tags)
		}
	}
	if t.Failed() {
		t.Logf("PostProcess: %v\n%s", err, said)
	}
	return srv.CallCount(op, "") > 0
}

// named reports whether said names cmd: the command itself, or, for an instance, a
// terminate-instances command of its region that lists it among the launch's others.
func named(said, cmd string) bool {
	if strings.Contains(said, cmd) {
		return true
	}
	prefix, id, ok := strings.Cut(cmd, "--instance-ids ")
	if !ok {
		return false
	}
	for _, line := range strings.Split(said, "\n") {
		if _, rest, ok := strings.Cut(line, prefix+"--instance-ids "); ok && slices.Contains(strings.Fields(rest), id) {
			return true
		}
	}
	return false
}

// unknownIDForm is cmd's form for what the cleanup never learned the id of: the leak command
// finds it by its name and VPC (a group) or by the launch tag (volumes, Elastic IPs,
// interfaces) instead. The caller checks the id form first.
func unknownIDForm(cmd string) string {
	f := strings.Fields(cmd)
	region := f[4]
	switch f[2] {
	case "delete-security-group":
		return "aws ec2 delete-security-group --region " + region + " --group-id $(aws ec2 describe-security-groups"
	case "delete-volume":
		return "for v in $(aws ec2 describe-volumes --region " + region
	case "release-address":
		return "for a in $(aws ec2 describe-addresses --region " + region
	case "delete-network-interface":
		return "for eni in $(aws ec2 describe-network-interfaces --region " + region
	}
	return cmd
}

// An instance slow to terminate keeps neither the key pair (it waits for nothing and goes
// first) nor the verdict: the healthy AMI is kept and tagged, and what is left is named last,
// each with its command.
func TestSlowTerminationKeepsTheVerdictAndNotTheKeyPair(t *testing.T) {
	const ami = "ami-0000000000000f011"
	f, p := launchable(t, ami, "snap-00000000000000f11", map[string]interface{}{})
	p.poll, p.callTimeout, p.cleanupTimeout = matrixPoll, matrixCall, time.Second
	p.checkBoot = func(context.Context, packersdk.Ui, *launch.Instance, target, string, func(string)) error {
		// Terminations now take longer than the cleanup has.
		f.srv.SetTransitionPolls(1_000_000)
		return nil
	}
	out := &syncBuffer{}
	ui := &packersdk.BasicUi{Reader: new(bytes.Buffer), Writer: out, ErrorWriter: out}
	_, _, _, err := p.PostProcess(context.Background(), ui, ebsArtifact("us-east-1:"+ami))
	if err != nil {
		t.Fatalf("a slow termination failed a healthy AMI: %v", err)
	}
	rs := f.srv.State("us-east-1", false).Regions["us-east-1"]
	if len(rs.KeyPairs) != 0 {
		t.Errorf("key pairs left: %+v", rs.KeyPairs)
	}
	if img, _ := f.image("us-east-1", ami); img.Tags[amitags.Verified] != "true" {
		t.Errorf("tags %v: want %s = true", img.Tags, amitags.Verified)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	id := rs.Instances[0].ID
	if !strings.Contains(last, "STILL RUNNING: "+id) || !strings.Contains(last, "aws ec2 terminate-instances --region us-east-1 --instance-ids "+id) {
		t.Errorf("last line %q: want the instance and its command", last)
	}
	var group string
	for _, g := range rs.SecurityGroups {
		if g.Name != "default" {
			group = g.ID
		}
	}
	if group == "" || !strings.Contains(out.String(), "LEFT BEHIND: security group "+group+" in us-east-1") ||
		!strings.Contains(out.String(), "aws ec2 delete-security-group --region us-east-1 --group-id "+group) {
		t.Errorf("the group %q left is not named with its command:\n%s", group, out.String())
	}
}

// A run that fails never leaves dlami:verified = true on a copy Packer is about to deregister:
// with two copies launched, the first healthy and the second not judged, neither is tagged.
func TestAFailedRunTagsNoCopyVerified(t *testing.T) {
	const east, west = "ami-0000000000000f021", "ami-0000000000000f022"
	f := newFakeEC2(t, "us-east-1", "us-west-2")
	f.own(t, "us-east-1", east, "snap-00000000000000f21")
	f.own(t, "us-west-2", west, "snap-00000000000000f22")
	p, err := configure(t, map[string]interface{}{"regions": []string{"us-east-1", "us-west-2"}, "instance_type": "p5.48xlarge",
		"skip_credential_validation": true, "report_dir": t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p.ec2For, p.poll = f.client, matrixPoll
	p.checkBoot = func(_ context.Context, _ packersdk.Ui, _ *launch.Instance, tg target, _ string, _ func(string)) error {
		if tg.region == "us-west-2" {
			return errors.New("SSH did not answer")
		}
		return nil
	}
	_, _, _, err = p.PostProcess(context.Background(), packersdk.TestUi(t), ebsArtifact("us-east-1:"+east+",us-west-2:"+west))
	if err == nil || !strings.Contains(err.Error(), "could not be verified") {
		t.Fatalf("err %v", err)
	}
	for region, id := range map[string]string{"us-east-1": east, "us-west-2": west} {
		if img, ok := f.image(region, id); !ok || img.Tags[amitags.Verified] != "" {
			t.Errorf("%s: registered %v, tags %v: a failed run must tag no copy", region, ok, img.Tags)
		}
	}
}

// A copy judged bad gets its on_failure even when the run is cancelled while a later copy is
// verified; the copy whose verification the cancellation cut short is left alone.
func TestOnFailureSurvivesALaterCancellation(t *testing.T) {
	const east, west = "ami-0000000000000f031", "ami-0000000000000f032"
	f := newFakeEC2(t, "us-east-1", "us-west-2")
	f.own(t, "us-east-1", east, "snap-00000000000000f31")
	f.own(t, "us-west-2", west, "snap-00000000000000f32")
	p, err := configure(t, map[string]interface{}{"regions": []string{"us-east-1", "us-west-2"}, "instance_type": "p5.48xlarge",
		"skip_credential_validation": true, "report_dir": t.TempDir(), "on_failure": "tag"})
	if err != nil {
		t.Fatal(err)
	}
	p.ec2For, p.poll = f.client, matrixPoll
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.checkBoot = func(ctx context.Context, _ packersdk.Ui, _ *launch.Instance, tg target, _ string, _ func(string)) error {
		if tg.region == "us-east-1" {
			return &engine.DriftError{Stage: "first boot", Failed: []string{"first-boot-kernel"}}
		}
		cancel()
		return ctx.Err()
	}
	_, _, _, err = p.PostProcess(ctx, packersdk.TestUi(t), ebsArtifact("us-east-1:"+east+",us-west-2:"+west))
	if err == nil || !strings.Contains(err.Error(), "did not boot healthy") || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("err %v: want the failed copy and the cancellation", err)
	}
	for region, id := range map[string]string{"us-east-1": east, "us-west-2": west} {
		// on_failure applies to every copy of the artifact, as it always has.
		if img, ok := f.image(region, id); !ok || img.Tags[amitags.Verified] != "false" {
			t.Errorf("%s: registered %v, tags %v: want %s = false", region, ok, img.Tags, amitags.Verified)
		}
	}
	for _, region := range []string{"us-east-1", "us-west-2"} {
		for _, in := range f.srv.State(region, false).Regions[region].Instances {
			if in.State != "terminated" {
				t.Errorf("%s: instance %s %s", region, in.ID, in.State)
			}
		}
	}
}

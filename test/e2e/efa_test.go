package e2e

// Issue 25, EFA where AWS can give it: the real Packer and amazon-ebs bake on p6-b200.48xlarge
// (one plain interface: no EFA device, the bake's EFA checks warn), and the dlami
// post-processor's verifications attach EFA in the EC2 User Guide's layout, against the fake EC2
// whose simulated hosts show exactly the EFA devices their launch attached and carry EFA traffic
// only while their security group allows all traffic to and from itself. One bake, one
// post-processor sequence per scenario (ebs/efa.pkr.hcl): the bake is the slow part.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// bastionAddr is where the bastion host listens: far from the fake's instances (127.0.0.2 up).
const bastionAddr = "127.0.0.250"

// ec2Client is an SDK client of the fake, for what a person would do beside Packer (make a
// security group, revoke a rule).
func (f *fakeAWS) ec2Client() *ec2.Client {
	return ec2.NewFromConfig(aws.Config{Region: ebsRegion, BaseEndpoint: aws.String(f.endpoint),
		Credentials: credentials.NewStaticCredentialsProvider(fakeAccessKeyID, fakeSecretAccessKey, "")})
}

// bootBastion boots a simulated host on bastionAddr:22 running real sshd, logging at DEBUG1
// so that its log shows every TCP forward it opens, and returns its state directory (env,
// sshd.log). It is torn down when the test ends.
func bootBastion(t *testing.T, e ebsEnv) (state, key string) {
	t.Helper()
	state = t.TempDir()
	prepare := filepath.Join(t.TempDir(), "prepare")
	if err := os.WriteFile(prepare, []byte("#!/bin/sh\nset -e\nmkdir -p /etc/ssh/sshd_config.d\nprintf 'LogLevel DEBUG1\\nAllowTcpForwarding yes\\n' >/etc/ssh/sshd_config.d/50-bastion.conf\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	boot := exec.Command(filepath.Join(e.repo, "test", "simhost", "boot"), state, "", prepare)
	boot.Env = append(os.Environ(), "DLAMI_SIM_ADDR="+bastionAddr, "DLAMI_SIM_PORT=22")
	if out, err := boot.CombinedOutput(); err != nil {
		t.Fatalf("booting the bastion: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(filepath.Join(e.repo, "test", "simhost", "teardown"), state).CombinedOutput(); err != nil {
			t.Errorf("tearing the bastion down: %v\n%s", err, out)
		}
	})
	b, err := os.ReadFile(filepath.Join(state, "env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && k == "ssh_private_key_file" {
			key = v
		}
	}
	if key == "" {
		t.Fatalf("the bastion's env has no ssh_private_key_file:\n%s", b)
	}
	return state, key
}

// scenarioInstance is the verification instance of one sequence of ebs/efa.pkr.hcl.
func scenarioInstance(s awsfake.StateDump, scenario string) (awsfake.Instance, bool) {
	for _, in := range s.Regions[ebsRegion].Instances {
		if in.Tags["dlami:scenario"] == scenario {
			return in, true
		}
	}
	return awsfake.Instance{}, false
}

func TestEFALaunch(t *testing.T) {
	e := ebsPrereqs(t)
	ebsDir, err := filepath.Abs("ebs")
	if err != nil {
		t.Fatal(err)
	}
	fake := e.startFake(t, "efa-fake", true)
	bastion, bastionKey := bootBastion(t, e)
	api := fake.ec2Client()
	ctx := context.Background()

	// The user's group for the user-group scenario: all traffic in from itself, but out only to
	// 0.0.0.0/0 (EC2's default outbound rule), which does not carry EFA.
	vpc := fake.state(t).Regions[ebsRegion].Vpc.ID
	mk, err := api.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("team-efa"), Description: aws.String("EFA, no outbound rule to itself"), VpcId: aws.String(vpc)})
	if err != nil {
		t.Fatal(err)
	}
	userGroup := aws.ToString(mk.GroupId)
	self := []types.IpPermission{{IpProtocol: aws.String("-1"), UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: mk.GroupId}}}}
	if _, err := api.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: mk.GroupId, IpPermissions: self}); err != nil {
		t.Fatal(err)
	}

	// The fault: once the revoked scenario's instance runs, its temporary group loses its
	// inbound rule from itself, as a person tidying rules would do; the verification is then
	// still settling, before its EFA traffic test.
	var revokedGroup string
	var revokeErr error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			in, ok := scenarioInstance(fake.state(t), "revoked")
			if !ok || in.State != "running" || len(in.SecurityGroupIDs) != 1 {
				continue
			}
			revokedGroup = in.SecurityGroupIDs[0]
			_, revokeErr = api.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(revokedGroup),
				IpPermissions: []types.IpPermission{{IpProtocol: aws.String("-1"), UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String(revokedGroup)}}}}})
			return
		}
	}()

	out := outDir(t, "efa")
	r := e.build(t, ebsDir, out, fake.packerEnv(e), nil,
		"-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "-var", "user_group="+userGroup,
		"-var", "bastion_host="+bastionAddr, "-var", "bastion_key="+bastionKey, "efa.pkr.hcl")
	close(stop)
	wg.Wait()
	t.Logf("EFA bake and four verifications: %s", r.took.Round(time.Second))
	for name, d := range sequenceDurations(r.log) {
		t.Logf("  %s", name+": "+d.Round(100*time.Millisecond).String())
	}
	// Two scenarios fail by design (user-group, revoked): the build fails, naming both.
	if r.code == 0 {
		t.Errorf("the build passed although two verifications must fail:\n%s", tail(filepath.Join(out, "packer.out"), 40))
	}
	s := fake.state(t)
	assertCleanedUp(t, s, ebsRegion)
	assertNoInstanceState(t, fake)

	t.Run("bake-warns-efa-not-attached", func(t *testing.T) {
		bake := readPhaseReport(t, out)
		if bake.Result != "pass" {
			t.Errorf("bake: %s, failed %v", bake.Result, bake.FailedChecks)
		}
		assertEFANotAttached(t, bake)
	})

	t.Run("p5-all-32-efa", func(t *testing.T) {
		rep := readPhaseReport(t, filepath.Join(out, "p5", ebsRegion))
		if rep.Result != "pass" {
			t.Errorf("p5 verification: %s, failed %v", rep.Result, rep.FailedChecks)
		}
		for _, id := range []string{"efa-devices", "efa-traffic", "gpudirect-rdma", "nccl-transport"} {
			if st, msg := rep.check(id); st != "pass" {
				t.Errorf("%s = %s %q, want pass on the 32 attached devices", id, st, msg)
			}
		}
		l := rep.Launch
		want := []string{"0/0 interface", "0/1 efa-only"}
		for c := 1; c < 32; c++ {
			want = append(want, strconv.Itoa(c)+"/0 efa-only")
		}
		if l == nil || l.EFA != 32 || !slices.Equal(l.NetworkInterfaces, want) || l.PlacementGroup == "" || l.ElasticIP == "" {
			t.Errorf("launch %+v: want the P5 layout's 33 interfaces (32 EFA) in a temporary placement group, reached by an Elastic IP", l)
		}
		in, ok := scenarioInstance(s, "p5")
		if !ok || in.InstanceType != "p5.48xlarge" || len(in.EFACards) != 32 || len(in.NetworkInterfaces) != 33 || in.PlacementGroup != l.PlacementGroup {
			t.Errorf("the p5 instance %s: %d EFA cards, %d interfaces, placement group %q", in.InstanceType, len(in.EFACards), len(in.NetworkInterfaces), in.PlacementGroup)
		}
		if ok, failed := fake.calls(t, ebsRegion, "RunInstances"); ok < 1 || failed != 0 {
			t.Errorf("RunInstances answered %d OK, %d errors", ok, failed)
		}
	})

	t.Run("user-group-without-self-rule", func(t *testing.T) {
		for _, want := range []string{"security_group_ids " + userGroup + ": the EFA interfaces' traffic needs an outbound rule allowing all traffic (protocol -1, all ports) to the group itself",
			"aws ec2 authorize-security-group-egress --group-id " + userGroup} {
			if !strings.Contains(r.ui, want) {
				t.Errorf("Packer's output lacks %q:\n%s", want, grepLines(r.ui, "security_group_ids"))
			}
		}
		if _, ok := scenarioInstance(s, "user-group"); ok {
			t.Error("an instance was launched with the refused group")
		}
		for _, kp := range s.Regions[ebsRegion].KeyPairs {
			t.Errorf("key pair %s left", kp.Name)
		}
	})

	t.Run("bastion", func(t *testing.T) {
		rep := readPhaseReport(t, filepath.Join(out, "bastion", ebsRegion))
		if rep.Result != "pass" {
			t.Errorf("bastion verification: %s, failed %v", rep.Result, rep.FailedChecks)
		}
		for _, id := range []string{"efa-devices", "efa-traffic", "gpudirect-rdma"} {
			if st, msg := rep.check(id); st != "pass" {
				t.Errorf("%s = %s %q, want pass on the 8 attached devices", id, st, msg)
			}
		}
		in, ok := scenarioInstance(s, "bastion")
		if !ok || len(in.EFACards) != 8 || in.PublicIP != "" || rep.Launch == nil || rep.Launch.ElasticIP != "" {
			t.Fatalf("the bastion scenario's instance %+v: want 8 EFA, no public address, no Elastic IP", in)
		}
		private := ""
		for _, ni := range in.NetworkInterfaces {
			if ni.NetworkCardIndex == 0 && ni.DeviceIndex == 0 {
				private = ni.PrivateIP
			}
		}
		// The bastion's real sshd opened the forward to the instance's private address.
		log, err := os.ReadFile(filepath.Join(bastion, "sshd.log"))
		if err != nil {
			t.Fatal(err)
		}
		forward := regexp.MustCompile(`direct-tcpip.*` + regexp.QuoteMeta(private) + `.*port 22|` + regexp.QuoteMeta(private) + ` port 22`)
		if private == "" || !forward.Match(log) || !strings.Contains(string(log), "Accepted publickey for ubuntu") {
			t.Errorf("the bastion's sshd log shows no login and forward to %s:22:\n%s", private, grepLines(string(log), "direct-tcpip"))
		}
		if !strings.Contains(r.ui, private+":22 through the bastion "+bastionAddr+":22") {
			t.Errorf("Packer's output does not say the instance was reached through the bastion:\n%s", grepLines(r.ui, "waiting for SSH"))
		}
	})

	t.Run("self-rule-revoked-mid-verification", func(t *testing.T) {
		if revokeErr != nil || revokedGroup == "" {
			t.Fatalf("the rule was not revoked (group %q): %v", revokedGroup, revokeErr)
		}
		rep := readPhaseReport(t, filepath.Join(out, "revoked", ebsRegion))
		st, msg := rep.check("efa-traffic")
		if st != "fail" || !strings.Contains(msg, revokedGroup) || !strings.Contains(msg, "hung and was stopped") {
			t.Errorf("efa-traffic = %s %q: want a failure naming %s", st, msg, revokedGroup)
		}
		if st, _ := rep.check("efa-devices"); st != "pass" {
			t.Errorf("efa-devices = %s: the devices are there, their traffic is not", st)
		}
		if st, _ := rep.check("gpudirect-rdma"); st == "pass" {
			t.Error("gpudirect-rdma passed with nccl = false")
		}
		if in, ok := scenarioInstance(s, "revoked"); !ok || in.EFATraffic {
			t.Errorf("the fake still carries EFA traffic for the revoked instance (%v)", ok)
		}
		if !strings.Contains(r.ui, "did not boot healthy") || !strings.Contains(r.ui, "efa-traffic") {
			t.Errorf("the build's error does not name efa-traffic:\n%s", tail(filepath.Join(out, "packer.out"), 20))
		}
	})
}

// assertEFANotAttached: a bake inside amazon-ebs on an EFA type has no EFA device; the device
// checks warn, naming where they are proven, and nothing passes for a device that was never
// there.
func assertEFANotAttached(t *testing.T, bake phaseReport) {
	t.Helper()
	for _, id := range []string{"efa-devices", "efa-traffic", "gpudirect-rdma"} {
		st, msg := bake.check(id)
		if st != "warn" || !strings.Contains(msg, "not judged here") || !strings.Contains(msg, "post-processor") {
			t.Errorf("bake %s = %s %q: want a warning that EFA was not attached at launch, naming the post-processor", id, st, msg)
		}
	}
	if st, msg := bake.check("nccl-transport"); st == "pass" || !strings.Contains(msg, "EFA rule is not judged here") {
		t.Errorf("bake nccl-transport = %s %q: NCCL over sockets must not pass as if EFA had been proven", st, msg)
	}
	for _, id := range []string{"efa-driver", "efa-installer"} {
		if st, _ := bake.check(id); st != "pass" {
			t.Errorf("bake %s = %s: the EFA software is still judged", id, st)
		}
	}
}

// sequenceDurations is how long each verification of one Packer run took, from PACKER_LOG's
// timestamps: from one "verifying the first boot" line to the next, the last to the end.
func sequenceDurations(log string) map[string]time.Duration {
	stamp := func(line string) (time.Time, bool) {
		if len(line) < 19 {
			return time.Time{}, false
		}
		ts, err := time.Parse("2006/01/02 15:04:05", line[:19])
		return ts, err == nil
	}
	var starts []time.Time
	var names []string
	var last time.Time
	for _, line := range strings.Split(log, "\n") {
		ts, ok := stamp(line)
		if !ok {
			continue
		}
		last = ts
		if i := strings.Index(line, "dlami: verifying the first boot of"); i >= 0 {
			starts = append(starts, ts)
			names = append(names, "verification "+strconv.Itoa(len(starts)))
		}
	}
	out := map[string]time.Duration{}
	for i, s := range starts {
		end := last
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		out[names[i]] = end.Sub(s)
	}
	return out
}

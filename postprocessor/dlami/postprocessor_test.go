package dlami

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/amitags"
	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

type artifact struct{ builder, id string }

func (a artifact) BuilderId() string           { return a.builder }
func (a artifact) Files() []string             { return nil }
func (a artifact) Id() string                  { return a.id }
func (a artifact) String() string              { return a.id }
func (a artifact) State(string) interface{}    { return nil }
func (a artifact) Destroy() error              { return nil }
func ebsArtifact(id string) packersdk.Artifact { return artifact{AmazonEBSBuilderID, id} }

func configure(t *testing.T, raw map[string]interface{}) (*PostProcessor, error) {
	t.Helper()
	p := &PostProcessor{}
	return p, p.Configure(raw)
}

func TestConfigureErrorsNameTheSetting(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  map[string]interface{}
		want string
	}{
		{"on_failure", map[string]interface{}{"on_failure": "delete"}, `on_failure "delete": use keep, tag or deregister`},
		{"ssh_interface", map[string]interface{}{"ssh_interface": "eth0"}, `ssh_interface "eth0"`},
		{"capacity preference", map[string]interface{}{"capacity_reservation_preference": "always"}, `capacity_reservation_preference "always"`},
		{"two reservations", map[string]interface{}{"capacity_reservation_id": "cr-1", "capacity_reservation_group_arn": "arn:aws:resource-groups:us-east-1:1:group/x"}, "set one"},
		{"preference and reservation", map[string]interface{}{"capacity_reservation_preference": "open", "capacity_reservation_id": "cr-1"}, `capacity_reservation_preference = "open" and capacity_reservation_id: EC2 refuses`},
		{"preference and group", map[string]interface{}{"capacity_reservation_preference": "capacity-reservations-only", "capacity_reservation_group_arn": "arn:aws:resource-groups:us-east-1:1:group/x"}, `capacity_reservation_preference = "capacity-reservations-only" and capacity_reservation_group_arn`},
		{"region", map[string]interface{}{"region": "us-east-1 "}, "region"},
		{"regions", map[string]interface{}{"regions": []string{"us-east-1", "mars-1"}}, "regions[1]"},
		{"timeout", map[string]interface{}{"ssh_timeout": "10ms"}, "ssh_timeout must be at least 1s"},
		{"expect", map[string]interface{}{"expect": map[string]interface{}{"gpu_count": -2}}, "expect.gpu_count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := configure(t, tc.raw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
	p, err := configure(t, map[string]interface{}{"packer_build_name": "golden"})
	if err != nil {
		t.Fatal(err)
	}
	c := p.config
	if c.OnFailure != OnFailureTag || c.SSHUsername != "ubuntu" || c.ReportDir != filepath.Join("dlami-verify", "golden") ||
		c.BOMFile != filepath.Join("dlami-reports", "golden", BOMFileName) || c.NCCL != nil || c.EFA != "all" || c.SSHTimeout != 30*time.Minute || c.CheckTimeout != time.Minute {
		t.Errorf("defaults %+v", c)
	}
}

func TestArtifactAndTargets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a       packersdk.Artifact
		cfg     Config
		want    string // "region=ami ..." of the targets
		wantErr string
	}{
		{"one region", ebsArtifact("us-east-1:ami-0a"), Config{}, "us-east-1=ami-0a", ""},
		{"region picks the build's copy", ebsArtifact("us-east-1:ami-0a,us-west-2:ami-0b"), Config{Region: "us-west-2"}, "us-west-2=ami-0b", ""},
		{"regions", ebsArtifact("us-east-1:ami-0a,us-west-2:ami-0b"), Config{Regions: []string{"us-east-1", "us-west-2"}}, "us-east-1=ami-0a us-west-2=ami-0b", ""},
		{"several without region", ebsArtifact("us-east-1:ami-0a,us-west-2:ami-0b"), Config{}, "", "the AMI exists in us-east-1, us-west-2: set region"},
		{"missing copy", ebsArtifact("us-east-1:ami-0a"), Config{Regions: []string{"eu-west-1"}}, "", "no copy in eu-west-1"},
		{"not amazon-ebs", artifact{"packer.post-processor.manifest", "x"}, Config{}, "", `not amazon-ebs`},
		{"not AMIs", ebsArtifact("us-east-1:snap-0a"), Config{}, "", "not a list of region:ami-id pairs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all, err := amis(tc.a)
			var ts []target
			if err == nil {
				ts, err = tc.cfg.targets(all)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range ts {
				got = append(got, x.region+"="+x.ami)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("targets %v, want %s", got, tc.want)
			}
		})
	}
}

func TestInstanceTypeFromTheBOM(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	encode := func(b bom.BOM) string {
		data, err := b.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	baked := bom.BOM{BuildName: "golden", InstanceType: "p5.48xlarge", Kernel: "7.0.0-1014-aws", NextBootKernel: "7.0.0-1014-aws",
		Guarded: map[string]bom.Package{"linux-image-7.0.0-1014-aws": {Version: "7.0.0-1014.14", Held: true}}}
	good := write("good.json", encode(baked))
	baked.InstanceType = ""
	noType := write("notype.json", encode(baked))
	for _, tc := range []struct {
		name, setting, bom, want, wantErr string
	}{
		{"setting wins", "g5.xlarge", good, "g5.xlarge", ""},
		{"from the bill of materials", "", good, "p5.48xlarge", ""},
		{"no file", "", filepath.Join(dir, "missing.json"), "", "instance_type is not set and the bill of materials to read it from is unreadable"},
		{"not JSON", "", write("bad.json", "{"), "", "bom_file"},
		{"no type recorded", "", noType, "", "records no instance type: set instance_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{InstanceType: tc.setting, BOMFile: tc.bom}
			got, err := c.instanceType()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("instance type %q %v, want %q", got, err, tc.want)
			}
		})
	}
}

// Bad input ends PostProcess before anything is launched, with the artifact kept.
func TestPostProcessRefusesBadInputBeforeLaunching(t *testing.T) {
	p, err := configure(t, map[string]interface{}{"bom_file": filepath.Join(t.TempDir(), "none.json")})
	if err != nil {
		t.Fatal(err)
	}
	launched := false
	p.ec2For = func(context.Context, string) (launch.EC2API, error) { launched = true; return nil, nil }
	ui := packersdk.TestUi(t)
	for _, a := range []packersdk.Artifact{artifact{"mitchellh.amazon.instance", "us-east-1:ami-0a"}, ebsArtifact("us-east-1:ami-0a")} {
		out, keep, forceOverride, err := p.PostProcess(context.Background(), ui, a)
		if err == nil || out != a || !keep || forceOverride {
			t.Errorf("PostProcess(%s) = %v, %v, %v, %v", a.BuilderId(), out, keep, forceOverride, err)
		}
	}
	if launched {
		t.Error("an EC2 client was made for bad input")
	}
}

type fakeEC2 struct {
	srv *awsfake.Server
	url string
}

func newFakeEC2(t *testing.T, regions ...string) fakeEC2 {
	srv := awsfake.NewSeeded(regions...)
	srv.SetTransitionPolls(0)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return fakeEC2{srv, hs.URL}
}

func (f fakeEC2) client(_ context.Context, region string) (launch.EC2API, error) {
	return ec2.NewFromConfig(aws.Config{Region: region, BaseEndpoint: aws.String(f.url), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKEPPTEST000000", "secret", "")}), nil
}

// own registers an image of the account, with a snapshot, as a bake leaves it.
func (f fakeEC2) own(t *testing.T, region, id, snapshot string) {
	t.Helper()
	account := f.srv.State(region, false).Account
	f.srv.PutSnapshot(region, awsfake.Snapshot{ID: snapshot, State: "completed", OwnerID: account, VolumeSize: 200})
	f.srv.PutImage(region, awsfake.Image{ID: id, Name: "golden-" + region, OwnerID: account, Architecture: "x86_64",
		RootDeviceName: "/dev/sda1", BlockDevices: []awsfake.BlockDevice{{DeviceName: "/dev/sda1", SnapshotID: snapshot, VolumeSize: 200}}})
}

func (f fakeEC2) image(region, id string) (awsfake.Image, bool) {
	for _, img := range f.srv.State(region, false).Regions[region].Images {
		if img.ID == id {
			return img, true
		}
	}
	return awsfake.Image{}, false
}

// on_failure acts on every copy of the artifact, not only the verified one.
func TestOnFailure(t *testing.T) {
	all := map[string]string{"us-east-1": "ami-0000000000000e001", "us-west-2": "ami-0000000000000e002"}
	for _, mode := range []string{OnFailureKeep, OnFailureTag, OnFailureDeregister} {
		t.Run(mode, func(t *testing.T) {
			f := newFakeEC2(t, "us-east-1", "us-west-2")
			f.own(t, "us-east-1", all["us-east-1"], "snap-00000000000000e01")
			f.own(t, "us-west-2", all["us-west-2"], "snap-00000000000000e02")
			p := &PostProcessor{config: Config{OnFailure: mode}}
			if err := p.onFailure(context.Background(), packersdk.TestUi(t), f.client, &run{}, all); err != nil {
				t.Fatal(err)
			}
			for region, id := range all {
				img, ok := f.image(region, id)
				switch mode {
				case OnFailureKeep:
					if !ok || img.Tags[amitags.Verified] != "" {
						t.Errorf("%s: keep changed the image: %v %+v", region, ok, img.Tags)
					}
				case OnFailureTag:
					if !ok || img.Tags[amitags.Verified] != "false" || img.Tags[amitags.VerifiedAt] == "" {
						t.Errorf("%s: tags %+v, want %s = false with the time", region, img.Tags, amitags.Verified)
					}
				case OnFailureDeregister:
					if ok {
						t.Errorf("%s: %s still registered", region, id)
					}
					if sn := f.srv.State(region, false).Regions[region].Snapshots; len(sn) != 0 {
						t.Errorf("%s: snapshots left after deregistering: %+v", region, sn)
					}
				}
			}
		})
	}
}

// launchable returns a post-processor configured with raw (plus the instance type, no
// credential check and a temporary report_dir) against a fake holding ami, an image of the
// account with its snapshot snap in us-east-1, as a bake leaves it.
func launchable(t *testing.T, ami, snap string, raw map[string]interface{}) (fakeEC2, *PostProcessor) {
	t.Helper()
	f := newFakeEC2(t, "us-east-1")
	f.own(t, "us-east-1", ami, snap)
	raw["instance_type"], raw["skip_credential_validation"], raw["report_dir"] = "p5.48xlarge", true, t.TempDir()
	p, err := configure(t, raw)
	if err != nil {
		t.Fatal(err)
	}
	p.ec2For = f.client
	return f, p
}

// When the first boot cannot be judged (here: nothing answers SSH), the build fails saying so,
// on_failure is not applied, and the instance and temporaries are still removed.
func TestUnverifiableFirstBootLeavesTheAMIAlone(t *testing.T) {
	const ami = "ami-0000000000000e003"
	f, p := launchable(t, ami, "snap-00000000000000e03", map[string]interface{}{"on_failure": "deregister", "ssh_timeout": "1s"})
	_, _, _, err := p.PostProcess(context.Background(), packersdk.TestUi(t), ebsArtifact("us-east-1:"+ami))
	if err == nil || !strings.Contains(err.Error(), "could not be verified (on_failure was not applied)") || strings.Contains(err.Error(), "did not boot healthy") {
		t.Fatalf("err %v", err)
	}
	if img, ok := f.image("us-east-1", ami); !ok || img.Tags[amitags.Verified] != "" {
		t.Errorf("the unverified AMI was touched: registered %v, tags %v", ok, img.Tags)
	}
	rs := f.srv.State("us-east-1", false).Regions["us-east-1"]
	for _, in := range rs.Instances {
		if in.State != "terminated" {
			t.Errorf("instance %s left %s", in.ID, in.State)
		}
	}
	if len(rs.Instances) != 1 || len(rs.KeyPairs) != 0 {
		t.Errorf("instances %d (want the one launch), key pairs left %v", len(rs.Instances), rs.KeyPairs)
	}
}

// A run makes one client per region (credentials checked once), and tries again after an error.
func TestPerRegionClients(t *testing.T) {
	calls := map[string]int{}
	fail := true
	f := perRegion(func(_ context.Context, region string) (launch.EC2API, error) {
		calls[region]++
		if region == "eu-west-1" && fail {
			fail = false
			return nil, errors.New("throttled")
		}
		return &ec2.Client{}, nil
	})
	ctx := context.Background()
	for _, r := range []string{"us-east-1", "us-east-1", "eu-west-1", "eu-west-1", "eu-west-1"} {
		_, _ = f(ctx, r)
	}
	if calls["us-east-1"] != 1 || calls["eu-west-1"] != 2 {
		t.Errorf("clients made %v: want 1 for us-east-1, 2 for eu-west-1 (one failed)", calls)
	}
}

// A target alone, or a preference alone, is what EC2 accepts.
func TestCapacitySettingsEC2Accepts(t *testing.T) {
	for _, raw := range []map[string]interface{}{
		{"capacity_reservation_id": "cr-1"},
		{"capacity_reservation_group_arn": "arn:aws:resource-groups:us-east-1:1:group/x"},
		{"capacity_reservation_preference": "none"},
	} {
		if _, err := configure(t, raw); err != nil {
			t.Errorf("%v refused: %v", raw, err)
		}
	}
}

// When the cleanup cannot terminate the instance, the last lines printed name it, its region
// and the command that terminates it, and the build fails saying so.
func TestStillRunningIsTheLastWord(t *testing.T) {
	const ami = "ami-0000000000000e004"
	f, p := launchable(t, ami, "snap-00000000000000e04", map[string]interface{}{"ssh_timeout": "1s"})
	p.poll, p.cleanupTimeout = 10*time.Millisecond, 300*time.Millisecond
	f.srv.SetFault("TerminateInstances", "us-east-1", awsfake.Fault{AccessDenied: true})
	var out bytes.Buffer
	ui := &packersdk.BasicUi{Reader: new(bytes.Buffer), Writer: &out, ErrorWriter: &out}
	_, _, _, err := p.PostProcess(context.Background(), ui, ebsArtifact("us-east-1:"+ami))
	if err == nil || !strings.Contains(err.Error(), "cleaning up the verification instances failed") {
		t.Fatalf("err %v", err)
	}
	rs := f.srv.State("us-east-1", false).Regions["us-east-1"]
	if len(rs.Instances) != 1 || rs.Instances[0].State != "running" {
		t.Fatalf("instances %+v: want the one the fault kept running", rs.Instances)
	}
	id := rs.Instances[0].ID
	if rs.Instances[0].Tags["dlami:run"] == "" {
		t.Errorf("instance tags %v: want the run named", rs.Instances[0].Tags)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "STILL RUNNING: "+id+" in us-east-1") ||
		!strings.Contains(last, "aws ec2 terminate-instances --region us-east-1 --instance-ids "+id) {
		t.Errorf("last line %q: want STILL RUNNING with the terminate command\n%s", last, out.String())
	}
}

// Ctrl-C while waiting for SSH still terminates the instance and deletes the temporaries.
func TestCancelledRunStillCleansUp(t *testing.T) {
	const ami = "ami-0000000000000e005"
	f, p := launchable(t, ami, "snap-00000000000000e05", map[string]interface{}{"ssh_timeout": "1m"})
	p.poll = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	f.srv.Observe(func(c awsfake.Call) {
		if c.Op == "RunInstances" {
			time.AfterFunc(200*time.Millisecond, cancel)
		}
	})
	_, _, _, err := p.PostProcess(ctx, packersdk.TestUi(t), ebsArtifact("us-east-1:"+ami))
	if err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("err %v", err)
	}
	rs := f.srv.State("us-east-1", false).Regions["us-east-1"]
	if len(rs.Instances) != 1 || rs.Instances[0].State != "terminated" || len(rs.KeyPairs) != 0 {
		t.Errorf("after Ctrl-C: instances %+v, key pairs %+v", rs.Instances, rs.KeyPairs)
	}
}

// An artifact with an ami_regions copy: only region's copy is launched, and when it boots
// healthy the copy is tagged dlami:verified = true too, naming the copy that was verified; a
// first boot that could not be judged leaves the copy as untagged as the verified one.
func TestAMIRegionsCopiesCarryTheVerification(t *testing.T) {
	const east, west = "ami-0000000000000e011", "ami-0000000000000e012"
	for _, tc := range []struct {
		name  string
		check error
	}{{"healthy", nil}, {"unjudged", errors.New("SSH did not answer")}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEC2(t, "us-east-1", "us-west-2")
			f.own(t, "us-east-1", east, "snap-00000000000000e11")
			f.own(t, "us-west-2", west, "snap-00000000000000e12")
			p, err := configure(t, map[string]interface{}{"region": "us-east-1", "instance_type": "p5.48xlarge",
				"skip_credential_validation": true, "report_dir": t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			p.ec2For = f.client
			var checked []string
			p.checkBoot = func(_ context.Context, _ packersdk.Ui, in *launch.Instance, tg target, _ string, _ func(string)) error {
				checked = append(checked, tg.region+"/"+tg.ami)
				return tc.check
			}
			_, keep, _, err := p.PostProcess(context.Background(), packersdk.TestUi(t), ebsArtifact("us-east-1:"+east+",us-west-2:"+west))
			if strings.Join(checked, " ") != "us-east-1/"+east {
				t.Errorf("launched and checked %v, want only us-east-1/%s", checked, east)
			}
			if len(f.srv.State("us-west-2", false).Regions["us-west-2"].Instances) != 0 {
				t.Error("an instance was launched in us-west-2: only region's copy is launched")
			}
			eastImg, _ := f.image("us-east-1", east)
			westImg, _ := f.image("us-west-2", west)
			if tc.check != nil {
				if err == nil || eastImg.Tags[amitags.Verified] != "" || westImg.Tags[amitags.Verified] != "" {
					t.Errorf("unjudged: err %v, tags %v / %v: want a failure and neither copy tagged", err, eastImg.Tags, westImg.Tags)
				}
				return
			}
			if err != nil || !keep {
				t.Fatalf("PostProcess: keep %v, err %v", keep, err)
			}
			if eastImg.Tags[amitags.Verified] != "true" {
				t.Errorf("verified copy tags %v", eastImg.Tags)
			}
			if westImg.Tags[amitags.Verified] != "true" || westImg.Tags[amitags.VerifiedIn] != "us-east-1/"+east ||
				westImg.Tags[amitags.VerifiedAt] == "" || westImg.Tags[amitags.VerifiedBy] == "" {
				t.Errorf("ami_regions copy tags %v: want %s = true and %s = us-east-1/%s", westImg.Tags, amitags.Verified, amitags.VerifiedIn, east)
			}
			if _, ok := eastImg.Tags[amitags.VerifiedIn]; ok {
				t.Errorf("the launched copy names another copy in %s: %v", amitags.VerifiedIn, eastImg.Tags)
			}
		})
	}
}

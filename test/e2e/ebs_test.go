package e2e

// The user's path end to end: the real Packer, the real amazon plugin (amazon-ebs), the dlami
// data source and provisioner, against test/cmd/dlami-fake-aws --simhost whose EC2 instances are
// simulated DLAMI hosts. Templates are in ebs/; they differ from a user's only by endpoints.

import (
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/amitags"
	billofmaterials "github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	dlamireport "github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// TestAmazonEBS runs the amazon-ebs scenarios. On one fake with simulated hosts, in order:
// the golden bake (with its ami_regions copy), a team image baked on that golden AMI, drift
// that fails a bake, the scheduled rebake loop, and Packer killed mid-bake, whose instance the
// fake's SIGTERM must still clean up (nothing mounted or running afterwards). Beside them, on a
// fake without hosts (its builds mostly wait on SDK retries), launches that meet
// InsufficientInstanceCapacity. One fake with hosts at a time: each allocates 127.0.0.2 first.
func TestAmazonEBS(t *testing.T) {
	e := ebsPrereqs(t)
	ebsDir, err := filepath.Abs("ebs")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("scenarios", func(t *testing.T) {
		t.Run("capacity", func(t *testing.T) {
			t.Parallel()
			capacityScenario(t, e, ebsDir)
		})
		t.Run("hosts", func(t *testing.T) {
			t.Parallel()
			hostScenarios(t, e, ebsDir)
		})
	})
}

// hostScenarios: golden, golden on golden, drift, the rebake loop and Packer killed, on one
// fake with simulated hosts.
func hostScenarios(t *testing.T, e ebsEnv, ebsDir string) {
	fake := e.startFake(t, "ebs-fake", true)
	var golden awsfake.Image

	t.Run("golden", func(t *testing.T) {
		out := outDir(t, "ebs-golden")
		r := e.build(t, ebsDir, out, fake.packerEnv(e), nil,
			"-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "golden.pkr.hcl")
		t.Logf("golden bake (amazon-ebs, Slurm layer, ami_regions copy): %s", r.took.Round(time.Second))
		if r.code != 0 {
			t.Fatalf("packer build exited %d (output in %s):\n%s", r.code, out, tail(filepath.Join(out, "packer.out"), 60))
		}
		s := fake.state(t)
		assertCleanedUp(t, s, ebsRegion)
		imgs := ownImages(s, ebsRegion)
		if len(imgs) != 1 {
			t.Fatalf("%d images owned by %s in %s, want the golden AMI only: %+v", len(imgs), s.Account, ebsRegion, imgs)
		}
		golden = imgs[0]
		wantSource := seedDLAMI(ebsRegion, latestSeedBuild())
		for k, want := range map[string]string{
			"dlami:family": "golden-slurm-p6-b200-48xlarge", "dlami:source_ami": wantSource, "dlami:build": latestSeedBuild(),
		} {
			if got := golden.Tags[k]; got != want {
				t.Errorf("golden AMI tag %s = %q, want %q", k, got, want)
			}
		}
		if golden.State != "available" || !strings.HasPrefix(golden.Name, "golden-slurm-p6-b200-48xlarge-") {
			t.Errorf("golden AMI %s is %q named %q", golden.ID, golden.State, golden.Name)
		}
		if !strings.Contains(r.ui, ebsRegion+": "+golden.ID) {
			t.Errorf("Packer's artifact does not name %s:\n%s", golden.ID, grepLines(r.ui, "ami-"))
		}
		// The image is what an instance launched from it boots: its top layer holds the bake.
		if len(golden.Layers) != 1 {
			t.Fatalf("golden AMI has layers %q, want one (the bake's disk over the base DLAMI)", golden.Layers)
		}
		var bom struct {
			BuildName    string            `json:"build_name"`
			InstanceType string            `json:"instance_type"`
			Components   map[string]string `json:"components"`
		}
		if err := json.Unmarshal(readLayerFile(t, golden, "etc/dlami-bake/manifest.json"), &bom); err != nil {
			t.Fatalf("bill of materials in the image: %v", err)
		}
		if bom.InstanceType != "p6-b200.48xlarge" || bom.Components["kernel"] != "7.0.0-1014-aws" {
			t.Errorf("bill of materials = %+v, want p6-b200.48xlarge (the launch's type) and kernel 7.0.0-1014-aws", bom)
		}
		// The image's dpkg database says what the Slurm layer installed (its files are behind
		// update-alternatives symlinks that only resolve inside the host).
		status := string(readLayerFile(t, golden, "var/lib/dpkg/status"))
		for _, pkg := range []string{"slurmd", "munge"} {
			if !strings.Contains(status, "Package: "+pkg+"\nStatus: install ok installed\n") {
				t.Errorf("the image's dpkg database does not have %s installed: the Slurm layer is not in the image", pkg)
			}
		}
		rep := readReport(t, out)
		if rep.Result != "pass" || len(rep.FailedChecks) != 0 {
			t.Errorf("report: result %q, failed %v; want pass", rep.Result, rep.FailedChecks)
		}
		// The bake read EC2's description of its type (the provisioner's ec2 block defaults to
		// the builder's region; the SDK reaches the fake through AWS_ENDPOINT_URL_EC2) and
		// judged the GPU count from it.
		if st, basis := checkStatus(rep, "instance-type"), checkBasis(rep, "gpu"); st != "pass" || !strings.HasPrefix(basis, "from DescribeInstanceTypes") {
			t.Errorf("instance-type = %s (%s), gpu basis %q: want pass and the GPU count from DescribeInstanceTypes", st, checkMessage(rep, "instance-type"), basis)
		}

		// ami_regions: the copy exists in the other region with the same tags and its own snapshot.
		copies := ownImages(s, ebsCopyRegion)
		if len(copies) != 1 {
			t.Fatalf("%d images in %s, want the ami_regions copy", len(copies), ebsCopyRegion)
		}
		cp := copies[0]
		if cp.State != "available" || cp.Name != golden.Name || cp.SourceImageID != golden.ID || cp.SourceRegion != ebsRegion {
			t.Errorf("copy %s: state %q name %q source %s@%s; want available %q from %s@%s",
				cp.ID, cp.State, cp.Name, cp.SourceImageID, cp.SourceRegion, golden.Name, golden.ID, ebsRegion)
		}
		for k, v := range golden.Tags {
			if strings.HasPrefix(k, "dlami:verified") {
				continue // the post-processor's, set on the verified copy after the copy was made
			}
			if cp.Tags[k] != v {
				t.Errorf("copy tag %s = %q, want %q", k, cp.Tags[k], v)
			}
		}
		if snapshotOf(cp) == "" || snapshotOf(cp) == snapshotOf(golden) {
			t.Errorf("copy snapshot %q, golden snapshot %q: want a snapshot of its own", snapshotOf(cp), snapshotOf(golden))
		}
		if !strings.Contains(r.ui, ebsCopyRegion+": "+cp.ID) {
			t.Errorf("Packer's artifact does not name the copy %s", cp.ID)
		}
		assertCleanedUp(t, s, ebsCopyRegion)
		assertNoInstanceState(t, fake)

		// The dlami post-processor booted the registered AMI on a fresh instance (terminated
		// since: assertCleanedUp) and found its first boot healthy.
		if golden.Tags["dlami:verified"] != "true" || golden.Tags["dlami:verified_at"] == "" {
			t.Errorf("golden AMI tags %v: want dlami:verified = true with dlami:verified_at", golden.Tags)
		}
		// What fleets select by: the verified AMI carries the version tags of its bill of
		// materials (read back from the fake EC2), the driver and the kernel at least.
		manifest, err := billofmaterials.Decode(readLayerFile(t, golden, "etc/dlami-bake/manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		versions := amitags.VersionTags(manifest)
		if versions[amitags.NvidiaDriver] == "" || versions[amitags.NvidiaDriverBranch] == "" || versions[amitags.Kernel] == "" || versions[amitags.EFAInstaller] == "" {
			t.Errorf("the bill of materials gives version tags %v: want the driver, its branch, the kernel and the EFA installer", versions)
		}
		for k, v := range versions {
			if golden.Tags[k] != v {
				t.Errorf("golden AMI tag %s = %q, want %q (from its bill of materials)", k, golden.Tags[k], v)
			}
		}
		// The copy was not launched; it carries the verified copy's result and names it.
		if cp.Tags["dlami:verified"] != "true" || cp.Tags["dlami:verified_in"] != ebsRegion+"/"+golden.ID {
			t.Errorf("the %s copy's tags %v: want dlami:verified = true and dlami:verified_in = %s/%s", ebsCopyRegion, cp.Tags, ebsRegion, golden.ID)
		}
		verify := readReport(t, filepath.Join(out, "verify", ebsRegion))
		if verify.Result != "pass" || checkStatus(verify, "first-boot-kernel") != "pass" || checkStatus(verify, "first-boot-packages") != "pass" || checkStatus(verify, "gpu") != "pass" {
			t.Errorf("first-boot report: %s, failed %v, first-boot-kernel %s, first-boot-packages %s",
				verify.Result, verify.FailedChecks, checkStatus(verify, "first-boot-kernel"), checkStatus(verify, "first-boot-packages"))
		}
		if n := verifyInstances(s, ebsRegion, golden.ID); n != 1 {
			t.Errorf("%d verification instances of %s, want 1", n, golden.ID)
		}
		assertBakeCost(t, r.ui, filepath.Join(out, "verify"), golden)
		// image_hygiene = true: the last step of the bake cleaned the image, and the
		// post-processor's verification above reached it all the same.
		if st := checkStatus(rep, "image-hygiene"); st != "pass" {
			t.Errorf("image-hygiene = %s, want pass", st)
		}
		assertHygienicImage(t, fake, golden)
		assertCleanedUp(t, fake.state(t), ebsRegion)
	})

	// An arm64 DLAMI on an x86_64 type, and a fractional-GPU type, are refused by the data
	// source (given the builder's instance_type) before anything launches or any layer runs.
	t.Run("refused-types", func(t *testing.T) {
		for _, tc := range []struct {
			arch, typ string
			want      []string
		}{
			{"arm64", "p6-b200.48xlarge", []string{"is arm64 but p6-b200.48xlarge runs only x86_64", "change architecture or instance_type"}},
			{"x86_64", "g6f.large", []string{`instance_type = "g6f.large"`, "fraction of one GPU"}},
		} {
			t.Run(tc.typ, func(t *testing.T) {
				out := outDir(t, "ebs-refused-"+tc.typ)
				ok, failed := fake.calls(t, ebsRegion, "RunInstances")
				r := e.build(t, ebsDir, out, fake.packerEnv(e), nil, "-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out,
					"-var", "architecture="+tc.arch, "-var", "instance_type="+tc.typ, "arch.pkr.hcl")
				if r.code == 0 {
					t.Fatalf("packer build passed:\n%s", tail(filepath.Join(out, "packer.out"), 40))
				}
				for _, w := range tc.want {
					if !strings.Contains(r.ui, w) {
						t.Errorf("Packer's output lacks %q:\n%s", w, tail(filepath.Join(out, "packer.out"), 40))
					}
				}
				if strings.Contains(r.ui, "LAYER-RAN") {
					t.Error("a layer ran")
				}
				if ok2, failed2 := fake.calls(t, ebsRegion, "RunInstances"); ok2 != ok || failed2 != failed {
					t.Errorf("RunInstances called (%d OK, %d failed before; %d, %d after): the refusal must come before any launch", ok, failed, ok2, failed2)
				}
			})
		}
	})

	// A GPU type without a built-in profile (p7-future.48xlarge, which the fake describes with
	// p6-b200.48xlarge's figures) is judged from EC2's description of it (issue 36): healthy,
	// it passes with the GPU count "from DescribeInstanceTypes"; with a GPU gone from the host
	// entirely (nvidia-smi and the PCI bus), only EC2's figure can fail it; with
	// DescribeInstanceTypes denied, the bake warns and still judges the count from the PCI
	// inventory (a GPU the driver lost fails), never a silent pass.
	t.Run("unprofiled-type", func(t *testing.T) {
		for _, tc := range []struct {
			name, hide, fault string
			pass              bool
			status            map[string]string // check id -> status
			mentions          map[string]string // check id -> a substring of its message
			basis             map[string]string // check id -> the prefix of its basis
		}{
			// Healthy, the bake passes; what EC2 cannot say (and no profile does) warns naming
			// the setting that would judge it, and the GPU model is judged only roughly.
			{name: "healthy", pass: true,
				status:   map[string]string{"instance-type": "warn", "gpu": "warn", "gpu-memory": "pass", "nvme": "pass"},
				mentions: map[string]string{"instance-type": "expect.nvlinks", "gpu": "judged from DescribeInstanceTypes"},
				basis:    map[string]string{"gpu": "from DescribeInstanceTypes", "gpu-memory": "from DescribeInstanceTypes", "nvme": "from DescribeInstanceTypes"}},
			{name: "gpu-gone", hide: "bus",
				status:   map[string]string{"gpu": "fail"},
				mentions: map[string]string{"gpu": "DescribeInstanceTypes says p7-future.48xlarge has 8 GPUs but the PCI bus has 7"}},
			{name: "describe-denied", hide: "driver", fault: "DescribeInstanceTypes@" + ebsRegion + "=denied",
				status:   map[string]string{"instance-type": "warn", "gpu": "fail"},
				mentions: map[string]string{"instance-type": "PCI inventory", "gpu": "nvidia-smi lists 7 GPUs but the PCI bus has 8"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.fault != "" {
					fake.control(t, http.MethodPost, "/_fake/fault?spec="+url.QueryEscape(tc.fault))
					defer fake.control(t, http.MethodDelete, "/_fake/fault")
				}
				out := outDir(t, "ebs-unprofiled-"+tc.name)
				r := e.build(t, ebsDir, out, fake.packerEnv(e), nil,
					"-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "-var", "hide_gpu="+tc.hide, "unprofiled.pkr.hcl")
				t.Logf("unprofiled %s: %s", tc.name, r.took.Round(time.Second))
				if (r.code == 0) != tc.pass {
					t.Fatalf("packer build exited %d, want pass %v (output in %s):\n%s", r.code, tc.pass, out, tail(filepath.Join(out, "packer.out"), 40))
				}
				rep := readReport(t, out)
				for id, want := range tc.status {
					if got := checkStatus(rep, id); got != want {
						t.Errorf("%s = %s, want %s: %s", id, got, want, checkMessage(rep, id))
					}
				}
				for id, want := range tc.mentions {
					if msg := checkMessage(rep, id); !strings.Contains(msg, want) {
						t.Errorf("%s says %q, want it to mention %q", id, msg, want)
					}
				}
				for id, want := range tc.basis {
					if b := checkBasis(rep, id); !strings.HasPrefix(b, want) {
						t.Errorf("%s basis %q, want it to start with %q", id, b, want)
					}
				}
				assertCleanedUp(t, fake.state(t), ebsRegion)
			})
		}
	})

	t.Run("golden-on-golden", func(t *testing.T) {
		if golden.ID == "" {
			t.Fatal("needs the golden AMI of the golden subtest, which did not produce one")
		}
		out := outDir(t, "ebs-golden-on-golden")
		r := e.build(t, ebsDir, out, fake.packerEnv(e), nil,
			"-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "team.pkr.hcl")
		t.Logf("golden on golden (team image on the golden AMI): %s", r.took.Round(time.Second))
		if r.code != 0 {
			t.Fatalf("packer build exited %d (output in %s):\n%s", r.code, out, tail(filepath.Join(out, "packer.out"), 60))
		}
		if !strings.Contains(r.ui, "GOLDEN-LAYER-PRESENT") {
			t.Error("the team's instance did not boot the golden image (slurmd missing)")
		}
		// Its own baseline: the one the golden bake left in the image must not be reused.
		if !strings.Contains(r.ui, "dlami: recorded the baseline") || strings.Contains(r.ui, "comparing against the baseline recorded at") {
			t.Errorf("the team bake did not take its own baseline (it reused the one in the golden image):\n%s",
				grepLines(r.ui, "baseline"))
		}
		s := fake.state(t)
		assertCleanedUp(t, s, ebsRegion)
		var team *awsfake.Image
		for _, img := range ownImages(s, ebsRegion) {
			if strings.HasPrefix(img.Name, "team-ml-") {
				team = &img
			}
		}
		if team == nil {
			t.Fatal("no team-ml-* AMI registered")
		}
		if team.Tags["team:base"] != golden.ID || team.Tags["dlami:source_ami"] != golden.Tags["dlami:source_ami"] {
			t.Errorf("team AMI tags %v, want team:base=%s and the golden's dlami:source_ami", team.Tags, golden.ID)
		}
		if len(team.Layers) != 2 || team.Layers[0] != golden.Layers[0] {
			t.Errorf("team AMI layers %q, want the golden's %q plus its own", team.Layers, golden.Layers)
		}
		if rep := readReport(t, out); rep.Result != "pass" {
			t.Errorf("team report result %q, failed %v", rep.Result, rep.FailedChecks)
		}
		assertNoInstanceState(t, fake)
	})

	t.Run("first-boot-dist-upgrade", func(t *testing.T) { firstBootDistUpgrade(t, e, fake, ebsDir) })
	t.Run("first-boot-grub-1015", func(t *testing.T) { firstBootGrub(t, e, fake, ebsDir) })
	t.Run("verify-interrupted", func(t *testing.T) { verifyInterrupted(t, e, fake, ebsDir) })
	t.Run("node-check", func(t *testing.T) { nodeCheckScenarios(t, e, fake, ebsDir) })

	t.Run("drift", func(t *testing.T) {
		exp, err := readExpectation(filepath.Join("scenarios", "unhold-dist-upgrade", "expect.json"))
		if err != nil {
			t.Fatal(err)
		}
		before := len(ownImages(fake.state(t), ebsRegion))
		out := outDir(t, "ebs-drift")
		r := e.build(t, ebsDir, out, fake.packerEnv(e), nil,
			"-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "drift.pkr.hcl")
		t.Logf("drift under amazon-ebs: %s", r.took.Round(time.Second))
		// The same verdict as the null-builder scenario unhold-dist-upgrade.
		for _, p := range append(compare(exp, r.out), reportSchemaProblems(r.out)...) {
			t.Errorf("as scenario unhold-dist-upgrade expects: %s", p)
		}
		s := fake.state(t)
		if after := len(ownImages(s, ebsRegion)); after != before {
			t.Errorf("a failed bake registered an AMI: %d own images before, %d after", before, after)
		}
		if strings.Contains(r.ui, "Creating AMI") || strings.Contains(r.ui, "AMIs were created") {
			t.Errorf("a failed bake went on to create an AMI:\n%s", grepLines(r.ui, "AMI"))
		}
		assertCleanedUp(t, s, ebsRegion)
		assertNoInstanceState(t, fake)
		if _, err := os.Stat(filepath.Join(out, "dlami-report.json")); err != nil {
			t.Errorf("the report of the failed bake is not on disk: %v", err)
		}
	})

	t.Run("rebake-loop", func(t *testing.T) { rebakeLoop(t, e, fake) })

	// Last: it ends with the fake's SIGTERM.
	t.Run("packer-killed", func(t *testing.T) { packerKilled(t, e, fake, ebsDir) })
}

// firstBootDistUpgrade: the bake passes, but a layer left a per-instance script that runs
// apt-get -y dist-upgrade on first boot. The post-processor's first boot fails
// first-boot-packages, and on_failure = "deregister" removes the AMI and its snapshots in both
// regions of the artifact.
func firstBootDistUpgrade(t *testing.T, e ebsEnv, fake *fakeAWS, ebsDir string) {
	before := fake.state(t)
	out := outDir(t, "ebs-first-boot-dist-upgrade")
	r := e.build(t, ebsDir, out, fake.packerEnv(e), nil,
		"-except=keep-ami", "-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "-var", "mode=dist-upgrade", "firstboot.pkr.hcl")
	t.Logf("first-boot dist-upgrade (bake, ami_regions copy, verification, deregistration): %s", r.took.Round(time.Second))
	if r.code == 0 {
		t.Fatalf("the build passed although the first boot upgraded the NVIDIA userspace:\n%s", tail(filepath.Join(out, "packer.out"), 40))
	}
	if bake := readReport(t, out); bake.Result != "pass" {
		t.Errorf("the bake itself should pass (nothing drifts during it): %s, failed %v", bake.Result, bake.FailedChecks)
	}
	verify := readReport(t, filepath.Join(out, "verify", ebsRegion))
	if verify.Result != "fail" || checkStatus(verify, "first-boot-packages") != "fail" {
		t.Errorf("first-boot report: %s, failed %v; want first-boot-packages failed", verify.Result, verify.FailedChecks)
	}
	for _, want := range []string{"did not boot healthy", "first-boot-packages", "deregistered"} {
		if !strings.Contains(r.ui, want) {
			t.Errorf("Packer's output lacks %q:\n%s", want, tail(filepath.Join(out, "packer.out"), 30))
		}
	}
	// Packer then destroys the failed build's artifact itself (nothing kept it): the amazon
	// plugin describes the AMI the post-processor already deregistered, which EC2 still shows
	// for a short while, and must not crash on it.
	if strings.Contains(r.all(), "PACKER CRASH") || strings.Contains(r.all(), "panic:") {
		t.Errorf("Packer crashed destroying the already deregistered AMI:\n%s", grepLines(r.all(), "panic"))
	}
	t.Logf("Packer's own cleanup of the artifact said: %s", grepLines(r.ui, "destroying builder artifact"))
	after := fake.state(t)
	for _, region := range []string{ebsRegion, ebsCopyRegion} {
		for _, img := range ownImages(after, region) {
			if strings.HasPrefix(img.Name, "firstboot-dist-upgrade-") {
				t.Errorf("%s: %s (%s) is still registered after on_failure = deregister", region, img.ID, img.State)
			}
		}
		if left := newSnapshots(before, after, region); len(left) > 0 {
			t.Errorf("%s: snapshots of the deregistered AMI left: %v", region, left)
		}
		assertCleanedUp(t, after, region)
	}
	assertNoInstanceState(t, fake)
}

// firstBootGrub: a shell provisioner after the dlami provisioner installs kernel 1015, holds it
// and makes it the GRUB default. The bake's checks never see it; the first boot runs 1015 and
// fails first-boot-kernel, and the AMI is tagged dlami:verified = false.
func firstBootGrub(t *testing.T, e ebsEnv, fake *fakeAWS, ebsDir string) {
	out := outDir(t, "ebs-first-boot-grub-1015")
	r := e.build(t, ebsDir, out, fake.packerEnv(e), nil,
		"-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "-var", "mode=grub-1015", "firstboot.pkr.hcl")
	t.Logf("first-boot GRUB default 1015: %s", r.took.Round(time.Second))
	if r.code == 0 {
		t.Fatalf("the build passed although the image boots kernel 1015:\n%s", tail(filepath.Join(out, "packer.out"), 40))
	}
	if bake := readReport(t, out); bake.Result != "pass" {
		t.Errorf("the dlami provisioner's bake should pass (the change came after it): %s, failed %v", bake.Result, bake.FailedChecks)
	}
	verify := readReport(t, filepath.Join(out, "verify", ebsRegion))
	if checkStatus(verify, "first-boot-kernel") != "fail" {
		t.Errorf("first-boot-kernel %s, want fail (failed %v)", checkStatus(verify, "first-boot-kernel"), verify.FailedChecks)
	}
	if !strings.Contains(r.ui, "first-boot-kernel") {
		t.Errorf("the build's error does not name first-boot-kernel:\n%s", tail(filepath.Join(out, "packer.out"), 30))
	}
	s := fake.state(t)
	var img *awsfake.Image
	for _, i := range ownImages(s, ebsRegion) {
		if strings.HasPrefix(i.Name, "firstboot-grub-1015-") {
			img = &i
		}
	}
	if img == nil {
		t.Fatalf("the AMI is gone: on_failure = tag must keep it; account %s images: %+v", s.Account, s.Regions[ebsRegion].Images)
	}
	if img.Tags["dlami:verified"] != "false" {
		t.Errorf("AMI tags %v, want dlami:verified = false", img.Tags)
	}
	assertCleanedUp(t, s, ebsRegion)
	assertNoInstanceState(t, fake)
}

// verifyInterrupted: Ctrl-C while the post-processor waits for a slow first boot. The
// verification instance is terminated, the temporaries deleted, a partial report says
// cancelled, and the AMI is not tagged either way.
func verifyInterrupted(t *testing.T, e ebsEnv, fake *fakeAWS, ebsDir string) {
	out := outDir(t, "ebs-verify-interrupted")
	interrupted := false
	r := e.build(t, ebsDir, out, fake.packerEnv(e), func(cmd *exec.Cmd) {
		deadline := time.Now().Add(10 * time.Minute)
		for time.Now().Before(deadline) {
			if b, _ := os.ReadFile(filepath.Join(out, "packer.log")); strings.Contains(string(b), "first boot: waiting for cloud-init") {
				time.Sleep(2 * time.Second)
				interrupted = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) == nil
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Errorf("the verification never started waiting for the first boot (output in %s)", out)
	}, "-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "-var", "mode=slow", "firstboot.pkr.hcl")
	t.Logf("Ctrl-C during verification: %s", r.took.Round(time.Second))
	if !interrupted {
		t.Fatalf("Ctrl-C was not sent (exit %d):\n%s", r.code, tail(filepath.Join(out, "packer.out"), 30))
	}
	if r.code == 0 {
		t.Error("the interrupted build exited 0")
	}
	verify := readReport(t, filepath.Join(out, "verify", ebsRegion))
	if verify.Result != "cancelled" || !slices.Contains(verify.FailedChecks, "bake:cancelled") {
		t.Errorf("partial report: %s, failed %v; want cancelled", verify.Result, verify.FailedChecks)
	}
	s := fake.state(t)
	for _, img := range ownImages(s, ebsRegion) {
		if strings.HasPrefix(img.Name, "firstboot-slow-") && img.Tags["dlami:verified"] != "" {
			t.Errorf("an unverified AMI was tagged dlami:verified = %q", img.Tags["dlami:verified"])
		}
	}
	launched := false
	for _, img := range ownImages(s, ebsRegion) {
		if strings.HasPrefix(img.Name, "firstboot-slow-") {
			launched = verifyInstances(s, ebsRegion, img.ID) == 1
		}
	}
	if !launched {
		t.Errorf("no verification instance of the firstboot-slow AMI was launched; instances: %+v", s.Regions[ebsRegion].Instances)
	}
	assertCleanedUp(t, s, ebsRegion)
	assertNoInstanceState(t, fake)
}

// verifyInstances counts the post-processor's instances of an AMI.
func verifyInstances(s awsfake.StateDump, region, ami string) int {
	n := 0
	for _, in := range s.Regions[region].Instances {
		if in.Tags["dlami:verify"] == ami && in.ImageID == ami {
			n++
		}
	}
	return n
}

// newSnapshots are the snapshots of region in after that were not in before.
func newSnapshots(before, after awsfake.StateDump, region string) []string {
	old := map[string]bool{}
	for _, sn := range before.Regions[region].Snapshots {
		old[sn.ID] = true
	}
	var out []string
	for _, sn := range after.Regions[region].Snapshots {
		if !old[sn.ID] {
			out = append(out, sn.ID)
		}
	}
	return out
}

// checkStatus is the status of check id in r, "absent" when it has none.
func checkStatus(r report, id string) string {
	for _, c := range r.Checks {
		if c.ID == id {
			return c.Status
		}
	}
	return "absent"
}

// checkBasis is the basis of check id in r, "" when it has none.
func checkBasis(r report, id string) string {
	for _, c := range r.Checks {
		if c.ID == id {
			return c.Basis
		}
	}
	return ""
}

// checkMessage is the message of check id in r, "" when it has none.
func checkMessage(r report, id string) string {
	for _, c := range r.Checks {
		if c.ID == id {
			return c.Message
		}
	}
	return ""
}

// capacityScenario: InsufficientInstanceCapacity (HTTP 500, as EC2 answers it) on the first
// RunInstances is absorbed by the retries of the amazon plugin's AWS SDK (v2, standard retryer,
// max_retries = 10 attempts); when it persists the build fails after those 10 attempts (about
// 1-2 min of backoff) with EC2's message, which says what to do. Nothing is left behind.
func capacityScenario(t *testing.T, e ebsEnv, ebsDir string) {
	fake := e.startFake(t, "ebs-capacity-fake", false)
	launch := func(t *testing.T, name string) packerResult {
		out := outDir(t, name)
		return e.build(t, ebsDir, out, fake.packerEnv(e), nil, "-var", "aws_endpoint="+fake.endpoint, "launch.pkr.hcl")
	}
	t.Run("first try only", func(t *testing.T) {
		okBefore, failedBefore := fake.calls(t, ebsRegion, "RunInstances")
		fake.control(t, "POST", "/_fake/fault?spec=RunInstances@"+ebsRegion+"=capacity:1")
		r := launch(t, "ebs-capacity-once")
		t.Logf("launch with one InsufficientInstanceCapacity: %s", r.took.Round(time.Second))
		ok, failed := fake.calls(t, ebsRegion, "RunInstances")
		if failed-failedBefore != 1 || ok-okBefore != 1 {
			t.Errorf("RunInstances answered %d times with an error and %d times OK, want 1 and 1 (the SDK retries a 500)",
				failed-failedBefore, ok-okBefore)
		}
		if r.code != 0 {
			t.Errorf("a single InsufficientInstanceCapacity failed the build (exit %d):\n%s", r.code, tail(filepath.Join(r.out, "packer.out"), 30))
		}
		assertCleanedUp(t, fake.state(t), ebsRegion)
	})
	t.Run("persistent", func(t *testing.T) {
		_, failedBefore := fake.calls(t, ebsRegion, "RunInstances")
		fake.control(t, "POST", "/_fake/fault?spec=RunInstances@"+ebsRegion+"=capacity:100")
		defer fake.control(t, "DELETE", "/_fake/fault")
		r := launch(t, "ebs-capacity-persistent")
		t.Logf("launch with persistent InsufficientInstanceCapacity: failed after %s", r.took.Round(time.Second))
		_, failed := fake.calls(t, ebsRegion, "RunInstances")
		t.Logf("amazon plugin v1.8.0: %d RunInstances attempts before giving up", failed-failedBefore)
		if failed-failedBefore != 10 {
			t.Errorf("RunInstances attempts = %d, want 10 (max_retries, whose amazon plugin default is 10, is the SDK's attempt budget)", failed-failedBefore)
		}
		if r.code == 0 {
			t.Fatal("the build passed although every RunInstances failed")
		}
		for _, want := range []string{
			"Error launching source instance: operation error EC2: RunInstances, exceeded maximum number of attempts, 10",
			"api error InsufficientInstanceCapacity: We currently do not have sufficient p5.48xlarge capacity",
			"by not specifying an Availability Zone in your request or choosing",
		} {
			if !strings.Contains(r.ui, want) {
				t.Errorf("Packer's output lacks %q:\n%s", want, tail(filepath.Join(r.out, "packer.out"), 20))
			}
		}
		assertCleanedUp(t, fake.state(t), ebsRegion)
	})
}

// packerKilled kills Packer (SIGKILL, with its plugins) while an instance is held by a
// provisioner, so amazon-ebs's cleanup never runs: the instance is still running when the fake
// gets SIGTERM, and the fake must still terminate it and leave nothing mounted or running.
func packerKilled(t *testing.T, e ebsEnv, fake *fakeAWS, ebsDir string) {
	out := outDir(t, "ebs-killed")
	start := time.Now()
	r := e.build(t, ebsDir, out, fake.packerEnv(e), func(cmd *exec.Cmd) {
		deadline := time.Now().Add(5 * time.Minute)
		for time.Now().Before(deadline) {
			if b, _ := os.ReadFile(filepath.Join(out, "packer.log")); strings.Contains(string(b), "HOST-REACHED p5.48xlarge") {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Errorf("the hold template never reached its host in 5 min (output in %s)", out)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}, "-var", "aws_endpoint="+fake.endpoint, "hold.pkr.hcl")
	if !r.killed {
		t.Fatalf("packer was not killed (exit %d):\n%s", r.code, tail(filepath.Join(out, "packer.out"), 30))
	}
	s := fake.state(t)
	running := 0
	for _, in := range s.Regions[ebsRegion].Instances {
		if in.State == "running" {
			running++
		}
	}
	if running != 1 || len(mustReadDir(t, filepath.Join(fake.stateRoot, "instances"))) != 1 {
		t.Fatalf("%d running instances after Packer was killed, want the held one (so the SIGTERM path has work to do)", running)
	}
	fake.stop(t)
	t.Logf("Packer killed mid-bake, fake SIGTERM cleaned up: %s", time.Since(start).Round(time.Second))
}

// assertNoInstanceState checks that no instance's disk is left in the fleet's state root:
// every instance the scenario launched was terminated and its host torn down.
func assertNoInstanceState(t *testing.T, fake *fakeAWS) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(fake.stateRoot, "instances"))
	if err != nil {
		t.Fatalf("reading the fleet's instances: %v", err)
	}
	for _, e := range entries {
		t.Errorf("instance state %s left in the fleet after its build", e.Name())
	}
	assertNothingLeft(t, filepath.Join(fake.stateRoot, "instances"))
}

func snapshotOf(img awsfake.Image) string {
	for _, bd := range img.BlockDevices {
		if bd.SnapshotID != "" {
			return bd.SnapshotID
		}
	}
	return ""
}

func readReport(t *testing.T, dir string) report { t.Helper(); return readReportAs[report](t, dir) }

// readReportAs reads dir's dlami-report.json, validated against the report's JSON Schema, into
// the view of it a test needs.
func readReportAs[T any](t *testing.T, dir string) T {
	t.Helper()
	var r T
	b, err := os.ReadFile(filepath.Join(dir, "dlami-report.json"))
	if err != nil {
		t.Fatalf("no report: %v", err)
	}
	if p := schemaProblem(b); p != "" {
		t.Errorf("%s: %s", dir, p)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s/dlami-report.json: %v", dir, err)
	}
	return r
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func mustReadDir(t *testing.T, dir string) []os.DirEntry {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// assertBakeCost checks the post-processor's account of the bake's instance time (golden.pkr.hcl
// has price_lookup = true): the last UI line names both phases on p6-b200.48xlarge with the
// On-Demand list price, dlami-cost.json in the verification's report_dir holds plausible
// seconds from EC2's times (the fake's, on the real clock) with dollars, and the verified AMI
// carries the same whole seconds in its tags.
func assertBakeCost(t *testing.T, ui, reportDir string, golden awsfake.Image) {
	t.Helper()
	const typ = "p6-b200.48xlarge"
	for _, want := range []string{"dlami: instance time: build 1 × " + typ + " ", "; verification 1 × " + typ + " ", " at On-Demand list price"} {
		if !strings.Contains(ui, want) {
			t.Errorf("the post-processor's output lacks %q:\n%s", want, grepLines(ui, "instance time"))
		}
	}
	data, err := os.ReadFile(filepath.Join(reportDir, dlamireport.CostFileName))
	if err != nil {
		t.Fatalf("dlami-cost.json: %v", err)
	}
	if p := costSchemaProblem(data); p != "" {
		t.Error(p)
	}
	var c dlamireport.Cost
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("dlami-cost.json: %v", err)
	}
	// The bake itself takes tens of seconds here; nothing takes an hour.
	plausible := func(s float64) bool { return s > 0 && s < 3600 }
	if !c.Build.Known || len(c.Build.Instances) != 1 || c.Build.Instances[0].InstanceType != typ || c.Build.Instances[0].StillRunning ||
		!plausible(c.Build.InstanceSeconds) || !c.Verification.Known || len(c.Verification.Instances) != 1 || !plausible(c.Verification.InstanceSeconds) ||
		c.USD == nil || *c.USD <= 0 {
		t.Errorf("dlami-cost.json:\n%s", data)
	}
	for tag, s := range map[string]float64{"dlami:build_instance_seconds": c.Build.InstanceSeconds, "dlami:verify_instance_seconds": c.Verification.InstanceSeconds} {
		if want := strconv.FormatInt(int64(math.Round(s)), 10); golden.Tags[tag] != want {
			t.Errorf("golden AMI tag %s = %q, want %s (dlami-cost.json)", tag, golden.Tags[tag], want)
		}
	}
	if golden.Tags["dlami:build_instance_type"] != typ {
		t.Errorf("golden AMI tag dlami:build_instance_type = %q", golden.Tags["dlami:build_instance_type"])
	}
}

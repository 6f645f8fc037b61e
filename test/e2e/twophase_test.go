package e2e

// Issue 21, bake where capacity is, verify where it counts: the demo template
// (examples/demo/demo.pkr.hcl) baked both ways through the real Packer and amazon-ebs against
// the fake EC2 with simulated hosts, and the GPU-instance seconds each way spent, from the
// fake's state API. One phase: amazon-ebs bakes on p6-b200.48xlarge (host suite and NCCL
// there), the post-processor verifies the first boot on another p6-b200.48xlarge. Two phases:
// amazon-ebs bakes on c7i.8xlarge (no GPU: the guard and the layers only), the post-processor
// runs the host suite and the NCCL test on the first of p5.48xlarge, p6-b200.48xlarge with
// capacity, and p5.48xlarge has none. Then a first phase that drifts.

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// phaseReport is the part of dlami-report.json these tests read.
type phaseReport struct {
	Result         string   `json:"result"`
	FailedChecks   []string `json:"failed_checks"`
	DeferredChecks []string `json:"deferred_checks"`
	InstanceType   string   `json:"instance_type"`
	Error          string   `json:"error"`
	Checks         []struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"checks"`
	Launch *struct {
		InstanceType string `json:"instance_type"`
		Refused      []struct {
			InstanceType string `json:"instance_type"`
			Code         string `json:"code"`
		} `json:"refused"`
		EFA               int      `json:"efa"`
		EFASetting        string   `json:"efa_setting"`
		NetworkInterfaces []string `json:"network_interfaces"`
		SecurityGroups    []string `json:"security_groups"`
		PlacementGroup    string   `json:"placement_group"`
		ElasticIP         string   `json:"elastic_ip"`
	} `json:"launch"`
}

func readPhaseReport(t *testing.T, dir string) phaseReport {
	t.Helper()
	return readReportAs[phaseReport](t, dir)
}

// assertEFAVerified: the verification attached n EFA interfaces and ran the EFA checks on them:
// efa-devices passes; efa-traffic and gpudirect-rdma ran (pass, or warn only because no floor
// is set: their figures are reported).
func assertEFAVerified(t *testing.T, verify phaseReport, n int) {
	t.Helper()
	if l := verify.Launch; l == nil || l.EFA != n || len(l.NetworkInterfaces) != n+1 || l.EFASetting != `efa = "all"` {
		t.Errorf("verification launch %+v: want %d EFA interfaces attached (efa = \"all\")", verify.Launch, n)
	}
	if st, msg := verify.check("efa-devices"); st != "pass" {
		t.Errorf("verification efa-devices = %s %q, want pass on the %d attached devices", st, msg, n)
	}
	for id, unfloored := range map[string]string{"efa-traffic": "bandwidth not judged", "gpudirect-rdma": "not judged"} {
		if st, msg := verify.check(id); st != "pass" && !(st == "warn" && strings.Contains(msg, unfloored) && !strings.Contains(msg, "not judged here")) {
			t.Errorf("verification %s = %s %q: want it run on the attached devices", id, st, msg)
		}
	}
}

func (r phaseReport) check(id string) (status, message string) {
	for _, c := range r.Checks {
		if c.ID == id {
			return c.Status, c.Message
		}
	}
	return "absent", ""
}

// spend is the instance time of one build, from the fake's state API: the build instance
// (launched by amazon-ebs) and the verification instances (tagged dlami:verify by the
// post-processor), each instance's running_seconds, and the API's own GPU total.
type spend struct {
	buildType        string
	buildSeconds     float64
	buildGPUSeconds  float64
	verifyTypes      []string
	verifyGPUSeconds float64
	gpuSecondsDelta  float64 // gpu_instance_seconds after - before
	newInstances     int
	verifyLaunches   int
}

func (s spend) gpuTotal() float64 { return s.buildGPUSeconds + s.verifyGPUSeconds }

func measure(before, after awsfake.StateDump) spend {
	old := map[string]bool{}
	for _, in := range before.Regions[ebsRegion].Instances {
		old[in.ID] = true
	}
	s := spend{gpuSecondsDelta: after.GPUInstanceSeconds - before.GPUInstanceSeconds}
	for _, in := range after.Regions[ebsRegion].Instances {
		if old[in.ID] {
			continue
		}
		s.newInstances++
		gpu := 0.0
		if awsfake.IsGPUInstanceType(in.InstanceType) {
			gpu = in.RunningSeconds
		}
		if in.Tags["dlami:verify"] != "" {
			s.verifyLaunches++
			s.verifyTypes = append(s.verifyTypes, in.InstanceType)
			s.verifyGPUSeconds += gpu
			continue
		}
		s.buildType, s.buildSeconds, s.buildGPUSeconds = in.InstanceType, s.buildSeconds+in.RunningSeconds, s.buildGPUSeconds+gpu
	}
	return s
}

// newImage is the one image of the account in after that before lacks.
func newImage(t *testing.T, before, after awsfake.StateDump) awsfake.Image {
	t.Helper()
	old := map[string]bool{}
	for _, img := range ownImages(before, ebsRegion) {
		old[img.ID] = true
	}
	var out []awsfake.Image
	for _, img := range ownImages(after, ebsRegion) {
		if !old[img.ID] {
			out = append(out, img)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d new images, want the one AMI of this build: %+v", len(out), out)
	}
	return out[0]
}

func TestTwoPhase(t *testing.T) {
	e := ebsPrereqs(t)
	demoDir, err := filepath.Abs(filepath.Join("..", "..", "examples", "demo"))
	if err != nil {
		t.Fatal(err)
	}
	ebsDir, err := filepath.Abs("ebs")
	if err != nil {
		t.Fatal(err)
	}
	fake := e.startFake(t, "twophase-fake", true)
	var one, two spend

	t.Run("one-phase", func(t *testing.T) {
		out := outDir(t, "twophase-one-phase")
		before := fake.state(t)
		r := e.build(t, demoDir, out, fake.packerEnv(e), nil,
			"-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "demo.pkr.hcl")
		t.Logf("one-phase demo bake: %s", r.took.Round(time.Second))
		if r.code != 0 {
			t.Fatalf("packer build exited %d (output in %s):\n%s", r.code, out, tail(filepath.Join(out, "packer.out"), 60))
		}
		after := fake.state(t)
		one = measure(before, after)
		if bake := readPhaseReport(t, out); bake.Result != "pass" || len(bake.DeferredChecks) != 0 {
			t.Errorf("bake report: %s, deferred %v; want pass", bake.Result, bake.DeferredChecks)
		}
		if !strings.Contains(r.ui, "build host: NVIDIA GPUs present") {
			t.Error("the one-phase build instance shows no GPU")
		}
		// Issue 25: amazon-ebs's build instance has no EFA device (one plain interface): the
		// bake's EFA device checks warn, naming the verification, and none passes.
		assertEFANotAttached(t, readPhaseReport(t, out))
		verify := readPhaseReport(t, filepath.Join(out, "first-boot", ebsRegion))
		if verify.Result != "pass" {
			t.Errorf("verification: %s, failed %v", verify.Result, verify.FailedChecks)
		}
		// The verification attached every EFA of p6-b200.48xlarge (efa = "all", the default)
		// and judged the devices and their traffic.
		assertEFAVerified(t, verify, 8)
		if one.buildType != "p6-b200.48xlarge" || one.buildGPUSeconds <= 0 || one.verifyLaunches != 1 || one.verifyGPUSeconds <= 0 {
			t.Errorf("one-phase spend %+v: want GPU time on a p6-b200.48xlarge build and one verification", one)
		}
		if math.Abs(one.gpuSecondsDelta-one.gpuTotal()) > 0.01 {
			t.Errorf("gpu_instance_seconds rose by %.2f, the instances' running_seconds add up to %.2f", one.gpuSecondsDelta, one.gpuTotal())
		}
		assertCleanedUp(t, after, ebsRegion)
		assertNoInstanceState(t, fake)
	})

	t.Run("two-phase", func(t *testing.T) {
		out := outDir(t, "twophase-two-phase")
		before := fake.state(t)
		okBefore, failedBefore := fake.calls(t, ebsRegion, "RunInstances")
		faulted := false
		r := e.build(t, demoDir, out, fake.packerEnv(e), func(cmd *exec.Cmd) {
			// Once the first phase is over (amazon-ebs launched its build instance long
			// before), p5.48xlarge has no capacity for the post-processor's first try.
			deadline := time.Now().Add(10 * time.Minute)
			for time.Now().Before(deadline) {
				if b, _ := os.ReadFile(filepath.Join(out, "packer.log")); strings.Contains(string(b), "dlami: result DEFERRED") {
					fake.control(t, "POST", "/_fake/fault?spec=RunInstances@"+ebsRegion+"=capacity:1")
					faulted = true
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Errorf("the first phase never reported result DEFERRED (output in %s)", out)
		}, "-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "-var", "two_phase=true",
			"-var", `verify_instance_types=["p5.48xlarge","p6-b200.48xlarge"]`, "demo.pkr.hcl")
		fake.control(t, "DELETE", "/_fake/fault")
		t.Logf("two-phase demo bake: %s", r.took.Round(time.Second))
		if !faulted {
			t.Fatalf("the capacity fault was never installed (exit %d):\n%s", r.code, tail(filepath.Join(out, "packer.out"), 40))
		}
		if r.code != 0 {
			t.Fatalf("packer build exited %d (output in %s):\n%s", r.code, out, tail(filepath.Join(out, "packer.out"), 60))
		}
		after := fake.state(t)
		two = measure(before, after)

		// Phase one: the guard and the layer on a build instance without GPUs; the host
		// suite and the NCCL test deferred, never passed.
		bake := readPhaseReport(t, out)
		if bake.Result != "deferred" || bake.InstanceType != "c7i.8xlarge" || !slices.Contains(bake.DeferredChecks, "gpu") || !slices.Contains(bake.DeferredChecks, "nccl-correctness") {
			t.Errorf("bake report: result %q on %q, deferred %v; want deferred on c7i.8xlarge with the host suite and NCCL", bake.Result, bake.InstanceType, bake.DeferredChecks)
		}
		for _, id := range []string{"holds", "packages", "next-boot-kernel", "dkms", "layer:slurm"} {
			if st, _ := bake.check(id); st != "pass" && st != "warn" {
				t.Errorf("phase one %s = %s: the guard and the layers are judged on the build instance", id, st)
			}
		}
		if st, msg := bake.check("gpu"); st != "skip" || !strings.Contains(msg, "complete_validation = true") {
			t.Errorf("phase one gpu = %s %q; want skip naming complete_validation", st, msg)
		}
		if !strings.Contains(r.ui, "build host: no NVIDIA GPU") || strings.Contains(r.ui, "build host: NVIDIA GPUs present") {
			t.Error("the two-phase build instance is not modelled without GPUs")
		}

		// Phase two: p5.48xlarge refused for capacity at once, p6-b200.48xlarge verified the
		// AMI with the full host suite and the NCCL test.
		verify := readPhaseReport(t, filepath.Join(out, "first-boot", ebsRegion))
		if verify.Result != "pass" || verify.InstanceType != "p6-b200.48xlarge" {
			t.Errorf("verification: %s on %s, failed %v", verify.Result, verify.InstanceType, verify.FailedChecks)
		}
		for _, id := range []string{"first-boot-kernel", "first-boot-packages", "gpu", "efa-devices", "nccl-correctness", "nccl-busbw", "nccl-transport"} {
			if st, _ := verify.check(id); st != "pass" {
				t.Errorf("verification %s = %s, want pass (complete_validation runs the host suite and the NCCL test)", id, st)
			}
		}
		assertEFAVerified(t, verify, 8)
		if l := verify.Launch; l == nil || l.InstanceType != "p6-b200.48xlarge" || len(l.Refused) != 1 || l.Refused[0].InstanceType != "p5.48xlarge" || l.Refused[0].Code != "InsufficientInstanceCapacity" {
			t.Errorf("verification launch %+v: want p6-b200.48xlarge after p5.48xlarge was refused", l)
		}
		ok, failed := fake.calls(t, ebsRegion, "RunInstances")
		if failed-failedBefore != 1 || ok-okBefore != 2 {
			t.Errorf("RunInstances answered %d errors and %d OK, want 1 (p5.48xlarge, not retried) and 2 (the build, the verification)", failed-failedBefore, ok-okBefore)
		}
		for _, want := range []string{"no capacity for p5.48xlarge (InsufficientInstanceCapacity); trying p6-b200.48xlarge",
			"dlami:verified_instance_type = p6-b200.48xlarge", "completing the validation the bake deferred"} {
			if !strings.Contains(r.ui, want) {
				t.Errorf("Packer's output lacks %q:\n%s", want, grepLines(r.ui, "dlami"))
			}
		}
		img := newImage(t, before, after)
		if img.Tags["dlami:verified"] != "true" || img.Tags["dlami:verified_instance_type"] != "p6-b200.48xlarge" {
			t.Errorf("AMI tags %v: want dlami:verified = true, dlami:verified_instance_type = p6-b200.48xlarge", img.Tags)
		}
		var bom struct {
			Deferred *struct {
				Checks            []string `json:"checks"`
				BuildInstanceType string   `json:"build_instance_type"`
			} `json:"deferred_validation"`
		}
		if err := json.Unmarshal(readLayerFile(t, img, "etc/dlami-bake/manifest.json"), &bom); err != nil {
			t.Fatal(err)
		}
		if bom.Deferred == nil || bom.Deferred.BuildInstanceType != "c7i.8xlarge" || !slices.Contains(bom.Deferred.Checks, "gpu") {
			t.Errorf("the image's bill of materials does not record the deferral: %+v", bom.Deferred)
		}

		// GPU time went to the verification only.
		if two.buildType != "c7i.8xlarge" || two.buildSeconds <= 0 || two.buildGPUSeconds != 0 {
			t.Errorf("build instance %s ran %.1f s, %.1f of them GPU seconds: want a c7i.8xlarge with zero", two.buildType, two.buildSeconds, two.buildGPUSeconds)
		}
		if two.verifyLaunches != 1 || !slices.Equal(two.verifyTypes, []string{"p6-b200.48xlarge"}) || two.verifyGPUSeconds <= 0 {
			t.Errorf("verification instances %v (%.1f GPU s): want one p6-b200.48xlarge", two.verifyTypes, two.verifyGPUSeconds)
		}
		if math.Abs(two.gpuSecondsDelta-two.verifyGPUSeconds) > 0.01 {
			t.Errorf("gpu_instance_seconds rose by %.2f, the verification instance ran %.2f: GPU time was spent elsewhere", two.gpuSecondsDelta, two.verifyGPUSeconds)
		}
		if d := after.InstanceSeconds["c7i.8xlarge"] - before.InstanceSeconds["c7i.8xlarge"]; math.Abs(d-two.buildSeconds) > 0.01 {
			t.Errorf("instance_seconds[c7i.8xlarge] rose by %.2f, the build instance ran %.2f", d, two.buildSeconds)
		}
		assertCleanedUp(t, after, ebsRegion)
		assertNoInstanceState(t, fake)
	})

	if one.gpuTotal() > 0 && two.verifyLaunches == 1 {
		t.Logf("GPU-instance seconds, demo template: one-phase %.1f (build %.1f + verification %.1f), two-phase %.1f (build 0, on %s for %.1f s + verification %.1f)",
			one.gpuTotal(), one.buildGPUSeconds, one.verifyGPUSeconds, two.gpuTotal(), two.buildType, two.buildSeconds, two.verifyGPUSeconds)
		if two.gpuTotal() >= one.gpuTotal() {
			t.Errorf("two-phase spent %.1f GPU seconds, one-phase %.1f: deferring validation saved nothing", two.gpuTotal(), one.gpuTotal())
		}
	}

	t.Run("drift-in-phase-one", func(t *testing.T) {
		out := outDir(t, "twophase-drift")
		before := fake.state(t)
		r := e.build(t, ebsDir, out, fake.packerEnv(e), nil,
			"-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "twophase-drift.pkr.hcl")
		t.Logf("first phase that drifts: %s", r.took.Round(time.Second))
		if r.code == 0 {
			t.Fatalf("a drifting first phase passed:\n%s", tail(filepath.Join(out, "packer.out"), 40))
		}
		after := fake.state(t)
		s := measure(before, after)
		if s.buildType != "c7i.8xlarge" || s.verifyLaunches != 0 || s.gpuSecondsDelta != 0 || s.newInstances != 1 {
			t.Errorf("spend %+v: want the c7i.8xlarge build instance only and zero GPU-instance seconds", s)
		}
		t.Logf("GPU-instance seconds of a drifting first phase: %.1f (build instance %s ran %.1f s)", s.gpuSecondsDelta, s.buildType, s.buildSeconds)
		bake := readPhaseReport(t, out)
		if bake.Result != "fail" || !slices.Contains(bake.FailedChecks, "holds") || !slices.Contains(bake.FailedChecks, "packages") {
			t.Errorf("report: %s, failed %v; want fail on holds and packages", bake.Result, bake.FailedChecks)
		}
		if st, msg := bake.check("gpu"); st != "skip" || !strings.Contains(msg, "no GPU instance is launched") {
			t.Errorf("gpu = %s %q: the report must say no GPU instance is launched", st, msg)
		}
		if strings.Contains(r.ui, "verifying the first boot") || len(ownImages(after, ebsRegion)) != len(ownImages(before, ebsRegion)) {
			t.Error("a drifted first phase registered an AMI or started its verification")
		}
		if _, err := os.Stat(filepath.Join(out, "verify")); err == nil {
			t.Error("the post-processor wrote reports for a failed build")
		}
		assertCleanedUp(t, after, ebsRegion)
		assertNoInstanceState(t, fake)
	})
}

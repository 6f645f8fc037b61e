package engine

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// bakedBOM bakes on a fresh fake host and returns the bill of materials it wrote.
func bakedBOM(t *testing.T) bom.BOM {
	h := newFakeHost(t)
	opt := options(t)
	if err := Run(context.Background(), h, &recordingUI{}, opt); err != nil {
		t.Fatal(err)
	}
	b, err := bom.Decode(h.files[opt.ManifestPath])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func verifyOptions(t *testing.T, b bom.BOM) VerifyOptions {
	return VerifyOptions{Common: Common{BuildName: "unit", ReportDir: t.TempDir(), CheckTimeout: time.Minute,
		RemoteFolder: "/tmp", LoadSampleEvery: time.Millisecond,
		Checks: settings.Checks{NCCL: settings.NCCL{Skip: true}, Function: settings.Function{EFATraffic: settings.EFATraffic{Skip: true}, GDR: settings.GDR{Skip: true}}}}, BOM: b, SettleTimeout: time.Minute}
}

func TestVerifyFirstBoot(t *testing.T) {
	b := bakedBOM(t)

	// A first boot as baked passes, without the NCCL test unless asked for.
	h := newFakeHost(t)
	o := verifyOptions(t, b)
	if err := Verify(context.Background(), h, &recordingUI{}, o); err != nil {
		t.Fatalf("healthy first boot: %v", err)
	}
	r := readReport(t, o.ReportDir)
	if r.Result != "pass" || status(r, "first-boot-kernel") != "pass" || status(r, "first-boot-packages") != "pass" ||
		status(r, "gpu") != "pass" || status(r, "nccl-correctness") != "skip" || status(r, "holds") != "missing" {
		t.Errorf("healthy: %s %v", r.Result, r.Checks)
	}
	if _, ok := h.files[bom.DefaultPath]; ok {
		t.Error("verification wrote a bill of materials")
	}

	// A per-instance script that dist-upgraded at first boot.
	h = newFakeHost(t)
	h.pkgs["linux-aws"] = fakePkg{"7.0.0.1015.15", false}
	installKernel1015(h)
	o = verifyOptions(t, b)
	err := Verify(context.Background(), h, &recordingUI{}, o)
	if err == nil {
		t.Fatal("a first-boot dist-upgrade passed")
	}
	r = readReport(t, o.ReportDir)
	if !slices.Contains(r.FailedChecks, "first-boot-packages") || !strings.Contains(check(r, "first-boot-packages").Message, "linux-aws: 7.0.0.1014.14 → 7.0.0.1015.15") {
		t.Errorf("dist-upgrade: %v %q", r.FailedChecks, check(r, "first-boot-packages").Message)
	}
	// The build's error names every failed check, the first-boot ones first.
	if !strings.HasPrefix(err.Error(), "first boot failed: first-boot-") {
		t.Errorf("error %q", err)
	}
	for _, id := range r.FailedChecks {
		if !strings.Contains(err.Error(), id) {
			t.Errorf("error %q does not name failed check %s", err, id)
		}
	}

	// cloud-init still running at the deadline: not judged as settled.
	h = newFakeHost(t)
	h.settle = fakeSection{code: 124}
	o = verifyOptions(t, b)
	if err := Verify(context.Background(), h, &recordingUI{}, o); err == nil {
		t.Fatal("an unsettled first boot passed")
	}
	r = readReport(t, o.ReportDir)
	if !slices.Equal(r.FailedChecks, []string{"first-boot-kernel", "first-boot-packages"}) || status(r, "gpu") != "skip" {
		t.Errorf("unsettled: %v gpu %s", r.FailedChecks, status(r, "gpu"))
	}
}

// The first boot is judged with the guard policy the bake used, carried in the bill of
// materials: a package the provisioner excluded never fails first-boot-packages (with
// on_failure = "deregister" that would destroy a good AMI).
func TestVerifyUsesTheBakesGuardPolicy(t *testing.T) {
	h := newFakeHost(t)
	opt := options(t)
	opt.Policy.Exclude = []string{"nvidia-fabricmanager-595"}
	if err := Run(context.Background(), h, &recordingUI{}, opt); err != nil {
		t.Fatal(err)
	}
	b, err := bom.Decode(h.files[opt.ManifestPath])
	if err != nil {
		t.Fatal(err)
	}
	if _, guarded := b.Guarded["nvidia-fabricmanager-595"]; guarded || b.GuardPolicy == nil {
		t.Fatalf("bill of materials: guarded %v, policy %+v", b.Guarded, b.GuardPolicy)
	}
	// The post-processor's own policy is the default one: without the BOM's, the excluded
	// package would be judged as an unexpected guarded package.
	o := verifyOptions(t, b)
	if err := Verify(context.Background(), newFakeHost(t), &recordingUI{}, o); err != nil {
		t.Fatalf("first boot of an unchanged image with an excluded package: %v", err)
	}
	b.GuardPolicy = nil
	o = verifyOptions(t, b)
	if err := Verify(context.Background(), newFakeHost(t), &recordingUI{}, o); err == nil {
		t.Fatal("without the bake's policy the excluded package must be judged (the test proves the policy is what passes it)")
	}
}

// On a first boot the SSH session is a fresh login of the image, so its own memlock limit is a
// second witness: limited there fails even when the limits files say unlimited (something
// outside pam_limits lowers it), while the same session in a bake is only evidence.
func TestVerifyJudgesTheFreshLoginsMemlock(t *testing.T) {
	b := bakedBOM(t)
	h := newFakeHost(t)
	h.hostOut["host.memlock"] = fakeSection{out: "64"}
	o := verifyOptions(t, b)
	if err := Verify(context.Background(), h, &recordingUI{}, o); err == nil {
		t.Fatal("a first boot whose login has 64 KiB of memlock passed")
	}
	c := check(readReport(t, o.ReportDir), "memlock")
	if c.Status != "fail" || c.Actual != "64 KiB for this login" || !strings.Contains(c.Message, "outside pam_limits") {
		t.Errorf("memlock %s %q: %s", c.Status, c.Actual, c.Message)
	}
}

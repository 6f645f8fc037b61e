package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/layer"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// cpuBuildHost is a fake build host that names itself a CPU instance and counts the host
// suite's reads (there must be none in a first phase).
func cpuBuildHost(t *testing.T) (*fakeHost, *int) {
	h := newFakeHost(t)
	h.hostOut["host.product_name"] = fakeSection{out: "c7i.8xlarge"}
	reads := 0
	h.onHostBatch = func(*fakeHost) { reads++ }
	return h, &reads
}

// The first phase of a two-phase bake: the guard and the layers are judged, the host suite and
// the NCCL test are deferred (skip, naming both settings, never a pass), the result is
// "deferred", and the bill of materials records it.
func TestDeferredBake(t *testing.T) {
	h, reads := cpuBuildHost(t)
	ui := &recordingUI{}
	opt := options(t, layer.Spec{Name: "slurm", AptPackages: []string{"slurmd"}})
	opt.DeferValidation = true
	if err := Run(context.Background(), h, ui, opt); err != nil {
		t.Fatalf("first phase: %v", err)
	}
	if *reads != 0 {
		t.Errorf("the host suite read the build host %d times; a first phase must not", *reads)
	}
	r := readReport(t, opt.ReportDir)
	if r.Result != "deferred" || len(r.FailedChecks) != 0 {
		t.Errorf("report: result %q failed %v, want deferred", r.Result, r.FailedChecks)
	}
	for _, id := range checks.IDs(checks.PhaseGuard) {
		if st := status(r, id); st == "skip" || st == "missing" {
			t.Errorf("guard check %s = %s: the guard runs in the first phase", id, st)
		}
	}
	if st := status(r, "layer:slurm"); st != "pass" {
		t.Errorf("layer:slurm = %s", st)
	}
	for _, id := range checks.IDs(checks.PhaseHost, checks.PhaseLoad) {
		c := check(r, id)
		if c.Status != "skip" || !strings.Contains(c.Message, "defer_validation = true") || !strings.Contains(c.Message, "complete_validation = true") ||
			!strings.Contains(c.Message, "c7i.8xlarge") {
			t.Errorf("%s: %s %q; want skip naming defer_validation, complete_validation and the build instance", id, c.Status, c.Message)
		}
	}
	if !strings.Contains(ui.String(), "result DEFERRED") || strings.Contains(ui.String(), "result PASS") {
		t.Errorf("the UI does not say the result is deferred:\n%s", ui.String())
	}
	b, err := bom.Decode(h.files[opt.ManifestPath])
	if err != nil {
		t.Fatal(err)
	}
	if b.Deferred == nil || b.Deferred.BuildInstanceType != "c7i.8xlarge" || !slices.Contains(b.Deferred.Checks, result.GPU) || !slices.Contains(b.Deferred.Checks, result.NCCLCorrectness) {
		t.Errorf("bill of materials deferred record %+v", b.Deferred)
	}
	if b.Kernel != "7.0.0-1014-aws" || len(b.Guarded) == 0 {
		t.Errorf("bill of materials kernel %q, %d guarded packages", b.Kernel, len(b.Guarded))
	}
}

// A layer that drifts in the first phase fails it before anything is deferred: no bill of
// materials, and the report says no GPU instance is launched for the deferred checks.
func TestDeferredBakeDriftFails(t *testing.T) {
	h, reads := cpuBuildHost(t)
	h.layerHook[0] = func(_ context.Context, h *fakeHost) (int, error) { installKernel1015(h); return 0, nil }
	opt := options(t, layer.Spec{Name: "careless"})
	opt.DeferValidation = true
	err := Run(context.Background(), h, &recordingUI{}, opt)
	var de *DriftError
	if !errors.As(err, &de) {
		t.Fatalf("want a drift error, got %v", err)
	}
	r := readReport(t, opt.ReportDir)
	if r.Result != "fail" || !slices.Contains(r.FailedChecks, "next-boot-kernel") {
		t.Errorf("report: %s %v", r.Result, r.FailedChecks)
	}
	if c := check(r, "gpu"); c.Status != "skip" || !strings.Contains(c.Message, "no GPU instance is launched") {
		t.Errorf("gpu after a drifted first phase: %s %q", c.Status, c.Message)
	}
	if _, ok := h.files[opt.ManifestPath]; ok || *reads != 0 {
		t.Errorf("a drifted first phase wrote a bill of materials or read the host suite (%d)", *reads)
	}
}

// nccl.skip = true stays a skip in a first phase: only the host suite is deferred.
func TestDeferredBakeWithNCCLSkip(t *testing.T) {
	h, _ := cpuBuildHost(t)
	opt := options(t)
	opt.DeferValidation, opt.Checks.NCCL.Skip = true, true
	if err := Run(context.Background(), h, &recordingUI{}, opt); err != nil {
		t.Fatal(err)
	}
	b, err := bom.Decode(h.files[opt.ManifestPath])
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(b.Deferred.Checks, result.NCCLCorrectness) || !slices.Contains(b.Deferred.Checks, result.Xid) {
		t.Errorf("deferred %v: want the host suite only", b.Deferred.Checks)
	}
	if c := check(readReport(t, opt.ReportDir), "nccl-correctness"); !strings.Contains(c.Message, "nccl.skip") {
		t.Errorf("nccl-correctness: %q", c.Message)
	}
}

// deferredBOM is the bill of materials of a first phase.
func deferredBOM(t *testing.T, expect settings.Expectations) bom.BOM {
	h, _ := cpuBuildHost(t)
	opt := options(t)
	opt.DeferValidation, opt.Checks.Expect = true, expect
	if err := Run(context.Background(), h, &recordingUI{}, opt); err != nil {
		t.Fatal(err)
	}
	b, err := bom.Decode(h.files[opt.ManifestPath])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A verification refuses a deferred bill of materials unless it completes the validation;
// completing it runs the host suite and the NCCL test with the bake's expect block.
func TestVerifyDeferred(t *testing.T) {
	b := deferredBOM(t, settings.Expectations{NVMePath: "/opt/dlami/nvme", GPUModel: "B200"})

	h := newFakeHost(t)
	o := verifyOptions(t, b)
	err := Verify(context.Background(), h, &recordingUI{}, o)
	if !errors.Is(err, ErrDeferredNotCompleted) || !strings.Contains(err.Error(), "complete_validation = true") || !strings.Contains(err.Error(), "defer_validation = true") {
		t.Fatalf("deferred BOM without complete_validation: %v", err)
	}
	if Judged(err) {
		t.Error("a refused deferred BOM is a verdict on the host; it is a setting that is missing")
	}
	r := readReport(t, o.ReportDir)
	if r.Result != "error" || status(r, "gpu") != "skip" || status(r, "first-boot-kernel") != "skip" {
		t.Errorf("refused: result %s gpu %s first-boot-kernel %s", r.Result, status(r, "gpu"), status(r, "first-boot-kernel"))
	}

	h = newFakeHost(t)
	o = verifyOptions(t, b)
	complete(&o)
	ui := &recordingUI{}
	if err := Verify(context.Background(), h, ui, o); err != nil {
		t.Fatalf("completing the deferred validation: %v", err)
	}
	r = readReport(t, o.ReportDir)
	for _, id := range []string{"first-boot-kernel", "first-boot-packages", "gpu", "efa-devices", "nccl-correctness", "nccl-busbw"} {
		if st := status(r, id); st != "pass" {
			t.Errorf("%s = %s, want pass (complete_validation runs the host suite and the NCCL test)", id, st)
		}
	}
	if r.Result != "pass" || !strings.Contains(ui.String(), "completing the validation the bake deferred") {
		t.Errorf("result %s; UI:\n%s", r.Result, ui.String())
	}
	if c := check(r, "gpu"); !strings.Contains(c.Actual, "B200") {
		t.Errorf("gpu actual %q: judged without the bake's gpu_model", c.Actual)
	}

	// The bake's expect block is what the deferred checks are judged with.
	b = deferredBOM(t, settings.Expectations{NVMePath: "/opt/dlami/nvme", GPUModel: "H100"})
	o = verifyOptions(t, b)
	complete(&o)
	if err := Verify(context.Background(), newFakeHost(t), &recordingUI{}, o); err == nil || status(readReport(t, o.ReportDir), "gpu") != "fail" {
		t.Errorf("a B200 host judged with the bake's gpu_model = H100 passed: %v", err)
	}
}

// complete_validation judges with the bake's own test settings, from the bill of materials: a
// bake with dcgm_level = 0 gets no DCGM diagnostics on the verification instance (reported
// skipped, naming the setting), and its skip_checks stay skipped there; one with a level gets
// that level.
func TestVerifyUsesTheBakesTestSettings(t *testing.T) {
	for _, tc := range []struct {
		level   settings.DCGMLevel
		dcgm    string
		message string
	}{
		{0, "skip", "dcgm_level = 0"},
		{1, "pass", ""},
	} {
		h, _ := cpuBuildHost(t)
		opt := options(t)
		opt.DeferValidation = true
		opt.Checks.Function.DCGMLevel = tc.level
		opt.Checks.Skip, opt.Checks.SkipSetting = []string{result.Lustre}, "skip_checks"
		if err := Run(context.Background(), h, &recordingUI{}, opt); err != nil {
			t.Fatal(err)
		}
		b, err := bom.Decode(h.files[opt.ManifestPath])
		if err != nil {
			t.Fatal(err)
		}
		if b.Checks == nil || b.Checks.Function.DCGMLevel != tc.level || !slices.Equal(b.Checks.Skip, []string{result.Lustre}) {
			t.Fatalf("the bill of materials carries %+v", b.Checks)
		}
		fh := functionHost(t, "")
		ran := ""
		answer := fh.jobs["dcgm.sh"]
		fh.jobs["dcgm.sh"] = func(ctx context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error) {
			ran = string(h.files[j.Script])
			return answer(ctx, h, j, w)
		}
		o := verifyOptions(t, b)
		complete(&o)
		if err := Verify(context.Background(), fh, &recordingUI{}, o); err != nil {
			t.Fatalf("level %d: %v", tc.level, err)
		}
		r := readReport(t, o.ReportDir)
		if c := check(r, "dcgm"); c.Status != tc.dcgm || !strings.Contains(c.Message, tc.message) {
			t.Errorf("level %d: dcgm %s %q", tc.level, c.Status, c.Message)
		}
		if c := check(r, "lustre"); c.Status != "skip" || !strings.Contains(c.Message, "skip_checks") {
			t.Errorf("level %d: lustre %s %q, want skipped by the bake's skip_checks", tc.level, c.Status, c.Message)
		}
		if want := fmt.Sprintf("level='%d'\n", tc.level); (tc.level > 0) != strings.Contains(ran, want) {
			t.Errorf("level %d: the DCGM script run: %q", tc.level, textcut.Head(ran, 200))
		}
	}
}

// complete makes o a verification that completes the bake's validation, judging with what
// the post-processor's complete_validation = true hands it: the bake's settings under none of
// its own, the NCCL test on.
func complete(o *VerifyOptions) {
	o.CompleteValidation = true
	o.Checks = o.BOM.Checks.Overlay(settings.Overlay{NCCL: settings.RunOn, DCGM: settings.RunAsBaked,
		EFATraffic: settings.RunAsBaked, GDR: settings.RunAsBaked, SkipSetting: "skip_checks", WarnSetting: "warn_checks"})
}

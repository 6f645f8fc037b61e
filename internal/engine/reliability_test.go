package engine

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/layer"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nccltests"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// A golden image carries the baseline of the bake that made it; the next bake takes its own
// and removes the old one, whatever it says.
func TestBaselineFromAnEarlierBakeIsReplaced(t *testing.T) {
	h := newFakeHost(t)
	old := []byte(`{"schema":1,"running_kernel":"6.8.0-1001-aws","packages":{"x":{"version":"1","held":true,"installed":true,"status":"hi "}}}`)
	h.files[guard.BaselinePath("an-earlier-run")] = old
	h.files[guard.BaselineDir+"/baseline.json"] = old // the layout of plugin versions before run ids
	opt := options(t, layer.Spec{Name: "a"})
	ui := &recordingUI{}
	if err := Run(context.Background(), h, ui, opt); err != nil {
		t.Fatalf("bake on an image with an old baseline: %v\n%s", err, ui)
	}
	for p := range h.files {
		if strings.HasPrefix(p, guard.BaselineDir) && p != guard.BaselinePath(runUUID) {
			t.Errorf("another run's baseline stayed in the image: %s", p)
		}
	}
	if _, ok := h.files[guard.BaselinePath(runUUID)]; !ok {
		t.Error("this run's baseline was not recorded")
	}
}

// "Cannot read the baseline" is a failure, never "no baseline".
func TestUnreadableBaselineFails(t *testing.T) {
	h := newFakeHost(t)
	h.files[guard.BaselinePath(runUUID)] = []byte(`{"schema": 1, "running_kern`)
	opt := options(t, layer.Spec{Name: "a"})
	err := Run(context.Background(), h, &recordingUI{}, opt)
	if err == nil || !strings.Contains(err.Error(), "baseline") || len(h.layersRun) != 0 {
		t.Fatalf("err %v layers %v", err, h.layersRun)
	}
	if r := readReport(t, opt.ReportDir); r.Result != "fail" || len(r.FailedChecks) == 0 {
		t.Errorf("report %s %v", r.Result, r.FailedChecks)
	}
	// And without a run id there is nothing to key a baseline to.
	opt = options(t)
	opt.RunUUID = ""
	if err := Run(context.Background(), newFakeHost(t), &recordingUI{}, opt); err == nil || !strings.Contains(err.Error(), "PackerRunUUID") {
		t.Errorf("no run id: %v", err)
	}
}

func TestSelfRebootingLayer(t *testing.T) {
	// Without expect_reboot: a failure that says what happened and what to set.
	h := newFakeHost(t)
	h.layerHook[0] = selfReboot
	opt := options(t, layer.Spec{Name: "vendor"}, layer.Spec{Name: "never"})
	err := Run(context.Background(), h, &recordingUI{}, opt)
	if err == nil || !strings.Contains(err.Error(), `rebooted during layer "vendor"`) || !strings.Contains(err.Error(), "expect_reboot = true") ||
		!strings.Contains(err.Error(), "reboot = true") || !strings.Contains(err.Error(), "drift check after the reboot found nothing") {
		t.Fatalf("got %v", err)
	}
	r := readReport(t, opt.ReportDir)
	if !slices.Equal(r.FailedChecks, []string{"layer:vendor"}) || len(h.layersRun) != 1 {
		t.Errorf("failed %v layers %v", r.FailedChecks, h.layersRun)
	}

	// With expect_reboot: the bake goes on after the drift check.
	h = newFakeHost(t)
	h.layerHook[0] = selfReboot
	opt = options(t, layer.Spec{Name: "vendor", ExpectReboot: true}, layer.Spec{Name: "next"})
	if err := Run(context.Background(), h, &recordingUI{}, opt); err != nil {
		t.Fatalf("expect_reboot: %v", err)
	}
	if r := readReport(t, opt.ReportDir); r.Result != "pass" || check(r, "layer:vendor").Status != "pass" || len(h.layersRun) != 2 {
		t.Errorf("expect_reboot: %s %+v %v", r.Result, check(r, "layer:vendor"), h.layersRun)
	}

	// With expect_reboot, into another kernel: the drift check fails kernel.
	h = newFakeHost(t)
	h.layerHook[0] = func(ctx context.Context, h *fakeHost) (int, error) { installKernel1015(h); return selfReboot(ctx, h) }
	opt = options(t, layer.Spec{Name: "vendor", ExpectReboot: true})
	if err := Run(context.Background(), h, &recordingUI{}, opt); err == nil {
		t.Fatal("a self-reboot into 1015 passed")
	}
	if r := readReport(t, opt.ReportDir); !slices.Contains(r.FailedChecks, "kernel") {
		t.Errorf("failed %v", r.FailedChecks)
	}

	// A drop without a reboot stays a failure with its cause.
	h = newFakeHost(t)
	h.layerHook[0] = func(context.Context, *fakeHost) (int, error) {
		return 0, fmt.Errorf("ssh: %w", host.ErrDisconnected)
	}
	opt = options(t, layer.Spec{Name: "flaky", ExpectReboot: true})
	err = Run(context.Background(), h, &recordingUI{}, opt)
	if err == nil || !strings.Contains(err.Error(), "without a reboot") {
		t.Fatalf("drop without reboot: %v", err)
	}
}

func TestCancelDuringNCCL(t *testing.T) {
	h := newFakeHost(t)
	ctx, cancel := context.WithCancel(context.Background())
	h.ncclHook = func(ctx context.Context, j host.Job) (int, error) {
		fmt.Fprintln(j.Output, "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong")
		cancel() // Ctrl-C while all_reduce_perf runs
		<-ctx.Done()
		return 0, ctx.Err()
	}
	opt := options(t, layer.Spec{Name: "a"})
	err := Run(ctx, h, &recordingUI{}, opt)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if !slices.Equal(h.killed, []string{"the NCCL test"}) {
		t.Errorf("killed %v: all_reduce_perf must be stopped on the host", h.killed)
	}
	r := readReport(t, opt.ReportDir)
	if r.Result != "cancelled" || r.Stage != "validation" || !slices.Equal(r.FailedChecks, []string{"bake:cancelled"}) {
		t.Errorf("report: %s at %s, failed %v", r.Result, r.Stage, r.FailedChecks)
	}
	if status(r, "gpu") != "pass" || status(r, "layer:a") != "pass" || status(r, "nccl-correctness") != "skip" {
		t.Errorf("checks done so far: gpu %s layer %s nccl %s", status(r, "gpu"), status(r, "layer:a"), status(r, "nccl-correctness"))
	}
	ju := junit(t, opt.ReportDir)
	if ju.Errors != 1 || ju.Failures != 0 {
		t.Errorf("junit errors %d failures %d", ju.Errors, ju.Failures)
	}
}

// Packer kills the plugin moments after Ctrl-C, often before the cancellation reaches it: the
// reports on disk while the NCCL test runs already say the bake would stop there, whole, in
// all three formats.
func TestReportsOnDiskWhilePluginCouldBeKilled(t *testing.T) {
	h := newFakeHost(t)
	opt := options(t, layer.Spec{Name: "a"})
	var during reportJSON
	var duringJUnit junitDoc
	h.ncclHook = func(ctx context.Context, j host.Job) (int, error) {
		// What a kill -9 of the plugin now would leave behind.
		during = readReport(t, opt.ReportDir)
		duringJUnit = junit(t, opt.ReportDir)
		return 1, errors.New("the test ends without a run")
	}
	_ = Run(context.Background(), h, &recordingUI{}, opt)
	if during.Result != "cancelled" || !strings.Contains(during.Error, "NCCL") || !slices.Equal(during.FailedChecks, []string{"bake:cancelled"}) {
		t.Errorf("report during the NCCL test: %s (%q), failed %v", during.Result, during.Error, during.FailedChecks)
	}
	if status(during, "gpu") != "pass" || status(during, "layer:a") != "pass" || status(during, "nccl-correctness") != "skip" {
		t.Errorf("checks done by then: gpu %s layer %s nccl %s", status(during, "gpu"), status(during, "layer:a"), status(during, "nccl-correctness"))
	}
	if duringJUnit.Errors != 1 {
		t.Errorf("junit during the NCCL test: %d errors, want 1", duringJUnit.Errors)
	}
	// The verdict replaces it at the end.
	if r := readReport(t, opt.ReportDir); r.Result == "cancelled" {
		t.Errorf("final report still says cancelled: %q", r.Error)
	}
}

func TestCancelDuringLayerKillsIt(t *testing.T) {
	h := newFakeHost(t)
	ctx, cancel := context.WithCancel(context.Background())
	h.layerHook[0] = func(ctx context.Context, _ *fakeHost) (int, error) {
		cancel()
		<-ctx.Done()
		return 0, ctx.Err()
	}
	opt := options(t, layer.Spec{Name: "slow"})
	if err := Run(ctx, h, &recordingUI{}, opt); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if !slices.Equal(h.killed, []string{`layer "slow"`}) {
		t.Errorf("killed %v", h.killed)
	}
	r := readReport(t, opt.ReportDir)
	if r.Result != "cancelled" || status(r, "layer:slow") != "error" || status(r, "gpu") != "skip" {
		t.Errorf("report %s layer %s gpu %s", r.Result, status(r, "layer:slow"), status(r, "gpu"))
	}
}

func TestXidDuringNCCLFails(t *testing.T) {
	h := newFakeHost(t)
	h.dmesgAdd = "[ 9000.000001] NVRM: Xid (PCI:0000:62:00): 74, pid=4242, name=all_reduce_perf, NVLink: fatal error detected on link 3"
	opt := options(t)
	if err := Run(context.Background(), h, &recordingUI{}, opt); err == nil {
		t.Fatal("an Xid during the NCCL test passed")
	}
	r := readReport(t, opt.ReportDir)
	if c := check(r, "xid"); c.Status != "fail" || !strings.Contains(c.Message, "during the NCCL test") {
		t.Errorf("xid: %+v", c)
	}
	if !slices.Equal(r.FailedChecks, []string{"xid"}) {
		t.Errorf("failed %v", r.FailedChecks)
	}
}

// An Xid logged during the NCCL test and then cleared from the ring buffer (dmesg -c, here by
// the test's own job; an overflow loses it the same way) is gone from dmesg after the test
// but journald kept it: the load's verdict reads the journal's records after the mark and
// fails, naming the journal.
func TestXidDuringNCCLClearedFromDmesgFails(t *testing.T) {
	h := newFakeHost(t)
	h.ncclHook = func(_ context.Context, j host.Job) (int, error) {
		h.mu.Lock()
		h.logKernel("[ 9000.000001] NVRM: Xid (PCI:0000:62:00): 74, pid=4242, name=all_reduce_perf, NVLink: fatal error detected on link 3")
		// dmesg -c: the boot's lines and the Xid leave the ring buffer, the journal keeps them.
		delete(h.files, "/dmesg-extra")
		s := h.hostOut["host.dmesg"]
		s.out = ""
		h.hostOut["host.dmesg"] = s
		h.logKernel("[ 9100.000001] nvme nvme1: I/O 17 QID 3 timeout, completion polled")
		out := h.ncclOut
		h.mu.Unlock()
		io.WriteString(j.Output, out)
		return 0, nil
	}
	opt := options(t)
	if err := Run(context.Background(), h, &recordingUI{}, opt); err == nil {
		t.Fatal("an Xid cleared from dmesg during the NCCL test passed")
	}
	r := readReport(t, opt.ReportDir)
	if c := check(r, "xid"); c.Status != "fail" || !strings.Contains(c.Message, "during the NCCL test: Xid 74") || !strings.Contains(c.Message, "read from the journal") {
		t.Errorf("xid: %s: %s", c.Status, c.Message)
	}
	if !slices.Equal(r.FailedChecks, []string{"xid"}) {
		t.Errorf("failed %v", r.FailedChecks)
	}
}

// The bill of materials carries what the post-processor compares a first boot with.
func TestBillOfMaterials(t *testing.T) {
	h := newFakeHost(t)
	opt := options(t)
	if err := Run(context.Background(), h, &recordingUI{}, opt); err != nil {
		t.Fatal(err)
	}
	b, err := bom.Decode(h.files[opt.ManifestPath])
	if err != nil {
		t.Fatal(err)
	}
	if b.Kernel != "7.0.0-1014-aws" || b.RunUUID != runUUID || b.InstanceType != "p6-b200.48xlarge" || !b.Guarded["linux-aws"].Held || b.NCCL == nil {
		t.Errorf("bom: %+v", b)
	}
}

type junitDoc struct {
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
}

func junit(t *testing.T, dir string) junitDoc {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "dlami-report.junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var d junitDoc
	if err := xml.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// Every failing ending is machine-readable: failed_checks is never empty when the result is
// not pass, and the JUnit file has a failure or an error.
func TestEveryFailingEndingIsMachineReadable(t *testing.T) {
	cases := map[string]func(h *fakeHost, o *Options){
		"failed layer": func(h *fakeHost, o *Options) {
			h.layerHook[0] = func(context.Context, *fakeHost) (int, error) { return 3, nil }
			o.Layers = []layer.Spec{{Name: "x"}}
		},
		"dropped connection": func(h *fakeHost, o *Options) {
			h.layerHook[0] = func(context.Context, *fakeHost) (int, error) { return 0, host.ErrDisconnected }
			o.Layers = []layer.Spec{{Name: "x"}}
		},
		"self reboot": func(h *fakeHost, o *Options) {
			h.layerHook[0] = selfReboot
			o.Layers = []layer.Spec{{Name: "x"}}
		},
		"internal error": func(h *fakeHost, o *Options) {
			o.Layers = []layer.Spec{{Name: "x", Files: []layer.File{{Source: "/nonexistent/file", Destination: "/etc/x"}}}}
		},
		"drift":     func(h *fakeHost, o *Options) { installKernel1015(h) },
		"host fail": func(h *fakeHost, o *Options) { h.addLimitsFile("99-site.conf", "* - memlock 64") },
	}
	for name, set := range cases {
		h := newFakeHost(t)
		opt := options(t)
		set(h, &opt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := Run(ctx, h, &recordingUI{}, opt)
		cancel()
		if err == nil {
			t.Errorf("%s: passed", name)
			continue
		}
		r := readReport(t, opt.ReportDir)
		ju := junit(t, opt.ReportDir)
		if r.Result == "pass" || len(r.FailedChecks) == 0 || ju.Failures+ju.Errors == 0 {
			t.Errorf("%s: result %s failed_checks %v junit failures %d errors %d", name, r.Result, r.FailedChecks, ju.Failures, ju.Errors)
		}
	}
}

// A staging folder the bake cannot remove at its end (the connection dropped) keeps the layers'
// scripts and the apt auth file in the image: the bake fails, naming it, whatever its checks
// said. A verification instance is thrown away: there it is no failure.
func TestStagingFolderLeftInTheImageFails(t *testing.T) {
	h := newFakeHost(t)
	h.removeErr = fmt.Errorf("removing /tmp/dlami-bake.x: %w", host.ErrDisconnected)
	opt := options(t, layer.Spec{Name: "a"})
	err := Run(context.Background(), h, &recordingUI{}, opt)
	if err == nil || !strings.Contains(err.Error(), "stay in the image") {
		t.Fatalf("err %v", err)
	}
	r := readReport(t, opt.ReportDir)
	if r.Result != "fail" || !slices.Contains(r.FailedChecks, "stage:staging-cleanup") {
		t.Errorf("report: %s, failed %v", r.Result, r.FailedChecks)
	}
	if status(r, "gpu") != "pass" {
		t.Errorf("the host's own verdicts changed: gpu %s", status(r, "gpu"))
	}
}

// A reboot, asked for or done by a layer's own scripts, says at a steady pace what it waits
// for, how long it has waited and its limit (reboot_timeout), and stops saying it once the
// host is back.
func TestRebootWaitsSayTheyWait(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(h *fakeHost) layer.Spec
		what  string
	}{
		{"reboot = true", func(h *fakeHost) layer.Spec {
			h.rebootTakes = 100 * time.Millisecond
			return layer.Spec{Name: "drivers", Reboot: true}
		}, "still waiting for the host to reboot and answer SSH again (reboot_timeout): "},
		{"the layer rebooted", func(h *fakeHost) layer.Spec {
			h.layerHook[0] = selfReboot
			h.reconnectTakes = 100 * time.Millisecond
			return layer.Spec{Name: "vendor", ExpectReboot: true}
		}, "still waiting for the host to answer SSH again after the dropped connection (reboot_timeout): "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost(t)
			opt := options(t, tc.setup(h))
			opt.RebootTimeout = 7 * time.Minute
			opt.ProgressEvery = 20 * time.Millisecond
			ui := &recordingUI{}
			if err := Run(context.Background(), h, ui, opt); err != nil {
				t.Fatal(err)
			}
			out := ui.String()
			if n := strings.Count(out, tc.what); n < 2 || !strings.Contains(out, " of at most 7m0s") {
				t.Errorf("%d progress lines for a 100 ms wait at 20 ms:\n%s", n, out)
			}
			// Nothing is said about the wait after the host is back.
			back := strings.Index(out, "the host is back")
			if back < 0 || strings.Contains(out[back:], tc.what) {
				t.Errorf("progress after the host was back, or it never came back:\n%s", out)
			}
		})
	}
}

// A bake's reports carry what the HTML report draws: a point per message size of the NCCL
// test, and, given a previous bill of materials, what changed since.
func TestReportsForPeople(t *testing.T) {
	h := newFakeHost(t)
	opt := options(t)
	prev := bom.BOM{BuildName: "golden", Kernel: "7.0.0-1013-aws", Components: map[string]string{}, Guarded: map[string]bom.Package{"linux-aws": {Version: "7.0.0.1013.13", Held: true}}}
	opt.PreviousBOM, opt.PreviousBOMFile = &prev, "prev/dlami-bom.json"
	if err := Run(context.Background(), h, &recordingUI{}, opt); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(opt.ReportDir, report.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	res, err := nccltests.Parse(strings.NewReader(h.ncclOut))
	if err != nil {
		t.Fatal(err)
	}
	if r.NCCL == nil || len(r.NCCL.Points) == 0 || len(r.NCCL.Points) != len(res.Rows) {
		t.Fatalf("NCCL points: %+v, want one per row of the test's table (%d)", r.NCCL, len(res.Rows))
	}
	if r.Changes == nil || len(r.Changes.Items) == 0 || r.Changes.Items[0] != (result.Change{Component: "kernel", Before: "7.0.0-1013-aws", After: "7.0.0-1014-aws"}) {
		t.Errorf("changes: %+v", r.Changes)
	}
	page, err := os.ReadFile(filepath.Join(opt.ReportDir, report.HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), `<circle class="point"`); n != len(res.Rows) {
		t.Errorf("the HTML report draws %d points, want %d", n, len(res.Rows))
	}
}

package engine

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/layer"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

const runUUID = "2f1d6f0e-6a7e-4a55-9a43-5e3cbb8b0c11"

type reportJSON struct {
	Result       string         `json:"result"`
	FailedChecks []string       `json:"failed_checks"`
	Stage        string         `json:"stage"`
	Drift        []result.Drift `json:"drift"`
	HeldByPlugin []string       `json:"held_by_plugin"`
	Error        string         `json:"error"`
	Checks       []struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		Message  string `json:"message"`
		Evidence string `json:"evidence"`
		Actual   string `json:"actual"`
		ExitCode *int   `json:"exit_code"`
	} `json:"checks"`
	Manifest map[string]string `json:"manifest"`
}

func options(t testing.TB, layers ...layer.Spec) Options {
	return Options{
		Common: Common{
			BuildName:    "unit",
			ReportDir:    t.TempDir(),
			CheckTimeout: time.Minute,
			RemoteFolder: "/tmp",
			Checks: settings.Checks{
				Expect:   settings.Expectations{NVMePath: "/opt/dlami/nvme"},
				NCCL:     settings.NCCL{Args: settings.NCCLDefaultArgs, Timeout: time.Minute},
				Function: settings.Function{EFATraffic: settings.EFATraffic{Skip: true}, GDR: settings.GDR{Skip: true}},
			},
			// The fake NCCL test runs 20 ms.
			LoadSampleEvery: time.Millisecond,
			// The function tests have their own tests (function_test.go).
		},
		RunUUID:       runUUID,
		Validate:      true,
		ManifestPath:  "/etc/dlami-bake/manifest.json",
		RebootTimeout: 30 * time.Second,
		Layers:        layers,
		EFARetries:    DefaultEFARetries,
		EFARetryDelay: time.Millisecond,
	}
}

func drifts(r reportJSON) string {
	var lines []string
	for _, d := range r.Drift {
		lines = append(lines, d.String())
	}
	return strings.Join(lines, "\n")
}

func check(r reportJSON, id string) (c struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Message  string `json:"message"`
	Evidence string `json:"evidence"`
	Actual   string `json:"actual"`
	ExitCode *int   `json:"exit_code"`
}) {
	for _, x := range r.Checks {
		if x.ID == id {
			return x
		}
	}
	return c
}

func readReport(t *testing.T, dir string) reportJSON {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "dlami-report.json"))
	if err != nil {
		t.Fatalf("report not written: %v", err)
	}
	var r reportJSON
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"dlami-report.junit.xml", "dlami-report.md", "dlami-report.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	return r
}

func status(r reportJSON, id string) string {
	for _, c := range r.Checks {
		if c.ID == id {
			return c.Status
		}
	}
	return "missing"
}

func TestHealthyBakePasses(t *testing.T) {
	h := newFakeHost(t)
	opt := options(t, layer.Spec{Name: "a", AptPackages: []string{"jq"}}, layer.Spec{Name: "b", Inline: []string{"true"}})
	if err := Run(context.Background(), h, &recordingUI{}, opt); err != nil {
		t.Fatalf("healthy bake failed: %v", err)
	}
	r := readReport(t, opt.ReportDir)
	if r.Result != "pass" || len(r.FailedChecks) != 0 {
		t.Fatalf("report: %+v", r)
	}
	for _, id := range checks.IDs(checks.PhaseGuard, checks.PhaseHost, checks.PhaseLoad, checks.PhaseFunction) {
		if st := status(r, id); st != "pass" && st != "warn" && st != "skip" {
			t.Errorf("check %s: %s", id, st)
		}
	}
	for _, id := range []string{"kernel", "holds", "gpu", "efa-devices", "nccl-correctness", "nccl-busbw", "nccl-transport"} {
		if status(r, id) != "pass" {
			t.Errorf("check %s did not pass: %s", id, status(r, id))
		}
	}
	if !slices.Equal(h.layersRun, []int{0, 1}) {
		t.Errorf("layers run: %v", h.layersRun)
	}
	if _, ok := h.files[guard.BaselinePath(runUUID)]; !ok {
		t.Error("baseline not recorded on the host")
	}
	for _, name := range []string{"layer:a", "layer:b"} {
		if c := check(r, name); c.Status != "pass" || c.ExitCode == nil || *c.ExitCode != 0 || !strings.Contains(c.Evidence, "layer") {
			t.Errorf("%s: %+v", name, c)
		}
	}
	var bom map[string]any
	if err := json.Unmarshal(h.files["/etc/dlami-bake/manifest.json"], &bom); err != nil {
		t.Fatalf("manifest not written into the image: %v", err)
	}
	if r.Manifest["kernel"] != "7.0.0-1014-aws" || r.Manifest["efa_installer"] == "" {
		t.Errorf("manifest: %v", r.Manifest)
	}
}

func TestDriftStopsTheBakeAtTheLayer(t *testing.T) {
	h := newFakeHost(t)
	h.layerHook[0] = func(_ context.Context, h *fakeHost) (int, error) { installKernel1015(h); return 0, nil }
	opt := options(t, layer.Spec{Name: "careless"}, layer.Spec{Name: "never"})
	err := Run(context.Background(), h, &recordingUI{}, opt)
	if err == nil || !strings.Contains(err.Error(), `after layer "careless"`) {
		t.Fatalf("want drift error naming the layer, got %v", err)
	}
	if !slices.Equal(h.layersRun, []int{0}) {
		t.Errorf("a layer ran after drift: %v", h.layersRun)
	}
	r := readReport(t, opt.ReportDir)
	if r.Result != "fail" || !slices.Contains(r.FailedChecks, "next-boot-kernel") {
		t.Errorf("report: result %s failed %v", r.Result, r.FailedChecks)
	}
	if status(r, "gpu") != "skip" || status(r, "nccl-correctness") != "skip" {
		t.Errorf("checks after the drift should be skipped: gpu %s nccl %s", status(r, "gpu"), status(r, "nccl-correctness"))
	}
	if !strings.Contains(drifts(r), "7.0.0-1014-aws → 7.0.0-1015-aws") {
		t.Errorf("drift does not name the new kernel: %v", r.Drift)
	}
	if _, ok := h.files["/etc/dlami-bake/manifest.json"]; ok {
		t.Error("a failed bake wrote its manifest into the image")
	}
}

// An image that does not hold a guarded package warns at the baseline and bakes on (every
// change to it still fails the packages check); require_holds makes it a failure.
func TestUnheldGuardedPackageWarnsUnlessRequired(t *testing.T) {
	for _, require := range []bool{false, true} {
		h := newFakeHost(t)
		h.pkgs["linux-image-7.0.0-1014-aws"] = fakePkg{"7.0.0-1014.14", false}
		opt := options(t, layer.Spec{Name: "a"})
		opt.RequireHolds = require
		err := Run(context.Background(), h, &recordingUI{}, opt)
		r := readReport(t, opt.ReportDir)
		if !require {
			if err != nil || status(r, "holds") != "warn" || len(h.layersRun) != 1 {
				t.Errorf("unheld, not required: err %v holds %s layers %v", err, status(r, "holds"), h.layersRun)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "after the baseline was taken") || len(h.layersRun) != 0 || !slices.Contains(r.FailedChecks, "holds") {
			t.Errorf("require_holds: err %v layers %v failed %v", err, h.layersRun, r.FailedChecks)
		}
	}
}

func TestHoldUnheldHoldsAndRecords(t *testing.T) {
	h := newFakeHost(t)
	h.pkgs["linux-image-7.0.0-1014-aws"] = fakePkg{"7.0.0-1014.14", false}
	opt := options(t)
	opt.HoldUnheld = true
	if err := Run(context.Background(), h, &recordingUI{}, opt); err != nil {
		t.Fatalf("bake: %v", err)
	}
	if !h.pkgs["linux-image-7.0.0-1014-aws"].held || len(h.held) != 1 {
		t.Errorf("package not put on hold: %v", h.held)
	}
	if r := readReport(t, opt.ReportDir); !slices.Equal(r.HeldByPlugin, []string{"linux-image-7.0.0-1014-aws"}) {
		t.Errorf("held_by_plugin: %v", r.HeldByPlugin)
	}
}

func TestSecondProvisionerComparesWithTheFirstBaseline(t *testing.T) {
	h := newFakeHost(t)
	first := options(t)
	first.Validate = false
	if err := Run(context.Background(), h, &recordingUI{}, first); err != nil {
		t.Fatalf("first provisioner: %v", err)
	}
	installKernel1015(h) // a plain shell provisioner in between
	second := options(t, layer.Spec{Name: "x"})
	err := Run(context.Background(), h, &recordingUI{}, second)
	if err == nil || len(h.layersRun) != 0 {
		t.Fatalf("second provisioner should fail before its layers: err %v, layers %v", err, h.layersRun)
	}
	if r := readReport(t, second.ReportDir); !slices.Contains(r.FailedChecks, "next-boot-kernel") {
		t.Errorf("failed checks: %v", r.FailedChecks)
	}
}

func TestRebootIntoNewKernelFails(t *testing.T) {
	h := newFakeHost(t)
	h.layerHook[0] = func(_ context.Context, h *fakeHost) (int, error) { installKernel1015(h); return 0, nil }
	opt := options(t, layer.Spec{Name: "k", Reboot: true})
	err := Run(context.Background(), h, &recordingUI{}, opt)
	if err == nil || h.reboots != 1 {
		t.Fatalf("want failure after one reboot: err %v reboots %d", err, h.reboots)
	}
	if r := readReport(t, opt.ReportDir); !slices.Contains(r.FailedChecks, "kernel") {
		t.Errorf("kernel check did not fail: %v", r.FailedChecks)
	}
}

func TestFailedLayerFailsTheBake(t *testing.T) {
	h := newFakeHost(t)
	h.layerHook[0] = func(_ context.Context, h *fakeHost) (int, error) { installKernel1015(h); return 100, nil }
	opt := options(t, layer.Spec{Name: "broken"}, layer.Spec{Name: "later"})
	err := Run(context.Background(), h, &recordingUI{}, opt)
	if err == nil || !strings.Contains(err.Error(), `layer "broken" failed with exit status 100`) {
		t.Fatalf("got %v", err)
	}
	r := readReport(t, opt.ReportDir)
	if r.Result != "fail" || r.Error == "" || len(h.layersRun) != 1 {
		t.Errorf("report %+v layers %v", r, h.layersRun)
	}
	if !slices.Contains(r.FailedChecks, "next-boot-kernel") || !slices.Contains(r.FailedChecks, "layer:broken") {
		t.Errorf("the failed layer or its drift was not reported: %v", r.FailedChecks)
	}
	if c := check(r, "layer:broken"); c.ExitCode == nil || *c.ExitCode != 100 || c.Actual != "exit 100" {
		t.Errorf("layer entry: %+v", c)
	}
}

// The memlock check judges what a new login gets after the layers, not Packer's own SSH
// session, which opened before them: a layer's limits file that lowers memlock fails the bake
// although the session still says unlimited, and one that raises it passes although the
// session says 64 KiB.
func TestMemlockJudgesANewLoginNotTheSession(t *testing.T) {
	for _, tt := range []struct {
		name    string
		session string
		file    string
		fail    bool
	}{
		{"a layer lowers it", "unlimited", "*  soft  memlock  65536\n*  hard  memlock  65536", true},
		{"a layer raises it", "64", "*  -  memlock  unlimited", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHost(t)
			h.hostOut["host.memlock"] = fakeSection{out: tt.session}
			if !tt.fail {
				// Before the layer nothing sets memlock and logins start from 64 KiB.
				h.hostOut["host.limits_files"] = fakeSection{out: ""}
				h.hostOut["host.limits_base"] = fakeSection{out: "init 65536 65536 bytes\nsshd 1187 65536 65536 bytes"}
			}
			h.layerHook[0] = func(_ context.Context, h *fakeHost) (int, error) {
				h.mu.Lock()
				defer h.mu.Unlock()
				h.addLimitsFile("99-memlock.conf", tt.file)
				return 0, nil
			}
			opt := options(t, layer.Spec{Name: "limits", Inline: []string{"install -m 0644 99-memlock.conf /etc/security/limits.d/"}})
			err := Run(context.Background(), h, &recordingUI{}, opt)
			c := check(readReport(t, opt.ReportDir), "memlock")
			if tt.fail {
				if err == nil || c.Status != "fail" || !strings.Contains(c.Message, "99-memlock.conf:1") || !strings.Contains(c.Actual, "65536 KiB") {
					t.Fatalf("err %v; memlock %s %q: %s", err, c.Status, c.Actual, c.Message)
				}
				return
			}
			if err != nil || c.Status != "pass" || !strings.Contains(c.Evidence, "this SSH session: 64 KiB (fixed when the session opened") {
				t.Fatalf("err %v; memlock %s %q: %s\n%s", err, c.Status, c.Actual, c.Message, c.Evidence)
			}
		})
	}
}

func TestHostFailureSkipsNCCLUnlessKeepGoing(t *testing.T) {
	for _, keepGoing := range []bool{false, true} {
		h := newFakeHost(t)
		h.addLimitsFile("99-site.conf", "* - memlock 64")
		opt := options(t)
		opt.KeepGoing = keepGoing
		if err := Run(context.Background(), h, &recordingUI{}, opt); err == nil {
			t.Fatalf("keep_going=%v: memlock 64 passed", keepGoing)
		}
		r := readReport(t, opt.ReportDir)
		if !slices.Equal(r.FailedChecks, []string{"memlock"}) {
			t.Errorf("keep_going=%v: failed %v", keepGoing, r.FailedChecks)
		}
		want := "skip"
		if keepGoing {
			want = "pass"
		}
		if got := status(r, "nccl-correctness"); got != want {
			t.Errorf("keep_going=%v: nccl-correctness %s, want %s", keepGoing, got, want)
		}
	}
}

func TestNCCLFailureFailsTheBake(t *testing.T) {
	h := newFakeHost(t)
	h.ncclOut = strings.Replace(h.ncclOut, "Out of bounds values : 0 OK", "Out of bounds values : 3 FAILED", 1)
	opt := options(t)
	if err := Run(context.Background(), h, &recordingUI{}, opt); err == nil {
		t.Fatal("out-of-bounds values passed")
	}
	if r := readReport(t, opt.ReportDir); !slices.Contains(r.FailedChecks, "nccl-correctness") {
		t.Errorf("failed: %v", r.FailedChecks)
	}
}

// A late EFA device (p5en) gets a second look; a missing one still fails after the retries.
func TestEFADeviceCountIsRetried(t *testing.T) {
	for _, lateBy := range []int{1, 99} {
		h := newFakeHost(t)
		healthy := h.hostOut["host.infiniband"]
		lines := strings.Split(healthy.out, "\n")
		var seven []string
		for _, l := range lines {
			if l != "rdmap136s0" {
				seven = append(seven, l)
			}
		}
		if len(seven) != len(lines)-1 {
			t.Fatalf("fixture lacks rdmap136s0: %q", healthy.out)
		}
		h.hostOut["host.infiniband"] = fakeSection{out: strings.Join(seven, "\n")}
		// The device is late, not absent: the bus has all eight functions.
		batches := 0
		h.onHostBatch = func(h *fakeHost) {
			batches++
			if batches > lateBy {
				h.hostOut["host.infiniband"] = healthy
			}
		}
		opt := options(t)
		err := Run(context.Background(), h, &recordingUI{}, opt)
		r := readReport(t, opt.ReportDir)
		if lateBy == 1 && (err != nil || status(r, "efa-devices") != "pass" || batches != 2) {
			t.Errorf("late device: err %v, efa-devices %s, batches %d", err, status(r, "efa-devices"), batches)
		}
		if lateBy == 99 && (err == nil || status(r, "efa-devices") != "fail" || batches != 1+DefaultEFARetries) {
			t.Errorf("missing device: err %v, efa-devices %s, batches %d", err, status(r, "efa-devices"), batches)
		}
	}
}

// A bus without any EFA function is not a late device (EC2 attaches EFA only at launch): a
// launch that asked for EFA and got none fails efa-devices at the first look, with no waits.
func TestNoEFAOnTheBusIsNotRetried(t *testing.T) {
	h := newFakeHost(t)
	drop := func(name string, gone func(string) bool) {
		var keep []string
		for _, l := range strings.Split(h.hostOut[name].out, "\n") {
			if !gone(l) {
				keep = append(keep, l)
			}
		}
		h.hostOut[name] = fakeSection{out: strings.Join(keep, "\n")}
	}
	drop("host.pci", func(l string) bool { return strings.Contains(l, " 0x1d0f 0xefa") })
	drop("host.infiniband", func(l string) bool { return strings.HasPrefix(l, "rdmap") })
	h.hostOut["host.fi_info"] = fakeSection{out: "fi_getinfo: -61 (No data available)", code: 1}
	batches := 0
	h.onHostBatch = func(*fakeHost) { batches++ }
	opt := options(t)
	opt.Launch = checks.Launch{Known: true, EFA: 8, Setting: `efa = "all"`, Described: true}
	err := Run(context.Background(), h, &recordingUI{}, opt)
	r := readReport(t, opt.ReportDir)
	if err == nil || status(r, "efa-devices") != "fail" || batches != 1 {
		t.Errorf("err %v, efa-devices %s %q, batches %d (want 1: nothing to wait for)", err, status(r, "efa-devices"), check(r, "efa-devices").Message, batches)
	}
}

// A layer that clears the kernel ring buffer (dmesg -c) cannot hide an Xid logged earlier in
// the same boot: the log read with the baseline is judged too.
func TestXidBeforeLayersSurvivesAClearedLog(t *testing.T) {
	h := newFakeHost(t)
	h.files["/dmesg-extra"] = []byte("[  700.000001] NVRM: Xid (PCI:0000:51:00): 79, pid=1, name=x, GPU has fallen off the bus.")
	h.layerHook[0] = func(_ context.Context, h *fakeHost) (int, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.files, "/dmesg-extra")
		return 0, nil
	}
	opt := options(t, layer.Spec{Name: "clears-dmesg", Inline: []string{"dmesg -c"}})
	if err := Run(context.Background(), h, &recordingUI{}, opt); err == nil {
		t.Fatal("an Xid logged before a layer cleared the log passed")
	}
	r := readReport(t, opt.ReportDir)
	if c := check(r, "xid"); c.Status != "fail" || !strings.Contains(c.Message, "before the layers ran") || !strings.Contains(c.Message, "Xid 79") {
		t.Errorf("xid: %s: %s", c.Status, c.Message)
	}
}

// A layer that logs an Xid and clears the ring buffer (a burn-in that ends with dmesg -c)
// cannot hide it either: the baseline's log never saw it, dmesg no longer shows it, but
// journald kept it, and the whole-boot verdict reads the journal.
func TestXidDuringALayerSurvivesAClearedLog(t *testing.T) {
	burnIn := func(h *fakeHost) {
		h.layerHook[0] = func(_ context.Context, h *fakeHost) (int, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.logKernel("[  700.000001] NVRM: Xid (PCI:0000:51:00): 79, pid=4242, name=all_reduce_perf, GPU has fallen off the bus.")
			delete(h.files, "/dmesg-extra") // dmesg -c
			return 0, nil
		}
	}
	h := newFakeHost(t)
	burnIn(h)
	opt := options(t, layer.Spec{Name: "burn-in", Inline: []string{"all_reduce_perf", "dmesg -c"}})
	if err := Run(context.Background(), h, &recordingUI{}, opt); err == nil {
		t.Fatal("an Xid a layer logged and cleared from the ring buffer passed")
	}
	r := readReport(t, opt.ReportDir)
	if c := check(r, "xid"); c.Status != "fail" || !strings.Contains(c.Message, "Xid 79") || !strings.Contains(c.Message, "only in the journal") {
		t.Errorf("xid: %s: %s", c.Status, c.Message)
	}

	// journald keeps no kernel message (Storage=none): the same layer cannot be judged, and
	// the check says so instead of passing.
	h = newFakeHost(t)
	burnIn(h)
	h.hostOut["host.journal_kernel"] = fakeSection{}
	h.layerHook[0] = func(_ context.Context, h *fakeHost) (int, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.logKernel("[  700.000001] NVRM: Xid (PCI:0000:51:00): 79, pid=4242, name=all_reduce_perf, GPU has fallen off the bus.")
		delete(h.files, "/dmesg-extra")
		delete(h.files, "/journal-extra") // nothing stored
		return 0, nil
	}
	opt = options(t, layer.Spec{Name: "burn-in", Inline: []string{"all_reduce_perf", "dmesg -c"}})
	if err := Run(context.Background(), h, &recordingUI{}, opt); err != nil {
		t.Fatalf("a warning failed the bake: %v", err)
	}
	r = readReport(t, opt.ReportDir)
	if c := check(r, "xid"); c.Status != "warn" || !strings.Contains(c.Message, "Storage=persistent") {
		t.Errorf("xid without a journal: %s: %s", c.Status, c.Message)
	}
}

// Drift after the last layer's drift check (a process a layer left behind, unattended-upgrades
// during the NCCL test) fails the bake: the guard looks once more before the verdict and the
// bill of materials.
func TestDriftDuringValidationFails(t *testing.T) {
	h := newFakeHost(t)
	h.ncclHook = func(_ context.Context, j host.Job) (int, error) {
		h.mu.Lock()
		h.pkgs["linux-aws"] = fakePkg{"7.0.0.1015.15", true}
		out := h.ncclOut
		h.mu.Unlock()
		io.WriteString(j.Output, out)
		return 0, nil
	}
	opt := options(t)
	err := Run(context.Background(), h, &recordingUI{}, opt)
	if err == nil || !strings.Contains(err.Error(), "after the host suite and the NCCL test") {
		t.Fatalf("drift during the NCCL test: %v", err)
	}
	if _, ok := h.files[opt.ManifestPath]; ok {
		t.Error("a bill of materials was written for a drifted image")
	}
	r := readReport(t, opt.ReportDir)
	if c := check(r, "packages"); c.Status != "fail" || !strings.Contains(drifts(r), "linux-aws") {
		t.Errorf("packages: %s: %s; drift %s", c.Status, c.Message, drifts(r))
	}
}

// The memlock limit jobs get is the scheduler's unit's, not Packer's SSH session's: a layer
// that installs slurmd with a limited LimitMEMLOCK fails job-memlock although the session has
// unlimited memlock.
func TestJobMemlockIsTheSchedulers(t *testing.T) {
	h := newFakeHost(t)
	h.hostOut["node.unit_memlock"] = fakeSection{out: "Id=slurmd.service\nLoadState=loaded\nLimitMEMLOCK=65536\n\nId=containerd.service\nLoadState=not-found\nLimitMEMLOCK=8388608\n\nId=docker.service\nLoadState=not-found\nLimitMEMLOCK=8388608\n"}
	opt := options(t)
	if err := Run(context.Background(), h, &recordingUI{}, opt); err == nil {
		t.Fatal("a scheduler unit with limited memlock passed")
	}
	r := readReport(t, opt.ReportDir)
	if status(r, "memlock") != "pass" || status(r, "job-memlock") != "fail" || !strings.Contains(check(r, "job-memlock").Message, "slurmd.service has LimitMEMLOCK") {
		t.Errorf("memlock %s, job-memlock %s: %s", status(r, "memlock"), status(r, "job-memlock"), check(r, "job-memlock").Message)
	}
}

// The staging folder is a new mktemp -d folder in remote_folder (host.Files.MakeTempDir), never
// a name built from the clock that another user of the host could create first: the bake and
// the first-boot verification each ask for one, stage their scripts in it and remove it.
func TestStagingFolderIsATempDir(t *testing.T) {
	h := newFakeHost(t)
	opt := options(t, layer.Spec{Name: "a", Inline: []string{"true"}})
	opt.RemoteFolder = "/var/tmp/dlami"
	opt.Now = func() time.Time { return time.Unix(1700000000, 42) }
	var staged []string
	h.layerHook[0] = func(_ context.Context, h *fakeHost) (int, error) {
		for p := range h.files {
			if strings.HasSuffix(p, "/layer.sh") {
				staged = append(staged, p)
			}
		}
		return 0, nil
	}
	if err := Run(context.Background(), h, &recordingUI{}, opt); err != nil {
		t.Fatal(err)
	}
	if len(h.tempDirs) != 1 {
		t.Fatalf("MakeTempDir calls %v, want one (remote_folder, dlami-bake)", h.tempDirs)
	}
	parts := strings.Split(h.tempDirs[0], "|")
	if parts[0] != "/var/tmp/dlami" || parts[1] != "dlami-bake" {
		t.Errorf("MakeTempDir(%q, %q), want (/var/tmp/dlami, dlami-bake)", parts[0], parts[1])
	}
	dir := parts[2]
	if len(staged) != 1 || !strings.HasPrefix(staged[0], dir+"/") {
		t.Errorf("layer script staged at %v, want under %s", staged, dir)
	}
	for p := range h.files {
		if strings.Contains(p, "1700000000") || strings.HasPrefix(p, dir) {
			t.Errorf("left on the host or named by the clock: %s", p)
		}
	}

	b, err := bom.Decode(h.files[opt.ManifestPath])
	if err != nil {
		t.Fatal(err)
	}
	v := newFakeHost(t)
	o := verifyOptions(t, b)
	if err := Verify(context.Background(), v, &recordingUI{}, o); err != nil {
		t.Fatal(err)
	}
	if len(v.tempDirs) != 1 || !strings.HasPrefix(v.tempDirs[0], "/tmp|dlami-verify|") {
		t.Errorf("verification MakeTempDir calls %v, want one (/tmp, dlami-verify)", v.tempDirs)
	}
}

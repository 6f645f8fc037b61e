package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

var p6Devices = []string{"rdmap82s0", "rdmap83s0", "rdmap99s0", "rdmap100s0", "rdmap118s0", "rdmap119s0", "rdmap135s0", "rdmap136s0"}

func readTestdata(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// functionHost answers the DCGM, EFA traffic and GPUDirect RDMA jobs as a healthy p6-b200
// does; failing names a device whose ping-pong errors.
func functionHost(t testing.TB, failing string) *fakeHost {
	h := newFakeHost(t)
	table := readTestdata(t, "../parse/pingpong/testdata/efa_test-aws-cdi-sdk-install-guide.txt")
	dcgm := readTestdata(t, "../parse/dcgmdiag/testdata/derived-dcgm4-r3-8xGPU-diagnostic-test-issue215.json")
	gdr := strings.ReplaceAll(readTestdata(t, "../parse/nccltests/testdata/synthetic-p6b200-1node-ok.txt"), "via P2P/CUMEM/read", "via NET/Libfabric/0/GDRDMA")
	h.jobs = map[string]func(context.Context, *fakeHost, host.Job, io.Writer) (int, error){
		"dcgm.sh": func(_ context.Context, _ *fakeHost, _ host.Job, w io.Writer) (int, error) {
			io.WriteString(w, dcgm+"\n@@DLAMI-DCGM EXIT 0\n@@DLAMI-DCGM STDERR\n")
			return 0, nil
		},
		"efa-traffic.sh": func(_ context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error) {
			if !strings.Contains(string(h.uploaded(j.Script)), "FI_EFA_ENABLE_SHM_TRANSFER=0") {
				t.Errorf("the traffic script leaves shared-memory transfer on")
			}
			for _, d := range p6Devices {
				out, rc := table, 0
				if d == failing {
					out, rc = "fi_av_insert(): common/shared.c:1063, ret=-22 (Invalid argument)", 1
				}
				fmt.Fprintf(w, "@@DLAMI-EFA BEGIN %s\n%s\n@@DLAMI-EFA END %s %d %d\n", d, out, d, rc, rc)
			}
			return 0, nil
		},
		"gdr.sh": func(_ context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error) {
			if !regexp.MustCompile(`env_key_(\d+)='NCCL_P2P_DISABLE'\nenv_value_(\d+)='1'\n`).Match(h.uploaded(j.Script)) {
				t.Errorf("the GPUDirect RDMA run leaves NVLink on")
			}
			io.WriteString(w, gdr)
			return 0, nil
		},
	}
	return h
}

func TestFunctionTestsRunAfterNCCL(t *testing.T) {
	opt := options(t)
	opt.Checks.Function = settings.Function{DCGMLevel: 2, EFATraffic: settings.EFATraffic{MinBandwidthMBps: 1000}, GDR: settings.GDR{BusBWFloorGBps: 100}}.Resolved()
	if err := Run(context.Background(), functionHost(t, ""), &recordingUI{}, opt); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	r := readReport(t, opt.ReportDir)
	for _, id := range []string{"dcgm", "efa-traffic", "gpudirect-rdma", "pcie-link", "gpu-clocks", "gpu-memory", "nvlink"} {
		if s := status(r, id); s != "pass" {
			t.Errorf("%s: %s: %s", id, s, check(r, id).Message)
		}
	}

	opt = options(t)
	opt.Checks.Function = settings.Function{DCGMLevel: 2, EFATraffic: settings.EFATraffic{MinBandwidthMBps: 1000}, GDR: settings.GDR{BusBWFloorGBps: 100}}.Resolved()
	broken := functionHost(t, "rdmap99s0")
	if err := Run(context.Background(), broken, &recordingUI{}, opt); err == nil {
		t.Fatal("a device that cannot carry traffic passed")
	}
	r = readReport(t, opt.ReportDir)
	if !slices.Equal(r.FailedChecks, []string{"efa-traffic"}) || !strings.Contains(check(r, "efa-traffic").Message, "rdmap99s0") {
		t.Errorf("one device errors: %v %q", r.FailedChecks, check(r, "efa-traffic").Message)
	}
	if _, ok := broken.files[opt.ManifestPath]; ok {
		t.Error("a bill of materials was written for an image whose EFA device failed")
	}
}

// Real durations of the stages, scaled 1 s → 1 ms, with where each figure comes from:
//   - NCCL: the 1-node all_reduce_perf -b 8 -e 1G -n 50 takes about a minute on 8 GPUs
//     (the p5 and p6 runs in internal/parse/nccltests/testdata: ~40 sizes, 55 iterations each,
//     mostly bound by the large sizes, plus mpirun start-up);
//   - DCGM level 2: "about 2 minutes" (NVIDIA DCGM user guide, run levels);
//   - one EFA device's ping-pong: 1000 x 64 KiB at ~91 us each (efa_test output in
//     internal/parse/pingpong/testdata) plus fabtests start-up and the script's half second for the
//     server to listen: ~2 s;
//   - the GPUDirect RDMA all-reduce, 8 MiB to 256 MiB x 25 iterations over EFA, plus mpirun
//     start-up: ~8 s.
const (
	benchScale   = time.Millisecond
	benchNCCL    = 60
	benchDCGM    = 120
	benchPerPing = 2
	benchGDR     = 8
)

// BenchmarkFunctionStages bakes a healthy host with every function test on, its jobs delayed
// to the durations above, and reports the wall time of the validation (in scaled seconds) for
// a p6-b200 (8 EFA devices) and a p5 (32): DCGM runs alongside the EFA traffic test.
func BenchmarkFunctionStages(b *testing.B) {
	for _, tc := range []struct {
		name    string
		devices int
	}{{"p6-b200-8-efa", 8}, {"p5-32-efa", 32}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				h := functionHost(b, "")
				slow(h, "dcgm.sh", benchDCGM)
				rounds := (tc.devices + settings.DefaultEFATrafficConcurrency - 1) / settings.DefaultEFATrafficConcurrency
				slow(h, "efa-traffic.sh", rounds*benchPerPing)
				slow(h, "gdr.sh", benchGDR)
				h.ncclHook = func(_ context.Context, j host.Job) (int, error) {
					time.Sleep(benchNCCL * benchScale)
					io.WriteString(j.Output, h.ncclOut)
					return 0, nil
				}
				opt := options(b)
				opt.Checks.Function = settings.Function{DCGMLevel: 2}.Resolved()
				start := time.Now()
				_ = Run(context.Background(), h, &recordingUI{}, opt)
				b.ReportMetric(float64(time.Since(start))/float64(benchScale), "scaled-s/bake")
			}
		})
	}
}

// slow delays a job of h by seconds (scaled).
func slow(h *fakeHost, script string, seconds int) {
	inner := h.jobs[script]
	h.jobs[script] = func(ctx context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error) {
		time.Sleep(time.Duration(seconds) * benchScale)
		return inner(ctx, h, j, w)
	}
}

// A long job says, at a steady pace, what the bake waits for and for how long.
func TestLongWaitsSayWhatTheyWaitFor(t *testing.T) {
	h := functionHost(t, "")
	answer := h.jobs["dcgm.sh"]
	h.jobs["dcgm.sh"] = func(ctx context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error) {
		time.Sleep(80 * time.Millisecond)
		return answer(ctx, h, j, w)
	}
	opt := options(t)
	opt.Checks.Function = settings.Function{DCGMLevel: 2}.Resolved()
	opt.ProgressEvery = 20 * time.Millisecond
	ui := &recordingUI{}
	if err := Run(context.Background(), h, ui, opt); err != nil {
		t.Fatal(err)
	}
	n := strings.Count(ui.String(), "still waiting for the DCGM diagnostics: ")
	if n < 2 || !strings.Contains(ui.String(), "of at most 15m0s") {
		t.Errorf("%d progress lines for an 80 ms job at 20 ms:\n%s", n, ui.String())
	}
}

// DCGM's pcie test wants x16 unless told the slot's width (min_pci_width): the script the bake
// runs carries the width of the instance type's slot (x8 on the single-GPU G6 sizes, per the
// profile) or expect.pcie_width, and nothing where neither gives one.
func TestDCGMToldTheSlotWidth(t *testing.T) {
	for _, tt := range []struct {
		name, instanceType string
		setting            int
		want               string // the width told, "" for none
	}{
		{"g6.xlarge: the profile's x8", "g6.xlarge", 0, "8"},
		{"expect.pcie_width on an unprofiled type", "x9.unknown", 4, "4"},
		{"expect.pcie_width wins over the profile", "g6.xlarge", 16, "16"},
		{"p6-b200: no slot width, DCGM's default", "p6-b200.48xlarge", 0, ""},
	} {
		h := functionHost(t, "")
		var script string
		h.jobs["dcgm.sh"] = func(_ context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error) {
			script = string(h.uploaded(j.Script))
			io.WriteString(w, "@@DLAMI-DCGM EXIT 0\n")
			return 0, nil
		}
		opt := options(t)
		opt.InstanceType = tt.instanceType
		opt.Checks.Function = settings.Function{DCGMLevel: 2}.Resolved()
		opt.Checks.Expect.PCIeWidth = tt.setting
		b := newBake(h, &recordingUI{}, opt)
		b.workDir = "/tmp/dlami-bake.unit"
		b.target = checks.Resolve(facts.Host{}, opt.Checks, opt.InstanceType)
		if err := b.dcgmTest(context.Background()); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !strings.Contains(script, "dcgmi") {
			t.Fatalf("%s: DCGM did not run: %q (not run: %q)", tt.name, script, b.run.DCGM.NotRun)
		}
		told := regexp.MustCompile(`pcie\.h2d_d2h_single_pinned\.min_pci_width=(\d+);pcie\.h2d_d2h_single_unpinned\.min_pci_width=(\d+)`).FindStringSubmatch(script)
		switch {
		case tt.want == "" && told != nil:
			t.Errorf("%s: told DCGM min_pci_width %s", tt.name, told[1])
		case tt.want != "" && (told == nil || told[1] != tt.want || told[2] != tt.want):
			t.Errorf("%s: min_pci_width %v, want %s for both subtests; parameters: %q", tt.name, told, tt.want, regexp.MustCompile(`(?m)^parameters=.*$`).FindString(script))
		}
	}
}

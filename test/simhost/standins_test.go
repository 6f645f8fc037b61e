// Package simhost_test runs the simulated host's stand-ins outside a host (no root, no
// chroot): DLAMI_SIM_PREFIX points sim.sh at a temporary tree that stands for "/", holding
// the knobs (etc/dlami-sim), the state (run/dlami-sim/state), a "loaded" nvidia module and
// its NVML library. Each test feeds a stand-in's output to the parser the plugin uses, so a
// stand-in never drifts from the format the checks read.
package simhost_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dcgmdiag"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/fiinfo"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpuhealth"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/kjournal"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nccltests"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvlink"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pingpong"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/rdmastat"
)

func simhostDir(t *testing.T) string {
	t.Helper()
	_, f, _, _ := runtime.Caller(0)
	return filepath.Dir(f)
}

type host struct {
	t      *testing.T
	prefix string
	dir    string // test/simhost
}

// newHost makes a prefix tree for instance type product with the given knobs.
func newHost(t *testing.T, product string, knobs map[string]string) *host {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	dir := simhostDir(t)
	p := t.TempDir()
	for _, d := range []string{"usr/lib/x86_64-linux-gnu", "usr/bin", "usr/lib/systemd/system", "sys/module/nvidia",
		"etc/dlami-sim", "run/dlami-sim/state"} {
		if err := os.MkdirAll(filepath.Join(p, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"usr/lib/dlami-sim":                          "root/usr/lib/dlami-sim",
		"usr/bin/nv-hostengine":                      "root/usr/bin/nv-hostengine",
		"usr/bin/nvidia-imex-ctl":                    "pkgs/files/nvidia-imex-ctl",
		"usr/lib/systemd/system/nvidia-dcgm.service": "root/usr/lib/systemd/system/nvidia-dcgm.service",
	}
	for l, target := range links {
		if err := os.Symlink(filepath.Join(dir, target), filepath.Join(p, l)); err != nil {
			t.Fatal(err)
		}
	}
	write := func(rel, s string) {
		if err := os.WriteFile(filepath.Join(p, rel), []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sys/module/nvidia/version", "595.91.07")
	write("usr/lib/x86_64-linux-gnu/libnvidia-ml.so.595.91.07", "")
	write("etc/dlami-sim/product-name", product)
	write("etc/dlami-sim/nccl-seconds", "0")
	for k, v := range knobs {
		write("etc/dlami-sim/"+k, v)
	}
	h := &host{t: t, prefix: p, dir: dir}
	t.Cleanup(func() { h.runErr(nil, "root/usr/bin/nv-hostengine", "--term") })
	return h
}

func (h *host) knob(name, value string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.prefix, "etc/dlami-sim", name), []byte(value+"\n"), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// runErr runs a stand-in (a path under test/simhost) with env added; it returns stdout,
// stderr and the exit status.
func (h *host) runErr(env []string, script string, args ...string) (string, string, int) {
	h.t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join(h.dir, script)}, args...)...)
	cmd.Env = append(append(os.Environ(), "DLAMI_SIM_PREFIX="+h.prefix), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatalf("%s: %v", script, err)
	}
	return out.String(), errb.String(), code
}

func (h *host) run(env []string, script string, args ...string) string {
	h.t.Helper()
	out, errs, code := h.runErr(env, script, args...)
	if code != 0 {
		h.t.Fatalf("%s %v: exit %d\nstdout:\n%s\nstderr:\n%s", script, args, code, out, errs)
	}
	return out
}

// underLoad makes nvidia-smi see a running NCCL stand-in (a marker naming a live pid) until
// the returned function is called.
func (h *host) underLoad() func() {
	h.t.Helper()
	m := filepath.Join(h.prefix, "run/dlami-sim/state", "nccl-running."+strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(m, nil, 0o644); err != nil {
		h.t.Fatal(err)
	}
	return func() { os.Remove(m) }
}

const smi = "pkgs/files/nvidia-smi"

func TestGPUHealthQueryHealthyIdleAndUnderLoad(t *testing.T) {
	for _, product := range []string{"p5.48xlarge", "p6-b200.48xlarge", "g5.xlarge"} {
		t.Run(product, func(t *testing.T) {
			h := newHost(t, product, nil)
			wantN, wantMax := 8, uint64(5)
			if product == "g5.xlarge" {
				wantN, wantMax = 1, 4
			}
			check := func(gen uint64) {
				t.Helper()
				out := h.run(nil, smi, "--query-gpu="+gpuhealth.Query, "--format=csv")
				// The header line as the real nvidia-smi prints it: the queried names, ", "-separated.
				if head, _, _ := strings.Cut(out, "\n"); head != strings.ReplaceAll(gpuhealth.Query, ",", ", ") {
					t.Fatalf("header line %q, want the queried names", head)
				}
				gpus, err := gpuhealth.Parse(out)
				if err != nil {
					t.Fatal(err)
				}
				if len(gpus) != wantN {
					t.Fatalf("%d GPUs, want %d", len(gpus), wantN)
				}
				for _, g := range gpus {
					if !g.Persistence.IsTrue() || !g.ECCMode.IsTrue() || !g.ECCUncorrectedVolatile.Known || g.ECCUncorrectedVolatile.N != 0 ||
						!g.RemappedRowsPending.IsFalse() || !g.RemappedRowsFailure.IsFalse() || g.RetiredPagesPending.Known() {
						t.Errorf("GPU %d memory/ECC not healthy: %+v", g.Index, g)
					}
					if g.PCIeGenCurrent.N != gen || g.PCIeGenMax.N != wantMax || g.PCIeWidthCurrent.N != 16 || g.PCIeWidthMax.N != 16 {
						t.Errorf("GPU %d PCIe gen %d/%d x%d/x%d, want gen %d/%d x16/x16", g.Index, g.PCIeGenCurrent.N, g.PCIeGenMax.N,
							g.PCIeWidthCurrent.N, g.PCIeWidthMax.N, gen, wantMax)
					}
					for _, f := range []gpuhealth.Flag{g.HWSlowdown, g.HWThermalSlowdown, g.HWPowerBrakeSlowdown, g.SWPowerCap} {
						if !f.IsFalse() {
							t.Errorf("GPU %d: a clock event reason is %v", g.Index, f)
						}
					}
				}
			}
			check(1) // idle GPUs drop to gen 1
			done := h.underLoad()
			check(wantMax)
			done()
			// The header form and the pre-R535 names parse the same.
			if _, err := gpuhealth.ParseFields(h.run(nil, smi, "--query-gpu="+gpuhealth.LegacyQuery, "--format=csv"),
				gpuhealth.Fields(gpuhealth.LegacyQuery)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// layout succeeds for every layout: boot-hook calls it under set -e, so a layout whose last
// test is false would stop the boot before sshd has host keys.
func TestLayoutUnderSetE(t *testing.T) {
	for _, product := range []string{"p6-b200.48xlarge", "p6-b300.48xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p4d.24xlarge", "p4de.24xlarge",
		"g5.xlarge", "g6.xlarge", "g6e.xlarge", "c7i.large", "p7-future.48xlarge", "p6e-gb200.36xlarge"} {
		h := newHost(t, product, nil)
		cmd := exec.Command("bash", "-ec", `. "$1"; layout; echo "$L_TYPE $L_PCIE_SLOT"`, "layout", filepath.Join(h.dir, "root/usr/lib/dlami-sim/sim.sh"))
		cmd.Env = append(os.Environ(), "DLAMI_SIM_PREFIX="+h.prefix)
		out, err := cmd.CombinedOutput()
		want := product + " 16"
		if product == "g6.xlarge" {
			want = product + " 8"
		}
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("%s: layout under set -e: %v %q, want %q", product, err, out, want)
		}
	}
}

// The single-GPU G6 sizes wire the L4 to an x8 slot: nvidia-smi reports x8 of the L4's x16,
// idle and under load, in the CSV query and in -q, whose architecture reads Ada Lovelace.
func TestGPUHealthG6SlotWidth(t *testing.T) {
	h := newHost(t, "g6.xlarge", nil)
	for _, load := range []bool{false, true} {
		if load {
			defer h.underLoad()()
		}
		gpus, err := gpuhealth.Parse(h.run(nil, smi, "--query-gpu="+gpuhealth.Query, "--format=csv"))
		if err != nil || len(gpus) != 1 || gpus[0].PCIeWidthCurrent.N != 8 || gpus[0].PCIeWidthMax.N != 16 {
			t.Fatalf("load %v: %+v %v", load, gpus, err)
		}
		q, err := gpuhealth.ParseQuery(h.run(nil, smi, "-q"))
		if err != nil || len(q.GPUs) != 1 || q.GPUs[0].PCIeWidthCurrent.N != 8 || q.GPUs[0].Architecture != "Ada Lovelace" || q.Incomplete() != nil {
			t.Fatalf("load %v: -q %+v %v", load, q, err)
		}
	}
	// DCGM's pcie test fails the L4 at x8 unless told the slot's width, as AWS's suites tell it.
	h.run(nil, hostengin)
	out, _, code := h.runErr(nil, dcgmi, "diag", "-r", "2", "-j")
	r, err := dcgmdiag.Parse(out)
	if pcie, _ := r.Test("pcie"); err != nil || code != 226 || pcie.Summary != dcgmdiag.Fail || pcie.Results[0].Warnings[0].ErrorID != 46 {
		t.Errorf("g6.xlarge r2 at DCGM's defaults: exit %d, %v, %+v", code, err, pcie)
	}
	out, _, code = h.runErr(nil, dcgmi, "diag", "-r", "2", "-p", "pcie.h2d_d2h_single_pinned.min_pci_width=8;pcie.h2d_d2h_single_unpinned.min_pci_width=8", "-j")
	if r, err = dcgmdiag.Parse(out); err != nil || code != 0 || r.Worst() != dcgmdiag.Pass {
		t.Errorf("g6.xlarge r2 told min_pci_width 8: exit %d, %v, %v", code, err, r.Worst())
	}
	// The other types keep x16.
	p5 := newHost(t, "p5.48xlarge", nil)
	q, err := gpuhealth.ParseQuery(p5.run(nil, smi, "-q"))
	if err != nil || len(q.GPUs) != 8 || q.GPUs[0].PCIeWidthCurrent.N != 16 || q.GPUs[0].Architecture != "Hopper" {
		t.Fatalf("p5 -q: %+v %v", q, err)
	}
}

func TestGPUHealthQueryKnobs(t *testing.T) {
	h := newHost(t, "p5.48xlarge", map[string]string{
		"gpu-remap-pending":         "1",
		"gpu-remap-failure":         "2",
		"gpu-ecc-uncorrected":       "4:3",
		"gpu-ecc-off":               "6",
		"gpu-persistence-off":       "7",
		"gpu-pcie-width-under-load": "3:8",
		"gpu-pcie-gen-under-load":   "0:3",
		"gpu-hw-slowdown":           "5",
		"gpu-hw-thermal-slowdown":   "6:always",
		"gpu-sw-power-cap":          "all",
	})
	parse := func() []gpuhealth.GPU {
		gpus, err := gpuhealth.Parse(h.run(nil, smi, "--query-gpu="+gpuhealth.Query, "--format=csv"))
		if err != nil {
			t.Fatal(err)
		}
		return gpus
	}
	idle := parse()
	if !idle[1].RemappedRowsPending.IsTrue() || !idle[2].RemappedRowsFailure.IsTrue() || idle[4].ECCUncorrectedVolatile.N != 3 {
		t.Errorf("memory knobs: %+v %+v %+v", idle[1], idle[2], idle[4])
	}
	if !idle[6].ECCMode.IsFalse() || idle[6].ECCUncorrectedVolatile.Known || !idle[7].Persistence.IsFalse() {
		t.Errorf("ECC off / persistence off: %+v %+v", idle[6], idle[7])
	}
	if idle[3].PCIeWidthCurrent.N != 16 || idle[5].HWSlowdown.IsTrue() || !idle[6].HWThermalSlowdown.IsTrue() || !idle[6].HWSlowdown.IsTrue() {
		t.Errorf("idle: width %d, GPU 5 %v, GPU 6 %v/%v", idle[3].PCIeWidthCurrent.N, idle[5].HWSlowdown, idle[6].HWThermalSlowdown, idle[6].HWSlowdown)
	}
	done := h.underLoad()
	defer done()
	load := parse()
	if load[3].PCIeWidthCurrent.N != 8 || load[3].PCIeWidthMax.N != 16 || load[0].PCIeGenCurrent.N != 3 || load[1].PCIeGenCurrent.N != 5 {
		t.Errorf("under load: GPU 3 x%d/x%d, GPU 0 gen %d, GPU 1 gen %d", load[3].PCIeWidthCurrent.N, load[3].PCIeWidthMax.N,
			load[0].PCIeGenCurrent.N, load[1].PCIeGenCurrent.N)
	}
	if !load[5].HWSlowdown.IsTrue() || load[4].HWSlowdown.IsTrue() || !load[0].SWPowerCap.IsTrue() {
		t.Errorf("under load: clock reasons %+v %+v", load[5], load[0])
	}
}

func TestNvlinkStatus(t *testing.T) {
	for _, c := range []struct {
		product string
		links   int
		gbps    float64
	}{{"p5.48xlarge", 18, 26.562}, {"p6-b200.48xlarge", 18, 53.125}, {"g5.xlarge", 0, 0}} {
		t.Run(c.product, func(t *testing.T) {
			h := newHost(t, c.product, map[string]string{"nvlink-inactive": "2:5"})
			st, err := nvlink.ParseStatus(h.run(nil, smi, "nvlink", "-s"))
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range st {
				if len(g.Links) != c.links {
					t.Fatalf("GPU %d: %d links, want %d", g.Index, len(g.Links), c.links)
				}
				want := c.links
				if g.Index == 2 && c.links > 0 {
					want--
				}
				if g.ActiveLinks() != want {
					t.Errorf("GPU %d: %d active links, want %d", g.Index, g.ActiveLinks(), want)
				}
				for _, l := range g.Links {
					if l.Active && l.GBps != c.gbps {
						t.Errorf("GPU %d link %d: %v GB/s", g.Index, l.Index, l.GBps)
					}
				}
				if c.links == 0 && (len(g.Notes) != 1 || !strings.Contains(g.Notes[0], "all links are inActive")) {
					t.Errorf("GPU %d notes %q", g.Index, g.Notes)
				}
			}
		})
	}
}

// nvlinkDelta reads `nvidia-smi nvlink -e` before and after one NCCL run.
func nvlinkDelta(t *testing.T, h *host) []nvlink.Change {
	t.Helper()
	before, err := nvlink.ParseErrors(h.run(nil, smi, "nvlink", "-e"))
	if err != nil {
		t.Fatal(err)
	}
	h.run([]string{"OMPI_COMM_WORLD_SIZE=8"}, "root/usr/lib/dlami-sim/all_reduce_perf", "-b", "8", "-e", "1M", "-f", "2")
	after, err := nvlink.ParseErrors(h.run(nil, smi, "nvlink", "-e"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := nvlink.Delta(before, after)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestNvlinkErrorsGrowDuringNCCL(t *testing.T) {
	t.Run("p5 healthy", func(t *testing.T) {
		if d := nvlinkDelta(t, newHost(t, "p5.48xlarge", nil)); len(d) != 0 {
			t.Errorf("healthy H100 counters changed: %v", d)
		}
	})
	t.Run("p5 crc and replay", func(t *testing.T) {
		d := nvlinkDelta(t, newHost(t, "p5.48xlarge", map[string]string{"nvlink-crc-growth": "4:7", "nvlink-replay-burst": "1:2"}))
		got := map[string]bool{}
		for _, c := range d {
			got[strconv.Itoa(c.GPU)+"/"+strconv.Itoa(c.Link)+"/"+c.Counter] = true
		}
		if len(d) != 2 || !got["4/7/CRC Errors"] || !got["1/2/Replay Errors"] {
			t.Errorf("changes %v", d)
		}
	})
	t.Run("b200 counters", func(t *testing.T) {
		d := nvlinkDelta(t, newHost(t, "p6-b200.48xlarge", map[string]string{"nvlink-crc-growth": "0:3"}))
		var errs []nvlink.Change
		traffic := 0
		for _, c := range d {
			switch {
			case strings.HasPrefix(c.Counter, "Tx ") || strings.HasPrefix(c.Counter, "Rx packets") ||
				strings.HasPrefix(c.Counter, "Rx bytes") || c.Counter == "FEC Errors - 0":
				traffic++
			default:
				errs = append(errs, c)
			}
		}
		if traffic == 0 || len(errs) != 1 || errs[0].GPU != 0 || errs[0].Link != 3 || errs[0].Counter != "Rx Errors" {
			t.Errorf("traffic %d, errors %v", traffic, errs)
		}
	})
}

func TestFabric(t *testing.T) {
	h := newHost(t, "p5.48xlarge", map[string]string{"fabric-state": "3:In Progress", "fabric-status": "5:NVML_ERROR_INSUFFICIENT_RESOURCES"})
	fab, err := nvlink.ParseFabric(h.run(nil, smi, "-q"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fab) != 8 {
		t.Fatalf("%d GPUs", len(fab))
	}
	for i, f := range fab {
		want := i != 3 && i != 5
		if f.Registered() != want {
			t.Errorf("GPU %d (%s): state %q status %q", i, f.BusID, f.State, f.Status)
		}
	}
	if fab[3].State != "In Progress" || fab[3].Status != "N/A" || fab[0].ClusterUUID == "" || fab[0].Health["Bandwidth"] != "N/A" {
		t.Errorf("%+v %+v", fab[3], fab[0])
	}
	g5, err := nvlink.ParseFabric(newHost(t, "g5.xlarge", nil).run(nil, smi, "-q"))
	if err != nil || len(g5) != 1 || g5[0].State != "N/A" {
		t.Errorf("g5: %+v %v", g5, err)
	}
	// The table still prints by default.
	if out := h.run(nil, smi); !strings.Contains(out, "NVIDIA-SMI 595.91.07") {
		t.Errorf("table: %s", out)
	}
}

const (
	dcgmi     = "root/usr/bin/dcgmi"
	hostengin = "root/usr/bin/nv-hostengine"
	systemctl = "root/usr/bin/systemctl"
)

func TestDCGM(t *testing.T) {
	h := newHost(t, "p5.48xlarge", nil)
	out, _, code := h.runErr(nil, dcgmi, "diag", "-r", "1", "-j")
	if _, err := dcgmdiag.Parse(out); code == 0 || !dcgmdiag.IsCouldNotRun(err) || !strings.Contains(err.Error(), "Host engine connection invalid") {
		t.Fatalf("without a host engine: exit %d, %v", code, err)
	}
	if s, _, code := h.runErr(nil, systemctl, "is-active", "nvidia-dcgm"); strings.TrimSpace(s) != "inactive" || code != 3 {
		t.Errorf("nvidia-dcgm %q exit %d", s, code)
	}
	if s := h.run(nil, hostengin); !strings.Contains(s, "Started host engine version 4.4.2 using port number: 5555") {
		t.Errorf("nv-hostengine: %q", s)
	}
	r, err := dcgmdiag.Parse(h.run(nil, dcgmi, "diag", "-r", "1", "-j"))
	if err != nil || r.Format != 4 || r.Version != "4.4.2" || r.DriverVersion != "595.91.07" || len(r.Tests) != 1 || r.Worst() != dcgmdiag.Pass {
		t.Fatalf("r1: %+v %v", r, err)
	}
	if s := h.run(nil, dcgmi, "discovery", "-l"); !strings.HasPrefix(s, "8 GPUs found.") || !strings.Contains(s, "4 NvSwitches found.") {
		t.Errorf("discovery: %s", s)
	}
	h.knob("dcgm-memory-fail", "3")
	out, _, code = h.runErr(nil, dcgmi, "diag", "-r", "2", "-j")
	r, err = dcgmdiag.Parse(out)
	if err != nil || code != 226 {
		t.Fatalf("r2: exit %d, %v", code, err)
	}
	mem, ok := r.Test("memory")
	if !ok || mem.Summary != dcgmdiag.Fail || len(r.Tests) != 3 {
		t.Fatalf("r2 tests %+v", r.Tests)
	}
	for _, res := range mem.Results {
		if (res.EntityID == 3) != (res.Outcome == dcgmdiag.Fail) {
			t.Errorf("memory GPU %d: %v", res.EntityID, res.Outcome)
		}
		if res.EntityID == 3 && (len(res.Warnings) != 1 || res.Warnings[0].ErrorID != 58) {
			t.Errorf("memory GPU 3 warnings %+v", res.Warnings)
		}
	}
	// DCGM's pcie test fails a GPU below min_pci_width (16 by default) with DCGM_FR_PCIE_WIDTH.
	h.knob("dcgm-memory-fail", "")
	h.knob("gpu-pcie-width-under-load", "5:8")
	out, _, code = h.runErr(nil, dcgmi, "diag", "-r", "2", "-j")
	if r, err = dcgmdiag.Parse(out); err != nil || code != 226 {
		t.Fatalf("r2 with GPU 5 at x8: exit %d, %v", code, err)
	}
	if pcie, _ := r.Test("pcie"); pcie.Summary != dcgmdiag.Fail || pcie.Results[5].Outcome != dcgmdiag.Fail || pcie.Results[5].Warnings[0].ErrorID != 46 ||
		!strings.Contains(pcie.Results[5].Warnings[0].Text, "PCI link width 8X") || pcie.Results[4].Outcome != dcgmdiag.Pass {
		t.Errorf("pcie with GPU 5 at x8: %+v", pcie)
	}
	out, _, code = h.runErr(nil, dcgmi, "diag", "-r", "2", "-p", "pcie.h2d_d2h_single_pinned.min_pci_width=8;pcie.h2d_d2h_single_unpinned.min_pci_width=8", "-j")
	if r, err = dcgmdiag.Parse(out); err != nil || code != 0 || r.Worst() != dcgmdiag.Pass {
		t.Errorf("r2 told min_pci_width 8: exit %d, %v, %v", code, err, r.Worst())
	}
	h.knob("gpu-pcie-width-under-load", "")
	h.knob("dcgm-runtime-error", "Error: Diagnostic could not be run while DCGM is paused.")
	out, _, _ = h.runErr(nil, dcgmi, "diag", "-r", "1", "-j")
	if _, err := dcgmdiag.Parse(out); !dcgmdiag.IsCouldNotRun(err) || !strings.Contains(err.Error(), "paused") {
		t.Errorf("runtime error: %v", err)
	}
	if s := h.run(nil, hostengin, "--term"); !strings.Contains(s, "Host engine successfully terminated.") {
		t.Errorf("--term: %q", s)
	}
	if s, _, code := h.runErr(nil, hostengin, "--term"); code != 1 || !strings.Contains(s, "may not be running") {
		t.Errorf("second --term: %q %d", s, code)
	}
	// The unit starts and stops its own host engine.
	h.run(nil, systemctl, "start", "nvidia-dcgm")
	if s, _, _ := h.runErr(nil, systemctl, "is-active", "nvidia-dcgm"); strings.TrimSpace(s) != "active" {
		t.Errorf("after start: %q", s)
	}
	h.run(nil, systemctl, "stop", "nvidia-dcgm")
	if s, _, _ := h.runErr(nil, systemctl, "is-active", "nvidia-dcgm"); strings.TrimSpace(s) != "inactive" {
		t.Errorf("after stop: %q", s)
	}
	logb, _ := os.ReadFile(filepath.Join(h.prefix, "run/dlami-sim/state/dcgm.log"))
	var kinds []string
	for _, l := range strings.Split(strings.TrimSpace(string(logb)), "\n") {
		f := strings.Fields(l)
		if len(f) == 5 {
			kinds = append(kinds, f[1]+" "+f[4])
		}
	}
	if strings.Join(kinds, ",") != "start by=nv-hostengine,stop by=nv-hostengine,start by=systemd,stop by=systemd" {
		t.Errorf("dcgm.log: %q", logb)
	}
}

const pp = "root/opt/amazon/efa/bin/fi_pingpong"

// pingpong runs a server and a client on device dev; it returns both outputs and exit codes.
func (h *host) pingpong(env []string, dev, port string) (srv, cli string, srvCode, cliCode int) {
	h.t.Helper()
	cmd := exec.Command("bash", filepath.Join(h.dir, pp), "-p", "efa", "-e", "rdm", "-d", dev+"-rdm", "-B", port, "-I", "1000", "-S", "65536")
	cmd.Env = append(append(os.Environ(), "DLAMI_SIM_PREFIX="+h.prefix), env...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	rendezvous := filepath.Join(h.prefix, "run/dlami-sim/state/pingpong", port)
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(rendezvous); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	co, ce, cc := h.runErr(env, pp, "-p", "efa", "-e", "rdm", "-d", dev+"-rdm", "-P", port, "-I", "1000", "-S", "65536", "127.0.0.1")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		h.t.Fatalf("server on %s did not finish", dev)
	}
	return so.String() + se.String(), co + ce, cmd.ProcessState.ExitCode(), cc
}

func largestMBps(t *testing.T, out string) float64 {
	t.Helper()
	tables, err := pingpong.Parse(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	r := tables[0].Largest()
	if r.Bytes != 65536 || !r.Complete() {
		t.Errorf("row %+v", r)
	}
	return r.MBps
}

func TestPingPongAndRDMACounters(t *testing.T) {
	h := newHost(t, "p5.48xlarge", map[string]string{
		"efa-pingpong-error":          "rdmap81s0",
		"efa-pingpong-slow":           "rdmap82s0",
		"efa-rx-drops-during-traffic": "rdmap80s0",
	})
	noSHM := []string{"FI_EFA_ENABLE_SHM_TRANSFER=0"}
	statBefore, err := rdmastat.Parse(h.run(nil, "root/usr/bin/rdma", "statistic", "show"))
	if err != nil || len(statBefore) != 32 {
		t.Fatalf("rdma statistic: %d links, %v", len(statBefore), err)
	}
	srv, cli, sc, cc := h.pingpong(noSHM, "rdmap79s0", "20079")
	if sc != 0 || cc != 0 {
		t.Fatalf("exit %d/%d\n%s\n%s", sc, cc, srv, cli)
	}
	efa := largestMBps(t, cli)
	if s := largestMBps(t, srv); efa < 4000 || efa > 5000 || s != efa {
		t.Errorf("EFA 64 KiB: client %.2f, server %.2f MB/s", efa, s)
	}
	_, cli, _, _ = h.pingpong(nil, "rdmap79s0", "20080")
	if shm := largestMBps(t, cli); shm < 3*efa {
		t.Errorf("SHM %.2f MB/s is not far above EFA's %.2f", shm, efa)
	}
	_, cli, _, _ = h.pingpong(noSHM, "rdmap82s0", "20082")
	if slow := largestMBps(t, cli); slow > efa/8 {
		t.Errorf("slow device %.2f MB/s", slow)
	}
	_, cli, _, cc = h.pingpong(noSHM, "rdmap81s0", "20081")
	var ppErr *pingpong.Error
	if _, err := pingpong.Parse(cli); cc == 0 || err == nil || !errorAs(err, &ppErr) || ppErr.Call != "fi_av_insert" {
		t.Errorf("error device: exit %d, %v", cc, err)
	}
	h.pingpong(noSHM, "rdmap80s0", "20083")
	out, _, code := h.runErr(noSHM, pp, "-p", "efa", "-e", "rdm", "-P", "20099", "127.0.0.1")
	if _, err := pingpong.Parse(out); code != 111 || err == nil {
		t.Errorf("no server: exit %d, %v", code, err)
	}
	statAfter, err := rdmastat.Parse(h.run(nil, "root/usr/bin/rdma", "statistic", "show"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := rdmastat.Delta(statBefore, statAfter)
	if err != nil {
		t.Fatal(err)
	}
	grew := map[string]uint64{}
	for _, c := range d {
		grew[c.Link+" "+c.Counter] = c.Increase()
	}
	if grew["rdmap79s0/1 tx_bytes"] != 2*1000*65536 || grew["rdmap80s0/1 rx_drops"] == 0 || grew["rdmap79s0/1 rx_drops"] != 0 ||
		grew["rdmap81s0/1 tx_bytes"] != 0 {
		t.Errorf("deltas %v", grew)
	}
}

// Knob efa-pingpong-server-late: the server listens only after its delay, and a client that
// comes first is refused (exit 111) as fabtests' is; a client once the server listens passes.
func TestPingPongServerLate(t *testing.T) {
	h := newHost(t, "p5.48xlarge", map[string]string{"efa-pingpong-server-late": "rdmap96s0:1.5"})
	noSHM := []string{"FI_EFA_ENABLE_SHM_TRANSFER=0"}
	port := "20196"
	cmd := exec.Command("bash", filepath.Join(h.dir, pp), "-p", "efa", "-e", "rdm", "-d", "rdmap96s0-rdm", "-B", port, "-I", "10", "-S", "1024")
	cmd.Env = append(append(os.Environ(), "DLAMI_SIM_PREFIX="+h.prefix), noSHM...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	start := time.Now()
	client := []string{"-p", "efa", "-e", "rdm", "-d", "rdmap96s0-rdm", "-P", port, "-I", "10", "-S", "1024", "127.0.0.1"}
	time.Sleep(300 * time.Millisecond)
	out, errs, code := h.runErr(noSHM, pp, client...)
	if code != 111 || !strings.Contains(out+errs, "failed to connect: Connection refused") {
		t.Fatalf("client before the late server: exit %d: %s%s", code, out, errs)
	}
	for code != 0 && time.Since(start) < 10*time.Second {
		time.Sleep(250 * time.Millisecond)
		out, errs, code = h.runErr(noSHM, pp, client...)
	}
	if code != 0 || time.Since(start) < 1500*time.Millisecond {
		t.Fatalf("client after %s: exit %d: %s%s", time.Since(start), code, out, errs)
	}
	if _, err := pingpong.Parse(out); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("server: %v", err)
	}
	// Another device's server listens at once.
	if _, cli, sc, cc := h.pingpong(noSHM, "rdmap97s0", "20197"); sc != 0 || cc != 0 {
		t.Errorf("rdmap97s0: exit %d/%d: %s", sc, cc, cli)
	}
}

func errorAs(err error, target **pingpong.Error) bool {
	e, ok := err.(*pingpong.Error)
	if ok {
		*target = e
	}
	return ok
}

func TestNCCLForcedOntoTheNetwork(t *testing.T) {
	env := []string{"OMPI_COMM_WORLD_SIZE=8", "NCCL_DEBUG=INFO", "NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1", "NCCL_NVLS_ENABLE=0"}
	nccl := "root/usr/lib/dlami-sim/all_reduce_perf"
	h := newHost(t, "p5.48xlarge", nil)
	r, err := nccltests.ParseString(h.run(env, nccl, "-b", "8", "-e", "1G", "-f", "2", "-g", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(r.Transport.DataTransports, ",") != "NET/Libfabric" || r.Transport.NVLS || !strings.HasSuffix(r.Transport.DataPaths[0], "/GDRDMA") {
		t.Errorf("transport %+v", r.Transport)
	}
	if r.Largest == nil || r.Largest.OutOfPlace.BusBW == nil || *r.Largest.OutOfPlace.BusBW > 60 {
		t.Errorf("largest %+v", r.Largest)
	}
	h.knob("gdrdma", "off")
	r, err = nccltests.ParseString(h.run(env, nccl, "-b", "8", "-e", "1G", "-f", "2", "-g", "1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Transport.DataPaths {
		if strings.Contains(p, "GDRDMA") {
			t.Errorf("gdrdma off: %s", p)
		}
	}
	// Without the variables NCCL stays on NVLink.
	r, err = nccltests.ParseString(h.run([]string{"OMPI_COMM_WORLD_SIZE=8", "NCCL_DEBUG=INFO"}, nccl, "-b", "8", "-e", "1G", "-f", "2", "-g", "1"))
	if err != nil || !r.Transport.NVLS || r.Transport.DataPaths[0] != "P2P/CUMEM/read" {
		t.Errorf("default: %+v %v", r.Transport, err)
	}
}

// journalctl -k -b 0 prints journald's copy of this boot's kernel log in the format the
// plugin's parser reads; the kernel lines all_reduce_perf logs reach both the ring buffer and
// the journal, and clearing the ring buffer (what dmesg -c does to kmsg) leaves the journal's
// copy alone. knob nccl-dmesg-runs 1 logs the lines on the first run of the boot only.
func TestJournalctlKeepsWhatDmesgCleared(t *testing.T) {
	h := newHost(t, "p6-b200.48xlarge", map[string]string{
		"nccl-dmesg":      "NVRM: Xid (PCI:0000:51:00): 79, pid=4242, name=all_reduce_perf, GPU has fallen off the bus.",
		"nccl-dmesg-runs": "1",
	})
	run := filepath.Join(h.prefix, "run/dlami-sim")
	boot := "[    0.000000] Linux version 7.0.0-1014-aws\n[   12.311904] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  595.91.07\n"
	for _, f := range []string{"kmsg", "journal-kmsg"} {
		if err := os.WriteFile(filepath.Join(run, f), []byte(boot), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(run, "boot-time"), []byte(strconv.FormatInt(time.Now().Unix()-60, 10)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	journal := func() []kjournal.Entry {
		t.Helper()
		out := h.run([]string{"HOSTNAME=ip-10-1-42-17"}, "root/usr/bin/journalctl", "-k", "-b", "0", "-q", "--no-pager", "-o", "short-monotonic")
		es, err := kjournal.Parse(out)
		if err != nil {
			t.Fatalf("journalctl output: %v\n%s", err, out)
		}
		return es
	}
	if es := journal(); len(es) != 2 || es[1].Host != "ip-10-1-42-17" || !es[1].Kernel() || es[1].Stamp != 12.311904 ||
		es[1].Message != "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  595.91.07" {
		t.Fatalf("boot lines: %+v", es)
	}
	nccl := "root/usr/lib/dlami-sim/all_reduce_perf"
	h.run([]string{"OMPI_COMM_WORLD_SIZE=8"}, nccl, "-b", "8", "-e", "1M", "-f", "2")
	if err := os.WriteFile(filepath.Join(run, "kmsg"), nil, 0o644); err != nil { // dmesg -c
		t.Fatal(err)
	}
	h.run([]string{"OMPI_COMM_WORLD_SIZE=8"}, nccl, "-b", "8", "-e", "1M", "-f", "2")
	es := journal()
	var xids int
	for _, e := range es {
		if strings.Contains(e.Message, "NVRM: Xid (PCI:0000:51:00): 79") {
			xids++
			if e.Stamp <= 12.311904 {
				t.Errorf("Xid stamped %v, before the boot lines", e.Stamp)
			}
		}
	}
	if len(es) != 3 || xids != 1 {
		t.Errorf("journal after two runs (Xid on the first only) and a cleared ring buffer: %+v", es)
	}
	if b, _ := os.ReadFile(filepath.Join(run, "kmsg")); strings.Contains(string(b), "Xid") {
		t.Errorf("the second run logged the Xid again: %q", b)
	}

	// Without -q an empty journal says so; the realtime format names the host too.
	if out := h.run([]string{"HOSTNAME=h"}, "root/usr/bin/journalctl", "-k", "-b", "--no-pager"); !strings.Contains(out, " h kernel: NVRM: Xid") {
		t.Errorf("short output: %q", out)
	}
	if _, _, code := h.runErr(nil, "root/usr/bin/journalctl", "-k", "-b", "-1"); code == 0 {
		t.Error("a previous boot was answered")
	}
	if _, _, code := h.runErr(nil, "root/usr/bin/journalctl", "-u", "ssh"); code == 0 {
		t.Error("a unit's journal was answered")
	}

	// journal-storage none: boot-hook makes no journal file; journalctl finds no journal files,
	// prints nothing with -q and exits 0 (systemd's journal_access_check_and_warn).
	if err := os.Remove(filepath.Join(run, "journal-kmsg")); err != nil {
		t.Fatal(err)
	}
	if out := h.run(nil, "root/usr/bin/journalctl", "-k", "-b", "0", "-q", "--no-pager", "-o", "short-monotonic"); out != "" {
		t.Errorf("no journal, -q: %q", out)
	}
	if out, errs, code := h.runErr(nil, "root/usr/bin/journalctl", "-k", "-b", "0", "--no-pager"); code != 0 || out != "-- No entries --\n" || !strings.Contains(errs, "No journal files were found.") {
		t.Errorf("no journal: %d %q %q", code, out, errs)
	}
	// all_reduce_perf still logs into the ring buffer only.
	h.run([]string{"OMPI_COMM_WORLD_SIZE=8"}, nccl, "-b", "8", "-e", "1M", "-f", "2")
	if _, err := os.Stat(filepath.Join(run, "journal-kmsg")); err == nil {
		t.Error("kmsg_append made a journal where journald keeps none")
	}
}

// image_hygiene's journalctl --rotate then --vacuum-time=1s empties what the journal held of
// this boot (the rotated file is the archive the vacuum deletes); a vacuum without a rotation
// deletes nothing of it. Only root may do either.
func TestJournalctlRotateVacuum(t *testing.T) {
	h := newHost(t, "p6-b200.48xlarge", nil)
	kmsg := filepath.Join(h.prefix, "run/dlami-sim/journal-kmsg")
	if err := os.WriteFile(kmsg, []byte("[   12.311904] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  595.91.07\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 {
		if _, errs, code := h.runErr(nil, "root/usr/bin/journalctl", "--rotate"); code != 1 || !strings.Contains(errs, "Permission denied") {
			t.Fatalf("non-root --rotate: exit %d: %s", code, errs)
		}
		return
	}
	held := func() int {
		b, err := os.ReadFile(kmsg)
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	h.run(nil, "root/usr/bin/journalctl", "--vacuum-time=1s")
	if held() == 0 {
		t.Fatal("a vacuum without a rotation deleted the active file's records")
	}
	h.run(nil, "root/usr/bin/journalctl", "--rotate")
	_, errs, code := h.runErr(nil, "root/usr/bin/journalctl", "--vacuum-time=1s")
	if code != 0 || !strings.Contains(errs, "Vacuuming done") || held() != 0 {
		t.Fatalf("rotate + vacuum: exit %d, %q, %d bytes left", code, errs, held())
	}
}

// The EFA devices a host shows are those its launch attached (knob efa-cards, written by the
// fleet), named after their network card, in card order, in every tool alike: fi_info's
// domains, rdma statistic's links and the network a forced NCCL run uses. "none" (amazon-ebs's
// one default interface) leaves an EFA-capable type without any.
func TestEFADevicesFollowTheLaunch(t *testing.T) {
	const fiInfo = "root/opt/amazon/efa/bin/fi_info"
	devices := func(h *host) (fi, links []string) {
		t.Helper()
		out, errs, code := h.runErr(nil, fiInfo, "-p", "efa", "-t", "FI_EP_RDM")
		if code == 0 {
			d, err := fiinfo.ParseDomains(out)
			if err != nil {
				t.Fatalf("fi_info: %v\n%s", err, out)
			}
			for _, dom := range d {
				fi = append(fi, fiinfo.DeviceName(dom))
			}
		} else if code != 1 || !strings.Contains(errs, "fi_getinfo: -61 (No data available)") {
			t.Fatalf("fi_info without EFA: exit %d, %q", code, errs)
		}
		out = h.run(nil, "root/usr/bin/rdma", "statistic", "show")
		if strings.TrimSpace(out) == "" {
			return fi, nil // no EFA: rdma prints nothing, as iproute2 does without RDMA links
		}
		stat, err := rdmastat.Parse(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range stat {
			links = append(links, l.Device)
		}
		return fi, links
	}
	seq := func(from, to int) string {
		var s []string
		for c := from; c <= to; c++ {
			s = append(s, strconv.Itoa(c))
		}
		return strings.Join(s, ",")
	}
	tests := []struct {
		product, cards string
		want           []string
	}{
		{"p6-b200.48xlarge", seq(0, 7), []string{"rdmap79s0", "rdmap80s0", "rdmap81s0", "rdmap82s0", "rdmap96s0", "rdmap97s0", "rdmap98s0", "rdmap99s0"}},
		// P6-B300: card 0 is ENA-only, the EFAs sit on cards 1-16.
		{"p6-b300.48xlarge", seq(1, 16), []string{"rdmap80s0", "rdmap81s0", "rdmap82s0", "rdmap96s0", "rdmap97s0", "rdmap98s0", "rdmap99s0",
			"rdmap113s0", "rdmap114s0", "rdmap115s0", "rdmap116s0", "rdmap130s0", "rdmap131s0", "rdmap132s0", "rdmap133s0", "rdmap147s0"}},
		{"p5.48xlarge", "0,2,5", []string{"rdmap79s0", "rdmap81s0", "rdmap97s0"}},
		{"p5.48xlarge", "none", nil},
		{"p6-b200.48xlarge", "none", nil},
	}
	for _, tc := range tests {
		t.Run(tc.product+"/"+tc.cards, func(t *testing.T) {
			h := newHost(t, tc.product, map[string]string{"efa-cards": tc.cards})
			fi, links := devices(h)
			if strings.Join(fi, " ") != strings.Join(tc.want, " ") || strings.Join(links, " ") != strings.Join(tc.want, " ") {
				t.Errorf("fi_info %v, rdma statistic %v; want %v", fi, links, tc.want)
			}
		})
	}
	// Without the knob (a host booted by hand, the scenarios) the type's full set.
	fi, links := devices(newHost(t, "p5.48xlarge", nil))
	if len(fi) != 32 || len(links) != 32 {
		t.Errorf("no efa-cards knob on p5.48xlarge: %d domains, %d links; want 32", len(fi), len(links))
	}
	// A malformed knob invents nothing.
	h := newHost(t, "p5.48xlarge", map[string]string{"efa-cards": "0,x"})
	if _, errs, code := h.runErr(nil, fiInfo, "-p", "efa"); code != 1 || !strings.Contains(errs, "knob efa-cards '0,x'") {
		t.Errorf("malformed efa-cards: exit %d, %q", code, errs)
	}

	// NCCL forced onto the network: without EFA devices aws-ofi-nccl finds no provider and NCCL
	// falls back to sockets, whatever the type.
	env := []string{"OMPI_COMM_WORLD_SIZE=8", "NCCL_DEBUG=INFO", "NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1"}
	nccl := "root/usr/lib/dlami-sim/all_reduce_perf"
	r, err := nccltests.ParseString(newHost(t, "p5.48xlarge", map[string]string{"efa-cards": "none"}).run(env, nccl, "-b", "8", "-e", "1G", "-f", "2", "-g", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Transport.Socket || len(r.Transport.Providers) != 0 {
		t.Errorf("no EFA attached: transport %+v, want sockets and no provider", r.Transport)
	}
	r, err = nccltests.ParseString(newHost(t, "p6-b200.48xlarge", map[string]string{"efa-cards": seq(0, 7)}).run(env, nccl, "-b", "8", "-e", "1G", "-f", "2", "-g", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Transport.Socket || len(r.Transport.Providers) != 1 || r.Transport.Providers[0].NICs == nil || *r.Transport.Providers[0].NICs != 8 {
		t.Errorf("8 EFA attached: transport %+v, want efa with 8 nics", r.Transport)
	}
}

// With knob efa-traffic blocked (the fleet sets it when the security groups lack the
// all-traffic self rules) EFA traffic never arrives: a ping-pong with the SHM transfer off and
// a network-forced NCCL run stall, silently, until their caller gives up. Shared memory and
// NVLink traffic do not cross the network and still pass.
func TestEFATrafficBlockedStalls(t *testing.T) {
	h := newHost(t, "p6-b200.48xlarge", map[string]string{"efa-traffic": "blocked"})
	stalls := func(what string, env []string, script string, args ...string) {
		t.Helper()
		cmd := exec.Command("bash", append([]string{filepath.Join(h.dir, script)}, args...)...)
		cmd.Env = append(append(os.Environ(), "DLAMI_SIM_PREFIX="+h.prefix), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			t.Errorf("%s finished (%v) although EFA traffic is blocked:\n%s", what, err, out.String())
		case <-time.After(2 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			if strings.Contains(strings.ToLower(out.String()), "security group") {
				t.Errorf("%s explains itself; real EFA stalls without a word:\n%s", what, out.String())
			}
		}
	}
	noSHM := []string{"FI_EFA_ENABLE_SHM_TRANSFER=0"}
	// The server waits as long as it takes anyway: the client is what must stall.
	srv := exec.Command("bash", filepath.Join(h.dir, pp), "-p", "efa", "-e", "rdm", "-d", "rdmap79s0-rdm", "-B", "20190", "-I", "10", "-S", "1024")
	srv.Env = append(append(os.Environ(), "DLAMI_SIM_PREFIX="+h.prefix), noSHM...)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(filepath.Join(h.prefix, "run/dlami-sim/state/pingpong/20190")); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stalls("fi_pingpong over EFA", noSHM, pp, "-p", "efa", "-e", "rdm", "-d", "rdmap79s0-rdm", "-P", "20190", "-I", "10", "-S", "1024", "127.0.0.1")

	// Shared memory does not cross the network.
	if _, cli, sc, cc := h.pingpong(nil, "rdmap80s0", "20191"); sc != 0 || cc != 0 {
		t.Errorf("SHM ping-pong with EFA traffic blocked: exit %d/%d\n%s", sc, cc, cli)
	}
	nccl := "root/usr/lib/dlami-sim/all_reduce_perf"
	stalls("all_reduce_perf forced onto the network", []string{"OMPI_COMM_WORLD_SIZE=8", "NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1"}, nccl, "-b", "8", "-e", "8M", "-f", "2", "-g", "1")
	if _, err := nccltests.ParseString(h.run([]string{"OMPI_COMM_WORLD_SIZE=8"}, nccl, "-b", "8", "-e", "8M", "-f", "2", "-g", "1")); err != nil {
		t.Errorf("NVLink all-reduce with EFA traffic blocked: %v", err)
	}
	// The fleet lifts the block when the rules come back: the next ping-pong passes.
	h.knob("efa-traffic", "allowed")
	if _, cli, sc, cc := h.pingpong(noSHM, "rdmap81s0", "20192"); sc != 0 || cc != 0 {
		t.Errorf("ping-pong after the rules came back: exit %d/%d\n%s", sc, cc, cli)
	}
}

// A GB200 tray (p6e-gb200.36xlarge): 4 NVIDIA GB200, each registered with the rack's fabric in
// one clique of one NVLink domain, healthy; knobs put each GPU in each broken state of
// shared/docs/grace-blackwell.md 1.4. The HGX layouts keep their zero clique.
func TestFabricGB200(t *testing.T) {
	h := newHost(t, "p6e-gb200.36xlarge", nil)
	fab, err := nvlink.ParseFabric(h.run(nil, smi, "-q"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fab) != 4 {
		t.Fatalf("%d GPUs", len(fab))
	}
	for i, f := range fab {
		if !f.Registered() || f.CliqueID != "4026" || f.Clique() != nvlink.IDSet || f.Cluster() != nvlink.IDSet || f.HealthSummary() != "Healthy" || f.ProductName != "NVIDIA GB200" {
			t.Errorf("GPU %d: %+v", i, f)
		}
	}
	broken := newHost(t, "p6e-gb200.36xlarge", map[string]string{
		"fabric-state":  "1:In Progress,2:Not Started,3:Not Supported",
		"fabric-status": "0:Insufficient Resources",
	})
	fab, err = nvlink.ParseFabric(broken.run(nil, smi, "-q"))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		kind  nvlink.FabricKind
		state string
	}{{nvlink.FabricFailed, "Completed"}, {nvlink.FabricPending, "In Progress"}, {nvlink.FabricPending, "Not Started"}, {nvlink.FabricNotSupported, "Not Supported"}} {
		if f := fab[i]; f.Kind != want.kind || f.State != want.state || f.Clique() != nvlink.IDZero || f.Cluster() != nvlink.IDZero {
			t.Errorf("GPU %d: %+v", i, f)
		}
	}
	if fab[0].Status != "Insufficient Resources" {
		t.Errorf("GPU 0 status %q", fab[0].Status)
	}
	sick := newHost(t, "p6e-gb200.36xlarge", map[string]string{"fabric-health": "2:Unhealthy", "fabric-clique": "3:2"})
	fab, err = nvlink.ParseFabric(sick.run(nil, smi, "-q"))
	if err != nil {
		t.Fatal(err)
	}
	if fab[2].HealthSummary() != "Unhealthy" || !fab[2].Registered() || fab[3].CliqueID != "2" || fab[0].HealthSummary() != "Healthy" {
		t.Errorf("%+v %+v", fab[2], fab[3])
	}
	p5, err := nvlink.ParseFabric(newHost(t, "p5.48xlarge", nil).run(nil, smi, "-q"))
	if err != nil || p5[0].Clique() != nvlink.IDZero || p5[0].Cluster() != nvlink.IDZero || p5[0].HealthSummary() != "" {
		t.Errorf("p5: %+v %v", p5[0], err)
	}
	if out := h.run(nil, smi, "nvlink", "-s"); strings.Count(out, "53.125 GB/s") != 4*18 || !strings.Contains(out, "NVIDIA GB200") {
		t.Errorf("nvlink -s: %s", out)
	}
}

// uname -m says aarch64 on a GB200 tray (and whatever knob machine says), the machine's own
// elsewhere; -r stays the simulated kernel.
func TestUnameMachine(t *testing.T) {
	for _, c := range []struct {
		product string
		knobs   map[string]string
		want    string
	}{
		{"p6e-gb200.36xlarge", nil, "aarch64"},
		{"p5.48xlarge", map[string]string{"machine": "aarch64"}, "aarch64"},
		{"p6e-gb200.36xlarge", map[string]string{"machine": "x86_64"}, "x86_64"},
	} {
		h := newHost(t, c.product, c.knobs)
		if out := strings.TrimSpace(h.run(nil, "root/usr/bin/uname", "-m")); out != c.want {
			t.Errorf("%s %v: uname -m %q, want %q", c.product, c.knobs, out, c.want)
		}
		if out := h.run(nil, "root/usr/bin/uname", "-a"); !strings.Contains(out, " "+c.want+" ") || !strings.Contains(out, "7.0.0-1014-aws") {
			t.Errorf("%s: uname -a %q", c.product, out)
		}
	}
}

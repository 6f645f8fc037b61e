package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheckbin"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

type resultCheck = result.Check

// TestNodeCheckInstalled: with node_check the bake installs the binary for the host's
// architecture, its config (pointing at the bill of materials), the unit (enabled), the Slurm
// wrapper and the NPD config, before it writes the bill of materials.
func TestNodeCheckInstalled(t *testing.T) {
	h := newFakeHost(t)
	h.hostOut["nodecheck.machine"] = fakeSection{out: "x86_64"}
	opt := options(t)
	opt.NodeCheck = &nodeconf.Config{Action: nodeconf.ActionBlock, BOMPath: opt.ManifestPath, OutDir: nodeconf.DefaultOutDir,
		Timeout: 300 * time.Second, CheckTimeout: time.Minute, Scontrol: nodeconf.DefaultScontrol, Before: nodeconf.DefaultBefore}
	err := Run(context.Background(), h, &recordingUI{}, opt)
	if nodecheckbin.Available() != nil {
		// A plain `go test` without `make node-check`: the install must say how to build.
		if err == nil || !strings.Contains(err.Error(), "make build") {
			t.Fatalf("without embedded binaries: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("bake with node_check: %v", err)
	}
	bin := h.files[nodeconf.BinaryPath]
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		t.Errorf("%s is not the binary (%d bytes)", nodeconf.BinaryPath, len(bin))
	}
	amd, _ := nodecheckbin.Binary("amd64")
	if !bytes.Equal(bin, amd) {
		t.Error("an x86_64 host did not get the linux/amd64 binary")
	}
	var cfg nodeconf.Config
	if err := json.Unmarshal(h.files[nodeconf.ConfigPath], &cfg); err != nil || cfg.BOMPath != opt.ManifestPath || cfg.Action != "block" {
		t.Errorf("config %+v %v", cfg, err)
	}
	if u := string(h.files[nodeconf.UnitPath]); !strings.Contains(u, "RequiredBy=slurmd.service kubelet.service") {
		t.Errorf("unit:\n%s", u)
	}
	for _, p := range []string{nodeconf.SlurmWrapperPath, nodeconf.NPDConfigPath} {
		if len(h.files[p]) == 0 {
			t.Errorf("%s not installed", p)
		}
	}
	if es := probe.NodeCheckEnableScript(nodeconf.UnitName, nodeconf.BinaryPath); !strings.Contains(es.Text, "unit='dlami-node-check.service'\n") ||
		!strings.Contains(es.Text, "binary='/usr/local/sbin/dlami-node-check'\n") || !strings.Contains(es.Text, `"$systemctl" enable "$unit"`) || !es.AsRoot {
		t.Errorf("enable script:\n%s", es.Text)
	}
	if !slicesContains(h.layersRun, -1) {
		t.Error("the enable job did not run")
	}
	if len(h.files[opt.ManifestPath]) == 0 {
		t.Error("no bill of materials")
	}
	if r := readReport(t, opt.ReportDir); r.Result != report.ResultPass {
		t.Errorf("report %s %v", r.Result, r.FailedChecks)
	}
}

// TestNodeCheckInstalledInADeferredBake: the first phase of a two-phase bake (defer_validation,
// on a Graviton build instance for the arm64 DLAMI of a GB200 tray) installs the node check
// too, the linux/arm64 binary, before the bill of materials: the trays launched from the
// image run it at every boot.
func TestNodeCheckInstalledInADeferredBake(t *testing.T) {
	h, _ := cpuBuildHost(t)
	h.hostOut["nodecheck.machine"] = fakeSection{out: "aarch64"}
	opt := options(t)
	opt.DeferValidation = true
	opt.NodeCheck = &nodeconf.Config{Action: nodeconf.ActionBlock, BOMPath: opt.ManifestPath, OutDir: nodeconf.DefaultOutDir,
		Timeout: 300 * time.Second, CheckTimeout: time.Minute, Scontrol: nodeconf.DefaultScontrol, Before: []string{"slurmd.service"}}
	ui := &recordingUI{}
	err := Run(context.Background(), h, ui, opt)
	if nodecheckbin.Available() != nil {
		if err == nil || !strings.Contains(err.Error(), "make build") {
			t.Fatalf("without embedded binaries: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("first phase with node_check: %v", err)
	}
	arm, _ := nodecheckbin.Binary("arm64")
	if !bytes.Equal(h.files[nodeconf.BinaryPath], arm) {
		t.Errorf("an aarch64 build host did not get the linux/arm64 binary (%d bytes)", len(h.files[nodeconf.BinaryPath]))
	}
	if u := string(h.files[nodeconf.UnitPath]); !strings.Contains(u, "RequiredBy=slurmd.service") {
		t.Errorf("unit:\n%s", u)
	}
	if !slicesContains(h.layersRun, -1) || !strings.Contains(ui.String(), "dlami: installed /usr/local/sbin/dlami-node-check (linux/arm64") {
		t.Errorf("the unit was not enabled, or the UI does not say so:\n%s", ui.String())
	}
	if len(h.files[opt.ManifestPath]) == 0 {
		t.Error("no bill of materials")
	}
	if r := readReport(t, opt.ReportDir); r.Result != "deferred" {
		t.Errorf("report %s %v, want deferred", r.Result, r.FailedChecks)
	}
}

// TestNodeCheckUnknownArchFails: a host the plugin has no binary for fails the bake, naming it.
func TestNodeCheckUnknownArchFails(t *testing.T) {
	h := newFakeHost(t)
	h.hostOut["nodecheck.machine"] = fakeSection{out: "riscv64"}
	opt := options(t)
	opt.NodeCheck = &nodeconf.Config{Action: nodeconf.ActionReport, Timeout: time.Minute}
	err := Run(context.Background(), h, &recordingUI{}, opt)
	if err == nil || !strings.Contains(err.Error(), `machine "riscv64"`) {
		t.Fatalf("riscv64 host: %v", err)
	}
	if _, ok := h.files[nodeconf.UnitPath]; ok {
		t.Error("the unit was installed on a host without a binary")
	}
}

func slicesContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestVerifyRunsTheImagesNodeCheck: a verification instance whose image has the node check
// runs it (report mode, JSON); its failure fails the verification, an image without it
// reports node-check skipped, and an unreadable answer fails closed.
func TestVerifyRunsTheImagesNodeCheck(t *testing.T) {
	b := bakedBOM(t)
	nodeReport := func(result string, failed ...string) string {
		r := report.Report{Result: result, FailedChecks: failed, Checks: []resultCheck{{ID: "gpu", Status: "pass"}}}
		for _, id := range failed {
			r.Checks = append(r.Checks, resultCheck{ID: id, Status: "fail", Message: "nvidia-fabricmanager: 595.91.07-1 → 595.99.01-1"})
		}
		js, err := report.JSON(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(js)
	}
	for _, c := range []struct {
		name    string
		present bool
		out     string
		code    int
		want    string
		msg     string
		pass    bool
	}{
		{"absent", false, "", 0, "skip", "the image has no node check", true},
		{"pass", true, nodeReport("pass"), 0, "pass", "", true},
		{"fail", true, nodeReport("fail", "first-boot-packages"), 1, "fail", "first-boot-packages: nvidia-fabricmanager: 595.91.07-1 → 595.99.01-1", false},
		{"sudo refused", true, "sudo: a password is required", 1, "fail", "without a readable JSON report", false},
		{"could not run", true, "", 126, "fail", "could not run", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newFakeHost(t)
			if c.present {
				h.hostOut["nodecheck.present"] = fakeSection{out: "present"}
				h.hostOut["nodecheck.run"] = fakeSection{out: c.out, code: c.code}
			}
			o := verifyOptions(t, b)
			err := Verify(context.Background(), h, &recordingUI{}, o)
			if (err == nil) != c.pass {
				t.Fatalf("verification: %v, want pass=%v", err, c.pass)
			}
			r := readReport(t, o.ReportDir)
			got := check(r, "node-check")
			if got.Status != c.want || !strings.Contains(got.Message, c.msg) {
				t.Errorf("node-check %s %q, want %s containing %q", got.Status, got.Message, c.want, c.msg)
			}
			if !c.pass && !strings.Contains(err.Error(), "node-check") {
				t.Errorf("the verification's error does not name node-check: %v", err)
			}
		})
	}
}

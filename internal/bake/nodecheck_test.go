package bake

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheck"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheckbin"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
)

// TestNodeCheckInstalled: with node_check the bake installs the binary for the host's
// architecture, its config (pointing at the bill of materials), the unit (enabled), the Slurm
// wrapper and the NPD config, before it writes the bill of materials.
func TestNodeCheckInstalled(t *testing.T) {
	h := newFakeHost(t)
	h.hostOut[sectionMachine] = fakeSection{out: "x86_64"}
	opt := options(t)
	opt.NodeCheck = &nodecheck.Config{Action: nodecheck.ActionBlock, BOMPath: opt.ManifestPath, OutDir: nodecheck.DefaultOutDir,
		TimeoutSeconds: 300, CheckTimeoutSeconds: 60, Scontrol: nodecheck.DefaultScontrol, Before: nodecheck.DefaultBefore}
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
	bin := h.files[nodecheck.BinaryPath]
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		t.Errorf("%s is not the binary (%d bytes)", nodecheck.BinaryPath, len(bin))
	}
	amd, _ := nodecheckbin.Binary("amd64")
	if !bytes.Equal(bin, amd) {
		t.Error("an x86_64 host did not get the linux/amd64 binary")
	}
	var cfg nodecheck.Config
	if err := json.Unmarshal(h.files[nodecheck.ConfigPath], &cfg); err != nil || cfg.BOMPath != opt.ManifestPath || cfg.Action != "block" {
		t.Errorf("config %+v %v", cfg, err)
	}
	if u := string(h.files[nodecheck.UnitPath]); !strings.Contains(u, "RequiredBy=slurmd.service kubelet.service") {
		t.Errorf("unit:\n%s", u)
	}
	for _, p := range []string{nodecheck.SlurmWrapperPath, nodecheck.NPDConfigPath} {
		if len(h.files[p]) == 0 {
			t.Errorf("%s not installed", p)
		}
	}
	if !strings.Contains(enableScript(), "\"$systemctl\" enable 'dlami-node-check.service'\n'/usr/local/sbin/dlami-node-check' --version") {
		t.Errorf("enable script:\n%s", enableScript())
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

// TestNodeCheckUnknownArchFails: a host the plugin has no binary for fails the bake, naming it.
func TestNodeCheckUnknownArchFails(t *testing.T) {
	h := newFakeHost(t)
	h.hostOut[sectionMachine] = fakeSection{out: "riscv64"}
	opt := options(t)
	opt.NodeCheck = &nodecheck.Config{Action: nodecheck.ActionReport, TimeoutSeconds: 60}
	err := Run(context.Background(), h, &recordingUI{}, opt)
	if err == nil || !strings.Contains(err.Error(), `machine "riscv64"`) {
		t.Fatalf("riscv64 host: %v", err)
	}
	if _, ok := h.files[nodecheck.UnitPath]; ok {
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

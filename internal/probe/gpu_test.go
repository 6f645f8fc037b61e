package probe

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	judge "github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func TestGPUFaults(t *testing.T) {
	runFaults(t, []fault{
		{"7 GPUs visible, 8 on the bus", func(s map[string]bundle.Section) {
			lines := strings.Split(strings.TrimSpace(s[sectionNvidiaSMI].Output), "\n")
			set(s, sectionNvidiaSMI, strings.Join(lines[:7], "\n"), 0)
		}, nil, []string{result.GPU}, "fell off the bus"},
		{"7 GPUs visible and on the bus (profile says 8)", func(s map[string]bundle.Section) {
			lines := strings.Split(strings.TrimSpace(s[sectionNvidiaSMI].Output), "\n")
			set(s, sectionNvidiaSMI, strings.Join(lines[:7], "\n"), 0)
			set(s, sectionPCI, pciLines(enaGroup(), gpuGroup(7), cx7Group(2), efaGroup(8)), 0)
		}, nil, []string{result.GPU}, "profile p6-b200.48xlarge says 8 GPUs but the PCI bus has 7"},
		{"wrong GPU model", func(s map[string]bundle.Section) {
			set(s, sectionNvidiaSMI, strings.ReplaceAll(s[sectionNvidiaSMI].Output, "NVIDIA B200", "NVIDIA H100 80GB HBM3"), 0)
		}, nil, []string{result.GPU}, "not B200"},
		{"driver library mismatch", func(s map[string]bundle.Section) {
			set(s, sectionNvidiaSMI, strings.ReplaceAll(s[sectionNvidiaSMI].Output, "595.91.07", "580.95.05"), 0)
		}, nil, []string{result.NvidiaDriver}, "mismatch"},
		{"driver pin", nil, func(e *settings.Expectations) { e.NvidiaDriver = "580.95.05" }, []string{result.NvidiaDriver}, "does not satisfy"},
		{"bad driver setting", nil, func(e *settings.Expectations) { e.NvidiaDriver = ">= abc" }, []string{result.NvidiaDriver}, "bad expected version"},
		{"nvidia-smi missing", func(s map[string]bundle.Section) {
			set(s, sectionNvidiaSMI, "nvidia-smi: not found (looked in /usr/bin/nvidia-smi, PATH)", 127)
		}, nil, []string{result.GPU, result.NvidiaDriver}, "command not found"},
		{"nvidia-smi garbage", func(s map[string]bundle.Section) {
			set(s, sectionNvidiaSMI, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", 0)
		}, nil, []string{result.GPU, result.NvidiaDriver}, "line 1"},
		{"nvidia-smi timed out", func(s map[string]bundle.Section) {
			set(s, sectionNvidiaSMI, "", 137)
		}, nil, []string{result.GPU, result.NvidiaDriver}, "timed out"},
		{"PCI inventory unreadable", func(s map[string]bundle.Section) {
			set(s, sectionPCI, "", 1)
		}, nil, []string{result.GPU, result.EFADevices}, "PCI inventory"},
	})
}

func TestGPUUnknownType(t *testing.T) {
	unknown := func(s map[string]bundle.Section) { set(s, sectionProductName, "p7-future.48xlarge", 0) }
	// Everything consistent: judged against the PCI bus, and a warning that there is no profile.
	c := statusOf(evaluate(t, unknown, func(e *settings.Expectations) { *e = settings.Expectations{} }), result.GPU)
	if c.Status != result.Warn || c.Basis != judge.BasisPCI || !strings.Contains(c.Message, "no built-in profile") || !strings.Contains(c.Message, "expect.gpu_count") {
		t.Errorf("healthy unprofiled host: %s basis %q: %s", c.Status, c.Basis, c.Message)
	}
	// 7 of 8 GPUs visible: fails whatever the profile says.
	c = statusOf(evaluate(t, func(s map[string]bundle.Section) {
		unknown(s)
		lines := strings.Split(strings.TrimSpace(s[sectionNvidiaSMI].Output), "\n")
		set(s, sectionNvidiaSMI, strings.Join(lines[:7], "\n"), 0)
	}, func(e *settings.Expectations) { *e = settings.Expectations{} }), result.GPU)
	if c.Status != result.Fail || !strings.Contains(c.Message, "nvidia-smi lists 7 GPUs but the PCI bus has 8") {
		t.Errorf("7 of 8: %s: %s", c.Status, c.Message)
	}
	// An explicit count turns the warning into a judged pass.
	c = statusOf(evaluate(t, unknown, func(e *settings.Expectations) { *e = settings.Expectations{GPUCount: 8, GPUModel: "B200"} }), result.GPU)
	if c.Status != result.Pass || c.Basis != judge.BasisSetting {
		t.Errorf("explicit count: %s basis %q: %s", c.Status, c.Basis, c.Message)
	}
}

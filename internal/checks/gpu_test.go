package checks

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func TestGPUFaults(t *testing.T) {
	runFaults(t, []fault{
		{"7 GPUs visible, 8 on the bus", func(s map[string]bundle.Section) {
			lines := strings.Split(strings.TrimSpace(s[HostSectionNvidiaSMI].Output), "\n")
			set(s, HostSectionNvidiaSMI, strings.Join(lines[:7], "\n"), 0)
		}, nil, []string{result.GPU}, "fell off the bus"},
		{"7 GPUs visible and on the bus (profile says 8)", func(s map[string]bundle.Section) {
			lines := strings.Split(strings.TrimSpace(s[HostSectionNvidiaSMI].Output), "\n")
			set(s, HostSectionNvidiaSMI, strings.Join(lines[:7], "\n"), 0)
			set(s, HostSectionPCI, pciLines(enaGroup(), gpuGroup(7), cx7Group(2), efaGroup(8)), 0)
		}, nil, []string{result.GPU}, "profile p6-b200.48xlarge says 8 GPUs but the PCI bus has 7"},
		{"wrong GPU model", func(s map[string]bundle.Section) {
			set(s, HostSectionNvidiaSMI, strings.ReplaceAll(s[HostSectionNvidiaSMI].Output, "NVIDIA B200", "NVIDIA H100 80GB HBM3"), 0)
		}, nil, []string{result.GPU}, "not B200"},
		{"driver library mismatch", func(s map[string]bundle.Section) {
			set(s, HostSectionNvidiaSMI, strings.ReplaceAll(s[HostSectionNvidiaSMI].Output, "595.91.07", "580.95.05"), 0)
		}, nil, []string{result.NvidiaDriver}, "mismatch"},
		{"driver pin", nil, func(e *Expectations) { e.NvidiaDriver = "580.95.05" }, []string{result.NvidiaDriver}, "does not satisfy"},
		{"bad driver setting", nil, func(e *Expectations) { e.NvidiaDriver = ">= abc" }, []string{result.NvidiaDriver}, "bad expected version"},
		{"nvidia-smi missing", func(s map[string]bundle.Section) {
			set(s, HostSectionNvidiaSMI, "nvidia-smi: not found (looked in /usr/bin/nvidia-smi, PATH)", 127)
		}, nil, []string{result.GPU, result.NvidiaDriver}, "command not found"},
		{"nvidia-smi garbage", func(s map[string]bundle.Section) {
			set(s, HostSectionNvidiaSMI, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", 0)
		}, nil, []string{result.GPU, result.NvidiaDriver}, "line 1"},
		{"nvidia-smi timed out", func(s map[string]bundle.Section) {
			set(s, HostSectionNvidiaSMI, "", 137)
		}, nil, []string{result.GPU, result.NvidiaDriver}, "timed out"},
		{"PCI inventory unreadable", func(s map[string]bundle.Section) {
			set(s, HostSectionPCI, "", 1)
		}, nil, []string{result.GPU, result.EFADevices}, "PCI inventory"},
	})
}

func TestGPUUnknownType(t *testing.T) {
	unknown := func(s map[string]bundle.Section) { set(s, HostSectionProductName, "p7-future.48xlarge", 0) }
	// Everything consistent: judged against the PCI bus, and a warning that there is no profile.
	c := statusOf(evaluate(t, unknown, func(e *Expectations) { *e = Expectations{} }), result.GPU)
	if c.Status != result.Warn || c.Basis != BasisPCI || !strings.Contains(c.Message, "no built-in profile") || !strings.Contains(c.Message, "expect.gpu_count") {
		t.Errorf("healthy unprofiled host: %s basis %q: %s", c.Status, c.Basis, c.Message)
	}
	// 7 of 8 GPUs visible: fails whatever the profile says.
	c = statusOf(evaluate(t, func(s map[string]bundle.Section) {
		unknown(s)
		lines := strings.Split(strings.TrimSpace(s[HostSectionNvidiaSMI].Output), "\n")
		set(s, HostSectionNvidiaSMI, strings.Join(lines[:7], "\n"), 0)
	}, func(e *Expectations) { *e = Expectations{} }), result.GPU)
	if c.Status != result.Fail || !strings.Contains(c.Message, "nvidia-smi lists 7 GPUs but the PCI bus has 8") {
		t.Errorf("7 of 8: %s: %s", c.Status, c.Message)
	}
	// An explicit count turns the warning into a judged pass.
	c = statusOf(evaluate(t, unknown, func(e *Expectations) { *e = Expectations{GPUCount: 8, GPUModel: "B200"} }), result.GPU)
	if c.Status != result.Pass || c.Basis != BasisSetting {
		t.Errorf("explicit count: %s basis %q: %s", c.Status, c.Basis, c.Message)
	}
}

func TestModelMatches(t *testing.T) {
	tests := []struct {
		name, model string
		want        bool
	}{
		{"NVIDIA B200", "B200", true},
		{"NVIDIA B200", "b200", true},
		{"NVIDIA H100 80GB HBM3", "H100", true},
		{"NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB", true},
		{"NVIDIA A100-SXM4-80GB", "A100-SXM4-40GB", false},
		{"NVIDIA L40S", "L4", false},
		{"NVIDIA L4", "L4", true},
		{"NVIDIA L4-12Q", "L4", true},
		{"NVIDIA L40S", "L40S", true},
		{"NVIDIA H200", "H100", false},
		{"NVIDIA GB200", "B200", false},
		{"NVIDIA B300 SXM6 AC", "B300", true},
		{"anything", "", true},
	}
	for _, tt := range tests {
		if got := modelMatches(tt.name, tt.model); got != tt.want {
			t.Errorf("modelMatches(%q, %q) = %v", tt.name, tt.model, got)
		}
	}
}

package probe

import (
	"strconv"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// Fields of gpuhealth.Query, by name.
const (
	fieldECCMode     = "ecc.mode.current"
	fieldECCVolatile = "ecc.errors.uncorrected.volatile.total"
	fieldRemapPend   = "remapped_rows.pending"
	fieldRemapFail   = "remapped_rows.failure"
)

func TestGPUMemoryFaults(t *testing.T) {
	runFaults(t, []fault{
		{"pending row remap", func(s map[string]bundle.Section) { gpuHealthField(s, 3, fieldRemapPend, "Yes") }, nil,
			[]string{result.GPUMemory}, "reboot the instance to apply the remap, then rebake"},
		{"row remap failure", func(s map[string]bundle.Section) { gpuHealthField(s, 5, fieldRemapFail, "Yes") }, nil,
			[]string{result.GPUMemory}, "retire the instance"},
		{"volatile uncorrectable ECC errors", func(s map[string]bundle.Section) { gpuHealthField(s, 2, fieldECCVolatile, "4") }, nil,
			[]string{result.GPUMemory}, "4 volatile uncorrectable ECC errors"},
		{"ECC disabled", func(s map[string]bundle.Section) { gpuHealthField(s, 0, fieldECCMode, "Disabled") }, nil,
			[]string{result.GPUMemory}, "ECC is disabled"},
		{"nvidia-smi health query fails", func(s map[string]bundle.Section) {
			set(s, sectionGPUHealth, "Unable to determine the device handle for GPU0000:52:00.0: Unknown Error", 15)
		}, nil, []string{result.GPUMemory}, "could not be read"},
	})
}

// nvlinkStatusLine sets link l of GPU g in the nvlink -s section to text.
func nvlinkStatusLine(s map[string]bundle.Section, g, l int, text string) {
	out := s[sectionNVLinkStatus].Output
	blocks := strings.Split(out, "GPU ")
	b := blocks[g+1]
	lines := strings.Split(b, "\n")
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "Link "+strconv.Itoa(l)+":") {
			lines[i] = "\t Link " + strconv.Itoa(l) + ": " + text
		}
	}
	blocks[g+1] = strings.Join(lines, "\n")
	set(s, sectionNVLinkStatus, strings.Join(blocks, "GPU "), 0)
}

func TestNVLinkFaults(t *testing.T) {
	runFaults(t, []fault{
		{"one inactive link", func(s map[string]bundle.Section) { nvlinkStatusLine(s, 2, 5, "<inactive>") }, nil,
			[]string{result.NVLink}, "GPU 2: link 5 inactive"},
		{"fabric not completed", func(s map[string]bundle.Section) {
			set(s, sectionNvsmiQuery, strings.Replace(s[sectionNvsmiQuery].Output, "State                             : Completed", "State                             : In Progress", 1), 0)
		}, nil, []string{result.NVLink}, "fabric registration not completed"},
		{"nvlink -s fails on an NVSwitch host", func(s map[string]bundle.Section) { set(s, sectionNVLinkStatus, "NVML: Unknown Error", 255) }, nil,
			[]string{result.NVLink}, "could not be read"},
	})
	// Fewer links than the setting says.
	c := statusOf(evaluate(t, nil, func(e *settings.Expectations) { e.NVLinks = 12 }), result.NVLink)
	if c.Status != result.Fail || !strings.Contains(c.Message, "18 active links, setting says 12") {
		t.Errorf("expect.nvlinks = 12 on 18-link GPUs: %s: %s", c.Status, c.Message)
	}
}

// The nvidia-smi -q section is read twice: for the fabric and for the health fields with each
// GPU's architecture (which the CSV query cannot ask for).
func TestHealthQueryFact(t *testing.T) {
	h := ParseHost(healthySections(t))
	if !h.Health.Query.OK() || len(h.Health.Query.Value) != 8 || h.Health.Query.Value[0].Name != "NVIDIA B200" {
		t.Fatalf("health -q: %s %+v", h.Health.Query.Problem, h.Health.Query.Value)
	}
	s := healthySections(t)
	set(s, sectionNvsmiQuery, "Attached GPUs : 8\nGPU 00000000:51:00.0\n    Product Architecture : Blackwell\n", 0)
	if q := ParseHost(s).Health.Query; q.OK() || !strings.Contains(q.Problem, "GPU list incomplete") {
		t.Errorf("1 of 8 GPU blocks read: %+v", q)
	}
}

package probe

import (
	"slices"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// gpuHealthHeader is the header line of the health section's fixtures, as --format=csv prints it.
const gpuHealthHeader = "index, pci.bus_id, persistence_mode, ecc.mode.current, ecc.errors.uncorrected.volatile.total, retired_pages.pending, remapped_rows.pending, remapped_rows.failure, pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max, clocks_event_reasons.hw_slowdown, clocks_event_reasons.hw_thermal_slowdown, clocks_event_reasons.hw_power_brake_slowdown, clocks_event_reasons.sw_power_cap"

// gpuHealthField sets field (a name of the section's header line) of GPU gpu's health line to v.
func gpuHealthField(s map[string]bundle.Section, gpu int, field, v string) {
	lines := strings.Split(s[sectionGPUHealth].Output, "\n")
	col := slices.Index(strings.Split(lines[0], ", "), field)
	if col < 0 {
		panic("the health section's header has no field " + field)
	}
	cells := strings.Split(lines[gpu+1], ", ")
	cells[col] = v
	lines[gpu+1] = strings.Join(cells, ", ")
	set(s, sectionGPUHealth, strings.Join(lines, "\n"), 0)
}

func TestPersistenceFaults(t *testing.T) {
	const persistence = "persistence_mode"
	daemonOff := func(s map[string]bundle.Section) { set(s, sectionPersistenced, "inactive", 3) }
	runFaults(t, []fault{
		{"daemon off, one GPU without persistence mode", func(s map[string]bundle.Section) {
			daemonOff(s)
			gpuHealthField(s, 1, persistence, "Disabled")
		}, nil, []string{result.Persistence}, "off on GPU 1:"},
		{"daemon off, health unreadable", func(s map[string]bundle.Section) {
			daemonOff(s)
			set(s, sectionGPUHealth, "Field \"persistence_mode\" is not a valid field to query.", 2)
		}, nil, []string{result.Persistence, result.GPUMemory}, "could not be read"},
		{"systemctl missing, mode off", func(s map[string]bundle.Section) {
			set(s, sectionPersistenced, "systemctl: not found", 127)
			gpuHealthField(s, 0, persistence, "Disabled")
		}, nil, []string{result.Persistence}, "off on GPU 0:"},
	})
	// Persistence mode on every GPU passes without the daemon.
	c := statusOf(evaluate(t, daemonOff, nil), result.Persistence)
	if c.Status != result.Pass || c.Actual != "persistence mode on all 8 GPUs (nvidia-persistenced inactive)" {
		t.Errorf("mode on, daemon off: %s %q: %s", c.Status, c.Actual, c.Message)
	}
}

package probe

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// gpuHealthField sets the field'th value (0-based, in gpuhealth.Query order) of GPU gpu's
// health line to v.
func gpuHealthField(s map[string]bundle.Section, gpu, field int, v string) {
	lines := strings.Split(s[sectionGPUHealth].Output, "\n")
	cells := strings.Split(lines[gpu], ", ")
	cells[field] = v
	lines[gpu] = strings.Join(cells, ", ")
	set(s, sectionGPUHealth, strings.Join(lines, "\n"), 0)
}

func TestPersistenceFaults(t *testing.T) {
	const persistence = 2
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

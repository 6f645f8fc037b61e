package probe

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	judge "github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func TestFabricManagerFaults(t *testing.T) {
	runFaults(t, []fault{
		{"inactive", func(s map[string]bundle.Section) { set(s, sectionFabricManager, "inactive", 3) }, nil, []string{result.FabricManager}, "not active"},
		{"failed", func(s map[string]bundle.Section) { set(s, sectionFabricManager, "failed", 3) }, nil, []string{result.FabricManager}, "not active"},
		{"profile NVSwitch, bus shows none", func(s map[string]bundle.Section) {
			set(s, sectionPCI, pciLines(enaGroup(), gpuGroup(8), efaGroup(8)), 0)
		}, nil, []string{result.FabricManager}, "says NVSwitch=true but the PCI bus shows no NVSwitch fabric"},
	})
}

func TestFabricManagerFromPCI(t *testing.T) {
	unprofiled := func(pciOut, state string, rc int) func(map[string]bundle.Section) {
		return func(s map[string]bundle.Section) {
			set(s, sectionProductName, "p7-future.48xlarge", 0)
			set(s, sectionPCI, pciOut, 0)
			set(s, sectionFabricManager, state, rc)
		}
	}
	for _, tt := range []struct {
		name   string
		pci    string
		state  string
		rc     int
		status result.Status
		msg    string
	}{
		{"NVSwitches, FM inactive", pciLines(gpuGroup(8), switchGroup(4), efaGroup(8)), "inactive", 3, result.Fail, "not active"},
		{"NVSwitches, FM active", pciLines(gpuGroup(8), switchGroup(4), efaGroup(8)), "active", 0, result.Pass, ""},
		{"ConnectX-7 bridges (P6), FM inactive", pciLines(gpuGroup(8), cx7Group(2), efaGroup(8)), "inactive", 3, result.Fail, "not active"},
		{"PCIe GPUs, no fabric", pciLines(gpuGroup(8), efaGroup(8)), "inactive", 3, result.Skip, "not required"},
		{"one bridge is not a fabric", pciLines(gpuGroup(8), cx7Group(1), efaGroup(8)), "inactive", 3, result.Skip, "not required"},
	} {
		c := statusOf(evaluate(t, unprofiled(tt.pci, tt.state, tt.rc), func(e *settings.Expectations) { *e = settings.Expectations{} }), result.FabricManager)
		if c.Status != tt.status || !strings.Contains(c.Message, tt.msg) || !strings.HasPrefix(c.Basis, judge.BasisPCI) {
			t.Errorf("%s: %s basis %q: %s", tt.name, c.Status, c.Basis, c.Message)
		}
	}
	// The setting wins over the bus.
	no := false
	c := statusOf(evaluate(t, unprofiled(pciLines(gpuGroup(8), switchGroup(4), efaGroup(8)), "inactive", 3), func(e *settings.Expectations) { *e = settings.Expectations{FabricManager: &no} }), result.FabricManager)
	if c.Status != result.Skip || c.Basis != judge.BasisSetting {
		t.Errorf("fabric_manager = false: %s %q", c.Status, c.Basis)
	}
}

package checks

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func init() {
	register(Entry{
		ID: result.FabricManager, Phase: PhaseHost, Family: "gpu", Order: 250, Judge: judgeFabricManager,
		Doc:   "Fabric Manager is active where the GPUs sit on an NVSwitch fabric (setting, profile, else NVSwitches or ConnectX-7 NVLink bridges on the PCI bus)",
		Reads: "`systemctl is-active nvidia-fabricmanager`, `/sys/bus/pci/devices`",
	})
}

// judgeFabricManager judges nvidia-fabricmanager: GPUs on an NVSwitch fabric need it active,
// or NVLink collectives across the switches do not work. A profile and the PCI bus that
// disagree about the fabric fail, naming both.
func judgeFabricManager(f facts.Run, t Target) result.Check {
	h := f.Host
	id := result.FabricManager
	want, basis, known := t.fabricManagerRequired()
	expected := "active"
	if !want {
		expected = "not required (no NVSwitch fabric)"
	}
	if !known {
		expected = "not judged"
	}
	ev := func() string { return evidence(h.FabricManager.Evidence, h.PCI.Evidence) }
	state := h.FabricManager.Value

	if t.Profile != nil && t.PCI != nil && t.Expect.FabricManager == nil && t.Profile.NVSwitch != t.PCI.HasNVLinkFabric() {
		return check(id, result.Fail, basis, expected, cmp.Or(state, "unknown"),
			fmt.Sprintf("the %s says NVSwitch=%v but the PCI bus shows %s: the instance is not what its type says, or the profile is wrong (set expect.fabric_manager to decide)",
				t.profileName(), t.Profile.NVSwitch, fabricSummary(*t.PCI)), ev())
	}
	if !known {
		return check(id, result.Warn, "", expected, cmp.Or(state, "unknown"),
			"not judged: no setting, no profile and no readable PCI inventory ("+t.PCIProblem+"); set expect.fabric_manager", ev())
	}
	if basis == BasisPCI {
		basis += ": " + fabricSummary(*t.PCI)
	}
	if !h.FabricManager.OK() {
		if want {
			return check(id, result.Fail, basis, expected, "unknown", h.FabricManager.Problem, ev())
		}
		return check(id, result.Skip, basis, expected, "unknown", "not required; "+h.FabricManager.Problem, ev())
	}
	switch {
	case state == "active":
		msg := ""
		if !want {
			msg = "active although not required"
		}
		return check(id, result.Pass, basis, expected, state, msg, "")
	case want:
		return check(id, result.Fail, basis, expected, state,
			"nvidia-fabricmanager is not active: NVLink collectives across the NVSwitches will not work (journalctl -u nvidia-fabricmanager; on HGX B200/B300 it also needs NVLSM)", ev())
	}
	return check(id, result.Skip, basis, expected, state, "Fabric Manager not required: "+strings.TrimPrefix(basis, BasisPCI+": "), "")
}

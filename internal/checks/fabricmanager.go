package checks

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// unitStates are the words `systemctl is-active` prints; it exits non-zero for every state but
// active, so the word, not the exit status, is the answer.
var unitStates = map[string]bool{
	"active": true, "inactive": true, "failed": true, "activating": true,
	"deactivating": true, "reloading": true, "unknown": true, "maintenance": true, "refreshing": true,
}

// unitState returns the state word of an is-active section, or "" when it printed none.
func unitState(s bundle.Section, ok bool) string {
	if !ok || s.TimedOut {
		return ""
	}
	if w := firstLine(s.Output); unitStates[w] {
		return w
	}
	return ""
}

// checkFabricManager judges nvidia-fabricmanager: GPUs on an NVSwitch fabric need it active,
// or NVLink collectives across the switches do not work. A profile and the PCI bus that
// disagree about the fabric fail, naming both.
func checkFabricManager(sections map[string]bundle.Section, t Target) result.Check {
	id := result.FabricManager
	want, basis, known := t.fabricManagerRequired()
	expected := "active"
	if !want {
		expected = "not required (no NVSwitch fabric)"
	}
	if !known {
		expected = "not judged"
	}
	ev := func() string { return evidence(sections, HostSectionFabricManager, HostSectionPCI) }
	s, ok := sections[HostSectionFabricManager]
	state := unitState(s, ok)

	if t.Profile != nil && t.PCI != nil && t.Expect.FabricManager == nil && t.Profile.NVSwitch != t.PCI.HasNVLinkFabric() {
		return check(id, result.Fail, basis, expected, or(state, "unknown"),
			fmt.Sprintf("the %s says NVSwitch=%v but the PCI bus shows %s: the instance is not what its type says, or the profile is wrong (set expect.fabric_manager to decide)",
				t.profileName(), t.Profile.NVSwitch, fabricSummary(*t.PCI)), ev())
	}
	if !known {
		return check(id, result.Warn, "", expected, or(state, "unknown"),
			"not judged: no setting, no profile and no readable PCI inventory ("+t.PCIProblem+"); set expect.fabric_manager", ev())
	}
	if basis == BasisPCI {
		basis += ": " + fabricSummary(*t.PCI)
	}
	if state == "" {
		_, problem := get(sections, HostSectionFabricManager)
		if problem == "" {
			problem = "systemctl printed no unit state"
		}
		if want {
			return check(id, result.Fail, basis, expected, "unknown", problem, ev())
		}
		return check(id, result.Skip, basis, expected, "unknown", "not required; "+problem, ev())
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

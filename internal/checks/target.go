package checks

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/instancetype"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
)

// Bases of an expectation, in the order they are consulted.
const (
	BasisSetting = "setting"
	// BasisEC2 is EC2's own description of the instance type.
	BasisEC2  = "from " + instancetype.Source
	BasisPCI  = "PCI inventory"
	BasisRule = "rule"
)

// Target is what the host checks compare against: the settings, the instance type's built-in
// profile (when there is one) and the host's own PCI inventory (when it could be read).
type Target struct {
	settings.Checks
	// InstanceType and InstanceTypeSource: the host's own answer ("product_name", "imds"),
	// else the configured type ("configured"), else "".
	InstanceType       string
	InstanceTypeSource string
	// Profile is nil when the instance type has no built-in profile.
	Profile *profile.Profile
	// EC2 is EC2's own description of the instance type (DescribeInstanceTypes), read once
	// per run; nil when it was not read, EC2Problem then says why ("" when nobody asked: the
	// node check, a run without AWS access).
	EC2        *instancetype.Description
	EC2Problem string
	// PCI is nil when the inventory could not be read; PCIProblem then says why.
	PCI        *facts.PCIInventory
	PCIProblem string
	// KernelLogSince, when set, limits the xid check to the kernel log after a mark (a layer's
	// reboot) and names the step in its verdict.
	KernelLogSince *facts.Mark
	// SessionIsLogin says the probe's own session is a fresh login of the image (a first
	// boot): its memlock limit is then a second witness of what a login gets. A bake's SSH
	// session opened before the layers ran, so there it is only evidence.
	SessionIsLogin bool
	// LoginUnjudged, when set, says why no login user's memlock can be judged (the node check
	// runs as root and was given no login user), naming the setting: memlock warns with it.
	LoginUnjudged string
	// Launch is what the host's launch attached, when the run knows it (a verification
	// instance the plugin launched itself); a bake inside a builder does not.
	Launch Launch
}

// Launch is what a launch attached to the instance.
type Launch struct {
	// Known is true when the run launched the instance itself and knows what it attached.
	Known bool
	// EFA is the number of EFA interfaces the launch attached; Setting names the setting
	// that chose it ("efa = \"all\"").
	EFA     int
	Setting string
	// SecurityGroups are the groups of the launch's interfaces: EFA traffic arrives only while
	// they allow all traffic to and from themselves.
	SecurityGroups []string
	// Described says DescribedEFA was read: how many EFA interfaces EC2 describes on the
	// instance once it ran. Fewer than EFA means EC2 did not give what the launch asked for;
	// the judges still demand EFA and name both.
	Described    bool
	DescribedEFA int
	// FleetNode says the instance is a fleet node, launched by its fleet's own launch template
	// (the node check): that template can attach EFA, so an EFA-capable node without EFA is a
	// fault of the fleet (its jobs fall back to sockets), never "not attached by a builder".
	FleetNode bool
}

// Resolve builds the Target of a host from its facts: the instance type (the host's answer,
// else configuredType), its profile, and the PCI inventory.
func Resolve(h facts.Host, s settings.Checks, configuredType string) Target {
	t := Target{Checks: s, InstanceType: h.Instance.Type, InstanceTypeSource: h.Instance.Source}
	if t.InstanceType == "" {
		if c := strings.TrimSpace(configuredType); c != "" {
			t.InstanceType, t.InstanceTypeSource = c, "configured"
		}
	}
	if p, ok := profile.Lookup(t.InstanceType); ok {
		t.Profile = &p
	}
	if h.PCI.OK() {
		inv := h.PCI.Value
		t.PCI = &inv
	} else {
		t.PCIProblem = h.PCI.Problem
	}
	return t
}

// profileName names the profile in messages and bases.
func (t Target) profileName() string {
	if t.Profile == nil {
		return ""
	}
	return "profile " + t.Profile.InstanceType
}

// noProfileNote says why a check fell back to the PCI inventory.
func (t Target) noProfileNote() string {
	typ := t.InstanceType
	if typ == "" {
		typ = "unknown"
	}
	return fmt.Sprintf("instance type %s has no built-in profile", typ)
}

// expectedCount resolves a count setting: the setting (n > 0; -1 = off), else the profile's
// (when it judges one), else the PCI inventory's. ok is false when nothing says; basis names
// where the count came from.
func (t Target) expectedCount(setting int, fromProfile func(profile.Profile) int, fromPCI func(facts.PCIInventory) int) (n int, basis string, ok bool) {
	switch {
	case setting > 0:
		return setting, BasisSetting, true
	case setting < 0:
		return 0, "", false
	}
	if t.Profile != nil {
		if v := fromProfile(*t.Profile); v > 0 {
			return v, t.profileName(), true
		}
	}
	if t.PCI != nil {
		return fromPCI(*t.PCI), BasisPCI, true
	}
	return 0, "", false
}

// expectedGPUs resolves the GPU count: the setting, else EC2's description (DescribeInstanceTypes
// knows every type EC2 sells, its profile or not), else the profile's, else the PCI inventory's.
func (t Target) expectedGPUs() (n int, basis string, ok bool) {
	if t.Expect.GPUCount == 0 && t.EC2 != nil && t.EC2.GPUCount > 0 {
		return t.EC2.GPUCount, BasisEC2, true
	}
	return t.expectedCount(t.Expect.GPUCount, func(p profile.Profile) int { return p.GPUCount }, func(i facts.PCIInventory) int { return len(i.GPUs) })
}

// efaCapable reports whether the instance type can have EFA devices: its profile, or the
// expect block, says so.
func (t Target) efaCapable() bool {
	return t.Profile != nil && t.Profile.MaxEFA > 0 || t.Expect.EFACount > 0
}

// efaUnattached says why an EFA-capable host has no EFA device to judge because its launch
// attached none, or "" when the devices can be judged. EC2 gives an instance EFA devices only
// for the network interfaces launched with them (an EFA cannot be attached to a running
// instance): a builder that launches one plain interface (amazon-ebs) gets none on any type.
func (t Target) efaUnattached() string {
	switch {
	case !t.efaCapable():
		return ""
	case t.Launch.Known && t.Launch.EFA == 0:
		return fmt.Sprintf("the launch attached no EFA interface (%s)", cmp.Or(t.Launch.Setting, `efa = "none"`))
	case !t.Launch.Known && !t.Launch.FleetNode && t.PCI != nil && len(t.PCI.EFA) == 0:
		return "no EFA interface was attached at launch: the PCI bus shows no EFA function (a builder such as amazon-ebs launches one plain network interface and cannot attach one; EC2 attaches EFA only at launch)"
	}
	return ""
}

// efaMissing says why a host whose launch should have given it EFA devices shows none, or ""
// when it has some, or none is expected: a verification whose launch asked for EFA interfaces
// (what EC2 describes may be fewer), or a fleet node of an EFA-capable type, whose launch
// template is the fleet's own and can attach them. expect.efa_count = -1 says a fleet runs
// without EFA.
func (t Target) efaMissing() string {
	if t.PCI == nil || len(t.PCI.EFA) > 0 {
		return ""
	}
	switch {
	case t.Launch.Known && t.Launch.EFA > 0:
		described := ""
		if t.Launch.Described {
			described = fmt.Sprintf(", EC2 describes %d on the instance", t.Launch.DescribedEFA)
		}
		return fmt.Sprintf("the launch asked for %d EFA interfaces (%s)%s and the PCI bus shows no EFA function: EC2 did not attach what the launch asked for, so the EFA devices, their traffic and GPUDirect RDMA cannot be proven; run the verification again (a launch that keeps coming up without EFA points at the account's EFA limits or the type's capacity)",
			t.Launch.EFA, cmp.Or(t.Launch.Setting, "efa"), described)
	case t.Launch.FleetNode && t.efaCapable() && t.Expect.EFACount >= 0:
		return fleetWithoutEFA
	}
	return ""
}

// fleetWithoutEFA is why an EFA-capable fleet node without an EFA device fails, and how a
// fleet that runs without EFA says so.
const fleetWithoutEFA = "the PCI bus shows no EFA function: this fleet node's launch attached no EFA interface; EC2 attaches EFA only at launch, for the network interfaces the launch template declares with InterfaceType efa (or efa-only), and without them multi-node jobs fall back to sockets; add the EFA network interfaces to the fleet's launch template (one per network card, as the EC2 User Guide's layout for the type says), or, for a fleet that runs without EFA, set expect.efa_count = -1 in the bake or skip_checks = [\"efa-devices\"] (node_check.skip_checks), and nccl.transport = \"any\" where the node runs the NCCL test"

// efaProvenElsewhere is where the EFA devices, their traffic and GPUDirect RDMA are proven
// when this host's launch attached none.
const efaProvenElsewhere = "they are proven by the dlami post-processor's verification, whose launch attaches every EFA interface of the type (efa = \"all\")"

// efaOnHost is how many EFA devices the host has by its profile, else its PCI bus; 0 when
// neither says it has any.
func (t Target) efaOnHost() int {
	if t.Profile != nil && t.Profile.EFACount > 0 {
		return t.Profile.EFACount
	}
	if t.PCI != nil {
		return len(t.PCI.EFA)
	}
	return 0
}

// fabricManagerRequired resolves whether Fabric Manager must be active: the setting, else the
// profile, else whether the PCI bus shows an NVSwitch fabric.
func (t Target) fabricManagerRequired() (want bool, basis string, ok bool) {
	switch {
	case t.Expect.FabricManager != nil:
		return *t.Expect.FabricManager, BasisSetting, true
	case t.Profile != nil:
		return t.Profile.NVSwitch, t.profileName(), true
	case t.PCI != nil:
		return t.PCI.HasNVLinkFabric(), BasisPCI, true
	}
	return false, "", false
}

// fabricSummary describes what the PCI bus shows of an NVSwitch fabric.
func fabricSummary(inv facts.PCIInventory) string {
	switch {
	case len(inv.NVSwitches) > 0:
		return fmt.Sprintf("%d NVSwitch functions (10de, class 0680)", len(inv.NVSwitches))
	case len(inv.GPUs) > 1 && len(inv.NVLinkManagementBridge) > 1:
		return fmt.Sprintf("%d ConnectX-7 NVLink management bridges (15b3, class 0207)", len(inv.NVLinkManagementBridge))
	}
	return "no NVSwitch fabric"
}

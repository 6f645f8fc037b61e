package checks

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/ibport"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func init() {
	register(Entry{
		ID: result.EFADriver, Phase: PhaseHost, Family: "efa", Order: 260, Judge: judgeEFADriver,
		Doc:   "the EFA kernel module is present for the running kernel, at the expected version; the GPUDirect RDMA peer-memory module (`efa_nv_peermem`) is built for it when the EFA installer lists `efa-nv-peermem`, whether or not the launch attached a device",
		Reads: "`modinfo -F version efa`, `modinfo -F version efa_nv_peermem`",
	})
	register(Entry{
		ID: result.EFAInstaller, Phase: PhaseHost, Family: "efa", Order: 270, Judge: judgeEFAInstaller,
		Doc:   "EFA installer, libfabric and aws-ofi-nccl versions match",
		Reads: "`/opt/amazon/efa_installed_packages`, `fi_info --version`",
	})
	register(Entry{
		ID: result.EFADevices, Phase: PhaseHost, Family: "efa", Order: 280, Judge: judgeEFADevices,
		Doc:   "EFA PCI functions = `rdmap*` devices = distinct `fi_info` EFA domains = the expected EFA count, and every EFA device's port is up (`ports/1/state` `4: ACTIVE`, `phys_state` `5: LinkUp`; a port `DOWN`, `INIT` or still `Polling` fails, naming the device); ConnectX-7 entries (`ibp*`, link DOWN) ignored, RDM/DGRAM duplicates counted once. On an EFA-capable type whose launch attached no EFA interface (a builder such as amazon-ebs cannot attach one; the PCI bus shows none) it warns, naming the post-processor's verification where the devices are proven, and never passes; some devices but fewer than expected fails. A host that should have EFA and shows none fails, naming why: a single-node verification whose launch asked for EFA interfaces (judged against the request, naming what EC2 describes and what the host shows), or a fleet node of an EFA-capable type (the node check: its launch template must declare the EFA network interfaces; a fleet without EFA sets `expect.efa_count = -1` or skips `efa-devices`)",
		Reads: "`/sys/bus/pci/devices`, `ls -1 /sys/class/infiniband/`, `/sys/class/infiniband/<dev>/ports/1/state` and `phys_state`, `/opt/amazon/efa/bin/fi_info -p efa -t FI_EP_RDM`",
	})
}

// judgeEFADriver judges the EFA kernel module: present for the running kernel (the DLAMI
// ships it whatever the instance type), at the pinned version if any.
func judgeEFADriver(f facts.Run, t Target) result.Check {
	h := f.Host
	id := result.EFADriver
	pin := t.Expect.EFADriver
	expected, basis := "efa module present for the running kernel", BasisRule
	if pin != "" {
		expected, basis = pin, BasisSetting
	}
	m := h.EFAModule
	if !m.OK() || m.Value == "" {
		return check(id, result.Fail, basis, expected, "efa kernel module not found", cmp.Or(m.Problem, "modinfo reported no version of the efa module"), m.Evidence)
	}
	if ok, msg := pinned(pin, m.Value); !ok {
		return check(id, result.Fail, basis, expected, m.Value, msg, m.Evidence)
	}
	// The peer-memory module is EFA software too: built for the running kernel whether or not
	// the launch attached a device, or GPUDirect RDMA over EFA cannot work on any node.
	if in := h.EFAInstaller; in.OK() && slices.Contains(in.Value.Names, "efa-nv-peermem") && (!h.PeerMemModule.OK() || h.PeerMemModule.Value == "") {
		return check(id, result.Fail, basis, expected, m.Value+"; efa_nv_peermem not built",
			"the EFA installer lists efa-nv-peermem but its module efa_nv_peermem is not built for the running kernel: GPUDirect RDMA over EFA cannot work (dkms status efa-nv-peermem): "+cmp.Or(h.PeerMemModule.Problem, "modinfo reported no version"),
			evidence(m.Evidence, h.PeerMemModule.Evidence))
	}
	msg := ""
	if pin == "" {
		msg = "the version is not pinned (set expect.efa_driver to judge it)"
	}
	return check(id, result.Pass, basis, expected, m.Value, msg, "")
}

// judgeEFAInstaller judges the EFA installer record: readable, and at the pinned installer,
// libfabric and aws-ofi-nccl versions if any.
func judgeEFAInstaller(f facts.Run, t Target) result.Check {
	h := f.Host
	id := result.EFAInstaller
	e := t.Expect
	expected := fmt.Sprintf("installer %s, libfabric %s, aws-ofi-nccl %s", cmp.Or(e.EFAInstaller, "any"), cmp.Or(e.Libfabric, "any"), cmp.Or(e.AWSOFINCCL, "any"))
	basis := BasisRule
	if e.EFAInstaller != "" || e.Libfabric != "" || e.AWSOFINCCL != "" {
		basis = BasisSetting
	}
	ev := func() string { return evidence(h.EFAInstaller.Evidence, h.LibfabricRuntime.Evidence) }
	if !h.EFAInstaller.OK() {
		return check(id, result.Fail, basis, expected, "no readable EFA installer record", h.EFAInstaller.Problem, ev())
	}
	in := h.EFAInstaller.Value
	if in.InstallerVersion == "" {
		return check(id, result.Fail, basis, expected, "no installer version", "the EFA installer record names no installer version: the EFA software cannot be judged", ev())
	}
	lf, lfOK := h.Libfabric()
	ofi, ofiOK := in.AWSOFINCCL()
	show := func(v string, ok bool) string {
		if !ok {
			return "not listed"
		}
		return v
	}
	actual := fmt.Sprintf("installer %s, libfabric %s, aws-ofi-nccl %s", in.InstallerVersion, show(lf, lfOK), show(ofi, ofiOK))
	var fails []string
	if ok, msg := pinned(e.EFAInstaller, in.InstallerVersion); !ok {
		fails = append(fails, "EFA installer: "+msg)
	}
	for _, c := range []struct {
		name, pin, v string
		found        bool
	}{
		{"libfabric", e.Libfabric, lf, lfOK},
		{"aws-ofi-nccl", e.AWSOFINCCL, ofi, ofiOK},
	} {
		if c.pin == "" {
			continue
		}
		if !c.found {
			fails = append(fails, fmt.Sprintf("%s is pinned to %q but its version is not recorded", c.name, c.pin))
			continue
		}
		if ok, msg := pinned(c.pin, c.v); !ok {
			fails = append(fails, c.name+": "+msg)
		}
	}
	if len(fails) > 0 {
		return check(id, result.Fail, basis, expected, actual, strings.Join(fails, "; "), ev())
	}
	msg := ""
	if basis == BasisRule {
		msg = "versions not pinned (set expect.efa_installer, expect.libfabric, expect.aws_ofi_nccl to judge them)"
	}
	return check(id, result.Pass, basis, expected, actual, msg, "")
}

// judgeEFADevices judges that the EFA PCI functions, the rdmap* devices and the fi_info domains
// agree, and that their count is the expected one (setting, else profile, else the PCI bus).
func judgeEFADevices(f facts.Run, t Target) result.Check {
	h := f.Host
	id := result.EFADevices
	want, basis, counted := t.expectedEFA()
	expected := "PCI EFA functions = rdmap* devices = fi_info domains"
	if counted {
		expected = fmt.Sprintf("%d EFA devices (PCI = /sys/class/infiniband rdmap* = fi_info domains)", want)
	}
	ev := func() string {
		return evidence(h.PCI.Evidence, h.RDMA.Evidence, h.RDMAPorts.Evidence, h.Domains.Evidence)
	}
	if !h.RDMA.OK() {
		return check(id, result.Fail, basis, expected, "unknown", h.RDMA.Problem, ev())
	}
	devs, other := h.RDMA.Value.EFA, h.RDMA.Value.Other
	pciEFA := -1
	if t.PCI != nil {
		pciEFA = len(t.PCI.EFA)
	}
	if why := t.efaUnattached(); why != "" && len(devs) == 0 && pciEFA <= 0 && (!h.Domains.OK() || len(h.Domains.Value) == 0) {
		// Nothing to count, and nothing that could have been counted: a warning that says
		// where the devices are proven, never a pass.
		return check(id, result.Warn, "", expected, "0 EFA devices (none attached at launch)", "not judged here: "+why+"; "+efaProvenElsewhere, ev())
	}
	noEFA := len(devs) == 0 && pciEFA == 0 && (!h.Domains.OK() || len(h.Domains.Value) == 0)
	if why := t.efaMissing(); why != "" && noEFA {
		// A launch that should have given EFA devices (the verification's request, the fleet's
		// own launch template) gave none: never a warning that points elsewhere.
		if !h.Domains.OK() {
			why += "; fi_info: " + efaDomainsProblem(h)
		}
		return check(id, result.Fail, cmp.Or(basis, t.launchBasis()), expected, "0 EFA devices (the PCI bus shows no EFA function)", why, ev())
	}
	if noEFA && !counted {
		return check(id, result.Warn, "", expected, "0 EFA devices (the PCI bus shows no EFA function)", "count not judged: expect.efa_count = -1, and this host has no EFA device", ev())
	}
	var notes []string
	if len(other) > 0 {
		notes = append(notes, "ignored non-EFA RDMA devices: "+strings.Join(other, ", "))
	}
	if d := t.describedShort(); d != "" {
		notes = append(notes, d)
	}
	if !h.Domains.OK() {
		if len(devs) == 0 && pciEFA == 0 && counted && want == 0 {
			return check(id, result.Skip, basis, expected, "0 EFA devices",
				"no EFA on this host and none expected; fi_info: "+h.Domains.Problem, ev())
		}
		actual := fmt.Sprintf("%d rdmap devices, fi_info failed", len(devs))
		if h.EFAProviderMissing != "" {
			actual = fmt.Sprintf("%d rdmap devices, no EFA provider in libfabric", len(devs))
		}
		return check(id, result.Fail, basis, expected, actual, efaDomainsProblem(h), ev())
	}
	domains := h.Domains.Value

	actual := fmt.Sprintf("%d rdmap devices, %d fi_info domains", len(devs), len(domains))
	if pciEFA >= 0 {
		actual = fmt.Sprintf("%d PCI EFA functions, %s", pciEFA, actual)
	}
	var fails []string
	switch {
	case t.PCI == nil:
		fails = append(fails, "the PCI inventory could not be read, so the EFA devices cannot be compared with the bus: "+t.PCIProblem)
	case pciEFA != len(devs):
		fails = append(fails, fmt.Sprintf("the PCI bus has %d EFA functions but /sys/class/infiniband has %d EFA devices: the efa driver did not bind every function (dmesg | grep efa)", pciEFA, len(devs)))
	}
	if len(devs) != len(domains) {
		fails = append(fails, fmt.Sprintf("/sys/class/infiniband has %d EFA devices but fi_info lists %d domains", len(devs), len(domains)))
	} else if missing := notIn(domains, devs); len(missing) > 0 && len(domains) > 0 && strings.HasPrefix(domains[0], "rdmap") {
		fails = append(fails, "fi_info domains not under /sys/class/infiniband: "+strings.Join(missing, ", "))
	}
	if basis == t.profileName() && t.PCI != nil && pciEFA != t.Profile.EFACount {
		fails = append(fails, fmt.Sprintf("the %s says %d EFA devices but the PCI bus has %d EFA functions (check the launch's EFA network interfaces)", t.profileName(), t.Profile.EFACount, pciEFA))
	} else if counted && basis != BasisPCI && len(devs) != want {
		fails = append(fails, fmt.Sprintf("%d EFA devices, %s says %d (check the launch's EFA network interfaces; p5en devices can come up late)", len(devs), basis, want))
	}
	fails = append(fails, efaPortsNotUp(h, devs)...)
	if len(fails) > 0 {
		return check(id, result.Fail, basis, expected, actual, strings.Join(append(fails, notes...), "; "), ev())
	}
	if !counted {
		return check(id, result.Warn, "", expected, actual, strings.Join(append([]string{"count not judged: expect.efa_count = -1"}, notes...), "; "), "")
	}
	if len(devs) == 0 {
		return check(id, result.Skip, basis, expected, actual, "no EFA on this host and none expected", "")
	}
	return check(id, result.Pass, basis, expected, actual, strings.Join(notes, "; "), "")
}

// efaPortsNotUp names the EFA devices whose port 1 is not ACTIVE with its link up (sysfs
// ports/1/state and phys_state), grouped by what they read, and those whose state could not be
// read (fail closed): a device that is listed but whose port is down cannot carry traffic.
func efaPortsNotUp(h facts.Host, devs []string) []string {
	if len(devs) == 0 {
		return nil
	}
	if !h.RDMAPorts.OK() {
		return []string{"the EFA devices' port state (/sys/class/infiniband/<dev>/ports/1/state, phys_state) could not be read, so their links cannot be judged: " + h.RDMAPorts.Problem}
	}
	byDevice := map[string]ibport.Port{}
	for _, p := range h.RDMAPorts.Value {
		byDevice[p.Device] = p
	}
	var order []string
	groups := map[string][]string{}
	add := func(why, dev string) {
		if _, ok := groups[why]; !ok {
			order = append(order, why)
		}
		groups[why] = append(groups[why], dev)
	}
	for _, d := range devs {
		p, ok := byDevice[d]
		switch {
		case !ok:
			add("port state not read (no ports/1/state for it)", d)
		case p.Problem != "":
			add("port state unreadable: "+p.Problem, d)
		case !p.Up():
			add(fmt.Sprintf("port 1 is %q, physical state %q (a working EFA port reads \"%d: ACTIVE\", \"%d: LinkUp\"): the device is present but its link is not up, so it cannot carry traffic (dmesg | grep efa; a port that stays down needs the instance replaced)",
				p.State.String(), p.PhysState.String(), ibport.StateActive, ibport.PhysLinkUp), d)
		}
	}
	out := make([]string, 0, len(order))
	for _, why := range order {
		out = append(out, strings.Join(groups[why], ", ")+": "+why)
	}
	return out
}

// efaDomainsProblem says why fi_info's EFA domains are unknown. libfabric's own answer that
// the EFA provider has nothing here (fi_getinfo -61) is named as such, with its likely
// causes, each with what this host shows of it; any other failure is the fact's problem.
func efaDomainsProblem(h facts.Host) string {
	if h.EFAProviderMissing == "" {
		return h.Domains.Problem
	}
	var causes, ruledOut []string
	installer := "the EFA installer was not run for the running kernel (it builds the efa module and installs libfabric's EFA provider; re-run it after a kernel change)"
	if m := h.EFAModule; !m.OK() || m.Value == "" {
		installer += ": this host has no efa module for its kernel (modinfo efa failed)"
	}
	causes = append(causes, installer)
	switch module := "the efa kernel module is not loaded (modprobe efa; dmesg | grep efa)"; {
	case !h.Loaded.OK():
		causes = append(causes, module)
	case h.Loaded.Value.Has("efa"):
		ruledOut = append(ruledOut, "the efa module is loaded")
	default:
		causes = append(causes, module+": lsmod does not list efa here")
	}
	device := "no EFA device is attached to the instance (its launch needs network interfaces with InterfaceType efa)"
	if h.RDMA.OK() && len(h.RDMA.Value.EFA) == 0 {
		device += ": /sys/class/infiniband has no EFA device here"
	}
	causes = append(causes, device)
	msg := fmt.Sprintf("libfabric's EFA provider is missing: `fi_info -p efa` answered %q and listed no \"provider: efa\". Likely causes: %s",
		h.EFAProviderMissing, strings.Join(causes, "; "))
	if len(ruledOut) > 0 {
		msg += " (" + strings.Join(ruledOut, ", ") + ")"
	}
	return msg
}

// expectedEFA resolves the EFA device count: the count the run's own launch attached, else the
// setting, the profile or the PCI bus (expectedCount).
func (t Target) expectedEFA() (n int, basis string, ok bool) {
	if t.Launch.Known && t.Launch.EFA > 0 && t.Expect.EFACount >= 0 {
		return t.Launch.EFA, t.launchBasis(), true
	}
	return t.expectedCount(t.Expect.EFACount, func(p profile.Profile) int { return p.EFACount }, func(i facts.PCIInventory) int { return len(i.EFA) })
}

// launchBasis names the launch's EFA request as a check's basis.
func (t Target) launchBasis() string { return "launch (" + t.Launch.Setting + ")" }

// describedShort says that EC2 describes fewer EFA interfaces than the launch asked for, or "".
func (t Target) describedShort() string {
	l := t.Launch
	if !l.Known || !l.Described || l.DescribedEFA >= l.EFA {
		return ""
	}
	return fmt.Sprintf("the launch asked for %d EFA interfaces (%s) but EC2 describes %d on the instance", l.EFA, l.Setting, l.DescribedEFA)
}

// notIn returns the names in a that are not in b.
func notIn(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}

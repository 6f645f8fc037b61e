package checks

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dpkg"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/imexctl"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func init() {
	register(Entry{
		ID: result.IMEX, Phase: PhaseHost, Family: "gpu", Order: 256, Judge: judgeIMEX, Refined: []Phase{PhaseFunction},
		Doc: "NVIDIA IMEX as its owner (setting `imex`; default `host` on multi-node NVLink types such as p6e-gb200, else not judged) wants it: " +
			"with `host` the nvidia-imex package matches the loaded driver, the unit is enabled, IMEX channel 0 is created at boot " +
			"(`options nvidia NVreg_CreateImexChannel0=1`) or exists, and a running service reports a healthy domain (UP, every node READY, every pair CONNECTED); " +
			"a bake on a multi-node NVLink host brings up a one-node domain (nodes_config.cfg holding only the tray's own private address, the service restarted) that must come UP with the node READY, " +
			"then puts the file and the service back as they were, and fails when it cannot (the image must not keep the temporary file); a verification and the node check only read; " +
			"with `dra` (the EKS DRA driver runs its own IMEX) the host unit is neither enabled nor running, and masked",
		Reads: "`dpkg-query -W 'nvidia-imex*'`, `systemctl is-enabled nvidia-imex`, `systemctl is-active nvidia-imex`, " +
			"`/etc/modprobe.d/*.conf`, `/dev/nvidia-caps-imex-channels/channel0`, `nvidia-imex-ctl -N -j`, `nvidia-smi` (loaded driver); " +
			"in a bake: `ip -4 route get 1.1.1.1`, `/etc/nvidia-imex/nodes_config.cfg`, `systemctl restart nvidia-imex`",
	})
}

// IMEXMode resolves the imex setting for the host: the setting, else settings.IMEX.Resolved
// (its one owner) over multiNodeNVLink's answer (expect.multi_node_nvlink, the profile, the
// GB200s on the PCI bus), the same answer nvlink-fabric judges by. basis names where the
// owner came from.
func (t Target) IMEXMode() (settings.IMEX, string) {
	if t.IMEX != settings.IMEXUnset {
		return t.IMEX, BasisSetting
	}
	mnnvl, basis, known := t.MultiNodeNVLink()
	if !known {
		basis = BasisRule
	}
	return t.IMEX.Resolved(mnnvl), basis
}

// ExpectsIMEXChannel reports whether the host's containers must see IMEX channel 0: imex
// resolves to "host" (by default on multi-node NVLink hosts; set on any other), the
// container-gpu check's IMEX rule. With "dra" the DRA driver gives pods their channels.
func (t Target) ExpectsIMEXChannel() bool {
	mode, _ := t.IMEXMode()
	return mode == settings.IMEXHost
}

// HostIMEXDomain reports whether the host's nvidia-imex forms this host's IMEX domain: the
// resolved imex is "host" and the host's NVLink domain spans trays (a GB200 tray). A bake then
// brings up a one-node domain of the tray's own address, and a verification of 2 or more nodes
// one across its trays (imex-domain). why says why not.
func (t Target) HostIMEXDomain() (ok bool, why string) {
	if mode, _ := t.IMEXMode(); mode != settings.IMEXHost {
		return false, "imex is not \"host\""
	}
	if mnnvl, _, _ := t.MultiNodeNVLink(); !mnnvl {
		return false, "the host has no multi-node NVLink"
	}
	return true, ""
}

// verdict collects the failures and warnings of a check made of several rules.
type verdict struct{ fails, warns []string }

func (v *verdict) fail(format string, a ...any) { v.fails = append(v.fails, fmt.Sprintf(format, a...)) }
func (v *verdict) warn(format string, a ...any) { v.warns = append(v.warns, fmt.Sprintf(format, a...)) }

// judgeIMEX judges NVIDIA IMEX, the service multi-node NVLink depends on (grace-blackwell.md
// section 1.5), as its owner wants it.
func judgeIMEX(f facts.Run, t Target) result.Check {
	id := result.IMEX
	x := f.Host.IMEX
	mode, basis := t.IMEXMode()
	ev := evidence(x.Packages.Evidence, x.Enabled.Evidence, x.Active.Evidence, x.Channel.Evidence, x.Domain.Evidence)
	if x.OneNode != nil && x.OneNode.Ran {
		ev = evidence(ev, x.OneNode.Domain.Evidence)
	}
	switch mode {
	case settings.IMEXHost:
		return judgeIMEXHost(f, basis, ev)
	case settings.IMEXDRA:
		return judgeIMEXDRA(x, basis, ev)
	}
	if basis == BasisSetting {
		return check(id, result.Skip, basis, "not judged", "imex = \"off\"", "skipped: imex = \"off\"", "")
	}
	typ := cmp.Or(t.InstanceType, "unknown")
	return check(id, result.Skip, basis, "not applicable", "no multi-node NVLink",
		fmt.Sprintf("not applicable: instance type %s has no multi-node NVLink domain (set imex = \"host\" or \"dra\" to judge IMEX anyway)", typ), "")
}

// judgeIMEXHost: the host's nvidia-imex service owns IMEX (Slurm, ParallelCluster, PCS).
func judgeIMEXHost(f facts.Run, basis, ev string) result.Check {
	x := f.Host.IMEX
	const expected = "imex = \"host\": nvidia-imex matching the loaded driver, enabled, channel 0 at boot, a running domain healthy"
	var v verdict
	var actual []string

	// The package matches the loaded driver: IMEX's NvGpu library must match the GPU driver
	// (healthy start log: "NvGpu Library version matched with GPU Driver version").
	driver, driverProblem := loadedDriver(f.Host)
	switch {
	case !x.Packages.OK():
		v.fail("the IMEX packages could not be read: %s", x.Packages.Problem)
	case len(x.Packages.Value) == 0:
		actual = append(actual, "no nvidia-imex package")
		v.fail("no nvidia-imex package is installed: install the IMEX package of the loaded driver (%s) from NVIDIA's repository, or set imex = \"dra\" (EKS) or \"off\"", cmp.Or(driver, "unknown"))
	default:
		for _, p := range x.Packages.Value {
			actual = append(actual, p.Name+" "+p.Version)
			up := dpkg.Upstream(p.Version)
			switch {
			case driverProblem != "":
				v.fail("%s %s cannot be compared with the loaded driver: %s", p.Name, p.Version, driverProblem)
			case up != driver:
				v.fail("%s %s does not match the loaded driver %s: IMEX starts only when its NvGpu library matches the GPU driver; install %s at version %s (or the driver the package was built for) and keep both on hold",
					p.Name, p.Version, driver, p.Name, driver)
			}
		}
	}

	// The unit is enabled: IMEX must run before CUDA applications start.
	switch st := x.Enabled.Value; {
	case !x.Enabled.OK():
		v.fail("whether nvidia-imex is enabled could not be read: %s", x.Enabled.Problem)
	case st == "enabled":
		actual = append(actual, "enabled")
	case st == "not-found":
		actual = append(actual, "no nvidia-imex unit")
		v.fail("the nvidia-imex unit does not exist: install the IMEX package and `systemctl enable nvidia-imex`")
	case strings.HasPrefix(st, "masked"):
		actual = append(actual, st)
		v.fail("nvidia-imex is %s: it cannot start, so no IMEX domain forms and multi-node NVLink jobs fail; `systemctl unmask nvidia-imex && systemctl enable nvidia-imex`, or set imex = \"dra\" where the EKS DRA driver owns IMEX", st)
	default:
		actual = append(actual, st)
		v.fail("nvidia-imex is %s, not enabled: it must run before CUDA applications start; `systemctl enable nvidia-imex`", st)
	}

	// Channel 0 exists at every boot: without it fabric-handle cuMemCreate fails with
	// CUDA_ERROR_NOT_PERMITTED.
	switch c := x.Channel.Value; {
	case !x.Channel.OK():
		v.fail("how IMEX channel 0 is created could not be read: %s", x.Channel.Problem)
	case c.AtBoot():
		actual = append(actual, "channel 0 at boot")
	case c.Device:
		actual = append(actual, "channel 0 present")
	default:
		actual = append(actual, "no channel 0")
		v.fail("IMEX channel 0 is not created: no /etc/modprobe.d/*.conf sets `options nvidia NVreg_CreateImexChannel0=1` and /dev/nvidia-caps-imex-channels/channel0 does not exist, so fabric-handle cuMemCreate fails with CUDA_ERROR_NOT_PERMITTED; add the option (then update-initramfs -u), or create the channel at every boot")
	}

	// The bake's one-node domain comes up; otherwise a running service reports a healthy domain.
	if o := x.OneNode; o != nil && o.Ran {
		judgeIMEXOneNode(*o, &v, &actual)
	} else {
		judgeIMEXDomain(x, &v, &actual)
	}

	actualText := strings.Join(actual, ", ")
	switch {
	case len(v.fails) > 0:
		return check(result.IMEX, result.Fail, basis, expected, actualText, strings.Join(append(v.fails, v.warns...), "; "), ev)
	case len(v.warns) > 0:
		return check(result.IMEX, result.Warn, basis, expected, actualText, strings.Join(v.warns, "; "), ev)
	}
	return check(result.IMEX, result.Pass, basis, expected, actualText, "", "")
}

// bakedIMEXList is what is wrong with an IMEX node list of count real addresses (the first
// few in addrs) kept in an image: imex (in the bake) and image-hygiene say it alike.
func bakedIMEXList(path string, count int, addrs []string) string {
	return fmt.Sprintf("%s holds %d real address(es) (%s): IMEX requires every node's list to match and blocks communication with nodes a list does not name, so a list baked into the image breaks every domain but the build's; ship it absent or with the placeholder 0.0.0.0 and let the job's prolog (or the verification) write the nodes' addresses",
		path, count, strings.Join(addrs, " "))
}

// judgeIMEXOneNode judges the bake's one-node domain: UP with its one node READY (and
// connected to itself) at the tray's own address, and nodes_config.cfg and the service put back.
func judgeIMEXOneNode(o facts.IMEXOneNode, v *verdict, actual *[]string) {
	if o.BakedCount > 0 {
		*actual = append(*actual, "nodes_config.cfg of real addresses")
		v.fail("the image's %s", bakedIMEXList("/etc/nvidia-imex/nodes_config.cfg", o.BakedCount, o.BakedAddresses))
	}
	if o.RestoreProblem != "" {
		*actual = append(*actual, "nodes_config.cfg or nvidia-imex not restored")
		v.fail("the one-node IMEX domain's temporary /etc/nvidia-imex/nodes_config.cfg and the service's state were not put back (%s): the image must not keep a list of addresses, since every node's list must match and a baked one blocks the nodes it does not name", o.RestoreProblem)
	}
	// why the service did not come up, when it said so.
	var causes []string
	if o.RestartExit != 0 {
		causes = append(causes, fmt.Sprintf("`systemctl restart nvidia-imex` exited %d", o.RestartExit))
	}
	if o.ActiveAfter == "failed" {
		causes = append(causes, "nvidia-imex failed: see `journalctl -u nvidia-imex` and /var/log/nvidia-imex.log (a package that does not match the driver is the usual cause)")
	} else if o.ActiveAfter != "" && o.ActiveAfter != "active" {
		causes = append(causes, "nvidia-imex is "+o.ActiveAfter)
	}
	cause := ""
	if len(causes) > 0 {
		cause = " (" + strings.Join(causes, "; ") + ")"
	}
	addr := cmp.Or(o.Address, "the tray's address")
	switch {
	case o.Problem != "":
		*actual = append(*actual, "one-node domain not brought up")
		v.fail("the one-node IMEX domain could not be brought up: %s", o.Problem)
		return
	case !o.Domain.OK() && len(causes) > 0:
		*actual = append(*actual, "one-node domain never up")
		v.fail("the one-node IMEX domain of %s never came up: %s; %s", addr, strings.Join(causes, "; "), o.Domain.Problem)
		return
	case !o.Domain.OK():
		*actual = append(*actual, "one-node domain unknown")
		v.fail("the one-node IMEX domain of %s did not answer: %s", addr, o.Domain.Problem)
		return
	}
	d := o.Domain.Value
	*actual = append(*actual, "one-node domain "+d.Status)
	p := d.Problems()
	for _, n := range d.Nodes {
		if n.Host != o.Address {
			p = append(p, fmt.Sprintf("node #%d is %s, not the tray's own address %s", n.Index, n.Host, o.Address))
		}
		for _, c := range n.Connections {
			switch c.Status {
			case imexctl.ConnVersionMismat:
				p = append(p, "version mismatch (!V!): the IMEX versions of the nodes differ, so they do not communicate")
			case imexctl.ConnNodeMapMismat:
				p = append(p, "node map mismatch (!M!): the nodes' nodes_config.cfg lists differ")
			}
		}
	}
	if len(d.Nodes) > 1 {
		p = append(p, fmt.Sprintf("the domain lists %d nodes, not the tray alone", len(d.Nodes)))
	}
	if len(p) > 0 {
		v.fail("the one-node IMEX domain of %s did not come up within the bake's wait: %s%s", addr, strings.Join(p, "; "), cause)
	}
}

// judgeIMEXDomain judges the domain a running service reports, by ParallelCluster's rule.
func judgeIMEXDomain(x facts.IMEX, v *verdict, actual *[]string) {
	state := x.Active.Value
	switch {
	case !x.Active.OK():
		v.fail("whether nvidia-imex runs could not be read: %s", x.Active.Problem)
		return
	case state == "failed":
		*actual = append(*actual, "service failed")
		v.fail("nvidia-imex failed: see `journalctl -u nvidia-imex` and /var/log/nvidia-imex.log (a package that does not match the driver, or a nodes_config.cfg that differs between nodes, are the usual causes)")
		return
	case state != "active":
		*actual = append(*actual, "service "+state)
		v.warn("the IMEX domain is not judged: nvidia-imex is %s (the domain forms when nodes_config.cfg holds the nodes' addresses and the service starts; a verification with nodes = 2 or more forms one across its trays and judges it as imex-domain)", state)
		return
	}
	if !x.Domain.OK() {
		*actual = append(*actual, "domain unknown")
		v.fail("nvidia-imex runs but its domain could not be read: %s", x.Domain.Problem)
		return
	}
	d := x.Domain.Value
	*actual = append(*actual, "domain "+d.Status)
	if d.Unconfigured() {
		v.warn("the IMEX domain is not judged: nvidia-imex runs with only the placeholder address 0.0.0.0 in nodes_config.cfg (domain %s), as images ship it until a job writes its nodes' addresses; a verification with nodes = 2 or more forms one across its trays and judges it as imex-domain", d.Status)
		return
	}
	if p := d.Problems(); len(p) > 0 {
		v.fail("the IMEX domain is not healthy: %s", strings.Join(p, "; "))
	}
}

// judgeIMEXDRA: the EKS DRA driver's ComputeDomain runs IMEX; the host's service must be
// disabled and masked, else the driver's daemon fails with `Failed to allocate Imex session
// … NV_ERR_IN_USE` and never gets Ready (kubernetes-sigs/dra-driver-nvidia-gpu#524).
func judgeIMEXDRA(x facts.IMEX, basis, ev string) result.Check {
	id := result.IMEX
	const expected = "imex = \"dra\": the host's nvidia-imex neither enabled nor running, and masked"
	const fix = "`systemctl disable --now nvidia-imex && systemctl mask nvidia-imex` in a layer (or set imex = \"host\" where the host owns IMEX)"
	if !x.Enabled.OK() {
		return check(id, result.Fail, basis, expected, "unknown", "whether nvidia-imex is enabled could not be read: "+x.Enabled.Problem, ev)
	}
	if !x.Active.OK() {
		return check(id, result.Fail, basis, expected, "unknown", "whether nvidia-imex runs could not be read: "+x.Active.Problem, ev)
	}
	en, act := x.Enabled.Value, x.Active.Value
	actual := en + ", " + act
	var v verdict
	if act == "active" || act == "activating" || act == "reloading" {
		v.fail("the host's nvidia-imex is %s", act)
	}
	switch en {
	case "masked", "not-found":
	case "disabled":
		v.warn("the host's nvidia-imex is disabled but not masked: a package upgrade or another unit can still start it")
	case "masked-runtime":
		v.warn("the host's nvidia-imex is masked only until the next boot (masked-runtime)")
	default:
		v.fail("the host's nvidia-imex is %s: it starts at boot", en)
	}
	switch {
	case len(v.fails) > 0:
		return check(id, result.Fail, basis, expected, actual,
			strings.Join(v.fails, "; ")+": the EKS DRA driver's IMEX daemons then fail with `Failed to allocate Imex session … NV_ERR_IN_USE` and never get Ready; "+fix, ev)
	case len(v.warns) > 0:
		return check(id, result.Warn, basis, expected, actual, strings.Join(v.warns, "; ")+"; "+fix, ev)
	}
	msg := "the host's nvidia-imex is masked: the DRA driver's IMEX daemons own the channel"
	if en == "not-found" {
		msg = "no host nvidia-imex unit: the DRA driver's IMEX daemons own the channel"
	}
	return check(id, result.Pass, basis, expected, actual, msg, "")
}

// loadedDriver is the driver the running kernel loaded, as nvidia-smi reports it for every
// GPU; problem says why it is not known.
func loadedDriver(h facts.Host) (version, problem string) {
	switch {
	case !h.GPUs.OK():
		return "", "the loaded driver version is unknown: " + h.GPUs.Problem
	case len(h.GPUs.Value) == 0:
		return "", "the loaded driver version is unknown: nvidia-smi lists no GPU"
	}
	return h.GPUs.Value[0].DriverVersion, ""
}

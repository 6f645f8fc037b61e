package checks

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/constraint"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/efapkgs"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/fiinfo"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/lsmod"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/modinfo"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/xid"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// DefaultNVMePath is where the DLAMI mounts the local NVMe instance store.
const DefaultNVMePath = "/opt/dlami/nvme"

// Section names of the host commands. They are a stable interface: reports, tests and the
// simulated host key on them.
const (
	HostSectionProductName   = "host.product_name"
	HostSectionIMDS          = "host.imds_instance_type"
	HostSectionNvidiaSMI     = "host.nvidia_smi"
	HostSectionFabricManager = "host.fabricmanager"
	HostSectionModinfoEFA    = "host.modinfo_efa_version"
	HostSectionModinfoNvidia = "host.modinfo_nvidia_version"
	HostSectionNvidiaLicense = "host.modinfo_nvidia_license"
	HostSectionModinfoGDRDrv = "host.modinfo_gdrdrv_version"
	HostSectionModinfoLustre = "host.modinfo_lustre_version"
	HostSectionEFAPackages   = "host.efa_installed_packages"
	HostSectionInfiniband    = "host.infiniband"
	HostSectionFiInfo        = "host.fi_info"
	HostSectionFiInfoVersion = "host.fi_info_version"
	HostSectionLsmod         = "host.lsmod"
	HostSectionGDRDevice     = "host.gdrdrv_dev"
	HostSectionMemlock       = "host.memlock"
	HostSectionNVMe          = "host.nvme_mount"
	HostSectionLfs           = "host.lfs_version"
	HostSectionDmesg         = "host.dmesg"
)

// HostOptions tunes the host command bundle.
type HostOptions struct {
	// NVMePath is the expected local NVMe mount point; "" means DefaultNVMePath.
	NVMePath string
	// CheckTimeoutSeconds bounds each command; 0 means 30.
	CheckTimeoutSeconds int
}

// hostIMDSCommand asks IMDSv2 for the instance type, one second per request, so a host
// without IMDS (or with the hop limit too low) costs at most two seconds. It asks only when
// product_name does not already name an EC2 instance type (Nitro writes it there), so the
// usual case costs nothing.
const hostIMDSCommand = `case "$(cat /sys/devices/virtual/dmi/id/product_name 2>/dev/null)" in [a-z]*.*large|[a-z]*.metal*) exit 0;; esac; ` +
	`TOKEN=$(curl -s -m 1 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token) && curl -s -m 1 -H "X-aws-ec2-metadata-token: $TOKEN" http://169.254.169.254/latest/meta-data/instance-type`

// HostCommands returns the read-only commands the host checks judge, for one bundle. The
// bundle must run as the ordinary login user, not under sudo: `ulimit -l` has to report the
// login session's limit. Only the kernel log needs root, and asks for it with `sudo -n`
// (never prompting), falling back to plain dmesg.
func HostCommands(o HostOptions) []bundle.Command {
	t := o.CheckTimeoutSeconds
	if t <= 0 {
		t = 30
	}
	path := o.NVMePath
	if path == "" {
		path = DefaultNVMePath
	}
	cmd := func(name, shell string) bundle.Command {
		return bundle.Command{Name: name, Shell: shell, TimeoutSeconds: t}
	}
	imds := cmd(HostSectionIMDS, hostIMDSCommand)
	imds.TimeoutSeconds = min(t, 3)
	return []bundle.Command{
		cmd(HostSectionProductName, "cat /sys/devices/virtual/dmi/id/product_name"),
		imds,
		cmd(HostSectionNvidiaSMI, "nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader"),
		cmd(HostSectionFabricManager, "systemctl is-active nvidia-fabricmanager"),
		cmd(HostSectionModinfoEFA, "modinfo -F version efa"),
		cmd(HostSectionModinfoNvidia, "modinfo -F version nvidia"),
		cmd(HostSectionNvidiaLicense, "modinfo -F license nvidia"),
		cmd(HostSectionModinfoGDRDrv, "modinfo -F version gdrdrv"),
		cmd(HostSectionModinfoLustre, "modinfo -F version lustre"),
		cmd(HostSectionEFAPackages, "cat /opt/amazon/efa_installed_packages"),
		cmd(HostSectionInfiniband, "ls -1 /sys/class/infiniband/"),
		cmd(HostSectionFiInfo, "fi_info -p efa -t FI_EP_RDM"),
		cmd(HostSectionFiInfoVersion, "fi_info --version"),
		cmd(HostSectionLsmod, "lsmod"),
		cmd(HostSectionGDRDevice, "stat -c %F /dev/gdrdrv"),
		cmd(HostSectionMemlock, "ulimit -l"),
		cmd(HostSectionNVMe, "findmnt -n -o TARGET,SOURCE,FSTYPE,SIZE --mountpoint "+hostShellWord(path)),
		cmd(HostSectionLfs, "lfs --version"),
		cmd(HostSectionDmesg, "sudo -n dmesg 2>/dev/null || dmesg"),
	}
}

var hostPlainWord = regexp.MustCompile(`^[A-Za-z0-9_./-]+$`)

// hostShellWord leaves plain paths as they are (the commands stay readable and match the
// simulated host) and quotes anything else.
func hostShellWord(s string) string {
	if hostPlainWord.MatchString(s) {
		return s
	}
	return bundle.Quote(s)
}

// ec2Type matches an EC2 instance type name ("p6-b200.48xlarge", "g5.xlarge"); Xen hosts
// write "HVM domU" into product_name and IMDS errors come back as HTML, neither matches.
var ec2Type = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9-]+$`)

// InstanceType resolves the instance type: the DMI product_name (Nitro writes the instance
// type there), else IMDSv2, else the configured setting. source says which one answered:
// "product_name", "imds", "configured", or "" when none did.
func InstanceType(sections map[string]bundle.Section, configured string) (typ, source string) {
	for _, c := range []struct{ name, source string }{
		{HostSectionProductName, "product_name"},
		{HostSectionIMDS, "imds"},
	} {
		s, ok := sections[c.name]
		if !ok || s.ExitCode != 0 || s.TimedOut {
			continue
		}
		if v := strings.TrimSpace(s.Output); ec2Type.MatchString(v) {
			return v, c.source
		}
	}
	if c := strings.TrimSpace(configured); c != "" {
		return c, "configured"
	}
	return "", ""
}

// Merge fills the expectations the user left unset from the instance profile (when found).
// Explicit settings win, including negative counts, which mean "do not judge" and so let a
// user switch off a profile's count.
func Merge(p profile.Profile, found bool, user Expectations) Expectations {
	out := user
	out.IgnoreXids = append([]int(nil), user.IgnoreXids...)
	if found {
		if out.InstanceType == "" {
			out.InstanceType = p.InstanceType
		}
		if out.GPUCount == 0 {
			out.GPUCount = p.GPUCount
		}
		if out.GPUModel == "" {
			out.GPUModel = p.GPUModel
		}
		if out.EFACount == 0 {
			out.EFACount = p.EFACount
		}
		if out.FabricManager == nil {
			v := p.NVSwitch
			out.FabricManager = &v
		}
		if out.NVMe == nil {
			v := p.NVMe
			out.NVMe = &v
		}
		if out.BusBWFloorGBps == 0 {
			out.BusBWFloorGBps = p.BusBWFloorGBps
		}
	}
	if out.NVMePath == "" {
		out.NVMePath = DefaultNVMePath
	}
	return out
}

// EvaluateHost judges the host command output against exp (already merged with the profile).
// Checks come cheap to expensive, one result per stable ID. A command that is missing, exits
// non-zero, times out or prints something unreadable fails its check with the raw output as
// evidence; it never passes.
func EvaluateHost(sections map[string]bundle.Section, exp Expectations) []result.Check {
	gpu, gpus := hostCheckGPU(sections, exp)
	return []result.Check{
		gpu,
		hostCheckDriver(sections, exp, gpus),
		hostCheckFabricManager(sections, exp),
		hostCheckEFADriver(sections, exp),
		hostCheckEFAInstaller(sections, exp),
		hostCheckEFADevices(sections, exp),
		hostCheckGDRCopy(sections, exp),
		hostCheckMemlock(sections),
		hostCheckNVMe(sections, exp),
		hostCheckLustre(sections, exp),
		hostCheckXid(sections, exp),
	}
}

// --- helpers --------------------------------------------------------------------------

const hostEvidenceMax = 2000

// hostGet returns a section and, when it cannot be trusted, why.
func hostGet(sections map[string]bundle.Section, name string) (bundle.Section, string) {
	s, ok := sections[name]
	switch {
	case !ok:
		return s, fmt.Sprintf("%s: no output (the command did not run)", name)
	case s.TimedOut:
		return s, fmt.Sprintf("%s: timed out", name)
	case s.ExitCode == 127:
		return s, fmt.Sprintf("%s: command not found (exit 127)", name)
	case s.ExitCode != 0:
		return s, fmt.Sprintf("%s: exited %d", name, s.ExitCode)
	}
	return s, ""
}

// hostEvidence renders raw output of some sections, bounded.
func hostEvidence(sections map[string]bundle.Section, names ...string) string {
	var b strings.Builder
	for _, n := range names {
		s, ok := sections[n]
		if !ok {
			fmt.Fprintf(&b, "[%s: no output]\n", n)
			continue
		}
		status := fmt.Sprintf("exit %d", s.ExitCode)
		if s.TimedOut {
			status = "timed out"
		}
		fmt.Fprintf(&b, "[%s: %s]\n%s\n", n, status, hostBound(strings.TrimRight(s.Output, "\n"), hostEvidenceMax))
	}
	return strings.TrimRight(b.String(), "\n")
}

func hostBound(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return s[:max] + fmt.Sprintf("\n... (%d more bytes)", len(s)-max)
}

func hostCheck(id string, st result.Status, expected, actual, msg, evidence string) result.Check {
	return result.Check{ID: id, Status: st, Expected: expected, Actual: actual, Message: msg, Evidence: evidence}
}

// hostPin checks actual against an expected version setting. It returns ok=true when no pin
// is set. A setting that does not parse fails: a typo must not disable the check.
func hostPin(setting, actual string) (ok bool, msg string) {
	if strings.TrimSpace(setting) == "" {
		return true, ""
	}
	c, err := constraint.Parse(setting)
	if err != nil {
		return false, fmt.Sprintf("bad expected version setting: %v", err)
	}
	match, err := c.Check(actual)
	if err != nil {
		return false, err.Error()
	}
	if !match {
		return false, fmt.Sprintf("%s does not satisfy %q", actual, c.String())
	}
	return true, ""
}

// hostModelMatches reports whether the nvidia-smi name contains model as a whole word,
// case-insensitively: "B200" matches "NVIDIA B200", "L4" does not match "NVIDIA L40S".
func hostModelMatches(name, model string) bool {
	n, m := strings.ToLower(name), strings.ToLower(strings.TrimSpace(model))
	if m == "" {
		return true
	}
	for i := 0; ; {
		j := strings.Index(n[i:], m)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(m)
		if (start == 0 || !hostAlnum(n[start-1])) && (end == len(n) || !hostAlnum(n[end])) {
			return true
		}
		i = start + 1
	}
}

func hostAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func hostFirstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}

func hostBool(p *bool) (set, v bool) {
	if p == nil {
		return false, false
	}
	return true, *p
}

// --- checks ---------------------------------------------------------------------------

func hostCheckGPU(sections map[string]bundle.Section, exp Expectations) (result.Check, []nvsmi.GPU) {
	id := result.GPU
	var expected string
	switch {
	case exp.GPUCount > 0 && exp.GPUModel != "":
		expected = fmt.Sprintf("%d x %s", exp.GPUCount, exp.GPUModel)
	case exp.GPUCount > 0:
		expected = fmt.Sprintf("%d GPUs", exp.GPUCount)
	case exp.GPUModel != "":
		expected = "any number of " + exp.GPUModel
	default:
		expected = "not judged"
	}
	ev := func() string { return hostEvidence(sections, HostSectionNvidiaSMI) }
	s, problem := hostGet(sections, HostSectionNvidiaSMI)
	if problem != "" {
		return hostCheck(id, result.Fail, expected, "nvidia-smi failed", problem, ev()), nil
	}
	gpus, err := nvsmi.Parse(s.Output)
	if err != nil {
		return hostCheck(id, result.Fail, expected, "unreadable nvidia-smi output", err.Error(), ev()), nil
	}
	names := map[string]int{}
	var wrong []string
	for _, g := range gpus {
		names[g.Name]++
		if !hostModelMatches(g.Name, exp.GPUModel) {
			wrong = append(wrong, fmt.Sprintf("GPU %d %q", g.Index, g.Name))
		}
	}
	var parts []string
	for n, c := range names {
		parts = append(parts, fmt.Sprintf("%d x %s", c, n))
	}
	sort.Strings(parts)
	actual := strings.Join(parts, ", ")
	var fails []string
	if exp.GPUCount > 0 && len(gpus) != exp.GPUCount {
		fails = append(fails, fmt.Sprintf("nvidia-smi lists %d GPUs, the instance type has %d", len(gpus), exp.GPUCount))
	}
	if len(wrong) > 0 {
		fails = append(fails, fmt.Sprintf("not %s: %s", exp.GPUModel, strings.Join(wrong, ", ")))
	}
	if len(fails) > 0 {
		return hostCheck(id, result.Fail, expected, actual, strings.Join(fails, "; "), ev()), gpus
	}
	msg := ""
	if exp.GPUCount <= 0 && exp.GPUModel == "" {
		msg = "count and model not judged: no instance profile and no GPU settings"
	}
	return hostCheck(id, result.Pass, expected, actual, msg, ""), gpus
}

func hostCheckDriver(sections map[string]bundle.Section, exp Expectations, gpus []nvsmi.GPU) result.Check {
	id := result.NvidiaDriver
	expected := "nvidia-smi and kernel module agree"
	if exp.NvidiaDriver != "" {
		expected = exp.NvidiaDriver + " (nvidia-smi and kernel module agree)"
	}
	ev := func() string {
		return hostEvidence(sections, HostSectionNvidiaSMI, HostSectionModinfoNvidia, HostSectionNvidiaLicense)
	}
	if gpus == nil {
		s, problem := hostGet(sections, HostSectionNvidiaSMI)
		if problem == "" {
			_, err := nvsmi.Parse(s.Output)
			problem = fmt.Sprintf("nvidia-smi output unreadable: %v", err)
		}
		return hostCheck(id, result.Fail, expected, "unknown", problem, ev())
	}
	s, problem := hostGet(sections, HostSectionModinfoNvidia)
	if problem != "" {
		return hostCheck(id, result.Fail, expected, "nvidia kernel module not found", problem, ev())
	}
	kmod, err := modinfo.Field(s.Output)
	if err != nil {
		return hostCheck(id, result.Fail, expected, "unreadable modinfo nvidia", err.Error(), ev())
	}
	actual := kmod
	if ls, p := hostGet(sections, HostSectionNvidiaLicense); p == "" {
		if lic, err := modinfo.Field(ls.Output); err == nil {
			actual += " (license " + lic + ")"
		}
	}
	var fails []string
	for _, g := range gpus {
		if g.DriverVersion != kmod {
			fails = append(fails, fmt.Sprintf("nvidia-smi reports driver %s on GPU %d but the nvidia kernel module is %s (driver/library mismatch: reboot, or reinstall one driver)", g.DriverVersion, g.Index, kmod))
			break
		}
	}
	if ok, msg := hostPin(exp.NvidiaDriver, kmod); !ok {
		fails = append(fails, msg)
	}
	if len(fails) > 0 {
		return hostCheck(id, result.Fail, expected, actual, strings.Join(fails, "; "), ev())
	}
	msg := ""
	if exp.NvidiaDriver == "" {
		msg = "version not pinned: reported only"
	}
	return hostCheck(id, result.Pass, expected, actual, msg, "")
}

var hostUnitStates = map[string]bool{
	"active": true, "inactive": true, "failed": true, "activating": true,
	"deactivating": true, "reloading": true, "unknown": true, "maintenance": true, "refreshing": true,
}

func hostCheckFabricManager(sections map[string]bundle.Section, exp Expectations) result.Check {
	id := result.FabricManager
	set, want := hostBool(exp.FabricManager)
	expected := "not judged"
	switch {
	case set && want:
		expected = "active"
	case set:
		expected = "not required (no NVSwitch)"
	}
	ev := func() string { return hostEvidence(sections, HostSectionFabricManager) }
	s, ok := sections[HostSectionFabricManager]
	state := ""
	if ok && !s.TimedOut {
		// is-active exits 3 for inactive units: the word, not the exit code, is the answer.
		if w := hostFirstLine(s.Output); hostUnitStates[w] {
			state = w
		}
	}
	if state == "" {
		_, problem := hostGet(sections, HostSectionFabricManager)
		if problem == "" {
			problem = "systemctl printed no unit state"
		}
		if set && want {
			return hostCheck(id, result.Fail, expected, "unknown", problem, ev())
		}
		return hostCheck(id, result.Skip, expected, "unknown", "not required; "+problem, ev())
	}
	switch {
	case state == "active":
		return hostCheck(id, result.Pass, expected, state, "", "")
	case set && want:
		return hostCheck(id, result.Fail, expected, state,
			"nvidia-fabricmanager is not active: NVLink collectives across the NVSwitches will not work (journalctl -u nvidia-fabricmanager)", ev())
	case set:
		return hostCheck(id, result.Skip, expected, state, "fabric manager not required on this instance type", "")
	default:
		return hostCheck(id, result.Skip, expected, state, "not judged: no instance profile or setting says whether the GPUs sit on NVSwitches", "")
	}
}

func hostCheckEFADriver(sections map[string]bundle.Section, exp Expectations) result.Check {
	id := result.EFADriver
	expected := "efa module present"
	if exp.EFADriver != "" {
		expected = exp.EFADriver
	}
	ev := func() string { return hostEvidence(sections, HostSectionModinfoEFA) }
	s, problem := hostGet(sections, HostSectionModinfoEFA)
	if problem != "" {
		return hostCheck(id, result.Fail, expected, "efa kernel module not found", problem, ev())
	}
	v, err := modinfo.Field(s.Output)
	if err != nil {
		return hostCheck(id, result.Fail, expected, "unreadable modinfo efa", err.Error(), ev())
	}
	if ok, msg := hostPin(exp.EFADriver, v); !ok {
		return hostCheck(id, result.Fail, expected, v, msg, ev())
	}
	msg := ""
	if exp.EFADriver == "" {
		msg = "version not pinned: reported only"
	}
	return hostCheck(id, result.Pass, expected, v, msg, "")
}

func hostCheckEFAInstaller(sections map[string]bundle.Section, exp Expectations) result.Check {
	id := result.EFAInstaller
	expected := fmt.Sprintf("installer %s, libfabric %s, aws-ofi-nccl %s",
		hostOr(exp.EFAInstaller, "any"), hostOr(exp.Libfabric, "any"), hostOr(exp.AWSOFINCCL, "any"))
	ev := func() string { return hostEvidence(sections, HostSectionEFAPackages, HostSectionFiInfoVersion) }
	s, problem := hostGet(sections, HostSectionEFAPackages)
	if problem != "" {
		return hostCheck(id, result.Fail, expected, "no EFA installer record", problem, ev())
	}
	in, err := efapkgs.Parse(s.Output)
	if err != nil {
		return hostCheck(id, result.Fail, expected, "unreadable EFA installer record", err.Error(), ev())
	}
	lf, lfOK := hostLibfabric(sections, in)
	ofi, ofiOK := in.AWSOFINCCL()
	show := func(v string, ok bool) string {
		if !ok {
			return "not listed"
		}
		return v
	}
	actual := fmt.Sprintf("installer %s, libfabric %s, aws-ofi-nccl %s", in.InstallerVersion, show(lf, lfOK), show(ofi, ofiOK))
	var fails []string
	if ok, msg := hostPin(exp.EFAInstaller, in.InstallerVersion); !ok {
		fails = append(fails, "EFA installer: "+msg)
	}
	for _, c := range []struct {
		name, pin, v string
		found        bool
	}{
		{"libfabric", exp.Libfabric, lf, lfOK},
		{"aws-ofi-nccl", exp.AWSOFINCCL, ofi, ofiOK},
	} {
		if c.pin == "" {
			continue
		}
		if !c.found {
			fails = append(fails, fmt.Sprintf("%s is pinned to %q but its version is not recorded", c.name, c.pin))
			continue
		}
		if ok, msg := hostPin(c.pin, c.v); !ok {
			fails = append(fails, c.name+": "+msg)
		}
	}
	if len(fails) > 0 {
		return hostCheck(id, result.Fail, expected, actual, strings.Join(fails, "; "), ev())
	}
	return hostCheck(id, result.Pass, expected, actual, "", "")
}

// hostLibfabric takes libfabric's version from the installer record, else from the runtime's
// own `fi_info --version`.
func hostLibfabric(sections map[string]bundle.Section, in efapkgs.Installed) (string, bool) {
	if v, ok := in.Libfabric(); ok {
		return v, true
	}
	if s, problem := hostGet(sections, HostSectionFiInfoVersion); problem == "" {
		if v, err := fiinfo.ParseVersion(s.Output); err == nil {
			return v.Libfabric, true
		}
	}
	return "", false
}

// hostEFANames lists the EFA devices under /sys/class/infiniband: "rdmapNsM" (and "efa_N" on
// old kernels). ConnectX-7 ports (ibp*, mlx5_*) on some instance types are link-down and
// irrelevant to EFA, so they are returned separately and ignored.
func hostEFANames(out string) (efa, other []string) {
	for _, line := range strings.Split(out, "\n") {
		n := strings.TrimSpace(line)
		switch {
		case n == "":
		case strings.HasPrefix(n, "rdmap"), hostOldEFA.MatchString(n):
			efa = append(efa, n)
		default:
			other = append(other, n)
		}
	}
	return efa, other
}

var hostOldEFA = regexp.MustCompile(`^efa_\d+$`)

func hostCheckEFADevices(sections map[string]bundle.Section, exp Expectations) result.Check {
	id := result.EFADevices
	judged := exp.EFACount > 0
	expected := "EFA devices = fi_info domains (count not judged)"
	if judged {
		expected = fmt.Sprintf("%d EFA devices (/sys/class/infiniband rdmap* = fi_info domains)", exp.EFACount)
	}
	ev := func() string { return hostEvidence(sections, HostSectionInfiniband, HostSectionFiInfo) }

	ib, ok := sections[HostSectionInfiniband]
	var devs, other []string
	switch {
	case !ok || ib.TimedOut || ib.ExitCode == 127:
		_, problem := hostGet(sections, HostSectionInfiniband)
		return hostCheck(id, result.Fail, expected, "unknown", problem, ev())
	case ib.ExitCode != 0:
		// No RDMA device at all: the class directory does not exist. Anything else is a
		// failure to look.
		if !strings.Contains(ib.Output, "No such file or directory") {
			_, problem := hostGet(sections, HostSectionInfiniband)
			return hostCheck(id, result.Fail, expected, "unknown", problem, ev())
		}
	default:
		devs, other = hostEFANames(ib.Output)
	}

	fi, problem := hostGet(sections, HostSectionFiInfo)
	var domains []string
	if problem == "" {
		var err error
		if domains, err = fiinfo.ParseDomains(fi.Output); err != nil {
			problem = err.Error()
		}
	}
	if problem != "" {
		if len(devs) == 0 && !judged {
			return hostCheck(id, result.Skip, expected, "0 EFA devices",
				"no EFA device and none expected; fi_info: "+problem, ev())
		}
		return hostCheck(id, result.Fail, expected, fmt.Sprintf("%d rdmap devices, fi_info failed", len(devs)), problem, ev())
	}

	actual := fmt.Sprintf("%d rdmap devices, %d fi_info domains", len(devs), len(domains))
	var notes []string
	if len(other) > 0 {
		notes = append(notes, "ignored non-EFA RDMA devices: "+strings.Join(other, ", "))
	}
	var fails []string
	if len(devs) != len(domains) {
		fails = append(fails, fmt.Sprintf("/sys/class/infiniband has %d EFA devices but fi_info lists %d domains", len(devs), len(domains)))
	} else if missing := hostMissing(domains, devs); len(missing) > 0 && strings.HasPrefix(domains[0], "rdmap") {
		fails = append(fails, "fi_info domains not under /sys/class/infiniband: "+strings.Join(missing, ", "))
	}
	if judged && len(devs) != exp.EFACount {
		fails = append(fails, fmt.Sprintf("%d EFA devices, the instance type has %d (check the launch's EFA network interfaces; p5en devices can come up late)", len(devs), exp.EFACount))
	}
	if judged && len(domains) != exp.EFACount && len(devs) == exp.EFACount {
		fails = append(fails, fmt.Sprintf("fi_info lists %d domains, want %d", len(domains), exp.EFACount))
	}
	if len(fails) > 0 {
		return hostCheck(id, result.Fail, expected, actual, strings.Join(append(fails, notes...), "; "), ev())
	}
	if !judged {
		notes = append([]string{"count not judged: no EFA count expected"}, notes...)
	}
	return hostCheck(id, result.Pass, expected, actual, strings.Join(notes, "; "), "")
}

// hostMissing returns the names in a that are not in b.
func hostMissing(a, b []string) []string {
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

func hostCheckGDRCopy(sections map[string]bundle.Section, exp Expectations) result.Check {
	id := result.GDRCopy
	expected := "gdrdrv loaded, /dev/gdrdrv character device"
	if exp.GDRCopy != "" {
		expected = "gdrdrv " + exp.GDRCopy + " loaded, /dev/gdrdrv character device"
	}
	ev := func() string {
		return hostEvidence(sections, HostSectionLsmod, HostSectionGDRDevice, HostSectionModinfoGDRDrv)
	}
	var fails []string
	loaded := "unknown"
	if s, problem := hostGet(sections, HostSectionLsmod); problem != "" {
		fails = append(fails, problem)
	} else if set, err := lsmod.Parse(s.Output); err != nil {
		fails = append(fails, err.Error())
	} else if set.Has("gdrdrv") {
		loaded = "loaded"
	} else {
		loaded = "not loaded"
		fails = append(fails, "gdrdrv is not loaded (lsmod)")
	}
	dev := "unknown"
	if s, problem := hostGet(sections, HostSectionGDRDevice); problem != "" {
		dev = "missing"
		fails = append(fails, "/dev/gdrdrv: "+problem)
	} else if t := hostFirstLine(s.Output); t != "character special file" {
		dev = t
		fails = append(fails, fmt.Sprintf("/dev/gdrdrv is a %q, not a character device", hostBound(t, 80)))
	} else {
		dev = "character device"
	}
	version := "unknown"
	if s, problem := hostGet(sections, HostSectionModinfoGDRDrv); problem != "" {
		fails = append(fails, problem)
	} else if v, err := modinfo.Field(s.Output); err != nil {
		fails = append(fails, "modinfo gdrdrv: "+err.Error())
	} else {
		version = v
		if ok, msg := hostPin(exp.GDRCopy, v); !ok {
			fails = append(fails, "GDRCopy: "+msg)
		}
	}
	actual := fmt.Sprintf("gdrdrv %s, version %s; /dev/gdrdrv %s", loaded, version, dev)
	if len(fails) > 0 {
		return hostCheck(id, result.Fail, expected, actual, strings.Join(fails, "; "), ev())
	}
	return hostCheck(id, result.Pass, expected, actual, "", "")
}

func hostCheckMemlock(sections map[string]bundle.Section) result.Check {
	id := result.Memlock
	const expected = "unlimited"
	ev := func() string { return hostEvidence(sections, HostSectionMemlock) }
	s, problem := hostGet(sections, HostSectionMemlock)
	if problem != "" {
		return hostCheck(id, result.Fail, expected, "unknown", problem, ev())
	}
	v := strings.TrimSpace(s.Output)
	if v == "unlimited" {
		return hostCheck(id, result.Pass, expected, v, "", "")
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		return hostCheck(id, result.Fail, expected, fmt.Sprintf("%d KiB", n),
			"locked memory is limited for the login session: collectives pin large buffers (set memlock unlimited in /etc/security/limits.d)", ev())
	}
	return hostCheck(id, result.Fail, expected, "unreadable", fmt.Sprintf("ulimit -l printed %q", hostBound(v, 80)), ev())
}

func hostCheckNVMe(sections map[string]bundle.Section, exp Expectations) result.Check {
	id := result.NVMe
	path := exp.NVMePath
	if path == "" {
		path = DefaultNVMePath
	}
	set, want := hostBool(exp.NVMe)
	expected := "mounted at " + path
	switch {
	case !set:
		expected = "not judged"
	case !want:
		expected = "not required"
	}
	ev := func() string { return hostEvidence(sections, HostSectionNVMe) }
	s, ok := sections[HostSectionNVMe]
	var mounted, known bool
	actual := "unknown"
	switch {
	case ok && !s.TimedOut && s.ExitCode == 0:
		f := strings.Fields(hostFirstLine(s.Output))
		if len(f) >= 1 && f[0] == path {
			mounted, known = true, true
			actual = "mounted: " + strings.Join(f[1:], " ")
		}
	case ok && !s.TimedOut && s.ExitCode == 1 && strings.TrimSpace(s.Output) == "":
		// findmnt exits 1 with no output when nothing is mounted there.
		known, actual = true, "not mounted"
	}
	switch {
	case !known:
		_, problem := hostGet(sections, HostSectionNVMe)
		if problem == "" {
			problem = "findmnt output unreadable"
		}
		if set && want {
			return hostCheck(id, result.Fail, expected, actual, problem, ev())
		}
		return hostCheck(id, result.Skip, expected, actual, "not required; "+problem, ev())
	case mounted:
		msg := ""
		if set && !want {
			msg = "mounted although not required"
		}
		return hostCheck(id, result.Pass, expected, actual, msg, "")
	case set && want:
		return hostCheck(id, result.Fail, expected, actual,
			"local NVMe instance store is not mounted at "+path+" (the DLAMI mounts it at boot; check the instance store and the mount unit)", ev())
	case set:
		return hostCheck(id, result.Skip, expected, actual, "no local NVMe expected on this instance type", "")
	default:
		return hostCheck(id, result.Skip, expected, actual, "not judged: no instance profile or setting says whether the type has local NVMe", "")
	}
}

var hostLfsVersion = regexp.MustCompile(`(?m)^lfs\s+(\S+)`)

func hostCheckLustre(sections map[string]bundle.Section, exp Expectations) result.Check {
	id := result.Lustre
	set, want := hostBool(exp.LustreExpected)
	required := (set && want) || (!set && exp.Lustre != "")
	expected := "not required"
	if required {
		expected = "lfs and lustre module"
		if exp.Lustre != "" {
			expected += " " + exp.Lustre
		}
	}
	ev := func() string { return hostEvidence(sections, HostSectionLfs, HostSectionModinfoLustre) }
	var problems []string
	lfs := ""
	if s, problem := hostGet(sections, HostSectionLfs); problem != "" {
		problems = append(problems, problem)
	} else if m := hostLfsVersion.FindStringSubmatch(s.Output); m != nil {
		lfs = m[1]
	} else {
		problems = append(problems, fmt.Sprintf("lfs --version printed %q", hostBound(hostFirstLine(s.Output), 80)))
	}
	kmod := ""
	if s, problem := hostGet(sections, HostSectionModinfoLustre); problem != "" {
		problems = append(problems, problem)
	} else if v, err := modinfo.Field(s.Output); err != nil {
		problems = append(problems, "modinfo lustre: "+err.Error())
	} else {
		kmod = v
	}
	actual := "not installed"
	if lfs != "" || kmod != "" {
		actual = fmt.Sprintf("lfs %s, module %s", hostOr(lfs, "missing"), hostOr(kmod, "missing"))
	}
	if !required {
		if len(problems) > 0 {
			return hostCheck(id, result.Skip, expected, actual, "Lustre not required; "+strings.Join(problems, "; "), ev())
		}
		return hostCheck(id, result.Pass, expected, actual, "installed although not required", "")
	}
	if len(problems) > 0 {
		return hostCheck(id, result.Fail, expected, actual,
			"Lustre client incomplete (the module must be built for the running kernel): "+strings.Join(problems, "; "), ev())
	}
	if ok, msg := hostPin(exp.Lustre, kmod); !ok {
		return hostCheck(id, result.Fail, expected, actual, "lustre module: "+msg, ev())
	}
	return hostCheck(id, result.Pass, expected, actual, "", "")
}

func hostOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

const hostXidEvidenceLines = 40

func hostCheckXid(sections map[string]bundle.Section, exp Expectations) result.Check {
	id := result.Xid
	ignore := map[int]bool{}
	var ign []string
	for _, n := range exp.IgnoreXids {
		if !ignore[n] {
			ignore[n] = true
			ign = append(ign, strconv.Itoa(n))
		}
	}
	expected := "no Xid/SXid in the kernel log"
	if len(ign) > 0 {
		expected += " (ignoring " + strings.Join(ign, ", ") + ")"
	}
	s, problem := hostGet(sections, HostSectionDmesg)
	if problem == "" && strings.TrimSpace(s.Output) == "" {
		problem = "dmesg printed nothing"
	}
	if problem != "" {
		return hostCheck(id, result.Fail, expected, "kernel log unreadable",
			problem+" (the login user needs passwordless sudo for dmesg, or kernel.dmesg_restrict=0)",
			hostEvidence(sections, HostSectionDmesg))
	}
	events, unparsed := xid.Parse(s.Output)
	type key struct {
		sxid bool
		n    int
		pci  string
	}
	var order []key
	groups := map[key][]xid.Event{}
	var bad, ignored []xid.Event
	for _, e := range events {
		if ignore[e.Xid] {
			ignored = append(ignored, e)
			continue
		}
		bad = append(bad, e)
		k := key{e.SXid, e.Xid, e.PCI}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], e)
	}
	var lines []string
	for _, e := range bad {
		lines = append(lines, e.Line)
	}
	lines = append(lines, unparsed...)
	for _, e := range ignored {
		lines = append(lines, e.Line)
	}
	evidence := ""
	if len(lines) > 0 {
		if len(lines) > hostXidEvidenceLines {
			lines = append(lines[:hostXidEvidenceLines], fmt.Sprintf("... (%d more lines)", len(lines)-hostXidEvidenceLines))
		}
		evidence = hostBound(strings.Join(lines, "\n"), 4*hostEvidenceMax)
	}
	if len(bad) == 0 && len(unparsed) == 0 {
		if len(ignored) > 0 {
			return hostCheck(id, result.Pass, expected, fmt.Sprintf("%d ignored events", len(ignored)),
				"only ignored Xids: "+hostXidSummary(ignored), evidence)
		}
		return hostCheck(id, result.Pass, expected, "none", "", "")
	}
	var msgs []string
	for _, k := range order {
		g := groups[k]
		e := g[0]
		kind := "Xid"
		if e.SXid {
			kind = "SXid"
		}
		msg := fmt.Sprintf("%s %d on PCI %s x%d: %s [%s; action: %s]", kind, e.Xid, e.PCI, len(g), e.Severity.Name, e.Severity.Class, e.Severity.Action)
		if e.Message != "" {
			msg += " " + strconv.Quote(hostBound(e.Message, 100))
		}
		msgs = append(msgs, msg)
	}
	if len(unparsed) > 0 {
		msgs = append(msgs, fmt.Sprintf("%d unreadable Xid/SXid lines", len(unparsed)))
	}
	actual := fmt.Sprintf("%d events: %s", len(bad), hostXidSummary(bad))
	if len(bad) == 0 {
		actual = fmt.Sprintf("%d unreadable Xid lines", len(unparsed))
	}
	return hostCheck(id, result.Fail, expected, actual, strings.Join(msgs, "; "), evidence)
}

// hostXidSummary renders distinct numbers in order: "Xid 79, SXid 20034".
func hostXidSummary(events []xid.Event) string {
	seen := map[string]bool{}
	var out []string
	for _, e := range events {
		s := fmt.Sprintf("Xid %d", e.Xid)
		if e.SXid {
			s = "S" + s
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

package checks

import (
	"regexp"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
)

// Section names of the host commands. They are a stable interface: reports, tests and the
// simulated host key on them.
const (
	HostSectionProductName   = "host.product_name"
	HostSectionIMDS          = "host.imds_instance_type"
	HostSectionPCI           = "host.pci"
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
	HostSectionBootID        = "host.boot_id"
)

// HostOptions tunes the host command bundle.
type HostOptions struct {
	// NVMePath is the expected local NVMe mount point; "" means DefaultNVMePath.
	NVMePath string
	// CheckTimeoutSeconds bounds each command; 0 means bundle.DefaultTimeoutSeconds.
	CheckTimeoutSeconds int
}

// imdsCommand asks IMDSv2 for the instance type, one second per request, so a host without
// IMDS (or with the hop limit too low) costs at most two seconds. It asks only when
// product_name does not already name an EC2 instance type (Nitro writes it there), so the
// usual case costs nothing.
const imdsCommand = `case "$(cat /sys/devices/virtual/dmi/id/product_name 2>/dev/null)" in [a-z]*.*large|[a-z]*.metal*) exit 0;; esac; ` +
	`TOKEN=$(curl -s -m 1 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token) && curl -s -m 1 -H "X-aws-ec2-metadata-token: $TOKEN" http://169.254.169.254/latest/meta-data/instance-type`

// pciCommand prints "<address> <vendor> <device> <class>" per PCI function from sysfs with
// shell builtins only: no lspci dependency and no fork per device.
const pciCommand = `for d in /sys/bus/pci/devices/*; do
  [ -r "$d/vendor" ] || continue
  read -r v <"$d/vendor" && read -r i <"$d/device" && read -r c <"$d/class" || exit 1
  echo "${d##*/} $v $i $c"
done`

// DmesgShell reads the kernel log as root without ever prompting (sudo -n), falling back to
// an unprivileged read where kernel.dmesg_restrict is 0. "$1" is dmesg's path.
const DmesgShell = `sudo -n "$1" 2>/dev/null || "$1"`

// HostCommands returns the read-only commands the host checks judge, for one bundle. The
// bundle must run as the ordinary login user, not under sudo: `ulimit -l` has to report the
// login session's limit. Only the kernel log needs root, and asks for it with `sudo -n`.
// Every tool is called at its real absolute path (package hosttools).
func HostCommands(o HostOptions) []bundle.Command {
	t := o.CheckTimeoutSeconds
	if t <= 0 {
		t = bundle.DefaultTimeoutSeconds
	}
	p := o.NVMePath
	if p == "" {
		p = DefaultNVMePath
	}
	cmd := func(name, shell string) bundle.Command {
		return bundle.Command{Name: name, Shell: shell, TimeoutSeconds: t}
	}
	tool := func(name string, tl bundle.Tool, shell string) bundle.Command {
		return bundle.Command{Name: name, Shell: shell, TimeoutSeconds: t, Tool: hosttools.Ptr(tl)}
	}
	imds := cmd(HostSectionIMDS, imdsCommand)
	imds.TimeoutSeconds = min(t, 3)
	return append([]bundle.Command{
		cmd(HostSectionProductName, "cat /sys/devices/virtual/dmi/id/product_name"),
		imds,
		cmd(HostSectionPCI, pciCommand),
		tool(HostSectionNvidiaSMI, hosttools.NvidiaSMI, `"$1" --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader`),
		tool(HostSectionFabricManager, hosttools.Systemctl, `"$1" is-active nvidia-fabricmanager`),
		tool(HostSectionModinfoEFA, hosttools.Modinfo, `"$1" -F version efa`),
		tool(HostSectionModinfoNvidia, hosttools.Modinfo, `"$1" -F version nvidia`),
		tool(HostSectionNvidiaLicense, hosttools.Modinfo, `"$1" -F license nvidia`),
		tool(HostSectionModinfoGDRDrv, hosttools.Modinfo, `"$1" -F version gdrdrv`),
		tool(HostSectionModinfoLustre, hosttools.Modinfo, `"$1" -F version lustre`),
		cmd(HostSectionEFAPackages, "cat /opt/amazon/efa_installed_packages"),
		cmd(HostSectionInfiniband, "ls -1 /sys/class/infiniband/"),
		tool(HostSectionFiInfo, hosttools.FiInfo, `"$1" -p efa -t FI_EP_RDM`),
		tool(HostSectionFiInfoVersion, hosttools.FiInfo, `"$1" --version`),
		tool(HostSectionLsmod, hosttools.Lsmod, `"$1"`),
		cmd(HostSectionGDRDevice, "stat -c %F /dev/gdrdrv"),
		cmd(HostSectionMemlock, "ulimit -l"),
		tool(HostSectionNVMe, hosttools.Findmnt, `"$1" -n -o TARGET,SOURCE,FSTYPE,SIZE --mountpoint `+shellWord(p)),
		tool(HostSectionLfs, hosttools.Lfs, `"$1" --version`),
	}, KernelLogCommands(o)...)
}

// KernelLogCommands read the kernel log and the boot it belongs to: the end of the host
// bundle, and on their own after the NCCL test, so the lines written during it can be judged.
func KernelLogCommands(o HostOptions) []bundle.Command {
	t := o.CheckTimeoutSeconds
	if t <= 0 {
		t = bundle.DefaultTimeoutSeconds
	}
	return []bundle.Command{
		{Name: HostSectionDmesg, Shell: DmesgShell, TimeoutSeconds: t, Tool: hosttools.Ptr(hosttools.Dmesg)},
		{Name: HostSectionBootID, Shell: "cat /proc/sys/kernel/random/boot_id", TimeoutSeconds: t},
	}
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./-]+$`)

// shellWord leaves plain paths as they are (the commands stay readable) and quotes anything
// else.
func shellWord(s string) string {
	if plainWord.MatchString(s) {
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

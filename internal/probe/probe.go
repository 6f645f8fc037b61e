// Package probe reads a host into typed facts. It owns the read-only commands the checks need
// and the names of their output sections (no other package knows them), runs them through a
// Runner in one round trip, and parses what came back into package facts' types. It judges
// nothing: a fact it cannot read carries the reason, and package checks decides what that
// means.
//
// The same probe runs over SSH during a bake (package remote implements Runner) and on the
// node itself (package localhost), so the bake, the first boot and the fleet read a host the
// same way.
package probe

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpumem"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/migmode"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// Runner runs read-only commands in one round trip and returns each one's section by name. A
// missing section is an error, never a partial map. host.Runner and Local implement it.
type Runner interface {
	Query(ctx context.Context, cmds []bundle.Command) (map[string]bundle.Section, error)
}

// Options tunes the host probe.
type Options struct {
	// NVMePath is the local NVMe mount point to look at; it must be set.
	NVMePath string
	// CheckTimeout bounds each command; 0 means check_timeout's default.
	CheckTimeout time.Duration
	// LoginUser is the user whose new login's memlock limit is worked out; "" is the user the
	// probe runs as (the SSH user in a bake). The node check runs as root and names the
	// bake's login user.
	LoginUser string
}

// timeout bounds each command: check_timeout, resolved by the caller.
func (o Options) timeout() time.Duration { return o.CheckTimeout }

// Section names of the host commands. They are private: reports show them as evidence, and the
// simulated host's fixtures key on them, but every reader outside this package gets facts.
const (
	sectionProductName   = "host.product_name"
	sectionIMDS          = "host.imds_instance_type"
	sectionPCI           = "host.pci"
	sectionNvidiaSMI     = "host.nvidia_smi"
	sectionHostMachine   = "host.uname_m"
	sectionGPUMemory     = "host.gpu_memory"
	sectionMIG           = "host.mig_mode"
	sectionFabricManager = "host.fabricmanager"
	sectionPersistenced  = "host.persistenced"
	sectionGPUHealth     = "host.gpu_health"
	sectionNVLinkStatus  = "host.nvlink_status"
	sectionNVLinkErrors  = "host.nvlink_errors"
	sectionNvsmiQuery    = "host.nvidia_smi_q"
	sectionRDMAStats     = "host.rdma_statistic"
	sectionModinfoEFA    = "host.modinfo_efa_version"
	sectionModinfoPeer   = "host.modinfo_efa_nv_peermem_version"
	sectionModinfoNvidia = "host.modinfo_nvidia_version"
	sectionNvidiaLicense = "host.modinfo_nvidia_license"
	sectionModinfoGDRDrv = "host.modinfo_gdrdrv_version"
	sectionModinfoLustre = "host.modinfo_lustre_version"
	sectionEFAPackages   = "host.efa_installed_packages"
	sectionInfiniband    = "host.infiniband"
	sectionRDMAPorts     = "host.infiniband_ports"
	sectionFiInfo        = "host.fi_info"
	sectionFiInfoVersion = "host.fi_info_version"
	sectionLsmod         = "host.lsmod"
	sectionGDRDevice     = "host.gdrdrv_dev"
	sectionMemlock       = "host.memlock"
	sectionNVMe          = "host.nvme_mount"
	sectionLfs           = "host.lfs_version"
	sectionDmesg         = "host.dmesg"
	sectionJournalKernel = "host.journal_kernel"
	sectionBootID        = "host.boot_id"
	sectionSettle        = "host.settle"
	sectionBaselines     = "guard.baselines"
)

// imdsCommand asks IMDSv2 for the instance type, one second per request, so a host without
// IMDS (or with the hop limit too low) costs at most two seconds. It asks only when
// product_name does not already name an EC2 instance type (Nitro writes it there), so the
// usual case costs nothing.
const imdsCommand = `case "$(cat /sys/devices/virtual/dmi/id/product_name 2>/dev/null)" in [a-z]*.*large|[a-z]*.metal*) exit 0;; esac; ` +
	`TOKEN=$(curl -s -m 1 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token) && curl -s -m 1 -H "X-aws-ec2-metadata-token: $TOKEN" http://169.254.169.254/latest/meta-data/instance-type`

// pciCommand prints "<address> <vendor> <device> <class>" per PCI function from sysfs
// (commands/pci.sh).
var pciCommand = commandShell("pci.sh")

// dmesgShell reads the kernel log as root: directly when the probe already runs as root, else
// through sudo -n (never prompting), falling back to an unprivileged read where
// kernel.dmesg_restrict is 0. sudo's own warnings ("unable to resolve host" after a scheduler
// renamed the node) go to /dev/null: they are not the kernel's lines. "$1" is dmesg's path.
// The parser also strips colours: a pseudo-terminal (ssh_pty) makes util-linux colour its
// output.
const dmesgShell = `if [ "$(id -u)" = 0 ]; then exec "$1"; fi; sudo -n "$1" 2>/dev/null || exec "$1"`

// journalShell reads this boot's kernel messages from the journal as root: directly when
// already root, else through sudo -n without ever prompting. Unlike dmesgShell it does not
// fall back on any failure: a root read that fails must fail the section, because an
// unprivileged journalctl outside the systemd-journal and adm groups sees only its own
// user's journal and exits 0 with no kernel line, which would read as "the journal keeps
// none". It falls back only when sudo itself refuses. journalctl's own stderr (the warnings
// of journal files it skipped) joins its output inside the privileged shell; sudo's goes to
// /dev/null, so "sudo: unable to resolve host" is never read as a journal line. "$1" is
// journalctl's path; -q drops the "-- No entries --" line and the access hints; -b 0 is this
// boot by its id; --no-pager, because a pty (ssh_pty) would start one.
const journalShell = `if [ "$(id -u)" = 0 ]; then exec "$1" ` + journalArgs + `; fi; ` +
	`if sudo -n true 2>/dev/null; then exec sudo -n /bin/sh -c 'exec "$0" ` + journalArgs + ` 2>&1' "$1" 2>/dev/null; fi; exec "$1" ` + journalArgs

const journalArgs = `-k -b 0 -q --no-pager -o short-monotonic`

// rdmaPortsCommand prints port 1's state and phys_state of every device under
// /sys/class/infiniband, one "<device> <attribute> <value>" line each (package ibport), the
// value as the kernel wrote it ("4: ACTIVE", "5: LinkUp") or "unreadable: " and cat's own
// words. No class directory is no RDMA device: nothing printed, exit 0 (the device listing
// says so on its own).
const rdmaPortsCommand = `cd /sys/class/infiniband 2>/dev/null || exit 0; for d in *; do [ -e "$d" ] || continue; ` +
	`for a in state phys_state; do if v=$(cat "$d/ports/1/$a" 2>&1); then echo "$d $a $v"; else echo "$d $a unreadable: $v"; fi; done; done`

// hostCommands returns the read-only commands the host suite reads, for one bundle. The bundle
// runs as the ordinary login user, not under sudo: `ulimit -l` reports that session's limit
// (evidence beside the limit a new login gets, which the limits files decide). Only the kernel log needs root, and asks for it with `sudo -n`. Every tool
// is called at its real absolute path (package hosttools).
func hostCommands(o Options) []bundle.Command {
	t := o.timeout()
	cmd := func(name, shell string) bundle.Command {
		return bundle.Command{Name: name, Shell: shell, Timeout: t}
	}
	tool := func(name string, tl bundle.Tool, shell string) bundle.Command {
		return bundle.Command{Name: name, Shell: shell, Timeout: t, Tool: hosttools.Ptr(tl)}
	}
	imds := cmd(sectionIMDS, imdsCommand)
	imds.Timeout = min(t, 3*time.Second)
	return append([]bundle.Command{
		cmd(sectionProductName, "cat /sys/devices/virtual/dmi/id/product_name"),
		imds,
		cmd(sectionPCI, pciCommand),
		tool(sectionNvidiaSMI, hosttools.NvidiaSMI, `"$1" --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader`),
		tool(sectionHostMachine, hosttools.Uname, `"$1" -m`),
		tool(sectionGPUMemory, hosttools.NvidiaSMI, `"$1" --query-gpu=`+gpumem.Query+` --format=csv,noheader,nounits`),
		tool(sectionMIG, hosttools.NvidiaSMI, `"$1" --query-gpu=`+migmode.Query+` --format=csv,noheader`),
		tool(sectionFabricManager, hosttools.Systemctl, `"$1" is-active nvidia-fabricmanager`),
		tool(sectionPersistenced, hosttools.Systemctl, `"$1" is-active nvidia-persistenced`),
		gpuHealthCommand(t),
		tool(sectionNVLinkStatus, hosttools.NvidiaSMI, `"$1" nvlink -s`),
		nvlinkErrorsCommand(t),
		tool(sectionNvsmiQuery, hosttools.NvidiaSMI, `"$1" -q`),
		rdmaStatsCommand(t),
		tool(sectionModinfoEFA, hosttools.Modinfo, `"$1" -F version efa`),
		tool(sectionModinfoPeer, hosttools.Modinfo, `"$1" -F version efa_nv_peermem`),
		tool(sectionModinfoNvidia, hosttools.Modinfo, `"$1" -F version nvidia`),
		tool(sectionNvidiaLicense, hosttools.Modinfo, `"$1" -F license nvidia`),
		tool(sectionModinfoGDRDrv, hosttools.Modinfo, `"$1" -F version gdrdrv`),
		tool(sectionModinfoLustre, hosttools.Modinfo, `"$1" -F version lustre`),
		cmd(sectionEFAPackages, "cat /opt/amazon/efa_installed_packages"),
		cmd(sectionInfiniband, "ls -1 /sys/class/infiniband/"),
		cmd(sectionRDMAPorts, rdmaPortsCommand),
		tool(sectionFiInfo, hosttools.FiInfo, `"$1" -p efa -t FI_EP_RDM`),
		tool(sectionFiInfoVersion, hosttools.FiInfo, `"$1" --version`),
		tool(sectionLsmod, hosttools.Lsmod, `"$1"`),
		cmd(sectionGDRDevice, "stat -c %F /dev/gdrdrv"),
		cmd(sectionMemlock, "ulimit -l"),
		tool(sectionNVMe, hosttools.Findmnt, `"$1" -n -o TARGET,SOURCE,FSTYPE,SIZE --mountpoint `+shellWord(o.NVMePath)),
		tool(sectionLfs, hosttools.Lfs, `"$1" --version`),
		// The journal's copy of this boot's kernel log, for the xid check's whole-boot verdict:
		// what a layer cleared from the ring buffer (dmesg -c), or what overflowed it, is still
		// there. Only here: the judgments since a mark (the NCCL test) read dmesg alone.
		tool(sectionJournalKernel, hosttools.Journalctl, journalShell),
	}, append(append(loginMemlockCommands(o), imexCommands(o)...), kernelLogCommands(o)...)...)
}

// kernelLogCommands read the kernel log and the boot it belongs to: the end of the host
// bundle, and on their own around a step (the NCCL test), so the lines it logged can be judged.
func kernelLogCommands(o Options) []bundle.Command {
	t := o.timeout()
	return []bundle.Command{
		{Name: sectionDmesg, Shell: dmesgShell, Timeout: t, Tool: hosttools.Ptr(hosttools.Dmesg)},
		{Name: sectionBootID, Shell: "cat /proc/sys/kernel/random/boot_id", Timeout: t},
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

// query runs cmds and names the step in its error.
func query(ctx context.Context, r Runner, what string, cmds []bundle.Command) (map[string]bundle.Section, error) {
	cmds = slices.Clone(cmds)
	for i := range cmds {
		// A command the probe gives no bound of its own is bounded like a check command.
		cmds[i].Timeout = cmp.Or(cmds[i].Timeout, settings.DefaultCheckTimeout)
	}
	sections, err := r.Query(ctx, cmds)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return sections, nil
}

// Host reads the host suite's facts in one round trip. The error is for a probe that could
// not run at all (the connection, the bundle); a fact the host could not give carries its own
// problem.
func Host(ctx context.Context, r Runner, o Options) (facts.Host, error) {
	if strings.TrimSpace(o.NVMePath) == "" {
		return facts.Host{}, fmt.Errorf("probe: no NVMe mount point to look at")
	}
	sections, err := query(ctx, r, "host validation", hostCommands(o))
	if err != nil {
		return facts.Host{}, err
	}
	return ParseHost(sections), nil
}

// KernelLog reads the kernel log again, on its own: around a step whose lines must be judged.
func KernelLog(ctx context.Context, r Runner, o Options) (facts.Fact[facts.KernelLog], error) {
	sections, err := query(ctx, r, "kernel log", kernelLogCommands(o))
	if err != nil {
		return facts.Fact[facts.KernelLog]{}, err
	}
	return parseKernelLog(sections), nil
}

// KernelLogAndJournal reads both copies of this boot's kernel log again: dmesg and the
// journal, after a step whose records must be judged (the NCCL test), so that what the step
// logged and the ring buffer lost is still seen.
func KernelLogAndJournal(ctx context.Context, r Runner, o Options) (facts.Fact[facts.KernelLog], facts.Fact[facts.KernelJournal], error) {
	t := o.timeout()
	cmds := append(kernelLogCommands(o), bundle.Command{Name: sectionJournalKernel, Shell: journalShell, Timeout: t, Tool: hosttools.Ptr(hosttools.Journalctl)})
	sections, err := query(ctx, r, "kernel log", cmds)
	if err != nil {
		return facts.Fact[facts.KernelLog]{}, facts.Fact[facts.KernelJournal]{}, err
	}
	return parseKernelLog(sections), parseWith(sections, sectionJournalKernel, parseKernelJournal), nil
}

// InstanceType reads only what the host says its instance type is (DMI product name, else
// IMDSv2): on a build instance without GPUs the rest of the host suite has nothing to read.
func InstanceType(ctx context.Context, r Runner) (facts.Instance, error) {
	in, _, err := Platform(ctx, r)
	return in, err
}

// Platform reads what the host says its instance type is and its CPU architecture (`uname
// -m`), in one round trip: before any layer runs, the bake compares them with the instance
// type's and the AMI's architecture.
func Platform(ctx context.Context, r Runner) (facts.Instance, facts.Fact[string], error) {
	cmds := append(hostCommands(Options{NVMePath: "/"})[:2], bundle.Command{Name: sectionHostMachine, Shell: `"$1" -m`, Tool: hosttools.Ptr(hosttools.Uname)})
	sections, err := query(ctx, r, "instance type and architecture", cmds)
	if err != nil {
		return facts.Instance{}, facts.Fact[string]{}, err
	}
	return instanceType(sections), parseMachine(sections), nil
}

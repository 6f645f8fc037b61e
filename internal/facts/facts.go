// Package facts holds what a host is, read once and typed: the GPU inventory, the driver and
// module versions, the EFA devices, the memlock limit, the kernel log and the rest. Package
// probe reads a host into these types; package checks judges them. Nothing here runs a command
// or reads raw output: a fact arrives already parsed, or with the reason it could not be read.
package facts

import (
	"fmt"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/efapkgs"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpumem"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/ibport"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/lsmod"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/migmode"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
)

// Fact is one typed fact of a host. Problem is "" when Value was read; otherwise it says why
// not (the command was missing, exited non-zero, timed out, or printed something unreadable),
// and Value is its zero value, never a guess. Evidence is the raw output the fact was read from,
// bounded, for the report of a check that fails on it.
type Fact[T any] struct {
	Value    T
	Problem  string
	Evidence string
}

// OK reports whether the fact was read.
func (f Fact[T]) OK() bool { return f.Problem == "" }

// Read returns a fact that was read.
func Read[T any](v T, evidence string) Fact[T] { return Fact[T]{Value: v, Evidence: evidence} }

// Unread returns a fact that could not be read, and why.
func Unread[T any](problem, evidence string) Fact[T] {
	if problem == "" {
		problem = "unreadable"
	}
	return Fact[T]{Problem: problem, Evidence: evidence}
}

// Host is everything the host suite knows of one host, one field per fact family.
type Host struct {
	// Instance is the EC2 instance type as the host tells it (DMI product_name, else IMDSv2).
	Instance Instance
	// Machine is the host's CPU architecture as `uname -m` prints it ("x86_64", "aarch64").
	Machine Fact[string]
	// PCI is the PCI inventory from sysfs: the ground truth the tools are compared with.
	PCI Fact[pci.Inventory]
	// GPUs are the GPUs nvidia-smi lists; CUDADriver is the CUDA version its table header
	// names ("" when the query format printed none).
	GPUs       Fact[[]nvsmi.GPU]
	CUDADriver string
	// GPUMemory is each GPU's memory.total (MiB), for the comparison with EC2's per-GPU figure.
	GPUMemory Fact[[]gpumem.GPU]
	// MIG is each GPU's current MIG mode (dcgmi diag does not run under MIG).
	MIG Fact[[]migmode.GPU]
	// Modules are the versions modinfo reports for the running kernel's modules.
	NvidiaModule  Fact[string]
	NvidiaLicense Fact[string]
	EFAModule     Fact[string]
	// PeerMemModule is the EFA installer's GPUDirect RDMA peer-memory module (efa_nv_peermem).
	PeerMemModule Fact[string]
	GDRDrvModule  Fact[string]
	LustreModule  Fact[string]
	// Persistenced is nvidia-persistenced's unit state word (each GPU's persistence mode is
	// in Health.GPUs).
	Persistenced Fact[string]
	// Loaded is the set of loaded kernel modules (lsmod).
	Loaded Fact[lsmod.Set]
	// FabricManager is nvidia-fabricmanager's unit state word ("active", "failed", ...).
	FabricManager Fact[string]
	// EFAInstaller is the EFA installer's record (/opt/amazon/efa_installed_packages).
	EFAInstaller Fact[efapkgs.Installed]
	// LibfabricRuntime is the libfabric version fi_info itself reports.
	LibfabricRuntime Fact[string]
	// RDMA is what /sys/class/infiniband lists.
	RDMA Fact[RDMADevices]
	// RDMAPorts are the state and physical state of port 1 of every device under
	// /sys/class/infiniband: a device listed there whose port is not ACTIVE with its link up
	// cannot carry traffic (presence is not function).
	RDMAPorts Fact[[]ibport.Port]
	// Domains are the libfabric EFA RDM domains fi_info lists.
	Domains Fact[[]string]
	// EFAProviderMissing is libfabric's own line when `fi_info -p efa` answered that the EFA
	// provider has nothing on this host (fi_getinfo -61, "No data available", no
	// "provider: efa" block); "" otherwise. Domains is then unread with that problem.
	EFAProviderMissing string
	// GDRDevice is the file type of /dev/gdrdrv as stat names it ("character special file").
	GDRDevice Fact[string]
	// Memlock is the locked-memory limit of the probe's own session. Over SSH in a bake that
	// session opened before any layer ran, so it is evidence, not the verdict: LoginMemlock is.
	Memlock Fact[Memlock]
	// LoginMemlock is the locked-memory limit a new login session of the login user gets, as
	// pam_limits applies the limits files now on the host.
	LoginMemlock Fact[LoginMemlock]
	// NVMe is what is mounted at the local NVMe mount point.
	NVMe Fact[Mount]
	// Lfs is the Lustre utilities' version (lfs --version).
	Lfs Fact[string]
	// KernelLog is this boot's kernel log.
	KernelLog Fact[KernelLog]
	// KernelJournal is this boot's kernel messages as journald kept them: the copy of the
	// kernel log that `dmesg -c` and a ring-buffer overflow cannot remove. Read, it may still
	// hold nothing (journald Storage=none, ReadKMsg=no): the xid check tells that apart.
	KernelJournal Fact[KernelJournal]
	// Health is what the GPUs and the fabric report of their health.
	Health Health
	// IMEX is what the host shows of NVIDIA IMEX.
	IMEX IMEX
}

// Instance is the instance type and where it was read: "product_name", "imds", or "" when
// neither named an EC2 instance type.
type Instance struct {
	Type   string
	Source string
}

// RDMADevices are the RDMA devices under /sys/class/infiniband: EFA's ("rdmapNsM", "efa_N" on
// old kernels) and the others (ConnectX-7 ports on some types, link-down and irrelevant to
// EFA). Both are empty when the class directory does not exist: no RDMA device at all.
type RDMADevices struct {
	EFA   []string
	Other []string
}

// Memlock is a locked-memory limit: unlimited, or KiB.
type Memlock struct {
	Unlimited bool
	KiB       uint64
}

func (m Memlock) String() string {
	if m.Unlimited {
		return "unlimited"
	}
	return fmt.Sprintf("%d KiB", m.KiB)
}

// LoginMemlock is the memlock limit a new login of User gets: Soft is what `ulimit -l` will
// print, Hard the most a process may raise it to. From says where the soft value comes from
// (a limits file's line, or the limit the session inherits), Notes how it was worked out.
type LoginMemlock struct {
	User  string
	Soft  Memlock
	Hard  Memlock
	From  string
	Notes []string
}

// Mount is what findmnt says of a mount point: whether something is mounted, at which target,
// and its source, type and size.
type Mount struct {
	Mounted bool
	Target  string
	Details string
}

// KernelJournal is this boot's kernel messages from the journal (journalctl -k -b 0), in
// order. Entries is empty when the journal holds none of this boot.
type KernelJournal struct {
	Entries []JournalEntry
	// Ignored are journalctl's warnings of journal files it skipped (truncated, corrupted):
	// their records are not in Entries.
	Ignored []string
}

// Mark is a named position in a host's kernel log: the lines after it belong to a step ("during
// the NCCL test", "since the reboot of layer \"x\"").
type Mark struct {
	Position LogPosition
	// During names the step in messages.
	During string
}

// Settle is how a first boot settled: cloud-init's status line ("status: done"), or TimedOut
// when cloud-init or apt were still busy when the wait ran out.
type Settle struct {
	Status   string
	TimedOut bool
}

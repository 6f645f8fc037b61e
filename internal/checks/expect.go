//go:generate packer-sdc mapstructure-to-hcl2 -type Expectations
//go:generate packer-sdc struct-markdown

// Package checks judges the output of the host validation commands and of the 1-node NCCL test
// into typed results. It runs nothing: the provisioner sends the commands this package lists and
// hands their output back.
//
// Every check compares the host with an expectation whose basis it records: an explicit
// setting first, then the instance type's built-in profile, then the host's own PCI
// inventory. A check with nothing to compare against warns and names the setting that would
// make it judge; it never passes.
package checks

// Expectations is the provisioner's `expect` block: what the host must look like. Versions
// take an exact value ("595.91.07") or a constraint such as ">= 3.3.0" or ">= 3.3, < 4" (see
// package constraint). Unset values come from the instance type's built-in profile and, where
// the type has none, from the host's PCI inventory.
type Expectations struct {
	// The AMI's CPU architecture, `x86_64` or `arm64`: set it from the data source
	// (`data.dlami.<name>.architecture`). Before any layer runs, the bake fails when it, the
	// host's `uname -m` and the instance type's SupportedArchitectures
	// (ec2:DescribeInstanceTypes, else the type's profile) disagree.
	Architecture string `mapstructure:"architecture" json:"architecture,omitempty"`
	// Running kernel, exact (`uname -r`); also what the next boot must run.
	Kernel string `mapstructure:"kernel" json:"kernel,omitempty"`
	// NVIDIA driver version or constraint (the kernel module's, which nvidia-smi must agree with).
	NvidiaDriver string `mapstructure:"nvidia_driver" json:"nvidia_driver,omitempty"`
	// EFA kernel driver version or constraint (`modinfo -F version efa`).
	EFADriver string `mapstructure:"efa_driver" json:"efa_driver,omitempty"`
	// EFA installer version or constraint (/opt/amazon/efa_installed_packages).
	EFAInstaller string `mapstructure:"efa_installer" json:"efa_installer,omitempty"`
	// libfabric version or constraint.
	Libfabric string `mapstructure:"libfabric" json:"libfabric,omitempty"`
	// aws-ofi-nccl version or constraint.
	AWSOFINCCL string `mapstructure:"aws_ofi_nccl" json:"aws_ofi_nccl,omitempty"`
	// GDRCopy (gdrdrv module) version or constraint.
	GDRCopy string `mapstructure:"gdrcopy" json:"gdrcopy,omitempty"`
	// Lustre client version or constraint; setting it also requires the client.
	Lustre string `mapstructure:"lustre" json:"lustre,omitempty"`
	// Number of GPUs. Defaults to the profile's, else the NVIDIA GPUs on the PCI bus. -1 turns
	// the count off (the PCI bus is still compared with nvidia-smi).
	GPUCount int `mapstructure:"gpu_count" json:"gpu_count,omitempty"`
	// GPU model, matched as a whole word of the nvidia-smi name, case-insensitively ("B200"
	// matches "NVIDIA B200", not "NVIDIA GB200").
	GPUModel string `mapstructure:"gpu_model" json:"gpu_model,omitempty"`
	// Number of EFA devices. Defaults to the profile's, else the EFA functions on the PCI bus.
	// -1 turns the count off.
	EFACount int `mapstructure:"efa_count" json:"efa_count,omitempty"`
	// Active NVLink links per GPU. Defaults to the profile's (18 on H100, H200 and B200 SXM; 12
	// on A100 SXM); without one, only inactive links are judged.
	NVLinks int `mapstructure:"nvlinks" json:"nvlinks,omitempty"`
	// PCIe link width of each GPU's slot, when the instance type wires its GPUs to slots
	// narrower than the GPUs' own maximum (an L4 at x8 of its x16). Defaults to the profile's
	// figure, else the width each GPU reports as its maximum; on an instance type without a
	// profile a narrower link warns until this is set. DCGM's pcie test is told the same
	// figure (min_pci_width).
	PCIeWidth int `mapstructure:"pcie_width" json:"pcie_width,omitempty"`
	// Whether Fabric Manager must be active. Defaults to the profile's answer, else whether
	// the PCI bus shows an NVSwitch fabric.
	FabricManager *bool `mapstructure:"fabric_manager" json:"fabric_manager,omitempty"`
	// Whether local NVMe must be mounted at nvme_path. Defaults to the profile's answer; an
	// instance type without a profile needs this setting for the check to judge.
	NVMe *bool `mapstructure:"nvme" json:"nvme,omitempty"`
	// Where local NVMe is mounted. Defaults to /opt/dlami/nvme.
	NVMePath string `mapstructure:"nvme_path" json:"nvme_path,omitempty"`
	// Whether the Lustre client must be installed (FSx for Lustre).
	LustreExpected *bool `mapstructure:"lustre_expected" json:"lustre_expected,omitempty"`
	// Lowest acceptable 1-node all-reduce busbw in GB/s at the largest message size. Defaults
	// to the profile's floor; without one the figure is reported with a warning.
	BusBWFloorGBps float64 `mapstructure:"busbw_floor_gbps" json:"busbw_floor_gbps,omitempty"`
	// Xid numbers that do not fail the xid check (they are still reported).
	IgnoreXids []int `mapstructure:"ignore_xids" json:"ignore_xids,omitempty"`
}

// DefaultNVMePath is where the DLAMI mounts the local NVMe instance store.
const DefaultNVMePath = "/opt/dlami/nvme"

// NVMeMount is where local NVMe must be mounted.
func (e Expectations) NVMeMount() string {
	if e.NVMePath == "" {
		return DefaultNVMePath
	}
	return e.NVMePath
}

//go:generate packer-sdc mapstructure-to-hcl2 -type Expectations
//go:generate packer-sdc struct-markdown

package settings

import (
	"fmt"
	"path"

	"github.com/dlami-bake/packer-plugin-dlami/internal/constraint"
)

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
	// Whether the GPUs' NVLink domain spans trays (an UltraServer tray such as
	// p6e-gb200.36xlarge), so that check nvlink-fabric requires every GPU registered with the
	// rack's fabric, with a non-zero CliqueId and ClusterUUID shared by all GPUs. Defaults to the
	// profile's answer, else whether the PCI bus shows more than one GB200 GPU (10de:2941).
	MultiNodeNVLink *bool `mapstructure:"multi_node_nvlink" json:"multi_node_nvlink,omitempty"`
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

// Validate reports every bad setting of the expect block, in field order, naming each one.
func (e Expectations) Validate() []error {
	var errs []error
	for _, p := range e.pins() {
		if p.value == "" {
			continue
		}
		if _, err := constraint.Parse(p.value); err != nil {
			errs = append(errs, fmt.Errorf("expect.%s: %w", p.setting, err))
		}
	}
	for _, n := range []struct {
		setting string
		v       int
	}{{"gpu_count", e.GPUCount}, {"efa_count", e.EFACount}, {"nvlinks", e.NVLinks}} {
		if n.v < -1 {
			errs = append(errs, fmt.Errorf("expect.%s = %d: use a count, or -1 to turn the count off", n.setting, n.v))
		}
	}
	if e.PCIeWidth != 0 && !pcieWidths[e.PCIeWidth] {
		errs = append(errs, fmt.Errorf("expect.pcie_width = %d: use a PCIe link width (1, 2, 4, 8, 12, 16 or 32 lanes), or leave it unset to take the profile's or the GPU's maximum", e.PCIeWidth))
	}
	if e.BusBWFloorGBps < 0 {
		errs = append(errs, fmt.Errorf("expect.busbw_floor_gbps = %g: must not be negative", e.BusBWFloorGBps))
	}
	if e.NVMePath != "" && !path.IsAbs(e.NVMePath) {
		errs = append(errs, fmt.Errorf("expect.nvme_path %q: must be an absolute path", e.NVMePath))
	}
	for i, x := range e.IgnoreXids {
		if x <= 0 {
			errs = append(errs, fmt.Errorf("expect.ignore_xids[%d] = %d: Xid numbers are positive", i, x))
		}
	}
	return errs
}

// pcieWidths are the link widths the PCIe specification defines.
var pcieWidths = map[int]bool{1: true, 2: true, 4: true, 8: true, 12: true, 16: true, 32: true}

type pin struct{ setting, value string }

// pins are the version settings, which take an exact version or a constraint.
func (e Expectations) pins() []pin {
	return []pin{
		{"nvidia_driver", e.NvidiaDriver}, {"efa_driver", e.EFADriver}, {"efa_installer", e.EFAInstaller},
		{"libfabric", e.Libfabric}, {"aws_ofi_nccl", e.AWSOFINCCL}, {"gdrcopy", e.GDRCopy}, {"lustre", e.Lustre},
	}
}

package checks

import (
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/efapkgs"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/modinfo"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
)

// Manifest returns the host's component versions as found by the host commands, keyed like
// the DLAMI release notes' "Major package versions" so the two can be diffed: nvidia_driver,
// cuda_driver, gpu_model, gpu_count, fabricmanager, efa_driver, efa_installer, libfabric,
// aws_ofi_nccl, gdrcopy, lustre, nvidia_kmod_license, instance_type. ("kernel" belongs to
// the kernel guard.) The PCI inventory adds pci_gpu_count, pci_gpu_ids, pci_nvswitch_count,
// pci_nvlink_bridge_count, pci_efa_count and pci_efa_ids. A key is omitted when its command failed or printed nothing readable:
// the manifest never guesses.
//
// cuda_driver is only known when the nvidia-smi section holds the table format (its "CUDA
// Version:" header); the CSV query of HostCommands does not print it.
func Manifest(sections map[string]bundle.Section) map[string]string {
	m := map[string]string{}
	ok := func(name string) (string, bool) {
		s, found := sections[name]
		if !found || s.TimedOut || s.ExitCode != 0 {
			return "", false
		}
		return s.Output, true
	}
	field := func(key, name string) {
		if out, found := ok(name); found {
			if v, err := modinfo.Field(out); err == nil {
				m[key] = v
			}
		}
	}
	if typ, _ := InstanceType(sections, ""); typ != "" {
		m["instance_type"] = typ
	}
	field("nvidia_driver", HostSectionModinfoNvidia)
	field("nvidia_kmod_license", HostSectionNvidiaLicense)
	field("efa_driver", HostSectionModinfoEFA)
	field("gdrcopy", HostSectionModinfoGDRDrv)
	field("lustre", HostSectionModinfoLustre)
	if out, found := ok(HostSectionNvidiaSMI); found {
		if gpus, err := nvsmi.Parse(out); err == nil {
			m["gpu_count"] = strconv.Itoa(len(gpus))
			m["gpu_model"] = gpus[0].Name
			if _, set := m["nvidia_driver"]; !set {
				m["nvidia_driver"] = gpus[0].DriverVersion
			}
		}
		if v := nvsmi.CUDAVersion(out); v != "" {
			m["cuda_driver"] = v
		}
	}
	// is-active exits non-zero for every state but active; the state word is still the fact.
	if s, found := sections[HostSectionFabricManager]; found {
		if w := unitState(s, true); w != "" {
			m["fabricmanager"] = w
		}
	}
	var in efapkgs.Installed
	if out, found := ok(HostSectionEFAPackages); found {
		if parsed, err := efapkgs.Parse(out); err == nil {
			in = parsed
			m["efa_installer"] = in.InstallerVersion
			if v, found := in.AWSOFINCCL(); found {
				m["aws_ofi_nccl"] = v
			}
		}
	}
	if v, found := libfabricVersion(sections, in); found {
		m["libfabric"] = v
	}
	if out, found := ok(HostSectionPCI); found {
		if inv, err := pci.Parse(out); err == nil && len(inv.Devices) > 0 {
			m["pci_gpu_count"] = strconv.Itoa(len(inv.GPUs))
			if len(inv.GPUs) > 0 {
				m["pci_gpu_ids"] = pciIDs(inv.GPUs)
			}
			m["pci_nvswitch_count"] = strconv.Itoa(len(inv.NVSwitches))
			m["pci_nvlink_bridge_count"] = strconv.Itoa(len(inv.NVLinkManagementBridge))
			m["pci_efa_count"] = strconv.Itoa(len(inv.EFA))
			if len(inv.EFA) > 0 {
				m["pci_efa_ids"] = pciIDs(inv.EFA)
			}
		}
	}
	if _, set := m["lustre"]; !set {
		if out, found := ok(HostSectionLfs); found {
			if mm := lfsVersion.FindStringSubmatch(out); mm != nil {
				m["lustre"] = strings.TrimSpace(mm[1])
			}
		}
	}
	return m
}

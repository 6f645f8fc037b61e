package facts

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
)

// Libfabric is libfabric's version: the EFA installer record's, else what fi_info reports.
func (h Host) Libfabric() (string, bool) {
	if h.EFAInstaller.OK() {
		if v, ok := h.EFAInstaller.Value.Libfabric(); ok {
			return v, true
		}
	}
	if h.LibfabricRuntime.OK() {
		return h.LibfabricRuntime.Value, true
	}
	return "", false
}

// Manifest returns the host's component versions, keyed like the DLAMI release notes' "Major
// package versions" so the two can be diffed: nvidia_driver, cuda_driver, gpu_model,
// gpu_count, fabricmanager, efa_driver, efa_installer, libfabric, aws_ofi_nccl, gdrcopy,
// lustre, nvidia_kmod_license, instance_type. ("kernel" belongs to the kernel guard.) The PCI
// inventory adds pci_gpu_count, pci_gpu_ids, pci_nvswitch_count, pci_nvlink_bridge_count,
// pci_efa_count and pci_efa_ids. A key is omitted when its fact could not be read: the manifest
// never guesses. The bill of materials carries it into the image.
func (h Host) Manifest() map[string]string {
	m := map[string]string{}
	put := func(key string, f Fact[string]) {
		if f.OK() && f.Value != "" {
			m[key] = f.Value
		}
	}
	if h.Instance.Type != "" {
		m["instance_type"] = h.Instance.Type
	}
	put("nvidia_driver", h.NvidiaModule)
	put("nvidia_kmod_license", h.NvidiaLicense)
	put("efa_driver", h.EFAModule)
	put("gdrcopy", h.GDRDrvModule)
	put("lustre", h.LustreModule)
	if h.GPUs.OK() && len(h.GPUs.Value) > 0 {
		gpus := h.GPUs.Value
		m["gpu_count"] = strconv.Itoa(len(gpus))
		m["gpu_model"] = gpus[0].Name
		if _, set := m["nvidia_driver"]; !set {
			m["nvidia_driver"] = gpus[0].DriverVersion
		}
	}
	if h.CUDADriver != "" {
		m["cuda_driver"] = h.CUDADriver
	}
	put("fabricmanager", h.FabricManager)
	if h.EFAInstaller.OK() {
		m["efa_installer"] = h.EFAInstaller.Value.InstallerVersion
		if v, found := h.EFAInstaller.Value.AWSOFINCCL(); found {
			m["aws_ofi_nccl"] = v
		}
	}
	if v, found := h.Libfabric(); found {
		m["libfabric"] = v
	}
	if v, found := h.IMEX.PackageVersion(); found {
		m["nvidia_imex"] = v
	}
	if h.PCI.OK() {
		inv := h.PCI.Value
		m["pci_gpu_count"] = strconv.Itoa(len(inv.GPUs))
		if len(inv.GPUs) > 0 {
			m["pci_gpu_ids"] = PCIIDs(inv.GPUs)
		}
		m["pci_nvswitch_count"] = strconv.Itoa(len(inv.NVSwitches))
		m["pci_nvlink_bridge_count"] = strconv.Itoa(len(inv.NVLinkManagementBridge))
		m["pci_efa_count"] = strconv.Itoa(len(inv.EFA))
		if len(inv.EFA) > 0 {
			m["pci_efa_ids"] = PCIIDs(inv.EFA)
		}
	}
	if _, set := m["lustre"]; !set {
		put("lustre", h.Lfs)
	}
	return m
}

// PCIIDs lists the distinct vendor:device ids of devs, in order: "10de:2901 x8".
func PCIIDs(devs []pci.Device) string {
	var order []string
	count := map[string]int{}
	for _, d := range devs {
		id := fmt.Sprintf("%04x:%04x", d.Vendor, d.Device)
		if count[id] == 0 {
			order = append(order, id)
		}
		count[id]++
	}
	parts := make([]string, len(order))
	for i, id := range order {
		parts[i] = fmt.Sprintf("%s x%d", id, count[id])
	}
	return strings.Join(parts, ", ")
}

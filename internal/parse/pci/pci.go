// Package pci reads the PCI inventory of a host from sysfs: one line per device as the host
// bundle prints it ("<address> <vendor> <device> <class>", the contents of
// /sys/bus/pci/devices/<address>/{vendor,device,class}), and counts the devices the host checks
// care about. It needs no tool on the host: lspci is not on every image.
package pci

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Vendor ids.
const (
	VendorNVIDIA   = 0x10de
	VendorAmazon   = 0x1d0f
	VendorMellanox = 0x15b3
)

// Device is one PCI function.
type Device struct {
	Address string // "0000:51:00.0"
	Vendor  uint16
	Device  uint16
	// Class is the 24-bit class code: base class, subclass, programming interface (0x030200).
	Class uint32
}

// BaseSub is the class without the programming interface (0x0302).
func (d Device) BaseSub() uint16 { return uint16(d.Class >> 8) }

// IsNVIDIAGPU: an NVIDIA 3D controller (0x0302, data-center GPUs) or VGA controller (0x0300).
func (d Device) IsNVIDIAGPU() bool {
	return d.Vendor == VendorNVIDIA && (d.BaseSub() == 0x0302 || d.BaseSub() == 0x0300)
}

// DeviceGB200 is the PCI device id of the GB200's Blackwell GPU (aws-parallelcluster-cookbook
// libraries/nvidia.rb, GB200_DEVICE_ID = '2941'; shared/docs/grace-blackwell.md 1.1).
const DeviceGB200 = 0x2941

// IsMultiNodeNVLinkGPU: a GPU whose NVLink domain spans trays (a GB200 of an UltraServer
// tray, 10de:2941). Its NVLink switches sit in other trays: the PCI bus shows no NVSwitch.
func (d Device) IsMultiNodeNVLinkGPU() bool { return d.IsNVIDIAGPU() && d.Device == DeviceGB200 }

// IsNVSwitch: an NVIDIA bridge (0x0680), which is how HGX A100/H100/H200 boards expose their
// NVSwitches (10de:1af1, 10de:22a3; aws-parallelcluster-cookbook nvidia.rb).
func (d Device) IsNVSwitch() bool { return d.Vendor == VendorNVIDIA && d.BaseSub() == 0x0680 }

// IsNVLinkManagementBridge: a Mellanox InfiniBand controller (0x0207). HGX B200/B300 boards
// expose no NVSwitch function; Fabric Manager and NVLSM reach their switches through
// ConnectX-7 ports, and ParallelCluster enables Fabric Manager when more than one is present
// (aws-parallelcluster-cookbook nvidia.rb, "CX-7 bridges on P6/B300"). These are the DOWN
// ibp*/mlx5_* devices under /sys/class/infiniband, never EFA.
func (d Device) IsNVLinkManagementBridge() bool {
	return d.Vendor == VendorMellanox && d.BaseSub() == 0x0207
}

// IsEFA: an Amazon Elastic Fabric Adapter function. The kernel driver matches 0xefa0-0xefa3
// and Amazon added 0xefa4 in 2026 (drivers/infiniband/hw/efa/efa_main.c, pci.ids); every
// generation so far is 0xefaN, so any 0xefa0-0xefaf counts.
func (d Device) IsEFA() bool { return d.Vendor == VendorAmazon && d.Device&0xfff0 == 0xefa0 }

// Inventory is what the host's PCI bus holds, by kind.
type Inventory struct {
	Devices                []Device
	GPUs                   []Device
	NVSwitches             []Device
	NVLinkManagementBridge []Device
	EFA                    []Device
}

// HasNVLinkFabric reports whether the GPUs sit on an NVSwitch fabric that Fabric Manager must
// drive: NVSwitch functions, or more than one ConnectX-7 management bridge beside more than one
// GPU (ParallelCluster's rule for P6).
func (inv Inventory) HasNVLinkFabric() bool {
	return len(inv.NVSwitches) > 0 || (len(inv.GPUs) > 1 && len(inv.NVLinkManagementBridge) > 1)
}

// MultiNodeNVLinkGPUs counts the GPUs whose NVLink domain spans trays (GB200).
func (inv Inventory) MultiNodeNVLinkGPUs() int {
	n := 0
	for _, g := range inv.GPUs {
		if g.IsMultiNodeNVLinkGPU() {
			n++
		}
	}
	return n
}

// HasMultiNodeNVLink reports whether the host is a multi-node NVLink tray: more than one GB200
// GPU (10de:2941), ParallelCluster's rule (`is_gb200_node?`: `lspci -d 10de:2941` counts more
// than 1; aws-parallelcluster-cookbook libraries/nvidia.rb). Such a host needs no Fabric
// Manager; its GPUs register with the rack's fabric (nvidia-smi -q's Fabric section).
func (inv Inventory) HasMultiNodeNVLink() bool { return inv.MultiNodeNVLinkGPUs() > 1 }

var address = regexp.MustCompile(`^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)

// Parse reads "<address> <vendor> <device> <class>" lines (hex with 0x, as sysfs prints them).
// An empty inventory is not an error (the caller decides what none means); a malformed line is.
func Parse(out string) (Inventory, error) {
	var inv Inventory
	for n, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 || !address.MatchString(f[0]) {
			return Inventory{}, fmt.Errorf("pci: line %d: want \"<address> <vendor> <device> <class>\", got %q", n+1, textcut.Head(line, 120))
		}
		vendor, err1 := hex(f[1], 16)
		device, err2 := hex(f[2], 16)
		class, err3 := hex(f[3], 24)
		if err := firstErr(err1, err2, err3); err != nil {
			return Inventory{}, fmt.Errorf("pci: line %d (%s): %w", n+1, f[0], err)
		}
		d := Device{Address: strings.ToLower(f[0]), Vendor: uint16(vendor), Device: uint16(device), Class: uint32(class)}
		inv.Devices = append(inv.Devices, d)
		switch {
		case d.IsNVIDIAGPU():
			inv.GPUs = append(inv.GPUs, d)
		case d.IsNVSwitch():
			inv.NVSwitches = append(inv.NVSwitches, d)
		case d.IsNVLinkManagementBridge():
			inv.NVLinkManagementBridge = append(inv.NVLinkManagementBridge, d)
		case d.IsEFA():
			inv.EFA = append(inv.EFA, d)
		}
	}
	return inv, nil
}

func hex(s string, bits int) (uint64, error) {
	t, ok := strings.CutPrefix(strings.ToLower(s), "0x")
	if !ok {
		return 0, fmt.Errorf("%q is not 0x-prefixed hex", textcut.Head(s, 20))
	}
	v, err := strconv.ParseUint(t, 16, bits)
	if err != nil {
		return 0, fmt.Errorf("%q is not a %d-bit hex value", textcut.Head(s, 20), bits)
	}
	return v, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

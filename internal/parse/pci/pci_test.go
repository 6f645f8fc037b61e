package pci

import (
	"os"
	"strings"
	"testing"
)

func TestParseFixtures(t *testing.T) {
	for _, c := range []struct {
		file                         string
		gpus, switches, bridges, efa int
		fabric                       bool
		devices                      int
	}{
		{"testdata/p5-48xlarge-like.txt", 8, 4, 0, 32, true, 47},
		{"testdata/p6-b200-like.txt", 8, 0, 2, 8, true, 20},
		{"testdata/p6e-gb200-like.txt", 4, 0, 0, 4, false, 11},
	} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		inv, err := Parse(string(b))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if len(inv.GPUs) != c.gpus || len(inv.NVSwitches) != c.switches || len(inv.NVLinkManagementBridge) != c.bridges ||
			len(inv.EFA) != c.efa || inv.HasNVLinkFabric() != c.fabric || len(inv.Devices) != c.devices {
			t.Errorf("%s: gpus %d switches %d bridges %d efa %d fabric %v devices %d", c.file,
				len(inv.GPUs), len(inv.NVSwitches), len(inv.NVLinkManagementBridge), len(inv.EFA), inv.HasNVLinkFabric(), len(inv.Devices))
		}
	}
}

func TestClassification(t *testing.T) {
	for _, c := range []struct {
		line string
		kind string
	}{
		{"0000:51:00.0 0x10de 0x2901 0x030200", "gpu"},
		{"0000:01:00.0 0x10de 0x2237 0x030000", "gpu"}, // VGA-class NVIDIA GPU
		{"0000:01:00.1 0x10de 0x22a3 0x068000", "nvswitch"},
		{"0000:01:00.1 0x10de 0x1aef 0x040300", "other"}, // NVIDIA HD audio: not a GPU
		{"0000:73:00.0 0x15b3 0x1021 0x020700", "bridge"},
		{"0000:73:00.0 0x15b3 0x1021 0x020000", "other"}, // a ConnectX Ethernet function
		{"0000:10:1c.0 0x1d0f 0xefa0 0x020000", "efa"},
		{"0000:10:1c.0 0x1d0f 0xefa4 0x020000", "efa"},
		{"0000:00:05.0 0x1d0f 0xec20 0x020000", "other"}, // ENA
		{"0000:00:04.0 0x1d0f 0x8061 0x010802", "other"}, // NVMe
	} {
		inv, err := Parse(c.line)
		if err != nil {
			t.Fatalf("%q: %v", c.line, err)
		}
		got := "other"
		switch {
		case len(inv.GPUs) == 1:
			got = "gpu"
		case len(inv.NVSwitches) == 1:
			got = "nvswitch"
		case len(inv.NVLinkManagementBridge) == 1:
			got = "bridge"
		case len(inv.EFA) == 1:
			got = "efa"
		}
		if got != c.kind {
			t.Errorf("%q: %s, want %s", c.line, got, c.kind)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"0000:51:00.0 0x10de 0x2901",              // missing class
		"51:00.0 0x10de 0x2901 0x030200",          // short address
		"0000:51:00.0 10de 0x2901 0x030200",       // no 0x
		"0000:51:00.0 0x10dex 0x2901 0x030200",    // not hex
		"0000:51:00.0 0x110de 0x2901 0x030200",    // too wide
		"0000:51:00.0 0x10de 0x2901 0x03020000",   // class too wide
		"cat: /sys/bus/pci/devices: No such file", // an error message, not data
	} {
		if _, err := Parse(in); err == nil || !strings.HasPrefix(err.Error(), "pci: line 1") {
			t.Errorf("Parse(%q) = %v, want a line error", in, err)
		}
	}
	if inv, err := Parse("\n\n"); err != nil || len(inv.Devices) != 0 {
		t.Errorf("empty: %v %+v", err, inv)
	}
}

func TestHasNVLinkFabric(t *testing.T) {
	one := Inventory{GPUs: make([]Device, 1), NVLinkManagementBridge: make([]Device, 2)}
	if one.HasNVLinkFabric() {
		t.Error("a single GPU has no NVLink fabric")
	}
	bridgeOnly := Inventory{GPUs: make([]Device, 8), NVLinkManagementBridge: make([]Device, 1)}
	if bridgeOnly.HasNVLinkFabric() {
		t.Error("one ConnectX bridge is not the P6 NVLink management signature")
	}
}

func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/p5-48xlarge-like.txt", "testdata/p6-b200-like.txt"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
	f.Add("0000:51:00.0 0x10de 0x2901 0x030200\nbogus")
	f.Fuzz(func(t *testing.T, s string) {
		inv, err := Parse(s)
		if err != nil {
			return
		}
		if n := len(inv.GPUs) + len(inv.NVSwitches) + len(inv.NVLinkManagementBridge) + len(inv.EFA); n > len(inv.Devices) {
			t.Fatalf("%d classified devices out of %d", n, len(inv.Devices))
		}
	})
}

// TestMultiNodeNVLink: a GB200 tray (more than one 10de:2941, ParallelCluster's rule) is a
// multi-node NVLink host without an NVSwitch fabric on its PCI bus; HGX boards are not.
func TestMultiNodeNVLink(t *testing.T) {
	for _, c := range []struct {
		file     string
		mnnvl    bool
		gb200    int
		nvswitch bool
	}{
		{"testdata/p6e-gb200-like.txt", true, 4, false},
		{"testdata/p5-48xlarge-like.txt", false, 0, true},
		{"testdata/p6-b200-like.txt", false, 0, true},
	} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		inv, err := Parse(string(b))
		if err != nil {
			t.Fatal(err)
		}
		if inv.HasMultiNodeNVLink() != c.mnnvl || inv.MultiNodeNVLinkGPUs() != c.gb200 || inv.HasNVLinkFabric() != c.nvswitch {
			t.Errorf("%s: multi-node %v (%d GB200), NVSwitch fabric %v", c.file, inv.HasMultiNodeNVLink(), inv.MultiNodeNVLinkGPUs(), inv.HasNVLinkFabric())
		}
	}
	for _, c := range []struct {
		in   string
		want bool
	}{
		{"0008:01:00.0 0x10de 0x2941 0x030200", false}, // one GB200: not "more than 1"
		{"0008:01:00.0 0x10de 0x2941 0x030200\n0009:01:00.0 0x10de 0x2941 0x030200", true},
		{"0008:01:00.0 0x10de 0x2941 0x068000\n0009:01:00.0 0x10de 0x2941 0x068000", false}, // not a GPU class
		{"0000:51:00.0 0x10de 0x2901 0x030200\n0000:52:00.0 0x10de 0x2901 0x030200", false}, // B200
	} {
		inv, err := Parse(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if inv.HasMultiNodeNVLink() != c.want {
			t.Errorf("%q: %v, want %v", c.in, inv.HasMultiNodeNVLink(), c.want)
		}
	}
}

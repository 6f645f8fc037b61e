package checks

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
)

func TestResolve(t *testing.T) {
	s := healthySections(t)
	tg := Resolve(s, Expectations{}, "g5.xlarge")
	if tg.InstanceType != "p6-b200.48xlarge" || tg.InstanceTypeSource != "product_name" || tg.Profile == nil || tg.PCI == nil {
		t.Fatalf("Resolve = %+v", tg)
	}
	if len(tg.PCI.GPUs) != 8 || len(tg.PCI.EFA) != 8 || !tg.PCI.HasNVLinkFabric() {
		t.Errorf("PCI = %d GPUs, %d EFA, fabric %v", len(tg.PCI.GPUs), len(tg.PCI.EFA), tg.PCI.HasNVLinkFabric())
	}
	set(s, HostSectionPCI, "garbage line", 0)
	if tg := Resolve(s, Expectations{}, ""); tg.PCI != nil || !strings.Contains(tg.PCIProblem, "pci: line 1") {
		t.Errorf("bad PCI: %+v", tg)
	}
	set(s, HostSectionPCI, "", 0)
	if tg := Resolve(s, Expectations{}, ""); tg.PCI != nil || !strings.Contains(tg.PCIProblem, "lists no device") {
		t.Errorf("empty PCI: %q", tg.PCIProblem)
	}
}

func TestExpectedCountPrecedence(t *testing.T) {
	s := healthySections(t)
	set(s, HostSectionPCI, pciLines(gpuGroup(6), efaGroup(3)), 0)
	gpus := func(e Expectations, typ string) (int, string, bool) {
		if typ != "" {
			set(s, HostSectionProductName, typ, 0)
		}
		tg := Resolve(s, e, "")
		return tg.expectedCount(e.GPUCount, func(p profile.Profile) int { return p.GPUCount }, func(i pci.Inventory) int { return len(i.GPUs) })
	}
	if n, b, ok := gpus(Expectations{GPUCount: 4}, ""); n != 4 || b != BasisSetting || !ok {
		t.Errorf("setting: %d %q %v", n, b, ok)
	}
	if n, b, ok := gpus(Expectations{}, ""); n != 8 || b != "profile p6-b200.48xlarge" || !ok {
		t.Errorf("profile: %d %q %v", n, b, ok)
	}
	if n, b, ok := gpus(Expectations{}, "p7-future.48xlarge"); n != 6 || b != BasisPCI || !ok {
		t.Errorf("pci: %d %q %v", n, b, ok)
	}
	if _, _, ok := gpus(Expectations{GPUCount: -1}, ""); ok {
		t.Error("-1 must turn the count off")
	}
}

func TestExpectationsValidate(t *testing.T) {
	good := p6Pins()
	if errs := good.Validate(); len(errs) != 0 {
		t.Fatalf("valid pins: %v", errs)
	}
	bad := Expectations{NvidiaDriver: ">= abc", GDRCopy: "~~", GPUCount: -2, EFACount: -3, BusBWFloorGBps: -1, NVMePath: "relative", IgnoreXids: []int{0}}
	errs := bad.Validate()
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	want := []string{"expect.nvidia_driver", "expect.gdrcopy", "expect.gpu_count", "expect.efa_count", "expect.busbw_floor_gbps", "expect.nvme_path", "expect.ignore_xids[0]"}
	if len(msgs) != len(want) {
		t.Fatalf("errors %q", msgs)
	}
	for i, w := range want {
		if !strings.HasPrefix(msgs[i], w) {
			t.Errorf("error %d = %q, want it to start with %s (order is the field order)", i, msgs[i], w)
		}
	}
	// Same input, same order, every time.
	for i := 0; i < 5; i++ {
		again := bad.Validate()
		for j := range again {
			if again[j].Error() != errs[j].Error() {
				t.Fatal("Validate order changed between runs")
			}
		}
	}
	_ = bundle.Section{}
}

package checks

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func TestExpectedCountPrecedence(t *testing.T) {
	inv, err := pci.Parse(strings.Repeat("0000:51:00.0 0x10de 0x2901 0x030200\n", 6) + strings.Repeat("0000:82:00.0 0x1d0f 0xefa3 0x020000\n", 3))
	if err != nil {
		t.Fatal(err)
	}
	s := facts.Host{Instance: facts.Instance{Type: "p6-b200.48xlarge", Source: "product_name"}, PCI: facts.Read(inv, "")}
	gpus := func(e settings.Expectations, typ string) (int, string, bool) {
		if typ != "" {
			s.Instance.Type = typ
		}
		tg := Resolve(s, settings.Checks{Expect: e}, "")
		return tg.expectedCount(e.GPUCount, func(p profile.Profile) int { return p.GPUCount }, func(i pci.Inventory) int { return len(i.GPUs) })
	}
	if n, b, ok := gpus(settings.Expectations{GPUCount: 4}, ""); n != 4 || b != BasisSetting || !ok {
		t.Errorf("setting: %d %q %v", n, b, ok)
	}
	if n, b, ok := gpus(settings.Expectations{}, ""); n != 8 || b != "profile p6-b200.48xlarge" || !ok {
		t.Errorf("profile: %d %q %v", n, b, ok)
	}
	if n, b, ok := gpus(settings.Expectations{}, "p7-future.48xlarge"); n != 6 || b != BasisPCI || !ok {
		t.Errorf("pci: %d %q %v", n, b, ok)
	}
	if _, _, ok := gpus(settings.Expectations{GPUCount: -1}, ""); ok {
		t.Error("-1 must turn the count off")
	}
}

func TestExpectationsValidate(t *testing.T) {
	yes := true
	good := settings.Expectations{NvidiaDriver: "595.91.07", EFADriver: ">= 3.3.0", EFAInstaller: "1.50.0", Libfabric: "2.6.0", AWSOFINCCL: "1.21.1", GDRCopy: ">= 2.4", Lustre: "2.15.6", LustreExpected: &yes}
	if errs := good.Validate(); len(errs) != 0 {
		t.Fatalf("valid pins: %v", errs)
	}
	bad := settings.Expectations{NvidiaDriver: ">= abc", GDRCopy: "~~", GPUCount: -2, EFACount: -3, BusBWFloorGBps: -1, NVMePath: "relative", IgnoreXids: []int{0}}
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
}

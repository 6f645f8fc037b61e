package profile

import (
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		typ      string
		model    string
		gpus     int
		efa      int
		nvswitch bool
		floor    float64
	}{
		{"p6-b200.48xlarge", "B200", 8, 8, true, 600},
		{"P6-B200.48XLARGE ", "B200", 8, 8, true, 600},
		{"p5.48xlarge", "H100", 8, 32, true, 350},
		{"p5e.48xlarge", "H200", 8, 32, true, 350},
		{"p5en.48xlarge", "H200", 8, 16, true, 350},
		{"p5.4xlarge", "H100", 1, 0, false, 0},
		{"p4d.24xlarge", "A100-SXM4-40GB", 8, 4, true, 180},
		{"p4de.24xlarge", "A100-SXM4-80GB", 8, 4, true, 180},
		{"g5.xlarge", "A10G", 1, 0, false, 0},
		{"g5.12xlarge", "A10G", 4, 0, false, 0},
		{"g5.48xlarge", "A10G", 8, 0, false, 0},
		{"g6.24xlarge", "L4", 4, 0, false, 0},
		{"g6e.48xlarge", "L40S", 8, 0, false, 0},
		{"p6-b300.48xlarge", "B300", 8, 16, true, 0},
		{"gr6.8xlarge", "L4", 1, 0, false, 0},
		{"g6f.large", "L4", 1, 0, false, 0},
	}
	for _, tt := range tests {
		p, ok := Lookup(tt.typ)
		if !ok {
			t.Errorf("Lookup(%q) not found", tt.typ)
			continue
		}
		if p.GPUModel != tt.model || p.GPUCount != tt.gpus || p.EFACount != tt.efa || p.NVSwitch != tt.nvswitch || p.BusBWFloorGBps != tt.floor || !p.NVMe || p.Arch != "x86_64" {
			t.Errorf("Lookup(%q) = %+v", tt.typ, p)
		}
	}
	for _, typ := range []string{"", "m5.large", "p6-b200", "g5", "p5.48xlarge.extra"} {
		if _, ok := Lookup(typ); ok {
			t.Errorf("Lookup(%q) found a profile", typ)
		}
	}
}

func TestAllProfilesAreComplete(t *testing.T) {
	all := All()
	// 9 P types; g5, g6, g6e 8 sizes each; gr6 2; g5g 6; g6f 4; gr6f 1.
	if want := 9 + 3*8 + 2 + 6 + 4 + 1; len(all) != want {
		t.Errorf("%d profiles, want %d", len(all), want)
	}
	seen := map[string]bool{}
	for i, p := range all {
		if seen[p.InstanceType] {
			t.Errorf("duplicate %s", p.InstanceType)
		}
		seen[p.InstanceType] = true
		if i > 0 && all[i-1].InstanceType > p.InstanceType {
			t.Errorf("not sorted at %s", p.InstanceType)
		}
		if p.GPUModel == "" || p.GPUCount < 1 || p.Source == "" || p.EFACount > p.MaxEFA || (p.Arch != "x86_64" && p.Arch != "arm64") {
			t.Errorf("incomplete profile %+v", p)
		}
		if p.NVSwitch && p.GPUCount < 2 {
			t.Errorf("%s: NVSwitch with %d GPUs", p.InstanceType, p.GPUCount)
		}
		if p.GPUCount == 1 && p.BusBWFloorGBps != 0 {
			t.Errorf("%s: single GPU with a busbw floor", p.InstanceType)
		}
		if strings.HasPrefix(p.InstanceType, "g") && (p.NVSwitch || p.EFACount != 0) {
			t.Errorf("%s: G types have no NVSwitch and an unjudged EFA count", p.InstanceType)
		}
	}
	gb, _ := Lookup("p6e-gb200.36xlarge")
	if gb.Arch != "arm64" || gb.NVSwitch || gb.GPUCount != 4 || !gb.Untested || gb.EFACount != 0 {
		t.Errorf("p6e-gb200: %+v", gb)
	}
	if g5g, _ := Lookup("g5g.xlarge"); g5g.NVMe || g5g.Arch != "arm64" {
		t.Errorf("g5g: %+v", g5g)
	}
	all[0].GPUCount = 99
	if p, _ := Lookup(all[0].InstanceType); p.GPUCount == 99 {
		t.Error("All returned the internal table")
	}
}

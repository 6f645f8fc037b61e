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
	for _, p := range all {
		if !p.Generation.Known() || !strings.Contains(p.Source, "GPU generation") {
			t.Errorf("%s: generation %q without its source", p.InstanceType, p.Generation)
		}
		if p.PCIeWidth != 0 && (!strings.Contains(p.Source, "PCIe x8 slot") || p.GPUCount != 1) {
			t.Errorf("%s: PCIe width %d without its source, or on a multi-GPU size", p.InstanceType, p.PCIeWidth)
		}
	}
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

// TestGenerationAndPCIeWidth checks the generation of each family and that the documented
// x8 slot is set exactly on the single-GPU G6 and Gr6 sizes (full-size vGPU and multi-GPU
// sizes are left to the GPU's own maximum or expect.pcie_width).
func TestGenerationAndPCIeWidth(t *testing.T) {
	for _, tt := range []struct {
		typ   string
		gen   Generation
		width int
	}{
		{"p4d.24xlarge", Ampere, 0}, {"p4de.24xlarge", Ampere, 0}, {"g5.xlarge", Ampere, 0},
		{"p5.48xlarge", Hopper, 0}, {"p5.4xlarge", Hopper, 0}, {"p5e.48xlarge", Hopper, 0}, {"p5en.48xlarge", Hopper, 0},
		{"p6-b200.48xlarge", Blackwell, 0}, {"p6-b300.48xlarge", Blackwell, 0}, {"p6e-gb200.36xlarge", Blackwell, 0},
		{"g6.xlarge", Ada, 8}, {"g6.2xlarge", Ada, 8}, {"g6.4xlarge", Ada, 8}, {"g6.8xlarge", Ada, 8}, {"g6.16xlarge", Ada, 8},
		{"gr6.4xlarge", Ada, 8}, {"gr6.8xlarge", Ada, 8},
		{"g6.12xlarge", Ada, 0}, {"g6.48xlarge", Ada, 0}, {"g6f.large", Ada, 0}, {"gr6f.4xlarge", Ada, 0},
		{"g6e.xlarge", Ada, 0}, {"g5g.xlarge", Turing, 0},
	} {
		p, ok := Lookup(tt.typ)
		if !ok || p.Generation != tt.gen || p.PCIeWidth != tt.width {
			t.Errorf("Lookup(%q) = generation %q, PCIe width %d; want %q, %d", tt.typ, p.Generation, p.PCIeWidth, tt.gen, tt.width)
		}
	}
	if g6, _ := Lookup("g6.48xlarge"); !strings.Contains(g6.Note, "expect.pcie_width") {
		t.Errorf("g6.48xlarge note %q does not name the setting", g6.Note)
	}
}

func TestGenerationFields(t *testing.T) {
	for _, tt := range []struct {
		gen                       Generation
		remap, retire, fabric, ok bool
	}{
		{Turing, false, true, false, true},
		{Ampere, true, false, false, true},
		{Ada, true, false, false, true},
		{Hopper, true, false, true, true},
		{Blackwell, true, false, true, true},
		{"Volta", false, false, false, false},
		{"", false, false, false, false},
	} {
		if tt.gen.HasRowRemapping() != tt.remap || tt.gen.HasPageRetirement() != tt.retire || tt.gen.HasFabricState() != tt.fabric || tt.gen.Known() != tt.ok {
			t.Errorf("%q: remap %v retire %v fabric %v known %v", tt.gen, tt.gen.HasRowRemapping(), tt.gen.HasPageRetirement(), tt.gen.HasFabricState(), tt.gen.Known())
		}
	}
}

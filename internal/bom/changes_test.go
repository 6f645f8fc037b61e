package bom

import (
	"reflect"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func TestChanges(t *testing.T) {
	prev := BOM{BuildName: "golden", GeneratedAt: time.Date(2026, 10, 2, 5, 17, 0, 0, time.UTC), PluginVersion: "0.1.0", Kernel: "7.0.0-1014-aws",
		Components: map[string]string{"nvidia_driver": "595.91.07", "efa_installer": "1.50.0", "gpu_count": "8", "pci_efa_count": "8"},
		NCCL:       &result.NCCLFigures{NCCLVersion: "2.27.3+cuda12.9"},
		Guarded:    map[string]Package{"linux-image-7.0.0-1014-aws": {Version: "7.0.0-1014.14", Held: true}, "slurmd": {Version: "23.11.4-1", Held: false}}}
	cur := BOM{Kernel: "7.0.0-1015-aws",
		Components: map[string]string{"nvidia_driver": "595.91.07", "efa_installer": "1.51.0", "cuda_driver": "13.0", "gpu_count": "4", "pci_efa_count": "4"},
		NCCL:       &result.NCCLFigures{NCCLVersion: "2.28.1+cuda13.0"},
		Guarded:    map[string]Package{"linux-image-7.0.0-1015-aws": {Version: "7.0.0-1015.15", Held: true}, "slurmd": {Version: "23.11.4-1", Held: true}}}
	got := Changes(prev, cur, "prev/dlami-bom.json")
	want := []result.Change{
		{Component: "kernel", Before: "7.0.0-1014-aws", After: "7.0.0-1015-aws"},
		{Component: "cuda_driver", Before: "(absent)", After: "13.0"},
		{Component: "nccl", Before: "2.27.3+cuda12.9", After: "2.28.1+cuda13.0"},
		{Component: "efa_installer", Before: "1.50.0", After: "1.51.0"},
		{Component: "package linux-image-7.0.0-1014-aws", Before: "7.0.0-1014.14", After: "(absent)"},
		{Component: "package linux-image-7.0.0-1015-aws", Before: "(absent)", After: "7.0.0-1015.15"},
		{Component: "package slurmd", Before: "23.11.4-1, not held", After: "23.11.4-1"},
	}
	if !reflect.DeepEqual(got.Items, want) {
		t.Errorf("changes:\n got %+v\nwant %+v", got.Items, want)
	}
	if got.Compared != 8 || got.Previous != "the bill of materials of golden made 2026-10-02 05:17 UTC by plugin 0.1.0 (prev/dlami-bom.json)" {
		t.Errorf("compared %d, previous %q", got.Compared, got.Previous)
	}
	if same := Changes(cur, cur, "x"); len(same.Items) != 0 || same.Items == nil {
		t.Errorf("a BOM against itself: %+v", same.Items)
	}
}

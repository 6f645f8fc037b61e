package nvsmi

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

func TestParseL(t *testing.T) {
	got, err := ParseL(fixture.Read(t, "L-2xV100-nvidia-container-runtime-117.list"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Listed{{0, "Tesla V100-PCIE-16GB", "GPU-id0"}, {1, "Tesla V100-PCIE-16GB", "GPU-id1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	mig := "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5a3f)\n  MIG 1g.5gb      Device  0: (UUID: MIG-aa)\n"
	if got, err := ParseL(mig); err != nil || len(got) != 1 || got[0].UUID != "GPU-5a3f" {
		t.Errorf("MIG listing: %+v, %v", got, err)
	}
}

func TestParseLRefuses(t *testing.T) {
	for name, tt := range map[string]struct{ in, mention string }{
		"empty":      {"", "no GPU listed"},
		"no devices": {"No devices were found\n", "not a GPU line"},
		"nvml":       {"Failed to initialize NVML: Driver/library version mismatch\n", "not a GPU line"},
		"not found":  {"exec: \"nvidia-smi\": executable file not found in $PATH\n", "not a GPU line"},
		"twice":      {"GPU 0: X (UUID: GPU-a)\nGPU 1: X (UUID: GPU-a)\n", "listed twice"},
	} {
		if _, err := ParseL(tt.in); err == nil || !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("%s: error %v, want one mentioning %q", name, err, tt.mention)
		}
	}
}

func FuzzParseL(f *testing.F) {
	fixture.SeedFuzz(f, ".list")
	f.Fuzz(func(t *testing.T, in string) {
		gpus, err := ParseL(in)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, g := range gpus {
			if g.UUID == "" || seen[g.UUID] {
				t.Fatalf("accepted %+v from %q", g, in)
			}
			seen[g.UUID] = true
		}
	})
}

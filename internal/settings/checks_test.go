package settings

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// changed lists the leaf fields (by Go path) in which a and b differ.
func changed(path string, a, b reflect.Value) []string {
	if a.Kind() == reflect.Struct {
		var out []string
		for i := range a.NumField() {
			out = append(out, changed(path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i))...)
		}
		return out
	}
	if reflect.DeepEqual(a.Interface(), b.Interface()) {
		return nil
	}
	return []string{path[1:]}
}

// The bake's settings, a verification's and a node's differ only in the fields each overlays
// (Overlay's one rule): the phase's expect block when it sets one, its check selection added
// to the bake's, the tests it runs and the NCCL environment of its own; never a floor, bound
// or CUDA version of the bake's.
func TestOverlayChangesOnlyWhatThePhaseSets(t *testing.T) {
	bake := Checks{
		Expect: Expectations{GPUCount: 8, EFACount: 32, GPUModel: "H100"},
		NCCL:   NCCL{CUDAVersion: "13.2", Timeout: 7 * time.Minute, Transport: TransportEFA},
		Function: Function{DCGMLevel: 2,
			EFATraffic: EFATraffic{MinBandwidthMBps: 3000, Timeout: 20 * time.Second, Concurrency: 8},
			GDR:        GDR{Skip: true, BusBWFloorGBps: 40}},
		Skip: []string{"lustre"}, Warn: []string{"gpu-clocks"},
		// imex is the bake's: every verification and node judges IMEX as the bake did.
		IMEX: IMEXDRA,
	}
	own := Expectations{GPUCount: 4}
	level1 := DCGMLevel(1)
	for _, tc := range []struct {
		name    string
		o       Overlay
		changed []string
		check   func(Checks) string
	}{
		{"a plain verification: its own expect block and selection, no load or function test",
			Overlay{Expect: &own, Skip: []string{"nvme"}, SkipSetting: "skip_checks (here or in the bake)", Container: RunAsBaked},
			[]string{"Expect.GPUCount", "Expect.GPUModel", "Expect.EFACount", "NCCL.Skip", "Function.DCGMLevel", "Function.EFATraffic.Skip", "Skip", "SkipSetting"},
			func(s Checks) string {
				if s.Function.DCGMLevel != DCGMOff || !s.NCCL.Skip || !s.Function.EFATraffic.Skip || !s.Function.GDR.Skip {
					return "runs a test"
				}
				if !slices.Equal(s.Skip, []string{"lustre", "nvme"}) {
					return fmt.Sprintf("skip %v, want the bake's then its own", s.Skip)
				}
				return ""
			}},
		{"a verification that completes the bake's: the bake's expect block and tests, NCCL on",
			Overlay{NCCL: RunOn, DCGM: RunAsBaked, EFATraffic: RunAsBaked, GDR: RunAsBaked, Container: RunAsBaked, NCCLEnv: map[string]string{"NCCL_X": "1"}},
			[]string{"NCCL.Env"},
			func(s Checks) string {
				if s.NCCL.Skip || s.Function.DCGMLevel != 2 || s.Function.EFATraffic.Skip || !s.Function.GDR.Skip {
					return "did not run the bake's tests as baked"
				}
				return ""
			}},
		{"a verification with EFA attached: the EFA tests as baked, not DCGM",
			Overlay{NCCL: RunOn, EFATraffic: RunAsBaked, GDR: RunAsBaked, Container: RunAsBaked},
			[]string{"Function.DCGMLevel"},
			nil},
		{"a node: the bake's expect block, its own tests whatever the bake ran",
			Overlay{Warn: []string{"nvme"}, NCCL: RunOff, EFATraffic: RunOff, GDR: RunOn, DCGM: RunOn, DCGMLevel: level1},
			[]string{"NCCL.Skip", "Function.DCGMLevel", "Function.EFATraffic.Skip", "Function.GDR.Skip", "Function.Container.Skip", "Warn"},
			func(s Checks) string {
				if s.Function.GDR.Skip || s.Function.DCGMLevel != 1 || s.Function.GDR.BusBWFloorGBps != 40 {
					return "did not run GPUDirect RDMA with the bake's floor, or DCGM at the node's level"
				}
				return ""
			}},
		{"a selection the bake has already: no change",
			Overlay{Skip: []string{"lustre"}, NCCL: RunAsBaked, DCGM: RunAsBaked, EFATraffic: RunAsBaked, GDR: RunAsBaked, Container: RunAsBaked},
			nil, nil},
	} {
		got := (&bake).Overlay(tc.o)
		diff := changed("", reflect.ValueOf(bake), reflect.ValueOf(got))
		if !slices.Equal(diff, tc.changed) {
			t.Errorf("%s: changed %q, want %q", tc.name, diff, tc.changed)
		}
		if tc.check != nil {
			if msg := tc.check(got); msg != "" {
				t.Errorf("%s: %s", tc.name, msg)
			}
		}
	}
	if bake.Skip[0] != "lustre" || len(bake.Skip) != 1 {
		t.Errorf("the overlay changed the bake's own selection: %v", bake.Skip)
	}
	// A bill of materials that recorded no settings: a bake's defaults, under the phase's own.
	var none *Checks
	if got := none.Overlay(Overlay{NCCL: RunOn, DCGM: RunAsBaked}); got.Function.DCGMLevel != DefaultDCGMLevel || got.NCCL.Skip || got.Function.EFATraffic.Timeout != DefaultEFATrafficTimeout {
		t.Errorf("no recorded settings: %+v", got)
	}
}

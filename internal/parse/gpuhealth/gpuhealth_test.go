package gpuhealth

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

func TestQuery(t *testing.T) {
	f := Fields(Query)
	if len(f) != 16 || f[0] != "index" || f[1] != "pci.bus_id" || f[15] != "clocks_event_reasons.sw_power_cap" {
		t.Fatalf("Fields(Query) = %q", f)
	}
	for _, name := range f[2:] {
		if _, ok := columns[canonical(name)]; !ok {
			t.Errorf("queried field %q has no column", name)
		}
	}
	if strings.Contains(LegacyQuery, "clocks_event_reasons") || !strings.Contains(LegacyQuery, "clocks_throttle_reasons.hw_slowdown") {
		t.Errorf("LegacyQuery = %q", LegacyQuery)
	}
}

func TestParseTestdata(t *testing.T) {
	healthy := func(g GPU) bool {
		return g.Persistence.IsTrue() && g.ECCMode.IsTrue() && g.ECCUncorrectedVolatile.Known && g.ECCUncorrectedVolatile.N == 0 &&
			g.RemappedRowsPending.IsFalse() && g.RemappedRowsFailure.IsFalse() &&
			g.PCIeGenCurrent.N == 5 && g.PCIeGenMax.N == 5 && g.PCIeWidthCurrent.N == 16 && g.PCIeWidthMax.N == 16 &&
			g.HWSlowdown.IsFalse() && g.HWThermalSlowdown.IsFalse() && g.HWPowerBrakeSlowdown.IsFalse()
	}
	for _, tt := range []struct {
		file    string
		fields  string
		busIDs  [2]string
		healthy []bool
	}{
		{"derived-csv-noheader-8xH100-535.183.01-from-q.txt", Query, [2]string{"00000000:53:00.0", "00000000:CA:00.0"},
			[]bool{true, true, false, true, true, true, true, true}},
		{"derived-csv-header-legacy-throttle-names-8xH100-535.183.01.txt", LegacyQuery, [2]string{"00000000:53:00.0", "00000000:CA:00.0"},
			[]bool{true, true, false, true, true, true, true, true}},
		{"derived-csv-noheader-8xH100-535.161.08-hw-slowdown-from-q.txt", Query, [2]string{"00000000:19:00.0", "00000000:DB:00.0"},
			[]bool{false, false, false, false, false, false, false, false}},
		{"derived-csv-noheader-8xH100-faults-injected.txt", Query, [2]string{"00000000:53:00.0", "00000000:CA:00.0"},
			[]bool{true, false, false, false, false, false, false, false}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			gpus, err := ParseFields(fixture.Read(t, tt.file), Fields(tt.fields))
			if err != nil {
				t.Fatal(err)
			}
			if len(gpus) != 8 || gpus[0].BusID != tt.busIDs[0] || gpus[7].BusID != tt.busIDs[1] {
				t.Fatalf("got %d GPUs, %q..%q", len(gpus), gpus[0].BusID, gpus[len(gpus)-1].BusID)
			}
			for i, g := range gpus {
				if g.Index != i {
					t.Errorf("GPU %d has index %d", i, g.Index)
				}
				if g.RetiredPagesPending.Known() {
					t.Errorf("GPU %d: retired_pages.pending should be unknown on H100: %+v", i, g.RetiredPagesPending)
				}
				if got := healthy(g); got != tt.healthy[i] {
					t.Errorf("GPU %d healthy = %v, want %v: %+v", i, got, tt.healthy[i], g)
				}
			}
		})
	}
}

func TestParseValues(t *testing.T) {
	gpus, err := Parse(fixture.Read(t, "derived-csv-noheader-8xH100-faults-injected.txt"))
	if err != nil {
		t.Fatal(err)
	}
	g := gpus[1]
	if g.ECCUncorrectedVolatile != (Count{Known: true, N: 2, Raw: "2"}) || !g.RemappedRowsPending.IsTrue() || g.RemappedRowsFailure.IsTrue() {
		t.Errorf("GPU 1 = %+v", g)
	}
	if !gpus[2].RemappedRowsFailure.IsTrue() {
		t.Errorf("GPU 2 remap failure = %+v", gpus[2].RemappedRowsFailure)
	}
	if g := gpus[3]; !g.Persistence.IsFalse() || !g.ECCMode.IsFalse() || g.ECCUncorrectedVolatile.Known || g.ECCUncorrectedVolatile.Raw != "[N/A]" {
		t.Errorf("GPU 3 = %+v", g)
	}
	if g := gpus[4]; g.PCIeGenCurrent.N != 1 || g.PCIeGenMax.N != 5 || g.PCIeWidthCurrent.N != 8 || g.PCIeWidthMax.N != 16 {
		t.Errorf("GPU 4 link = %+v", g)
	}
	if g := gpus[5]; !g.HWSlowdown.IsTrue() || !g.HWThermalSlowdown.IsTrue() || !g.SWPowerCap.IsFalse() {
		t.Errorf("GPU 5 clocks = %+v", g)
	}
	if g := gpus[6]; g.RemappedRowsPending.Known() || g.RemappedRowsPending.Raw != "[Unknown Error]" || g.ECCUncorrectedVolatile.Known {
		t.Errorf("GPU 6 = %+v", g)
	}
	if g := gpus[7]; g.HWSlowdown.State != Unknown || g.HWSlowdown.Raw != "[Not Supported]" || g.HWSlowdown.String() == "" {
		t.Errorf("GPU 7 = %+v", g)
	}
	real, _ := Parse(fixture.Read(t, "derived-csv-noheader-8xH100-535.183.01-from-q.txt"))
	if g := real[2]; !g.HWPowerBrakeSlowdown.IsTrue() || !g.SWPowerCap.IsTrue() || g.HWSlowdown.IsTrue() {
		t.Errorf("real GPU 2 clocks = %+v", g)
	}
}

func TestParseFieldsSubset(t *testing.T) {
	// A shorter query: untyped fields land in Other, unqueried ones stay Unknown with no Raw.
	gpus, err := ParseFields("index, uuid, persistence_mode\n0, NVIDIA H100 80GB HBM3, N/A\n", []string{"index", "name", "persistence_mode"})
	if err == nil || !strings.Contains(err.Error(), "uuid") {
		t.Fatalf("a header naming other fields than the query's: %+v, %v", gpus, err)
	}
	gpus, err = ParseFields("index, name [unit], persistence_mode\n0, NVIDIA H100 80GB HBM3, N/A\n", []string{"index", "name", "persistence_mode"})
	if err != nil {
		t.Fatal(err)
	}
	g := gpus[0]
	if g.Other["name"] != "NVIDIA H100 80GB HBM3" || g.Persistence.Known() || g.Persistence.Raw != "N/A" || g.ECCMode.Raw != "" || g.BusID != "" {
		t.Errorf("subset = %+v", g)
	}
	if _, err := ParseFields("0\n", []string{"name"}); err == nil || !strings.Contains(err.Error(), "index") {
		t.Errorf("no index field: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	row := "0, 00000000:53:00.0, Enabled, Enabled, 0, [N/A], No, No, 5, 5, 16, 16, Not Active, Not Active, Not Active, Not Active"
	for _, tt := range []struct{ name, in, mention string }{
		{"empty", "", "no GPU"},
		{"blank lines", "\n\r\n  \n", "no GPU"},
		{"no devices", "No devices were found\n", "No devices were found"},
		{"driver down", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n", "couldn't communicate"},
		// The message drivers print for a field they do not know (e.g. the new clock names on an old driver).
		{"invalid field", "Field \"clocks_event_reasons.hw_slowdown\" is not a valid field to query.\n\n", "not a valid field"},
		{"header only", "index, pci.bus_id, persistence_mode, ecc.mode.current, ecc.errors.uncorrected.volatile.total, retired_pages.pending, remapped_rows.pending, remapped_rows.failure, pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max, clocks_event_reasons.hw_slowdown, clocks_event_reasons.hw_thermal_slowdown, clocks_event_reasons.hw_power_brake_slowdown, clocks_event_reasons.sw_power_cap\n", "no GPU"},
		{"header mismatch", "index, pci.bus_id, persistence_mode\n" + row, "header"},
		{"short row", "0, 00000000:53:00.0, Enabled\n", "want 16 fields"},
		{"bad index", strings.Replace(row, "0,", "x,", 1), "GPU index"},
		{"negative index", strings.Replace(row, "0,", "-1,", 1), "GPU index"},
		{"no bus id", strings.Replace(row, "00000000:53:00.0", "[N/A]", 1), "bus ID"},
		{"bad flag", strings.Replace(row, "Enabled, Enabled", "On, Enabled", 1), "persistence_mode"},
		{"yes for enabled", strings.Replace(row, "Enabled, Enabled", "Enabled, Yes", 1), "ecc.mode.current"},
		{"bad count", strings.Replace(row, "Enabled, 0,", "Enabled, -3,", 1), "ecc.errors.uncorrected.volatile.total"},
		{"bad remap", strings.Replace(row, "No, No", "Maybe, No", 1), "remapped_rows.pending"},
		{"width with x", strings.Replace(row, "16, 16", "16x, 16", 1), "pcie.link.width.current"},
		{"duplicate index", row + "\n" + row, "twice"},
	} {
		_, err := Parse(tt.in)
		if err == nil {
			t.Errorf("%s: Parse succeeded, want an error", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("%s: error %q does not mention %q", tt.name, err, tt.mention)
		}
	}
}

func FuzzParse(f *testing.F) {
	fixture.SeedFuzz(f, ".txt")
	f.Fuzz(func(t *testing.T, s string) {
		gpus, err := Parse(s)
		if err == nil && len(gpus) == 0 {
			t.Fatal("no error but no GPUs")
		}
		for _, g := range gpus {
			if g.BusID == "" || g.Index < 0 {
				t.Fatalf("GPU without bus ID or index: %+v", g)
			}
			for _, fl := range []Flag{g.Persistence, g.ECCMode, g.RemappedRowsPending, g.RemappedRowsFailure, g.HWSlowdown} {
				if fl.Raw == "" {
					t.Fatalf("queried flag with no text: %+v", g)
				}
			}
		}
		_, _ = ParseFields(s, Fields(LegacyQuery))
	})
}

package gpuhealth

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
)

func TestQuery(t *testing.T) {
	f := Fields(Query)
	if len(f) < 16 || f[0] != "index" || f[1] != "pci.bus_id" || !slices.Contains(f, "clocks_event_reasons.sw_power_cap") {
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
		{"derived-csv-header-8xH100-535.183.01-from-q.txt", Query, [2]string{"00000000:53:00.0", "00000000:CA:00.0"},
			[]bool{true, true, false, true, true, true, true, true}},
		{"derived-csv-header-legacy-throttle-names-8xH100-535.183.01.txt", LegacyQuery, [2]string{"00000000:53:00.0", "00000000:CA:00.0"},
			[]bool{true, true, false, true, true, true, true, true}},
		{"derived-csv-header-8xH100-535.161.08-hw-slowdown-from-q.txt", Query, [2]string{"00000000:19:00.0", "00000000:DB:00.0"},
			[]bool{false, false, false, false, false, false, false, false}},
		{"derived-csv-header-8xH100-faults-injected.txt", Query, [2]string{"00000000:53:00.0", "00000000:CA:00.0"},
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
	gpus, err := Parse(fixture.Read(t, "derived-csv-header-8xH100-faults-injected.txt"))
	if err != nil {
		t.Fatal(err)
	}
	g := gpus[1]
	if g.ECCUncorrectedVolatile != (Count{Known: true, N: 2, Kind: KindValue, Raw: "2"}) || !g.RemappedRowsPending.IsTrue() || g.RemappedRowsFailure.IsTrue() {
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
	if g := gpus[6]; g.RemappedRowsPending.Known() || g.RemappedRowsPending.Kind != KindUnknownError || g.RemappedRowsPending.Raw != "[Unknown Error]" || g.ECCUncorrectedVolatile.Known {
		t.Errorf("GPU 6 = %+v", g)
	}
	if g := gpus[7]; g.HWSlowdown.State != Unknown || g.HWSlowdown.Kind != KindNotSupported || g.HWSlowdown.Raw != "[Not Supported]" || g.HWSlowdown.String() == "" {
		t.Errorf("GPU 7 = %+v", g)
	}
	real, _ := Parse(fixture.Read(t, "derived-csv-header-8xH100-535.183.01-from-q.txt"))
	if g := real[2]; !g.HWPowerBrakeSlowdown.IsTrue() || !g.SWPowerCap.IsTrue() || g.HWSlowdown.IsTrue() {
		t.Errorf("real GPU 2 clocks = %+v", g)
	}
}

func TestParseFieldsSubset(t *testing.T) {
	// A shorter query: the name is typed, unqueried fields stay Unknown with no Raw.
	gpus, err := ParseFields("index, uuid, persistence_mode\n0, NVIDIA H100 80GB HBM3, N/A\n", []string{"index", "name", "persistence_mode"})
	if err == nil || !strings.Contains(err.Error(), "uuid") {
		t.Fatalf("a header naming other fields than the query's: %+v, %v", gpus, err)
	}
	gpus, err = ParseFields("index, name [unit], persistence_mode\n0, NVIDIA H100 80GB HBM3, N/A\n", []string{"index", "name", "persistence_mode"})
	if err != nil {
		t.Fatal(err)
	}
	g := gpus[0]
	if g.Name != "NVIDIA H100 80GB HBM3" || len(g.Other) != 0 || g.Persistence.Known() || g.Persistence.Raw != "N/A" || g.ECCMode.Raw != "" || g.BusID != "" {
		t.Errorf("subset = %+v", g)
	}
	if _, err := ParseFields("0\n", []string{"name"}); err == nil || !strings.Contains(err.Error(), "index") {
		t.Errorf("no index field: %v", err)
	}
}

// fixtureHeader is the header line of the fixtures' 16 columns, as `--format=csv` prints it.
const fixtureHeader = "index, pci.bus_id, persistence_mode, ecc.mode.current, ecc.errors.uncorrected.volatile.total, retired_pages.pending, remapped_rows.pending, remapped_rows.failure, pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max, clocks_event_reasons.hw_slowdown, clocks_event_reasons.hw_thermal_slowdown, clocks_event_reasons.hw_power_brake_slowdown, clocks_event_reasons.sw_power_cap\n"

func TestParseErrors(t *testing.T) {
	row := "0, 00000000:53:00.0, Enabled, Enabled, 0, [N/A], No, No, 5, 5, 16, 16, Not Active, Not Active, Not Active, Not Active"
	for _, tt := range []struct{ name, in, mention string }{
		{"empty", "", "no GPU"},
		{"blank lines", "\n\r\n  \n", "no GPU"},
		{"no devices", "No devices were found\n", "No devices were found"},
		{"driver down", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n", "couldn't communicate"},
		// The message drivers print for a field they do not know (e.g. the new clock names on an old driver).
		{"invalid field", "Field \"clocks_event_reasons.hw_slowdown\" is not a valid field to query.\n\n", "not a valid field"},
		{"header only", fixtureHeader, "no GPU"},
		{"no header", row, "no header line"},
		{"header shorter than its rows", "index, pci.bus_id, persistence_mode\n" + row, "want 3 fields"},
		{"header naming a field not asked", "index, uuid, persistence_mode\n0, GPU-1, Enabled", "did not ask"},
		{"header without index", "pci.bus_id, persistence_mode\n00000000:53:00.0, Enabled", "no \"index\""},
		{"header naming a field twice", "index, persistence_mode, persistence_mode\n0, Enabled, Enabled", "twice"},
		{"short row", fixtureHeader + "0, 00000000:53:00.0, Enabled\n", "want 16 fields"},
		{"bad index", fixtureHeader + strings.Replace(row, "0,", "x,", 1), "GPU index"},
		{"negative index", fixtureHeader + strings.Replace(row, "0,", "-1,", 1), "GPU index"},
		{"no bus id", fixtureHeader + strings.Replace(row, "00000000:53:00.0", "[N/A]", 1), "bus ID"},
		{"bad flag", fixtureHeader + strings.Replace(row, "Enabled, Enabled", "On, Enabled", 1), "persistence_mode"},
		{"yes for enabled", fixtureHeader + strings.Replace(row, "Enabled, Enabled", "Enabled, Yes", 1), "ecc.mode.current"},
		{"bad count", fixtureHeader + strings.Replace(row, "Enabled, 0,", "Enabled, -3,", 1), "ecc.errors.uncorrected.volatile.total"},
		{"bad remap", fixtureHeader + strings.Replace(row, "No, No", "Maybe, No", 1), "remapped_rows.pending"},
		{"width with x", fixtureHeader + strings.Replace(row, "16, 16", "16x, 16", 1), "pcie.link.width.current"},
		{"duplicate index", fixtureHeader + row + "\n" + row, "twice"},
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

// TestColumnsByName: the header says which column is which, in whatever order, and a field the
// header does not name is KindNotQueried (Raw ""): unknown, never a healthy reading.
func TestColumnsByName(t *testing.T) {
	gpus, err := Parse("remapped_rows.pending, index, ecc.mode.current, pci.bus_id\n[N/A], 0, Enabled, 00000000:53:00.0\nYes, 1, Disabled, 00000000:64:00.0\n")
	if err != nil {
		t.Fatal(err)
	}
	if g := gpus[1]; g.Index != 1 || g.BusID != "00000000:64:00.0" || !g.RemappedRowsPending.IsTrue() || !g.ECCMode.IsFalse() {
		t.Errorf("GPU 1 read by position, not by name: %+v", g)
	}
	g := gpus[0]
	if g.RemappedRowsPending.Kind != KindNotApplicable || !g.ECCMode.IsTrue() {
		t.Errorf("GPU 0: %+v", g)
	}
	for name, f := range map[string]Flag{"persistence_mode": g.Persistence, "remapped_rows.failure": g.RemappedRowsFailure, "hw_slowdown": g.HWSlowdown} {
		if f.Kind != KindNotQueried || f.Known() || f.Raw != "" || f.Kind.String() != "not queried" {
			t.Errorf("%s, not in the header: %+v, want not queried", name, f)
		}
	}
	if c := g.ECCUncorrectedVolatile; c.Known || c.Kind != KindNotQueried {
		t.Errorf("ECC count, not in the header: %+v, want not queried", c)
	}
}

// TestAddingAFieldBreaksNoFixture: with the query one field longer (as when the probe asks for
// a new health field), every fixture Parse reads still parses to the same GPUs, the new field
// not queried.
func TestAddingAFieldBreaksNoFixture(t *testing.T) {
	longer := append(Fields(Query), "clocks_event_reasons.sync_boost", "temperature.gpu")
	files := []string{
		"derived-csv-header-8xH100-535.183.01-from-q.txt", "derived-csv-header-legacy-throttle-names-8xH100-535.183.01.txt",
		"derived-csv-header-8xH100-535.161.08-hw-slowdown-from-q.txt", "derived-csv-header-8xH100-faults-injected.txt",
		"derived-csv-header-8xA100-535.129.03-unreadable-fields.txt",
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			text := fixture.Read(t, file)
			want, err := parseReport(text, Fields(Query), true)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseReport(text, longer, true)
			if err != nil {
				t.Fatalf("the longer query breaks the fixture: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the longer query reads other GPUs:\n%+v\nwant\n%+v", got.GPUs, want.GPUs)
			}
			for _, g := range got.GPUs {
				if _, ok := g.Other["temperature.gpu"]; ok {
					t.Errorf("GPU %d: a field the fixture lacks has a value", g.Index)
				}
			}
		})
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

// TestKinds: each way nvidia-smi prints "no value" keeps its own Kind, distinct from a
// number and from "[N/A]", on the fields the judges read (derived from a real A100 host).
func TestKinds(t *testing.T) {
	gpus, err := Parse(fixture.Read(t, "derived-csv-header-8xA100-535.129.03-unreadable-fields.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		gpu   int
		field string
		got   func(GPU) (Kind, string)
		kind  Kind
		fails bool
	}{
		{0, "ecc volatile", func(g GPU) (Kind, string) { return g.ECCUncorrectedVolatile.Kind, g.ECCUncorrectedVolatile.Raw }, KindValue, false},
		{0, "retired pages", func(g GPU) (Kind, string) { return g.RetiredPagesPending.Kind, g.RetiredPagesPending.Raw }, KindNotApplicable, false},
		{1, "ecc volatile", func(g GPU) (Kind, string) { return g.ECCUncorrectedVolatile.Kind, g.ECCUncorrectedVolatile.Raw }, KindUnknownError, true},
		{2, "ecc volatile", func(g GPU) (Kind, string) { return g.ECCUncorrectedVolatile.Kind, g.ECCUncorrectedVolatile.Raw }, KindNotApplicable, false},
		{3, "ecc volatile", func(g GPU) (Kind, string) { return g.ECCUncorrectedVolatile.Kind, g.ECCUncorrectedVolatile.Raw }, KindGPULost, true},
		{4, "remap failure", func(g GPU) (Kind, string) { return g.RemappedRowsFailure.Kind, g.RemappedRowsFailure.Raw }, KindUnknownError, true},
		{4, "remap pending", func(g GPU) (Kind, string) { return g.RemappedRowsPending.Kind, g.RemappedRowsPending.Raw }, KindValue, false},
		{5, "remap pending", func(g GPU) (Kind, string) { return g.RemappedRowsPending.Kind, g.RemappedRowsPending.Raw }, KindNoPermission, true},
		{6, "width current", func(g GPU) (Kind, string) { return g.PCIeWidthCurrent.Kind, g.PCIeWidthCurrent.Raw }, KindNotSupported, false},
		{6, "width max", func(g GPU) (Kind, string) { return g.PCIeWidthMax.Kind, g.PCIeWidthMax.Raw }, KindNotSupported, false},
		{7, "hw slowdown", func(g GPU) (Kind, string) { return g.HWSlowdown.Kind, g.HWSlowdown.Raw }, KindOtherError, true},
	} {
		k, raw := tt.got(gpus[tt.gpu])
		if k != tt.kind || k.ReadFailed() != tt.fails || k.String() == "" {
			t.Errorf("GPU %d %s (%q): kind %v (read failed %v), want %v", tt.gpu, tt.field, raw, k, k.ReadFailed(), tt.kind)
		}
	}
	// Known stays false for every "no value" kind: nothing reads as a zero count.
	for _, g := range gpus[1:4] {
		if g.ECCUncorrectedVolatile.Known || g.ECCUncorrectedVolatile.N != 0 {
			t.Errorf("GPU %d ECC count %+v reads as known", g.Index, g.ECCUncorrectedVolatile)
		}
	}
	if g := gpus[0]; g.PCIeWidthMax.Kind != KindValue || g.Persistence.Kind != KindValue || (Flag{}).Kind != KindNotQueried {
		t.Errorf("value kinds: %+v", g)
	}
	for raw, want := range map[string]Kind{"N/A": KindNotApplicable, "[n/a]": KindNotApplicable, "Unknown Error": KindUnknownError,
		"GPU is lost": KindGPULost, "[Insufficient Permissions]": KindNoPermission, "Not Supported": KindNotSupported, "[Timeout]": KindOtherError, "": KindNotQueried, "16": KindValue} {
		if got := kindOf(raw); got != want {
			t.Errorf("kindOf(%q) = %v, want %v", raw, got, want)
		}
	}
}

// TestMissingGPUs: a GPU that fell off the bus is skipped while the others keep their index
// (a real capture); the list is an error, never a shorter healthy host.
func TestMissingGPUs(t *testing.T) {
	fields := []string{"index", "pci.bus_id", "name"}
	text := fixture.Read(t, "csv-index-busid-name-8xRTX3080-gpu3-fell-off.txt")
	_, err := ParseFields(text, fields)
	var miss *nvsmi.MissingGPUsError
	if !errors.As(err, &miss) || !reflect.DeepEqual(miss.Gaps, []int{3}) || len(miss.Handles) != 1 ||
		miss.Handles[0] != (nvsmi.HandleError{Index: 3, BusID: "0000:04:00.0", Reason: "Unknown Error"}) || len(miss.Listed) != 7 {
		t.Fatalf("error %v (%+v), want the missing GPU 3 at 0000:04:00.0", err, miss)
	}
	if !strings.Contains(err.Error(), "GPU 3 at 0000:04:00.0: Unknown Error") || !strings.Contains(err.Error(), "index(es) 3 missing") {
		t.Errorf("message %q", err)
	}
	r, err := ParseReport(text, fields)
	if err != nil || len(r.GPUs) != 7 || r.GPUs[3].Index != 4 || r.GPUs[3].Name != "NVIDIA GeForce RTX 3080" || !reflect.DeepEqual(r.Gaps(), []int{3}) {
		t.Fatalf("report %+v, %v", r, err)
	}
	// Without the stderr line (a probe that drops stderr) the gap alone still fails.
	noHandle := text[strings.Index(text, "\n")+1:]
	if _, err := ParseFields(noHandle, fields); !errors.As(err, &miss) || len(miss.Handles) != 0 || !reflect.DeepEqual(miss.Gaps, []int{3}) {
		t.Errorf("gap without the handle line: %v", err)
	}
	// A row nvidia-smi could not read at all, as printed for a failed GPU.
	bad := "0, 00000000:01:00.0, NVIDIA GeForce RTX 3080\n[Unknown Error], [Unknown Error], [Unknown Error]\n"
	if _, err := ParseFields(bad, fields); !errors.As(err, &miss) || miss.UnreadableRows != 1 {
		t.Errorf("unreadable row: %v", err)
	}
	// Only the count shows a GPU missing after the highest index.
	seven := strings.Join(strings.Split(text, "\n")[1:4], "\n")
	gpus, err := ParseFields(seven, fields)
	if err != nil || !reflect.DeepEqual(Missing(gpus, 8), []int{3, 4, 5, 6, 7}) || Missing(gpus, 3) != nil {
		t.Errorf("Missing: %v, %v", gpus, err)
	}
}

// TestParseQueryGenerations reads real `nvidia-smi -q` captures of each generation: the
// fields a generation does not have read KindNotApplicable, the ones it has read values.
func TestParseQueryGenerations(t *testing.T) {
	for _, tt := range []struct {
		file         string
		gpus         int
		name, arch   string
		retired      Kind // retired_pages.pending
		remap        Kind // remapped_rows.pending and .failure
		gen, width   [2]uint64
		persistence  State
		remapPending []int
	}{
		{"q-8xA100-SXM4-40GB-535.129.03-nvswitch.txt", 8, "NVIDIA A100-SXM4-40GB", "Ampere", KindNotApplicable, KindValue, [2]uint64{4, 4}, [2]uint64{16, 16}, False, nil},
		{"q-4xA100-SXM4-80GB-555.42.02-gpu1-remap-pending.txt", 4, "NVIDIA A100-SXM4-80GB", "Ampere", KindNotApplicable, KindValue, [2]uint64{4, 4}, [2]uint64{16, 16}, True, []int{1}},
		{"q-1xA10-550.90.12.txt", 1, "NVIDIA A10", "Ampere", KindNotApplicable, KindValue, [2]uint64{}, [2]uint64{}, True, nil},
		{"q-1xL4-550.90.07-idle-x8-of-x16.txt", 1, "NVIDIA L4", "Ada Lovelace", KindNotApplicable, KindValue, [2]uint64{1, 4}, [2]uint64{8, 16}, True, nil},
		{"q-1xL40S-550.127.05.txt", 1, "NVIDIA L40S", "Ada Lovelace", KindNotApplicable, KindValue, [2]uint64{1, 4}, [2]uint64{16, 16}, True, nil},
		{"q-8xH100-80GB-HBM3-565.57.01.txt", 8, "NVIDIA H100 80GB HBM3", "Hopper", KindNotApplicable, KindValue, [2]uint64{5, 5}, [2]uint64{16, 16}, True, nil},
		{"q-1xH200-550.90.12.txt", 1, "NVIDIA H200", "Hopper", KindNotApplicable, KindValue, [2]uint64{5, 5}, [2]uint64{16, 16}, True, nil},
		{"q-8xV100-SXM2-16GB-550.127.05-page-retirement.txt", 8, "Tesla V100-SXM2-16GB", "Volta", KindValue, KindNotApplicable, [2]uint64{}, [2]uint64{}, True, nil},
	} {
		t.Run(tt.file, func(t *testing.T) {
			r, err := ParseQuery(fixture.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if r.Attached != tt.gpus || len(r.GPUs) != tt.gpus || r.Incomplete() != nil {
				t.Fatalf("attached %d, %d GPU blocks, incomplete %v", r.Attached, len(r.GPUs), r.Incomplete())
			}
			var pending []int
			for i, g := range r.GPUs {
				if g.Index != i || g.Name != tt.name || g.Architecture != tt.arch || g.BusID == "" {
					t.Errorf("GPU %d = %q %q %q index %d", i, g.BusID, g.Name, g.Architecture, g.Index)
				}
				if g.RetiredPagesPending.Kind != tt.retired || g.RemappedRowsPending.Kind != tt.remap || g.RemappedRowsFailure.Kind != tt.remap {
					t.Errorf("GPU %d: retired %v, remap %v/%v", i, g.RetiredPagesPending, g.RemappedRowsPending, g.RemappedRowsFailure)
				}
				if g.RemappedRowsPending.IsTrue() {
					pending = append(pending, i)
				}
				if g.RemappedRowsFailure.IsTrue() || g.RetiredPagesPending.IsTrue() {
					t.Errorf("GPU %d: remap failure or retirement pending", i)
				}
				if !g.ECCMode.IsTrue() || g.ECCUncorrectedVolatile.Kind != KindValue || g.ECCUncorrectedVolatile.N != 0 || g.Persistence.State != tt.persistence {
					t.Errorf("GPU %d: ECC %v, volatile %+v, persistence %v", i, g.ECCMode, g.ECCUncorrectedVolatile, g.Persistence)
				}
				if tt.gen[1] > 0 && ([2]uint64{g.PCIeGenCurrent.N, g.PCIeGenMax.N} != tt.gen || [2]uint64{g.PCIeWidthCurrent.N, g.PCIeWidthMax.N} != tt.width) {
					t.Errorf("GPU %d: gen %d/%d width %d/%d", i, g.PCIeGenCurrent.N, g.PCIeGenMax.N, g.PCIeWidthCurrent.N, g.PCIeWidthMax.N)
				}
				if g.PCIeWidthMax.Raw != "16x" || !g.PCIeWidthMax.Known {
					t.Errorf("GPU %d: width max %+v", i, g.PCIeWidthMax)
				}
				for _, f := range []Flag{g.HWSlowdown, g.HWThermalSlowdown, g.HWPowerBrakeSlowdown} {
					if !f.IsFalse() {
						t.Errorf("GPU %d: a hardware slowdown %v", i, f)
					}
				}
				if g.SWPowerCap.IsTrue() != (tt.arch == "Ampere" && tt.gpus == 1) { // the A10 capture: SW Power Cap Active
					t.Errorf("GPU %d: SW power cap %v", i, g.SWPowerCap)
				}
			}
			if !reflect.DeepEqual(pending, tt.remapPending) {
				t.Errorf("remap pending on %v, want %v", pending, tt.remapPending)
			}
		})
	}
}

func TestParseQueryIncomplete(t *testing.T) {
	text := fixture.Read(t, "q-8xA100-SXM4-40GB-535.129.03-nvswitch.txt")
	// Cut the last GPU block: Attached GPUs still says 8.
	cut := text[:strings.LastIndex(text, "\nGPU 00000000:")+1]
	r, err := ParseQuery(cut)
	if err != nil {
		t.Fatal(err)
	}
	var miss *nvsmi.MissingGPUsError
	if err := r.Incomplete(); len(r.GPUs) != 7 || !errors.As(err, &miss) || !reflect.DeepEqual(miss.Gaps, []int{7}) {
		t.Errorf("7 of 8 blocks: %d GPUs, %v", len(r.GPUs), err)
	}
	r, err = ParseQuery("Unable to determine the device handle for GPU 0000:04:00.0: GPU is lost\n" + text)
	if err != nil || !errors.As(r.Incomplete(), &miss) || miss.Handles[0].Reason != "GPU is lost" || miss.Handles[0].Index != -1 {
		t.Errorf("handle line: %v, %v", r.Incomplete(), err)
	}
	for _, tt := range []struct{ in, want string }{
		{"", "empty"},
		{"No devices were found\n", "no GPU block"},
		{"Attached GPUs : lots\n", "not a count"},
		{"GPU 00000000:2F:00.0\n    Persistence Mode : Sometimes\n", "Persistence Mode"},
		{"GPU 00000000:2F:00.0\n    PCI\n        GPU Link Info\n            Link Width\n                Max : wide\n", "Link Width Max"},
		{"GPU 00000000:2F:00.0\n    ECC Errors\n        Volatile\n            DRAM Uncorrectable : many\n", "DRAM Uncorrectable"},
	} {
		if _, err := ParseQuery(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseQuery(%q) error %v, want one mentioning %q", tt.in, err, tt.want)
		}
	}
	// Several uncorrectable counters: the sum, and the worst kind when one is not a number.
	r, err = ParseQuery("GPU 00000000:2F:00.0\n    ECC Errors\n        Volatile\n            SRAM Uncorrectable : 2\n            DRAM Uncorrectable : 3\n" +
		"GPU 00000000:35:00.0\n    ECC Errors\n        Volatile\n            SRAM Uncorrectable : N/A\n            DRAM Uncorrectable : Unknown Error\n            DRAM Correctable : 7\n")
	if err != nil || r.GPUs[0].ECCUncorrectedVolatile.N != 5 || r.GPUs[1].ECCUncorrectedVolatile.Kind != KindUnknownError || r.Attached != -1 {
		t.Errorf("sums: %+v, %v", r, err)
	}
}

func FuzzParseQuery(f *testing.F) {
	fixture.SeedFuzz(f, ".txt")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseQuery(s)
		if err != nil {
			return
		}
		if len(r.GPUs) == 0 && len(r.Handles) == 0 {
			t.Fatal("no error, no GPU")
		}
		for i, g := range r.GPUs {
			if g.Index != i || g.BusID == "" {
				t.Fatalf("GPU %d: %+v", i, g)
			}
			if c := g.ECCUncorrectedVolatile; c.Known != (c.Kind == KindValue) {
				t.Fatalf("count known %v with kind %v", c.Known, c.Kind)
			}
		}
		_ = r.Incomplete()
	})
}

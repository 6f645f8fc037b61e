package nvlink

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
)

func TestParseStatusTestdata(t *testing.T) {
	for _, tt := range []struct {
		file          string
		gpus, links   int
		active        int
		gbps          float64
		name, uuid0   string
		inactiveLinks []int
	}{
		{"status-2xH100-PCIe-nvlink-bridge-inactive-links.txt", 2, 18, 12, 26.562, "NVIDIA H100 PCIe", "GPU-6968dfc2-d444-d92c-c36b-6abe53445cb9", []int{4, 5, 10, 11, 16, 17}},
		{"status-8xA100-SXM4-80GB-gpud.txt", 8, 12, 12, 25, "NVIDIA A100-SXM4-80GB", "GPU-5269b708-678a-b1a8-60f0-c90406537486", nil},
	} {
		t.Run(tt.file, func(t *testing.T) {
			st, err := ParseStatus(fixture.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(st) != tt.gpus || st[0].UUID != tt.uuid0 {
				t.Fatalf("got %d GPUs, first UUID %q", len(st), st[0].UUID)
			}
			for i, g := range st {
				if g.Index != i || g.Name != tt.name || len(g.Links) != tt.links || g.ActiveLinks() != tt.active || len(g.Notes) != 0 {
					t.Errorf("GPU %d = %s: %d links, %d active, notes %q", i, g.Name, len(g.Links), g.ActiveLinks(), g.Notes)
				}
				var inactive []int
				for j, l := range g.Links {
					if l.Index != j {
						t.Errorf("GPU %d link %d has index %d", i, j, l.Index)
					}
					if !l.Active {
						inactive = append(inactive, l.Index)
						if l.Raw != "<inactive>" || l.GBps != 0 {
							t.Errorf("GPU %d inactive link %+v", i, l)
						}
					} else if l.GBps != tt.gbps {
						t.Errorf("GPU %d link %d speed %v", i, l.Index, l.GBps)
					}
				}
				if !reflect.DeepEqual(inactive, tt.inactiveLinks) {
					t.Errorf("GPU %d inactive links %v, want %v", i, inactive, tt.inactiveLinks)
				}
			}
		})
	}
}

func TestParseStatusVariants(t *testing.T) {
	st, err := ParseStatus("GPU 0: NVIDIA H100 80GB HBM3\n\t Link 0: 26.562 GB/s\n\t Link 1: 0 GB/s\n\t [...]\nGPU 1: NVIDIA H100 80GB HBM3\n\t NVML: Unable to retrieve NVLink information as all links are inActive\n")
	if err != nil {
		t.Fatal(err)
	}
	if st[0].UUID != "" || st[0].ActiveLinks() != 1 || st[0].Links[1].Active || !reflect.DeepEqual(st[0].Notes, []string{"[...]"}) {
		t.Errorf("GPU 0 = %+v", st[0])
	}
	if len(st[1].Links) != 0 || len(st[1].Notes) != 1 || !strings.Contains(st[1].Notes[0], "inActive") {
		t.Errorf("GPU 1 = %+v", st[1])
	}
}

func TestParseErrorsTestdata(t *testing.T) {
	c, err := ParseErrors(fixture.Read(t, "errors-H100-80GB-HBM3-replay-recovery-crc-elided.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c) != 1 || c[0].Name != "NVIDIA H100 80GB HBM3" || len(c[0].Links) != 3 || !reflect.DeepEqual(c[0].Notes, []string{"[...]"}) {
		t.Fatalf("got %+v", c)
	}
	want := map[string]uint64{"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}
	for i, l := range c[0].Links {
		if l.Index != []int{0, 1, 17}[i] || !reflect.DeepEqual(l.Counts, want) || len(l.Other) != 0 {
			t.Errorf("link %d = %+v", i, l)
		}
	}

	b, err := ParseErrors(fixture.Read(t, "derived-errors-B300-595.91.07-blackwell-counter-names.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 1 || len(b[0].Links) != 2 {
		t.Fatalf("got %+v", b)
	}
	l := b[0].Links[1]
	if l.Counts["Link recovery failed events"] != 0 || l.Counts["FEC Errors - 0"] != 36140749276 || l.Counts["Raw Errors Lane 0"] != 82 || l.Counts["Symbol Errors"] != 0 {
		t.Errorf("B300 link 1 counts = %v", l.Counts)
	}
	if _, ok := l.Counts["Malformed packet Errors"]; !ok || l.Other["Effective BER"] != "15e-255" || len(l.Other) != 2 || len(l.Counts) != 16+16+5 {
		t.Errorf("B300 link 1 = %d counts %v, other %v", len(l.Counts), l.Counts, l.Other)
	}
}

func TestDelta(t *testing.T) {
	before, err := ParseErrors(fixture.Read(t, "derived-errors-H100-18-links-before.txt"))
	if err != nil {
		t.Fatal(err)
	}
	after, err := ParseErrors(fixture.Read(t, "derived-errors-H100-18-links-after-link5-crc-replay.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(before[0].Links) != 18 {
		t.Fatalf("%d links", len(before[0].Links))
	}
	d, err := Delta(before, after)
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{{GPU: 0, Link: 5, Counter: "CRC Errors", Before: 0, After: 12}, {GPU: 0, Link: 5, Counter: "Replay Errors", Before: 0, After: 3}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("Delta = %v", d)
	}
	if d[0].String() != "GPU 0 link 5 CRC Errors +12 (0 -> 12)" {
		t.Errorf("String = %q", d[0])
	}
	if d, err := Delta(before, before); err != nil || len(d) != 0 {
		t.Errorf("Delta(x, x) = %v, %v", d, err)
	}
	// A counter that went down, a missing link, another GPU: all errors, never "no change".
	if _, err := Delta(after, before); err == nil || !strings.Contains(err.Error(), "reset") {
		t.Errorf("backwards: %v", err)
	}
	short, _ := ParseErrors("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-abcdefab-cdef-abdc-abcd-abababababab)\n Link 0: CRC Errors: 0\n")
	if _, err := Delta(before, short); err == nil || !strings.Contains(err.Error(), "links") {
		t.Errorf("fewer links: %v", err)
	}
	other, _ := ParseErrors(strings.Replace(fixture.Read(t, "derived-errors-H100-18-links-before.txt"), "abababababab", "cdcdcdcdcdcd", 1))
	if _, err := Delta(before, other); err == nil || !strings.Contains(err.Error(), "was") {
		t.Errorf("other GPU: %v", err)
	}
	renamed, _ := ParseErrors(strings.Replace(fixture.Read(t, "derived-errors-H100-18-links-before.txt"), "Link 3: CRC Errors", "Link 3: CRC Flit Errors", 1))
	if _, err := Delta(before, renamed); err == nil || !strings.Contains(err.Error(), "CRC Flit Errors") {
		t.Errorf("renamed counter: %v", err)
	}
	if _, err := Delta(before, nil); err == nil {
		t.Error("Delta(x, nil) succeeded")
	}
}

func TestParseFabricTestdata(t *testing.T) {
	for _, tt := range []struct {
		file       string
		busIDs     []string
		registered []bool
		clique     string
	}{
		{"query-8xH100-535.183.01-fabric-completed-no-clique.txt",
			[]string{"00000000:53:00.0", "00000000:64:00.0", "00000000:75:00.0", "00000000:86:00.0", "00000000:97:00.0", "00000000:A8:00.0", "00000000:B9:00.0", "00000000:CA:00.0"},
			[]bool{true, true, true, true, true, true, true, true}, ""},
		{"derived-query-8xH100-535.183.01-fabric-in-progress-and-failed.txt",
			[]string{"00000000:53:00.0", "00000000:64:00.0", "00000000:75:00.0", "00000000:86:00.0", "00000000:97:00.0", "00000000:A8:00.0", "00000000:B9:00.0", "00000000:CA:00.0"},
			[]bool{true, true, false, true, true, false, true, true}, ""},
		{"query-1xH100-560.35.03-fabric-clique-health.txt", []string{"00000000:DB:00.0"}, []bool{true}, "0"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			fs, err := ParseFabric(fixture.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var bus []string
			var reg []bool
			for _, f := range fs {
				bus = append(bus, f.BusID)
				reg = append(reg, f.Registered())
				if f.CliqueID != tt.clique {
					t.Errorf("%s CliqueID %q", f.BusID, f.CliqueID)
				}
			}
			if !reflect.DeepEqual(bus, tt.busIDs) || !reflect.DeepEqual(reg, tt.registered) {
				t.Errorf("bus IDs %v registered %v", bus, reg)
			}
		})
	}
	fs, _ := ParseFabric(fixture.Read(t, "query-1xH100-560.35.03-fabric-clique-health.txt"))
	if f := fs[0]; f.ClusterUUID != "00000000-0000-0000-0000-000000000000" || !reflect.DeepEqual(f.Health, map[string]string{"Bandwidth": "N/A"}) {
		t.Errorf("560 fabric = %+v", f)
	}
	fs, _ = ParseFabric(fixture.Read(t, "derived-query-8xH100-535.183.01-fabric-in-progress-and-failed.txt"))
	if fs[2].State != "In Progress" || fs[2].Status != "N/A" || fs[5].Status != "NVML_ERROR_INSUFFICIENT_RESOURCES" || fs[0].Health != nil {
		t.Errorf("derived = %+v / %+v", fs[2], fs[5])
	}
}

func TestParseErrorsAll(t *testing.T) {
	for _, tt := range []struct {
		name  string
		parse func(string) error
		in    string
		want  string
	}{
		{"status empty", status, "", "empty"},
		{"status driver", status, "Failed to initialize NVML: Driver/library version mismatch\n", "version mismatch"},
		{"status bad speed", status, "GPU 0: NVIDIA H100 80GB HBM3\n Link 0: fast\n", "neither a speed"},
		{"status dup link", status, "GPU 0: X\n Link 0: 25 GB/s\n Link 0: 25 GB/s\n", "twice"},
		{"status dup gpu", status, "GPU 0: X\n Link 0: 25 GB/s\nGPU 0: X\n", "twice"},
		{"status huge link", status, "GPU 0: X\n Link 99999999999999999999: 25 GB/s\n", "link index"},
		{"errors none", errs, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "no GPU"},
		{"errors no value", errs, "GPU 0: X\n Link 0: Replay Errors\n", "<counter>: <value>"},
		{"errors empty value", errs, "GPU 0: X\n Link 0: Replay Errors:\n", "empty"},
		{"errors dup", errs, "GPU 0: X\n Link 0: CRC Errors: 1\n Link 0: CRC Errors: 2\n", "twice"},
		{"fabric empty", fabric, "", "empty"},
		{"fabric none", fabric, "No devices were found\n", "no GPU block"},
		{"fabric old driver", fabric, "GPU 00000000:53:00.0\n    Product Name : NVIDIA H100 80GB HBM3\n    Processes : None\n", "no Fabric section"},
		{"fabric no state", fabric, "GPU 00000000:53:00.0\n    Fabric\n        CliqueId : 0\n", "without State"},
		{"fabric two", fabric, "GPU 00000000:53:00.0\n    Fabric\n        State : Completed\n        Status : Success\n    Fabric\n", "two Fabric"},
		{"fabric second gpu old", fabric, "GPU 00000000:53:00.0\n    Fabric\n        State : Completed\n        Status : Success\nGPU 00000000:64:00.0\n    Processes : None\n", "00000000:64:00.0"},
	} {
		err := tt.parse(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.want)
		}
	}
}

func status(s string) error { _, err := ParseStatus(s); return err }
func errs(s string) error   { _, err := ParseErrors(s); return err }
func fabric(s string) error { _, err := ParseFabric(s); return err }

func FuzzParse(f *testing.F) {
	fixture.SeedFuzz(f, ".txt")
	f.Fuzz(func(t *testing.T, s string) {
		if st, err := ParseStatus(s); err == nil && len(st) == 0 {
			t.Fatal("status: no error, no GPU")
		}
		if c, err := ParseErrors(s); err == nil {
			if len(c) == 0 {
				t.Fatal("errors: no error, no GPU")
			}
			for _, u := range Unreadable(c) {
				for _, g := range c {
					for _, l := range g.Links {
						if _, counted := l.Counts[u.Counter]; counted && g.Index == u.GPU && l.Index == u.Link {
							t.Fatalf("%v is both a count and unreadable", u)
						}
					}
				}
			}
			if _, err := Delta(c, c); err != nil {
				t.Fatalf("Delta(x, x): %v", err)
			}
		}
		if fs, err := ParseFabric(s); err == nil {
			for _, fb := range fs {
				if fb.State == "" || fb.Status == "" || fb.Kind == FabricAbsent || fb.Kind == 0 {
					t.Fatalf("fabric without state: %+v", fb)
				}
				if (fb.Kind == FabricRegistered) != fb.Registered() {
					t.Fatalf("kind %v, registered %v", fb.Kind, fb.Registered())
				}
				if fb.Clique() == IDSet && strings.Trim(fb.CliqueID, "0-") == "" || fb.Cluster() == IDSet && strings.Trim(fb.ClusterUUID, "0-") == "" {
					t.Fatalf("all-zero id read as set: %+v", fb)
				}
				if fb.HealthSummary() != "" && fb.Health == nil {
					t.Fatalf("summary without health: %+v", fb)
				}
			}
			if len(fs) == 0 {
				t.Fatal("fabric: no error, no GPU")
			}
		}
	})
}

// TestFabricGenerations reads real nvidia-smi -q captures of each generation: an A100 on an
// NVSwitch board and a Hopper GPU off NVSwitch print "N/A" (not applicable, never a failed
// registration); Hopper on NVSwitch prints Completed/Success.
func TestFabricGenerations(t *testing.T) {
	for _, tt := range []struct {
		file       string
		gpus       int
		arch, name string
		kind       FabricKind
		clique     string
	}{
		{"query-8xA100-SXM4-40GB-535.129.03-nvswitch-fabric-na.txt", 8, "Ampere", "NVIDIA A100-SXM4-40GB", FabricNotApplicable, ""},
		{"query-1xGH200-550.127.05-hopper-no-nvswitch-fabric-na.txt", 1, "Hopper", "NVIDIA GH200 480GB", FabricNotApplicable, "N/A"},
		{"query-8xH100-535.183.01-fabric-completed-no-clique.txt", 8, "Hopper", "NVIDIA H100 80GB HBM3", FabricRegistered, ""},
		{"query-8xH100-565.57.01-fabric-completed.txt", 8, "Hopper", "NVIDIA H100 80GB HBM3", FabricRegistered, "0"},
		{"query-1xH200-550.90.12-fabric-completed-clique.txt", 1, "Hopper", "NVIDIA H200", FabricRegistered, "0"},
		{"query-1xH100-560.35.03-fabric-clique-health.txt", 1, "Hopper", "NVIDIA H100 80GB HBM3", FabricRegistered, "0"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			text := fixture.Read(t, tt.file)
			r, err := ParseFabricReport(text)
			if err != nil {
				t.Fatal(err)
			}
			if r.Attached != tt.gpus || len(r.GPUs) != tt.gpus || r.Incomplete() != nil {
				t.Fatalf("attached %d, %d blocks, %v", r.Attached, len(r.GPUs), r.Incomplete())
			}
			for _, f := range r.GPUs {
				if f.Kind != tt.kind || f.Architecture != tt.arch || f.ProductName != tt.name || f.CliqueID != tt.clique || f.Kind.String() == "unknown" {
					t.Errorf("%s: %+v", f.BusID, f)
				}
				if (f.Kind == FabricRegistered) != f.Registered() {
					t.Errorf("%s: kind %v but Registered %v", f.BusID, f.Kind, f.Registered())
				}
			}
			// ParseFabric reads the same, N/A included.
			if fs, err := ParseFabric(text); err != nil || len(fs) != tt.gpus {
				t.Errorf("ParseFabric: %d, %v", len(fs), err)
			}
		})
	}
	fs, _ := ParseFabric(fixture.Read(t, "derived-query-8xH100-535.183.01-fabric-in-progress-and-failed.txt"))
	if fs[2].Kind != FabricPending || fs[5].Kind != FabricFailed || fs[0].Kind != FabricRegistered {
		t.Errorf("derived kinds %v %v %v", fs[0].Kind, fs[2].Kind, fs[5].Kind)
	}
}

func TestFabricKinds(t *testing.T) {
	for _, tt := range []struct {
		present       bool
		state, status string
		want          FabricKind
	}{
		{true, "Completed", "Success", FabricRegistered},
		{true, "Completed", "NVML_ERROR_INSUFFICIENT_RESOURCES", FabricFailed},
		{true, "Completed", "Unknown Error", FabricUnreadable},
		{true, "N/A", "N/A", FabricNotApplicable},
		{true, "Not Supported", "N/A", FabricNotSupported},
		{true, "In Progress", "N/A", FabricPending},
		{true, "Not Started", "N/A", FabricPending},
		{true, "[Unknown Error]", "[Unknown Error]", FabricUnreadable},
		{true, "GPU is lost", "GPU is lost", FabricUnreadable},
		{false, "", "", FabricAbsent},
	} {
		if got := fabricKind(tt.present, tt.state, tt.status); got != tt.want {
			t.Errorf("fabricKind(%v, %q, %q) = %v, want %v", tt.present, tt.state, tt.status, got, tt.want)
		}
	}
}

// TestFabricIncomplete: a block missing against "Attached GPUs", or a GPU nvidia-smi could
// not open, is an error for ParseFabric and a MissingGPUsError from the report.
func TestFabricIncomplete(t *testing.T) {
	text := fixture.Read(t, "query-8xA100-SXM4-40GB-535.129.03-nvswitch-fabric-na.txt")
	cut := text[:strings.LastIndex(text, "\nGPU 00000000:")+1]
	if _, err := ParseFabric(cut); err == nil || !strings.Contains(err.Error(), "7 missing") {
		t.Errorf("7 of 8 blocks: %v", err)
	}
	r, err := ParseFabricReport(cut)
	var miss *nvsmi.MissingGPUsError
	if err != nil || len(r.GPUs) != 7 || !errors.As(r.Incomplete(), &miss) || !reflect.DeepEqual(miss.Gaps, []int{7}) {
		t.Errorf("report of 7 of 8: %d GPUs, %v, %v", len(r.GPUs), r.Incomplete(), err)
	}
	withHandle := "Unable to determine the device handle for GPU3: 0000:67:00.0: GPU is lost\n" + text
	if _, err := ParseFabric(withHandle); !errors.As(err, &miss) || miss.Handles[0].Index != 3 {
		t.Errorf("handle line: %v", err)
	}
	// No Fabric section: ParseFabric fails, the report keeps the GPU as FabricAbsent.
	old := "Attached GPUs : 1\nGPU 00000000:53:00.0\n    Product Name : NVIDIA A100-SXM4-40GB\n    Product Architecture : Ampere\n    Processes : None\n"
	if _, err := ParseFabric(old); err == nil || !strings.Contains(err.Error(), "no Fabric section") {
		t.Errorf("old driver: %v", err)
	}
	if r, err := ParseFabricReport(old); err != nil || r.GPUs[0].Kind != FabricAbsent || r.GPUs[0].Architecture != "Ampere" {
		t.Errorf("old driver report: %+v, %v", r, err)
	}
}

// TestUnreadableCounters: counters that read "N/A" or "[Unknown Error]" are kept apart,
// counted as not readable, and never compared as zero by Delta.
func TestUnreadableCounters(t *testing.T) {
	text := fixture.Read(t, "derived-errors-H100-18-links-unreadable.txt")
	c, err := ParseErrors(text)
	if err != nil {
		t.Fatal(err)
	}
	un := Unreadable(c)
	if Readable(c) != 0 || len(un) != 18*3 || un[0] != (CounterRef{GPU: 0, Link: 0, Counter: "CRC Errors", Raw: "[Unknown Error]"}) || un[1].Raw != "N/A" {
		t.Fatalf("readable %d, unreadable %d: %v", Readable(c), len(un), un[:2])
	}
	if un[0].String() != "GPU 0 link 0 CRC Errors: [Unknown Error]" {
		t.Errorf("String = %q", un[0])
	}
	if d, err := Delta(c, c); err != nil || len(d) != 0 {
		t.Errorf("Delta of unreadable counters = %v, %v: nothing to compare, and nothing reads as growth", d, err)
	}
	before, _ := ParseErrors(fixture.Read(t, "derived-errors-H100-18-links-before.txt"))
	if Readable(before) != 18*3 || len(Unreadable(before)) != 0 {
		t.Errorf("readable before: %d, %d", Readable(before), len(Unreadable(before)))
	}
	if _, err := Delta(before, c); err == nil {
		t.Error("Delta from readable to unreadable counters succeeded")
	}
	// Blackwell's BER values are not counts but are values, not unreadable.
	b, _ := ParseErrors(fixture.Read(t, "derived-errors-B300-595.91.07-blackwell-counter-names.txt"))
	if len(Unreadable(b)) != 0 || b[0].Links[1].Other["Effective BER"] != "15e-255" {
		t.Errorf("B300: unreadable %v", Unreadable(b))
	}
}

// TestStatusBlackwell reads a real B300 nvlink -s: 18 links at 53.125 GB/s on each of the 7
// GPUs listed. The listing has no gap: only the expected GPU count tells 7 from 8.
func TestStatusBlackwell(t *testing.T) {
	st, err := ParseStatus(fixture.Read(t, "status-7xB300-SXM6-610.57.04.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 7 {
		t.Fatalf("%d GPUs", len(st))
	}
	for i, g := range st {
		if g.Index != i || g.Name != "NVIDIA B300 SXM6 AC" || len(g.Links) != 18 || g.ActiveLinks() != 18 || g.Inactive() != nil || g.Links[17].GBps != 53.125 {
			t.Errorf("GPU %d: %s, %d links, %d active", i, g.Name, len(g.Links), g.ActiveLinks())
		}
	}
	pcie, _ := ParseStatus(fixture.Read(t, "status-2xH100-PCIe-nvlink-bridge-inactive-links.txt"))
	if !reflect.DeepEqual(pcie[0].Inactive(), []int{4, 5, 10, 11, 16, 17}) {
		t.Errorf("Inactive = %v", pcie[0].Inactive())
	}
}

// TestFabricMultiNode reads the Fabric section of GB200 trays (multi-node NVLink) beside
// single-node NVSwitch hosts, whose zeroed CliqueId and ClusterUUID are healthy
// (shared/docs/grace-blackwell.md 1.4; the derived fixtures' .source say how each was built).
func TestFabricMultiNode(t *testing.T) {
	type gpu struct {
		kind            FabricKind
		state, status   string
		clique, cluster IDKind
		summary         string
	}
	ok := gpu{FabricRegistered, "Completed", "Success", IDSet, IDSet, "Healthy"}
	for _, tt := range []struct {
		name, file string
		want       []gpu
		cliques    []string
	}{
		{"healthy GB200", "derived-query-4xGB200-570.172.08-mnnvl-healthy.txt", []gpu{ok, ok, ok, ok}, []string{"4026", "4026", "4026", "4026"}},
		{"H100 zero clique healthy", "query-1xH100-560.35.03-fabric-clique-health.txt",
			[]gpu{{FabricRegistered, "Completed", "Success", IDZero, IDZero, ""}}, []string{"0"}},
		{"H100 R535 without clique fields", "query-8xH100-535.183.01-fabric-completed-no-clique.txt",
			[]gpu{{FabricRegistered, "Completed", "Success", IDAbsent, IDAbsent, ""}}, nil},
		{"insufficient resources", "derived-query-4xGB200-570.172.08-insufficient-resources.txt",
			[]gpu{{FabricFailed, "Completed", "Insufficient Resources", IDZero, IDZero, "Not Supported"}}, []string{"0", "0", "0", "0"}},
		{"in progress and not started", "derived-query-4xGB200-570.172.08-in-progress-not-started.txt",
			[]gpu{ok, {FabricPending, "In Progress", "N/A", IDZero, IDZero, ""}, {FabricPending, "Not Started", "N/A", IDZero, IDZero, ""}, ok},
			[]string{"4026", "0", "0", "4026"}},
		{"not supported", "derived-query-4xGB200-570.172.08-not-supported.txt",
			[]gpu{{FabricNotSupported, "Not Supported", "N/A", IDZero, IDZero, ""}}, nil},
		{"health summary unhealthy", "derived-query-4xGB200-570.172.08-health-unhealthy.txt",
			[]gpu{ok, {FabricRegistered, "Completed", "Success", IDSet, IDSet, "Unhealthy"}, ok, ok}, []string{"4026", "2", "4026", "4026"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fs, err := ParseFabric(fixture.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range fs {
				w := tt.want[min(i, len(tt.want)-1)]
				got := gpu{f.Kind, f.State, f.Status, f.Clique(), f.Cluster(), f.HealthSummary()}
				if got != w {
					t.Errorf("GPU %d (%s): %+v, want %+v", i, f.BusID, got, w)
				}
				if tt.cliques != nil && f.CliqueID != tt.cliques[i] {
					t.Errorf("GPU %d CliqueId %q, want %q", i, f.CliqueID, tt.cliques[i])
				}
			}
			if tt.cliques != nil && len(fs) != len(tt.cliques) {
				t.Errorf("%d GPUs, want %d", len(fs), len(tt.cliques))
			}
		})
	}
}

func TestClassifyID(t *testing.T) {
	for in, want := range map[string]IDKind{
		"":                                     IDAbsent,
		"   ":                                  IDAbsent,
		"0":                                    IDZero,
		"00000000-0000-0000-0000-000000000000": IDZero,
		"4026":                                 IDSet,
		"2":                                    IDSet,
		"9c6f5af3-5b2e-4c1d-a8f7-31e0b6d4c2a9": IDSet,
		"9C6F5AF3-5B2E-4C1D-A8F7-31E0B6D4C2A9": IDSet,
		"N/A":                                  IDUnreadable,
		"Not Supported":                        IDUnreadable,
		"[Unknown Error]":                      IDUnreadable,
		"GPU is lost":                          IDUnreadable,
		"----":                                 IDUnreadable,
		"0x10":                                 IDUnreadable,
		"clique-7":                             IDUnreadable,
	} {
		if got := ClassifyID(in); got != want {
			t.Errorf("ClassifyID(%q) = %v, want %v", in, got, want)
		}
	}
}

func FuzzClassifyID(f *testing.F) {
	for _, s := range []string{"0", "4026", "00000000-0000-0000-0000-000000000000", "9c6f5af3-5b2e", "N/A", "", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k := ClassifyID(s)
		switch k {
		case IDAbsent:
			if strings.TrimSpace(s) != "" {
				t.Fatalf("%q absent", s)
			}
		case IDZero:
			if strings.Trim(strings.TrimSpace(s), "0-") != "" {
				t.Fatalf("%q zero", s)
			}
		case IDSet:
			if strings.Trim(strings.TrimSpace(s), "0-") == "" {
				t.Fatalf("%q set but all zeros", s)
			}
		case IDUnreadable:
		default:
			t.Fatalf("%q: kind %d", s, k)
		}
		if k.String() == "" {
			t.Fatal("no name")
		}
	})
}

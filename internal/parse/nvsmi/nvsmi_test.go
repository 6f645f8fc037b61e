package nvsmi

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

func TestParseTestdata(t *testing.T) {
	tests := []struct {
		file      string
		count     int
		name      string
		driver    string
		firstBus  string
		lastBus   string
		cudaTable string
	}{
		{"csv-noheader-8xB200-595.91.07-p6-b200.txt", 8, "NVIDIA B200", "595.91.07", "00000000:51:00.0", "00000000:87:00.0", ""},
		{"csv-header-8xH100-550.90.07-p5.txt", 8, "NVIDIA H100 80GB HBM3", "550.90.07", "00000000:53:00.0", "00000000:CA:00.0", ""},
		{"csv-noheader-8xA100-550.90.07-p4d.txt", 8, "NVIDIA A100-SXM4-40GB", "550.90.07", "00000000:10:1C.0", "00000000:A0:1D.0", ""},
		{"table-8xB200-580.95.05-noprocs.txt", 8, "NVIDIA B200", "580.95.05", "00000000:51:00.0", "00000000:87:00.0", "13.0"},
		{"table-8xH100-550.90.07-p5-buslayout-noprocs.txt", 8, "NVIDIA H100 80GB HBM3", "550.90.07", "00000000:53:00.0", "00000000:CA:00.0", "12.4"},
		{"table-p4d-8xA100-40GB-550.90.07-openshift.txt", 8, "NVIDIA A100-SXM4-40GB", "550.90.07", "00000000:10:1C.0", "00000000:A0:1D.0", "12.4"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			text := fixture.Read(t, tt.file)
			gpus, err := Parse(text)
			if err != nil {
				t.Fatal(err)
			}
			if len(gpus) != tt.count {
				t.Fatalf("got %d GPUs, want %d", len(gpus), tt.count)
			}
			for i, g := range gpus {
				if g.Index != i || g.Name != tt.name || g.DriverVersion != tt.driver {
					t.Errorf("GPU %d = %+v", i, g)
				}
			}
			if gpus[0].BusID != tt.firstBus || gpus[len(gpus)-1].BusID != tt.lastBus {
				t.Errorf("bus IDs %q..%q, want %q..%q", gpus[0].BusID, gpus[len(gpus)-1].BusID, tt.firstBus, tt.lastBus)
			}
			if got := CUDAVersion(text); got != tt.cudaTable {
				t.Errorf("CUDAVersion = %q, want %q", got, tt.cudaTable)
			}
		})
	}
}

func TestParseCSVVariants(t *testing.T) {
	gpus, err := ParseCSV("index, name, driver_version\n0, NVIDIA L4, 595.91.07\r\n")
	if err != nil || len(gpus) != 1 || gpus[0].BusID != "" || gpus[0].Name != "NVIDIA L4" {
		t.Fatalf("three-column CSV: %+v, %v", gpus, err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in, mention string
	}{
		{"empty", "", "no GPU"},
		{"header only", "index, name, driver_version, pci.bus_id\n", "no GPU"},
		{"no devices", "No devices were found\n", "line 1"},
		{"driver down", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n", "line 1"},
		{"not found", "sh: 1: nvidia-smi: not found\n", "line 1"},
		{"bad index", "x, NVIDIA B200, 595.91.07, 00000000:51:00.0\n", "index"},
		{"too many fields", "0, NVIDIA B200, 595.91.07, 00000000:51:00.0, extra\n", "line 1"},
		{"empty name", "0, , 595.91.07, 00000000:51:00.0\n", "empty name"},
		{"table no gpus", "+---+\n| NVIDIA-SMI 580.95.05  Driver Version: 580.95.05  CUDA Version: 13.0 |\n+---+\n", "no GPU"},
		{"table no driver", "+---+\n| NVIDIA-SMI 580.95.05 |\n+---+\n", "Driver Version"},
	}
	for _, tt := range tests {
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
		if err == nil {
			idx := make([]int, len(gpus))
			for i, g := range gpus {
				idx[i] = g.Index
			}
			if gaps := IndexGaps(idx); gaps != nil {
				t.Fatalf("no error but GPUs %v missing", gaps)
			}
		}
		for _, line := range strings.Split(s, "\n") {
			if h, ok := ParseHandleError(line); ok && h.Reason == "" {
				t.Fatalf("handle error without a reason: %q", line)
			}
		}
		_ = CUDAVersion(s)
	})
}

func TestMissingGPUs(t *testing.T) {
	_, err := Parse(fixture.Read(t, "derived-csv-noheader-8xA100-p4d-gpu3-fell-off.txt"))
	var miss *MissingGPUsError
	if !errors.As(err, &miss) || !reflect.DeepEqual(miss.Gaps, []int{3}) || !reflect.DeepEqual(miss.Listed, []int{0, 1, 2, 4, 5, 6, 7}) ||
		len(miss.Handles) != 1 || miss.Handles[0].BusID != "0000:20:1D.0" {
		t.Fatalf("error %v, want GPU 3 missing", err)
	}
	// The table form: a row missing and the handle line printed above the table.
	table := fixture.Read(t, "table-p4d-8xA100-40GB-550.90.07-openshift.txt")
	lines := strings.Split(table, "\n")
	var kept []string
	for i, l := range lines {
		if strings.HasPrefix(l, "|   3  ") { // GPU 3's three table lines
			lines[i+1], lines[i+2] = "", ""
			continue
		}
		kept = append(kept, l)
	}
	short := strings.Join(kept, "\n")
	if _, err := Parse(short); !errors.As(err, &miss) || !reflect.DeepEqual(miss.Gaps, []int{3}) {
		t.Errorf("table without GPU 3: %v", err)
	}
	if _, err := Parse("Unable to determine the device handle for GPU 0000:20:1D.0: GPU is lost\n" + table); !errors.As(err, &miss) || miss.Handles[0].Reason != "GPU is lost" {
		t.Errorf("table with a handle line: %v", err)
	}
	if _, err := Parse("[Unknown Error], [Unknown Error], [Unknown Error], [Unknown Error]\n"); !errors.As(err, &miss) || miss.UnreadableRows != 1 {
		t.Errorf("unreadable row: %v", err)
	}
	if _, err := Parse("0, NVIDIA B200, 595.91.07, 00000000:51:00.0\n0, NVIDIA B200, 595.91.07, 00000000:52:00.0\n"); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate index: %v", err)
	}
}

func TestParseHandleError(t *testing.T) {
	for _, tt := range []struct {
		line string
		want HandleError
	}{
		// Spellings from public captures.
		{"Unable to determine the device handle for GPU3: 0000:04:00.0: Unknown Error", HandleError{3, "0000:04:00.0", "Unknown Error"}},
		{"Unable to determine the device handle for GPU 0000:01:00.0: Not Found", HandleError{-1, "0000:01:00.0", "Not Found"}},
		{"Unable to determine the device handle for GPU0000:25:00.0: Unknown Error", HandleError{-1, "0000:25:00.0", "Unknown Error"}},
		{"Unable to determine the device handle for GPU2: Unknown Error", HandleError{2, "", "Unknown Error"}},
		{"Unable to determine the device handle for gpu 0000:65:00.0: GPU is lost.  Reboot the system to recover this GPU", HandleError{-1, "0000:65:00.0", "GPU is lost.  Reboot the system to recover this GPU"}},
		{"Unable to determine the device handle for GPU0", HandleError{0, "", "no reason given"}},
	} {
		got, ok := ParseHandleError(tt.line)
		if !ok || got != tt.want {
			t.Errorf("ParseHandleError(%q) = %+v, %v; want %+v", tt.line, got, ok, tt.want)
		}
	}
	if _, ok := ParseHandleError("0, NVIDIA B200, 595.91.07, 00000000:51:00.0"); ok {
		t.Error("a GPU row read as a handle error")
	}
	if s := (HandleError{Index: -1, Reason: "x"}).String(); s != "a GPU: x" {
		t.Errorf("String = %q", s)
	}
}

func TestIndexGaps(t *testing.T) {
	for _, tt := range []struct {
		in, want []int
	}{
		{nil, nil}, {[]int{0}, nil}, {[]int{2, 0, 1}, nil}, {[]int{1}, []int{0}}, {[]int{0, 3, 5}, []int{1, 2, 4}},
	} {
		if got := IndexGaps(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("IndexGaps(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if got := IndexGaps([]int{1 << 16}); len(got) != 1<<12 {
		t.Errorf("a huge index allocates %d gaps", len(got))
	}
}

package nvsmi

import (
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
		_ = CUDAVersion(s)
	})
}

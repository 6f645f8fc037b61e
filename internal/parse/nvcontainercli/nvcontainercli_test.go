package nvcontainercli

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

func TestParseInfoCaptures(t *testing.T) {
	tests := []struct {
		file        string
		nvrm, cuda  string
		uuids       []string
		firstModel  string
		firstBusLoc string
	}{
		{"info-4gpu-t4-fake-nvidia.txt", "575.57.08", "12.2",
			[]string{"GPU-0-FAKE-UUID", "GPU-1-FAKE-UUID", "GPU-2-FAKE-UUID", "GPU-3-FAKE-UUID"}, "NVIDIA Tesla T4", "00000000:00:00.0"},
		{"info-debug-rtx4090-ublue-hwe-166.txt", "535.113.01", "12.2",
			[]string{"GPU-cf22c558-a271-8c6a-eed9-067e58966643"}, "NVIDIA GeForce RTX 4090", "00000000:01:00.0"},
		{"info-debug-gtx1080-nvidia-docker-904.txt", "390.87", "9.1",
			[]string{"GPU-e572b8ee-523e-f7be-a359-33149791a02a"}, "GeForce GTX 1080 with Max-Q Design", "00000000:01:00.0"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			info, err := ParseInfo(fixture.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if info.NVRMVersion != tt.nvrm || info.CUDAVersion != tt.cuda {
				t.Errorf("versions %q %q, want %q %q", info.NVRMVersion, info.CUDAVersion, tt.nvrm, tt.cuda)
			}
			if !reflect.DeepEqual(info.UUIDs(), tt.uuids) {
				t.Errorf("UUIDs %v, want %v", info.UUIDs(), tt.uuids)
			}
			d := info.Devices[0]
			if d.Model != tt.firstModel || d.BusLocation != tt.firstBusLoc || d.Index != 0 || d.Minor != 0 {
				t.Errorf("first device %+v", d)
			}
			for i, d := range info.Devices {
				if d.Index != i {
					t.Errorf("device %d has index %d", i, d.Index)
				}
			}
		})
	}
}

func TestParseInfoRefuses(t *testing.T) {
	fourGPUs := fixture.Read(t, "info-4gpu-t4-fake-nvidia.txt")
	tests := []struct{ name, in, mention string }{
		{"null UUID (Jetson, no NVML)", fixture.Read(t, "info-null-uuid-jetson-nvidia-docker-1775.txt"), "no readable GPU UUID"},
		{"driver not loaded", fixture.Read(t, "info-init-error-driver-not-loaded.txt"), "initialization error: nvml error: driver not loaded"},
		{"driver error", "nvidia-container-cli: initialization error: driver error: failed to process request\n", "driver error: failed to process request"},
		{"empty", "", "NVRM version"},
		{"UUID twice", strings.Replace(fourGPUs, "GPU-1-FAKE-UUID", "GPU-0-FAKE-UUID", 1), "listed twice"},
		{"bad index", strings.Replace(fourGPUs, "Device Index:   2", "Device Index:   two", 1), "not a number"},
		{"bad minor", strings.Replace(fourGPUs, "Device Minor:   2", "Device Minor:   x", 1), "not a number"},
		{"not key value", fourGPUs + "garbage line\n", "not a \"key: value\" line"},
		{"no UUID line", strings.Replace(fourGPUs, "GPU UUID:       GPU-3-FAKE-UUID\n", "", 1), "device 3 has no readable GPU UUID"},
		{"shell not found", "sh: 1: nvidia-container-cli: not found\n", "NVRM version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseInfo(tt.in)
			if err == nil {
				t.Fatalf("ParseInfo succeeded, want an error mentioning %q", tt.mention)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not mention %q", err, tt.mention)
			}
		})
	}
}

func TestParseInfoNoGPU(t *testing.T) {
	info, err := ParseInfo("NVRM version:   595.91.07\nCUDA version:   13.2\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Devices) != 0 || info.NVRMVersion != "595.91.07" {
		t.Errorf("info %+v", info)
	}
}

func FuzzParseInfo(f *testing.F) {
	fixture.SeedFuzz(f, ".txt")
	f.Fuzz(func(t *testing.T, in string) {
		info, err := ParseInfo(in)
		if err != nil {
			return
		}
		if info.NVRMVersion == "" {
			t.Fatalf("accepted a report without a driver version: %q", in)
		}
		seen := map[string]bool{}
		for _, d := range info.Devices {
			if d.UUID == "" || seen[d.UUID] || d.Index < 0 {
				t.Fatalf("accepted device %+v of %q", d, in)
			}
			seen[d.UUID] = true
		}
	})
}

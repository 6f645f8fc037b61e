package probe

import (
	"maps"
	"testing"
)

func TestManifest(t *testing.T) {
	s := healthySections(t)
	want := map[string]string{
		"instance_type":           "p6-b200.48xlarge",
		"nvidia_driver":           "595.91.07",
		"nvidia_kmod_license":     "Dual MIT/GPL",
		"gpu_model":               "NVIDIA B200",
		"gpu_count":               "8",
		"fabricmanager":           "active",
		"efa_driver":              "3.3.0g",
		"efa_installer":           "1.50.0",
		"libfabric":               "2.6.0amzn1.0",
		"aws_ofi_nccl":            "1.21.1-1",
		"nvidia_imex":             "595.91.07-1",
		"gdrcopy":                 "2.5.1",
		"lustre":                  "2.15.6",
		"pci_gpu_count":           "8",
		"pci_gpu_ids":             "10de:2901 x8",
		"pci_nvswitch_count":      "0",
		"pci_nvlink_bridge_count": "2",
		"pci_efa_count":           "8",
		"pci_efa_ids":             "1d0f:efa3 x8",
	}
	if got := ParseHost(s).Manifest(); !maps.Equal(got, want) {
		t.Errorf("Manifest =\n%v\nwant\n%v", got, want)
	}

	// Failed commands leave their keys out; nothing is guessed.
	set(s, sectionModinfoNvidia, "modinfo: ERROR: Module nvidia not found.", 1)
	set(s, sectionEFAPackages, "cat: /opt/amazon/efa_installed_packages: No such file or directory", 1)
	set(s, sectionModinfoLustre, "", 1)
	set(s, sectionLfs, "lfs: not found", 127)
	set(s, sectionFabricManager, "inactive", 3)
	set(s, sectionPCI, "", 1)
	got := ParseHost(s).Manifest()
	for _, k := range []string{"efa_installer", "aws_ofi_nccl", "lustre", "cuda_driver", "kernel", "pci_gpu_count"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s = %q after its command failed", k, v)
		}
	}
	if got["nvidia_driver"] != "595.91.07" || got["libfabric"] != "2.6.0amzn1.0" || got["fabricmanager"] != "inactive" {
		t.Errorf("fallbacks: %v", got)
	}

	// The table format also yields the CUDA driver version.
	set(s, sectionNvidiaSMI, "| NVIDIA-SMI 595.91.07   Driver Version: 595.91.07   CUDA Version: 13.2 |\n+----+\n|   0  NVIDIA B200                    On  |   00000000:51:00.0 Off |                    0 |\n", 0)
	if got := ParseHost(s).Manifest(); got["cuda_driver"] != "13.2" || got["gpu_count"] != "1" {
		t.Errorf("table manifest = %v", got)
	}
}

func BenchmarkManifest(b *testing.B) {
	s := healthySections(b)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ParseHost(s).Manifest()
	}
}

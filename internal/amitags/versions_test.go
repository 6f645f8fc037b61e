package amitags

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func sampleBOM() bom.BOM {
	return bom.BOM{
		Kernel: "7.0.0-1014-aws", NextBootKernel: "7.0.0-1014-aws", InstanceType: "p5.48xlarge",
		Components: map[string]string{"nvidia_driver": "595.91.07", "cuda_driver": "13.2", "efa_installer": "1.50.0", "aws_ofi_nccl": "1.21.1"},
		Guarded: map[string]bom.Package{
			"linux-image-7.0.0-1014-aws": {Version: "7.0.0-1014.14", Held: true},
			"nvidia-container-toolkit":   {Version: "1.20.1-1"},
		},
		NCCL: &result.NCCLFigures{NCCLVersion: "2.28.9"},
	}
}

func TestVersionTags(t *testing.T) {
	got := VersionTags(sampleBOM())
	want := map[string]string{
		NvidiaDriver: "595.91.07", NvidiaDriverBranch: "595", CUDADriver: "13.2", EFAInstaller: "1.50.0", AWSOFINCCL: "1.21.1",
		ContainerToolkit: "1.20.1-1", NCCL: "2.28.9", Kernel: "7.0.0-1014-aws",
	}
	if len(got) != len(want) {
		t.Errorf("tags %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got[IMEX]; ok {
		t.Errorf("IMEX tagged without an IMEX package: %v", got)
	}
	// What the bill of materials does not record is not tagged, never guessed.
	empty := VersionTags(bom.BOM{Kernel: "6.8.0-1040-aws"})
	if len(empty) != 1 || empty[Kernel] != "6.8.0-1040-aws" {
		t.Errorf("tags of a bare BOM: %v", empty)
	}
	for k, v := range got {
		if len(k) > 128 || len(v) > 256 {
			t.Errorf("tag %s = %s exceeds EC2's key/value limits", k, v)
		}
	}
}

func TestWithVersions(t *testing.T) {
	data, err := sampleBOM().Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bom.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{Verified: "true"}
	got := WithVersions(base, path)
	if got[Verified] != "true" || got[NvidiaDriver] != "595.91.07" || got[Kernel] != "7.0.0-1014-aws" {
		t.Errorf("WithVersions = %v", got)
	}
	if len(base) != 1 {
		t.Errorf("WithVersions changed its argument: %v", base)
	}
	if got := WithVersions(base, filepath.Join(t.TempDir(), "missing.json")); len(got) != 1 {
		t.Errorf("an absent bill of materials added tags: %v", got)
	}
}

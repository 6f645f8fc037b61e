package dlamiresolve

import (
	"regexp"
	"strings"
	"testing"
)

func TestParseName(t *testing.T) {
	tests := []struct {
		name string
		want ParsedName
	}{
		{"Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20261002", ParsedName{"base-oss-nvidia-driver-gpu-ubuntu-24.04", false, "20261002"}},
		{"Deep Learning ARM64 Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20251205", ParsedName{"base-oss-nvidia-driver-gpu-ubuntu-24.04", true, "20251205"}},
		{"Deep Learning Base OSS Nvidia Driver GPU AMI (Amazon Linux 2023) 20250523", ParsedName{"base-oss-nvidia-driver-gpu-amazon-linux-2023", false, "20250523"}},
		{"Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.9 (Amazon Linux 2023) 20251010", ParsedName{"oss-nvidia-driver-gpu-pytorch-2.9-amazon-linux-2023", false, "20251010"}},
		{"Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)", ParsedName{"base-oss-nvidia-driver-gpu-ubuntu-22.04", false, ""}},
		{"ml-golden-20261003", ParsedName{"ml-golden-20261003", false, ""}},
		{"", ParsedName{}},
	}
	for _, tc := range tests {
		if got := ParseName(tc.name); got != tc.want {
			t.Errorf("ParseName(%q) = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParameterPath(t *testing.T) {
	p := ParameterPath("arm64", DefaultFlavor, "amazon-linux-2023")
	if p != "/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver-gpu-amazon-linux-2023/latest/ami-id" {
		t.Fatalf("ParameterPath = %q", p)
	}
	arch, typ, ok := SplitParameterPath(p)
	if !ok || arch != "arm64" || typ != "base-oss-nvidia-driver-gpu-amazon-linux-2023" {
		t.Fatalf("SplitParameterPath = %q %q %v", arch, typ, ok)
	}
	for _, bad := range []string{"/team/ami", "/aws/service/deeplearning/ami/x86_64", "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"} {
		if _, _, ok := SplitParameterPath(bad); ok {
			t.Errorf("SplitParameterPath(%q) ok", bad)
		}
	}
}

var amiTypeRE = regexp.MustCompile(`^[^\s()A-Z]*$`)

func FuzzParseName(f *testing.F) {
	for _, s := range []string{
		"Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20261002",
		"Deep Learning ARM64 Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20251205",
		"深度学习 ARM64 基础 OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20251205",
		"Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.9 (Amazon Linux 2023)*", "((", " 2026100 ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p := ParseName(name)
		if p.Build != "" && !ValidBuild(p.Build) {
			t.Fatalf("build %q is not YYYYMMDD", p.Build)
		}
		if p.Build != "" && !strings.HasSuffix(strings.TrimSpace(name), p.Build) {
			t.Fatalf("build %q not at the end of %q", p.Build, name)
		}
		if !amiTypeRE.MatchString(p.AMIType) {
			t.Fatalf("ami type %q holds space, parenthesis or upper case", p.AMIType)
		}
		if again := ParseName(strings.ToUpper(name)); again.ARM64 != p.ARM64 {
			t.Fatalf("ARM64 marker depends on case for %q", name)
		}
	})
}

func FuzzSplitParameterPath(f *testing.F) {
	f.Add("x86_64", "base-oss-nvidia-driver-gpu", "ubuntu-24.04")
	f.Add("arm64", "oss-nvidia-driver-gpu-pytorch-2.9", "amazon-linux-2023")
	f.Fuzz(func(t *testing.T, arch, flavor, os string) {
		if strings.ContainsAny(arch+flavor+os, "/\n") || arch == "" || flavor+os == "" {
			return
		}
		a, typ, ok := SplitParameterPath(ParameterPath(arch, flavor, os))
		if !ok || a != arch || typ != AMIType(flavor, os) {
			t.Fatalf("round trip of %q %q %q gave %q %q %v", arch, flavor, os, a, typ, ok)
		}
	})
}

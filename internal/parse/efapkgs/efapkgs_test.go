package efapkgs

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

func TestParseTestdata(t *testing.T) {
	tests := []struct {
		file      string
		installer string
		libfabric string
		ofi       string // "" = not listed
		packages  int
		extra     map[string]string
	}{
		{"efa_installed_packages-1.5.1-ubuntu-deb.txt", "1.5.1", "1.8.0amzn1.0", "", 21,
			map[string]string{"efa": "1.3.0-1.amzn1", "rdma-core": "25.0-1", "openmpi": "3.1.4-2", "libfabric-bin": "1.8.0amzn1.0"}},
		{"efa_installed_packages-1.22.0-rhel8-rpm.txt", "1.22.0", "1.17.0", "", 16,
			map[string]string{"efa-config": "1.13", "openmpi40-aws": "4.1.5", "python3-pyverbs": "43.0", "libfabric-aws-devel": "1.17.0"}},
		{"efa_installed_packages-1.50.0-ubuntu2404-synth.txt", "1.50.0", "2.6.0amzn1.0", "1.21.1-1", 12,
			map[string]string{"openmpi40-aws": "4.1.7-1", "openmpi50-aws": "5.0.9-1", "libpmix-aws": "4.2.8-1", "efa-nv-peermem": "1.2.2-1"}},
		{"efa_installed_packages-1.50.0-mixed-synth.txt", "1.50.0", "2.6.0amzn1.0", "1.21.1", 9,
			map[string]string{"efa-config": "", "libnccl-ofi": "", "aws-ofi-nccl": "1.21.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			in, err := Parse(fixture.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if in.InstallerVersion != tt.installer || in.DebugPackages != "no" {
				t.Errorf("installer %q debug %q", in.InstallerVersion, in.DebugPackages)
			}
			if v, _ := in.Libfabric(); v != tt.libfabric {
				t.Errorf("Libfabric = %q, want %q", v, tt.libfabric)
			}
			v, ok := in.AWSOFINCCL()
			if v != tt.ofi || ok != (tt.ofi != "") {
				t.Errorf("AWSOFINCCL = %q, %v, want %q", v, ok, tt.ofi)
			}
			if len(in.Packages) != tt.packages || len(in.Names) != tt.packages {
				t.Errorf("%d packages (%d names), want %d: %v", len(in.Packages), len(in.Names), tt.packages, in.Names)
			}
			for name, want := range tt.extra {
				got, listed := in.Packages[name]
				if !listed || got != want {
					t.Errorf("package %s = %q (listed %v), want %q", name, got, listed, want)
				}
			}
		})
	}
}

func TestParseKeyValueComponents(t *testing.T) {
	in, err := Parse("# EFA installer version: 1.50.0\nlibfabric: 2.6.0\naws-ofi-nccl=1.21.1\n# Some component: 3\n")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := in.Libfabric(); v != "2.6.0" {
		t.Errorf("Libfabric = %q", v)
	}
	if v, _ := in.AWSOFINCCL(); v != "1.21.1" {
		t.Errorf("AWSOFINCCL = %q", v)
	}
	if in.Header["Some component"] != "3" {
		t.Errorf("Header = %v", in.Header)
	}
}

func TestNameOnlyDoesNotEraseVersion(t *testing.T) {
	in, err := Parse("# EFA installer version: 1.50.0\naws-ofi-nccl 1.21.1\naws-ofi-nccl\n")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := in.AWSOFINCCL(); v != "1.21.1" {
		t.Errorf("AWSOFINCCL = %q", v)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, in, mention string }{
		{"empty", "", "empty"},
		{"missing", "cat: /opt/amazon/efa_installed_packages: No such file or directory\n", "No such file"},
		{"no header", "libfabric1-aws 2.6.0amzn1.0\n", "EFA installer version"},
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
		in, err := Parse(s)
		if err != nil {
			return
		}
		if in.InstallerVersion == "" {
			t.Fatal("no error but no installer version")
		}
		if len(in.Names) != len(in.Packages) {
			t.Fatalf("%d names but %d packages", len(in.Names), len(in.Packages))
		}
		_, _ = in.Libfabric()
		_, _ = in.AWSOFINCCL()
	})
}

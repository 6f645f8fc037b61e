package checks

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
)

func TestHostCommands(t *testing.T) {
	cmds := HostCommands(HostOptions{})
	byName := map[string]bundle.Command{}
	for _, c := range cmds {
		byName[c.Name] = c
		if strings.HasPrefix(c.Shell, "sudo ") && c.Name != HostSectionDmesg {
			t.Errorf("%s runs under sudo: %q", c.Name, c.Shell)
		}
		if c.TimeoutSeconds != bundle.DefaultTimeoutSeconds && c.Name != HostSectionIMDS {
			t.Errorf("%s timeout %d", c.Name, c.TimeoutSeconds)
		}
	}
	if len(byName) != len(cmds) {
		t.Fatal("duplicate command names")
	}
	if _, err := bundle.Script(cmds); err != nil {
		t.Fatal(err)
	}
	// Tools are called by absolute path, never by a login PATH.
	tools := map[string]string{
		HostSectionNvidiaSMI: "/usr/bin/nvidia-smi", HostSectionFabricManager: "/usr/bin/systemctl",
		HostSectionModinfoEFA: "/usr/sbin/modinfo", HostSectionFiInfo: "/opt/amazon/efa/bin/fi_info",
		HostSectionFiInfoVersion: "/opt/amazon/efa/bin/fi_info", HostSectionLsmod: "/usr/sbin/lsmod",
		HostSectionNVMe: "/usr/bin/findmnt", HostSectionLfs: "/usr/bin/lfs", HostSectionDmesg: "/usr/bin/dmesg",
	}
	for name, first := range tools {
		c := byName[name]
		if c.Tool == nil || c.Tool.Paths[0] != first || !strings.Contains(c.Shell, `"$1"`) {
			t.Errorf("%s: tool %+v shell %q", name, c.Tool, c.Shell)
		}
	}
	if s := byName[HostSectionFabricManager].Shell; s != `"$1" is-active nvidia-fabricmanager` {
		t.Errorf("fabric manager shell %q", s)
	}
	if s := byName[HostSectionPCI].Shell; !strings.Contains(s, "/sys/bus/pci/devices/*") || strings.Contains(s, "lspci") {
		t.Errorf("pci shell %q", s)
	}
	imds := byName[HostSectionIMDS]
	if imds.TimeoutSeconds > 3 || !strings.Contains(imds.Shell, "-m 1") || !strings.Contains(imds.Shell, "meta-data/instance-type") || !strings.Contains(imds.Shell, "X-aws-ec2-metadata-token") {
		t.Errorf("imds command %+v", imds)
	}
	custom := HostCommands(HostOptions{NVMePath: "/scratch dir", CheckTimeoutSeconds: 5})
	for _, c := range custom {
		if c.TimeoutSeconds > 5 {
			t.Errorf("%s timeout %d with CheckTimeoutSeconds 5", c.Name, c.TimeoutSeconds)
		}
		if c.Name == HostSectionNVMe && !strings.HasSuffix(c.Shell, "--mountpoint '/scratch dir'") {
			t.Errorf("nvme command %q does not quote the path", c.Shell)
		}
	}
}

func TestInstanceType(t *testing.T) {
	tests := []struct {
		name       string
		product    *bundle.Section
		imds       *bundle.Section
		configured string
		typ, src   string
	}{
		{"product_name", &bundle.Section{Output: "p6-b200.48xlarge\n"}, &bundle.Section{Output: "p5.48xlarge"}, "g5.xlarge", "p6-b200.48xlarge", "product_name"},
		{"xen falls to imds", &bundle.Section{Output: "HVM domU"}, &bundle.Section{Output: "p4d.24xlarge"}, "", "p4d.24xlarge", "imds"},
		{"imds html error falls to configured", &bundle.Section{Output: "HVM domU"}, &bundle.Section{Output: "<html>401 - Unauthorized</html>"}, "p5en.48xlarge", "p5en.48xlarge", "configured"},
		{"imds timeout", &bundle.Section{Output: "", ExitCode: 1}, &bundle.Section{Output: "", ExitCode: 28}, " g6e.48xlarge ", "g6e.48xlarge", "configured"},
		{"nothing", nil, nil, "", "", ""},
	}
	for _, tt := range tests {
		s := map[string]bundle.Section{}
		if tt.product != nil {
			s[HostSectionProductName] = *tt.product
		}
		if tt.imds != nil {
			s[HostSectionIMDS] = *tt.imds
		}
		typ, src := InstanceType(s, tt.configured)
		if typ != tt.typ || src != tt.src {
			t.Errorf("%s: InstanceType = %q, %q; want %q, %q", tt.name, typ, src, tt.typ, tt.src)
		}
	}
}

package probe

import (
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	judge "github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func TestHostCommands(t *testing.T) {
	cmds := hostCommands(Options{NVMePath: "/opt/dlami/nvme", CheckTimeout: settings.DefaultCheckTimeout})
	byName := map[string]bundle.Command{}
	for _, c := range cmds {
		byName[c.Name] = c
		if strings.Contains(c.Shell, "sudo ") && c.Name != sectionDmesg && c.Name != sectionJournalKernel {
			t.Errorf("%s runs under sudo: %q", c.Name, c.Shell)
		}
		if c.Timeout != settings.DefaultCheckTimeout && c.Name != sectionIMDS {
			t.Errorf("%s timeout %s", c.Name, c.Timeout)
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
		sectionNvidiaSMI: "/usr/bin/nvidia-smi", sectionFabricManager: "/usr/bin/systemctl",
		sectionModinfoEFA: "/usr/sbin/modinfo", sectionFiInfo: "/opt/amazon/efa/bin/fi_info",
		sectionFiInfoVersion: "/opt/amazon/efa/bin/fi_info", sectionLsmod: "/usr/sbin/lsmod",
		sectionNVMe: "/usr/bin/findmnt", sectionLfs: "/usr/bin/lfs", sectionDmesg: "/usr/bin/dmesg",
		sectionJournalKernel: "/usr/bin/journalctl",
	}
	for name, first := range tools {
		c := byName[name]
		if c.Tool == nil || c.Tool.Paths[0] != first || !strings.Contains(c.Shell, `"$1"`) {
			t.Errorf("%s: tool %+v shell %q", name, c.Tool, c.Shell)
		}
	}
	if s := byName[sectionFabricManager].Shell; s != `"$1" is-active nvidia-fabricmanager` {
		t.Errorf("fabric manager shell %q", s)
	}
	// The journal: this boot's kernel records, as root without prompting, and a failing root
	// read is not retried unprivileged (it would see no kernel record and exit 0).
	if s := byName[sectionJournalKernel].Shell; !strings.Contains(s, `sudo -n /bin/sh -c 'exec "$0" -k -b 0 -q --no-pager -o short-monotonic 2>&1' "$1" 2>/dev/null`) ||
		strings.Contains(s, "||") || !strings.Contains(s, "if sudo -n true") {
		t.Errorf("journal shell %q", s)
	}
	if s := byName[sectionPCI].Shell; !strings.Contains(s, "/sys/bus/pci/devices/*") || strings.Contains(s, "lspci") {
		t.Errorf("pci shell %q", s)
	}
	imds := byName[sectionIMDS]
	if imds.Timeout > 3*time.Second || !strings.Contains(imds.Shell, "-m 1") || !strings.Contains(imds.Shell, "meta-data/instance-type") || !strings.Contains(imds.Shell, "X-aws-ec2-metadata-token") {
		t.Errorf("imds command %+v", imds)
	}
	custom := hostCommands(Options{NVMePath: "/scratch dir", CheckTimeout: 5 * time.Second})
	for _, c := range custom {
		if c.Timeout > 5*time.Second {
			t.Errorf("%s timeout %s with CheckTimeout 5s", c.Name, c.Timeout)
		}
		if c.Name == sectionNVMe && !strings.HasSuffix(c.Shell, "--mountpoint '/scratch dir'") {
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
			s[sectionProductName] = *tt.product
		}
		if tt.imds != nil {
			s[sectionIMDS] = *tt.imds
		}
		tg := judge.Resolve(ParseHost(s), settings.Checks{}, tt.configured)
		typ, src := tg.InstanceType, tg.InstanceTypeSource
		if typ != tt.typ || src != tt.src {
			t.Errorf("%s: InstanceType = %q, %q; want %q, %q", tt.name, typ, src, tt.typ, tt.src)
		}
	}
}

func TestResolve(t *testing.T) {
	s := healthySections(t)
	tg := Resolve(s, settings.Expectations{}, "g5.xlarge")
	if tg.InstanceType != "p6-b200.48xlarge" || tg.InstanceTypeSource != "product_name" || tg.Profile == nil || tg.PCI == nil {
		t.Fatalf("Resolve = %+v", tg)
	}
	if len(tg.PCI.GPUs) != 8 || len(tg.PCI.EFA) != 8 || !tg.PCI.HasNVLinkFabric() {
		t.Errorf("PCI = %d GPUs, %d EFA, fabric %v", len(tg.PCI.GPUs), len(tg.PCI.EFA), tg.PCI.HasNVLinkFabric())
	}
	set(s, sectionPCI, "garbage line", 0)
	if tg := Resolve(s, settings.Expectations{}, ""); tg.PCI != nil || !strings.Contains(tg.PCIProblem, "pci: line 1") {
		t.Errorf("bad PCI: %+v", tg)
	}
	set(s, sectionPCI, "", 0)
	if tg := Resolve(s, settings.Expectations{}, ""); tg.PCI != nil || !strings.Contains(tg.PCIProblem, "lists no device") {
		t.Errorf("empty PCI: %q", tg.PCIProblem)
	}
}

package probe

import (
	"slices"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	judge "github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func TestEvaluateHostHealthyP6B200(t *testing.T) {
	checks := evaluate(t, nil, nil)
	var ids []string
	for _, c := range checks {
		ids = append(ids, c.ID)
		if c.Status != result.Pass {
			t.Errorf("%s: %s (expected %q, actual %q): %s\n%s", c.ID, c.Status, c.Expected, c.Actual, c.Message, c.Evidence)
		}
		if c.Expected == "" || c.Actual == "" || c.Basis == "" || c.DurationMS != 0 {
			t.Errorf("%s: basis %q expected %q actual %q duration %d", c.ID, c.Basis, c.Expected, c.Actual, c.DurationMS)
		}
	}
	hostIDs := []string{result.InstanceType, result.GPU, result.NvidiaDriver, result.Persistence, result.GPUMemory, result.NVLink, result.FabricManager,
		result.EFADriver, result.EFAInstaller, result.EFADevices, result.GDRCopy, result.Memlock, result.NVMe, result.Lustre, result.Xid}
	if !slices.Equal(ids, hostIDs) {
		t.Errorf("check order = %v, want %v", ids, hostIDs)
	}
	want := map[string]string{
		result.GPU:          "8 x NVIDIA B200; PCI: 8 NVIDIA GPUs",
		result.NvidiaDriver: "595.91.07 (license Dual MIT/GPL)",
		result.EFADriver:    "3.3.0g",
		result.EFAInstaller: "installer 1.50.0, libfabric 2.6.0amzn1.0, aws-ofi-nccl 1.21.1-1",
		result.EFADevices:   "8 PCI EFA functions, 8 rdmap devices, 8 fi_info domains",
		result.Memlock:      "unlimited for a new login of ubuntu",
		result.Lustre:       "lfs 2.15.6, module 2.15.6",
		result.Xid:          "none",
	}
	for _, c := range checks {
		if w, ok := want[c.ID]; ok && c.Actual != w {
			t.Errorf("%s actual = %q, want %q", c.ID, c.Actual, w)
		}
		if c.ID == result.EFADevices && !strings.Contains(c.Message, "ibp115s0f0") {
			t.Errorf("efa-devices message %q does not name the ignored ConnectX-7 port", c.Message)
		}
	}
	if b := statusOf(checks, result.GPU).Basis; b != "profile p6-b200.48xlarge" {
		t.Errorf("gpu basis %q", b)
	}
	if result.Failed(checks) {
		t.Error("result.Failed on a healthy host")
	}
}

// No check passes without comparing against an expectation: across healthy and broken hosts,
// typed and untyped, with and without settings, every pass names its basis, and a host
// with nothing to judge against never passes the checks that need one.
func TestNoPassWithoutBasis(t *testing.T) {
	type variant struct {
		name   string
		mutate func(map[string]bundle.Section)
		expect func(*settings.Expectations)
	}
	variants := []variant{
		{"healthy p6", nil, nil},
		{"no pins", nil, func(e *settings.Expectations) { *e = settings.Expectations{} }},
		{"unprofiled type", func(s map[string]bundle.Section) { set(s, sectionProductName, "p7-future.48xlarge", 0) }, func(e *settings.Expectations) { *e = settings.Expectations{} }},
		{"unprofiled, no PCI", func(s map[string]bundle.Section) {
			set(s, sectionProductName, "p7-future.48xlarge", 0)
			set(s, sectionPCI, "", 0)
		}, func(e *settings.Expectations) { *e = settings.Expectations{} }},
		{"counts off", nil, func(e *settings.Expectations) { e.GPUCount, e.EFACount = -1, -1 }},
		{"g5 without EFA", func(s map[string]bundle.Section) {
			set(s, sectionProductName, "g5.xlarge", 0)
			set(s, sectionPCI, pciLines(enaGroup(), pciGroup{1, "0x10de", "0x2237", "0x030200"}), 0)
			set(s, sectionNvidiaSMI, "0, NVIDIA A10G, 595.91.07, 00000000:00:1E.0", 0)
			set(s, sectionInfiniband, "ls: cannot access '/sys/class/infiniband/': No such file or directory", 2)
			set(s, sectionFiInfo, "fi_getinfo: -61 (No data available)", 1)
		}, func(e *settings.Expectations) { *e = settings.Expectations{} }},
	}
	for _, v := range variants {
		for _, c := range evaluate(t, v.mutate, v.expect) {
			if c.Status == result.Pass && (c.Basis == "" || strings.Contains(c.Expected, "not judged")) {
				t.Errorf("%s: %s passed without a basis (expected %q): %s", v.name, c.ID, c.Expected, c.Message)
			}
			if (c.Status == result.Warn) && !strings.Contains(c.Message, "expect.") && !strings.Contains(c.Message, "set ") {
				t.Errorf("%s: %s warns without naming the setting that would make it judge: %q", v.name, c.ID, c.Message)
			}
		}
	}
	// The PCI inventory unreadable and no profile: the GPU and EFA checks cannot pass.
	checks := evaluate(t, variants[3].mutate, variants[3].expect)
	for _, id := range []string{result.GPU, result.EFADevices, result.FabricManager} {
		if c := statusOf(checks, id); c.Status == result.Pass {
			t.Errorf("%s passed with no profile and no PCI inventory: %s", id, c.Message)
		}
	}
}

func TestEvaluateHostTolerates(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s map[string]bundle.Section)
		expect func(e *settings.Expectations)
	}{
		{"fi_info lists RDM and DGRAM", func(s map[string]bundle.Section) {
			set(s, sectionFiInfo, rdmLines(p6RDMAP, "-rdm", "-dgrm"), 0)
		}, nil},
		{"ignored Xid 31", func(s map[string]bundle.Section) {
			set(s, sectionDmesg, s[sectionDmesg].Output+"\n[ 9.1] NVRM: Xid (PCI:0000:51:00): 31, pid=1, name=python3, Ch 00000008, intr 00000000. MMU Fault", 0)
		}, func(e *settings.Expectations) { e.IgnoreXids = []int{31} }},
		{"nvidia-smi header line", func(s map[string]bundle.Section) {
			set(s, sectionNvidiaSMI, "index, name, driver_version, pci.bus_id\n"+s[sectionNvidiaSMI].Output, 0)
		}, nil},
		{"model case-insensitive", nil, func(e *settings.Expectations) { e.GPUModel = "nvidia b200" }},
		{"driver constraint", nil, func(e *settings.Expectations) { e.NvidiaDriver = ">= 595, < 596" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range evaluate(t, tt.mutate, tt.expect) {
				if c.Status != result.Pass {
					t.Errorf("%s: %s (actual %q): %s", c.ID, c.Status, c.Actual, c.Message)
				}
			}
		})
	}
}

// The healthy p6-b200 reading's Fabric sections read CliqueId 0 and a zero ClusterUUID, which
// is healthy on an HGX board: nvlink-fabric is not applicable there (and never fails it).
func TestNVLinkFabricNotApplicableOnP6B200(t *testing.T) {
	s := healthySections(t)
	var got []result.Check
	for _, c := range judge.JudgePhase(judge.PhaseHost, facts.Run{Host: ParseHost(s)}, Resolve(s, p6Pins(), "")) {
		if c.ID == result.NVLinkFabric {
			got = append(got, c)
		}
	}
	if len(got) != 1 || got[0].Status != result.Skip || !strings.Contains(got[0].Message, "not applicable") {
		t.Errorf("nvlink-fabric on p6-b200: %+v", got)
	}
}

func BenchmarkEvaluateHost(b *testing.B) {
	s := healthySections(b)
	// A busy kernel log: the healthy one repeated, with Xid lines mixed in.
	var log strings.Builder
	for i := 0; i < 2000; i++ {
		log.WriteString(s[sectionDmesg].Output)
		log.WriteString("\n[ 9.1] NVRM: Xid (PCI:0000:51:00): 31, pid=1, name=python3, Ch 00000008\n")
	}
	set(s, sectionDmesg, log.String(), 0)
	e := p6Pins()
	e.IgnoreXids = []int{31}
	tg := Resolve(s, e, "")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		hostChecks(ParseHost(s), tg)
	}
}

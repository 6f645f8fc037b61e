package probe

import (
	"slices"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func TestEFAFaults(t *testing.T) {
	runFaults(t, []fault{
		{"efa driver missing", func(s map[string]bundle.Section) {
			set(s, sectionModinfoEFA, "modinfo: ERROR: Module efa not found.", 1)
		}, nil, []string{result.EFADriver}, "exited 1"},
		{"efa driver too old", nil, func(e *settings.Expectations) { e.EFADriver = ">= 3.4" }, []string{result.EFADriver}, "does not satisfy"},
		{"efa section absent", func(s map[string]bundle.Section) { delete(s, sectionModinfoEFA) }, nil, []string{result.EFADriver}, "did not run"},
		{"libfabric pin", nil, func(e *settings.Expectations) { e.Libfabric = "2.7.0" }, []string{result.EFAInstaller}, "libfabric"},
		{"installer pin", nil, func(e *settings.Expectations) { e.EFAInstaller = "1.49.0" }, []string{result.EFAInstaller}, "EFA installer"},
		{"aws-ofi-nccl unrecorded", func(s map[string]bundle.Section) {
			set(s, sectionEFAPackages, "# EFA installer version: 1.50.0\nlibfabric1-aws 2.6.0amzn1.0\n", 0)
		}, nil, []string{result.EFAInstaller}, "not recorded"},
		{"installer record missing", func(s map[string]bundle.Section) {
			set(s, sectionEFAPackages, "cat: /opt/amazon/efa_installed_packages: No such file or directory", 1)
		}, nil, []string{result.EFAInstaller}, "exited 1"},
		{"7 rdmap vs 8 domains", func(s map[string]bundle.Section) {
			set(s, sectionInfiniband, strings.Join(append(slices.Clone(p6RDMAP[:7]), "ibp115s0f0"), "\n"), 0)
		}, nil, []string{result.EFADevices}, "7 EFA devices but fi_info lists 8"},
		{"7 rdmap and 7 domains, 8 on the bus", func(s map[string]bundle.Section) {
			set(s, sectionInfiniband, strings.Join(p6RDMAP[:7], "\n"), 0)
			set(s, sectionFiInfo, rdmLines(p6RDMAP[:7], "-rdm"), 0)
		}, nil, []string{result.EFADevices}, "the PCI bus has 8 EFA functions but /sys/class/infiniband has 7"},
		{"7 on the bus, profile says 8", func(s map[string]bundle.Section) {
			set(s, sectionPCI, pciLines(enaGroup(), gpuGroup(8), cx7Group(2), efaGroup(7)), 0)
			set(s, sectionInfiniband, strings.Join(p6RDMAP[:7], "\n"), 0)
			set(s, sectionFiInfo, rdmLines(p6RDMAP[:7], "-rdm"), 0)
		}, nil, []string{result.EFADevices}, "profile p6-b200.48xlarge says 8 EFA devices but the PCI bus has 7"},
		{"PCI mismatch", func(s map[string]bundle.Section) {
			set(s, sectionPCI, pciLines(enaGroup(), gpuGroup(8), cx7Group(2), efaGroup(9)), 0)
		}, nil, []string{result.EFADevices}, "the PCI bus has 9 EFA functions"},
		{"fi_info names another device", func(s map[string]bundle.Section) {
			set(s, sectionFiInfo, rdmLines(append(slices.Clone(p6RDMAP[:7]), "rdmap999s0"), "-rdm"), 0)
		}, nil, []string{result.EFADevices}, "rdmap999s0"},
		{"fi_info missing", func(s map[string]bundle.Section) {
			set(s, sectionFiInfo, "fi_info: not found (looked in /opt/amazon/efa/bin/fi_info, /usr/bin/fi_info, PATH)", 127)
		}, nil, []string{result.EFADevices}, "command not found"},
		{"fi_info no data", func(s map[string]bundle.Section) {
			set(s, sectionFiInfo, "fi_getinfo: -61 (No data available)", 1)
		}, nil, []string{result.EFADevices}, `libfabric's EFA provider is missing: ` + "`fi_info -p efa`" + ` answered "fi_getinfo: -61 (No data available)"`},
		{"fi_info exits 1 with other words", func(s map[string]bundle.Section) {
			set(s, sectionFiInfo, "fi_info: error while loading shared libraries: libfabric.so.1: cannot open shared object file", 1)
		}, nil, []string{result.EFADevices}, "exited 1"},
		{"fi_info times out", func(s map[string]bundle.Section) {
			set(s, sectionFiInfo, "fi_getinfo: -61 (No data available)", 124)
		}, nil, []string{result.EFADevices}, "timed out"},
		{"fi_info garbage", func(s map[string]bundle.Section) {
			set(s, sectionFiInfo, "\x00\x01 garbage ####", 0)
		}, nil, []string{result.EFADevices}, "no provider"},
		{"an EFA port DOWN", func(s map[string]bundle.Section) {
			set(s, sectionRDMAPorts, strings.Replace(s[sectionRDMAPorts].Output, "rdmap99s0 state 4: ACTIVE", "rdmap99s0 state 1: DOWN", 1), 0)
		}, nil, []string{result.EFADevices}, `rdmap99s0: port 1 is "1: DOWN", physical state "5: LinkUp"`},
		{"an EFA link Polling", func(s map[string]bundle.Section) {
			set(s, sectionRDMAPorts, strings.Replace(s[sectionRDMAPorts].Output, "rdmap83s0 phys_state 5: LinkUp", "rdmap83s0 phys_state 2: Polling", 1), 0)
		}, nil, []string{result.EFADevices}, `rdmap83s0: port 1 is "4: ACTIVE", physical state "2: Polling"`},
		{"port state section absent", func(s map[string]bundle.Section) { delete(s, sectionRDMAPorts) }, nil, []string{result.EFADevices}, "port state"},
		{"port state listing garbage", func(s map[string]bundle.Section) {
			set(s, sectionRDMAPorts, "sh: 1: cannot open /sys/class/infiniband: Permission denied", 0)
		}, nil, []string{result.EFADevices}, "port state"},
		{"no infiniband class", func(s map[string]bundle.Section) {
			set(s, sectionInfiniband, "ls: cannot access '/sys/class/infiniband/': No such file or directory", 2)
		}, nil, []string{result.EFADevices}, ""},
	})
}

// A host without EFA (g5.xlarge): nothing expected, nothing there: skipped, not failed, and
// not silently passed; EFA that appears unexpectedly must still agree.
func TestEFAAbsentWhereNoneIsExpected(t *testing.T) {
	g5 := func(s map[string]bundle.Section) {
		set(s, sectionProductName, "g5.xlarge", 0)
		set(s, sectionPCI, pciLines(enaGroup(), pciGroup{1, "0x10de", "0x2237", "0x030200"}), 0)
		set(s, sectionNvidiaSMI, "0, NVIDIA A10G, 595.91.07, 00000000:00:1E.0", 0)
		set(s, sectionFabricManager, "inactive", 3)
		set(s, sectionInfiniband, "ls: cannot access '/sys/class/infiniband/': No such file or directory", 2)
		set(s, sectionFiInfo, "fi_getinfo: -61 (No data available)", 1)
		set(s, sectionLfs, "lfs: not found (looked in /usr/bin/lfs, /usr/sbin/lfs, PATH)", 127)
		set(s, sectionModinfoLustre, "modinfo: ERROR: Module lustre not found.", 1)
		set(s, sectionGPUHealth, gpuHealthHeader+"\n"+"0, 00000000:00:1E.0, Enabled, Enabled, 0, [N/A], No, No, 1, 4, 16, 16, Not Active, Not Active, Not Active, Not Active", 0)
		set(s, sectionNVLinkStatus, "", 0)
		set(s, sectionNVLinkErrors, "", 0)
	}
	no := false
	checks := evaluate(t, g5, func(e *settings.Expectations) { *e = settings.Expectations{NVMe: &no} })
	want := map[string]result.Status{
		result.InstanceType: result.Pass, result.GPU: result.Pass, result.NvidiaDriver: result.Pass, result.Persistence: result.Pass, result.GPUMemory: result.Pass, result.NVLink: result.Skip, result.FabricManager: result.Skip,
		result.EFADriver: result.Pass, result.EFAInstaller: result.Pass, result.EFADevices: result.Skip,
		result.GDRCopy: result.Pass, result.Memlock: result.Pass, result.NVMe: result.Pass,
		result.Lustre: result.Skip, result.Xid: result.Pass,
	}
	for _, c := range checks {
		if c.Status != want[c.ID] {
			t.Errorf("%s: %s, want %s (actual %q): %s", c.ID, c.Status, want[c.ID], c.Actual, c.Message)
		}
	}
	withEFA := func(s map[string]bundle.Section) {
		g5(s)
		set(s, sectionInfiniband, "rdmap0s6\nrdmap0s7", 0)
		set(s, sectionFiInfo, rdmLines([]string{"rdmap0s6"}, "-rdm"), 0)
	}
	if c := statusOf(evaluate(t, withEFA, func(e *settings.Expectations) { *e = settings.Expectations{NVMe: &no} }), result.EFADevices); c.Status != result.Fail {
		t.Errorf("efa-devices with 2 rdmap, 1 domain and no PCI function: %s", c.Status)
	}
}

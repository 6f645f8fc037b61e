package checks

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// hostHealthy loads the healthy p6-b200 sections. The fixture format is this test's own
// ("=== <section> exit=N" then the output), so it does not depend on bundle's marker format.
func hostHealthy(t testing.TB) map[string]bundle.Section {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "host", "p6-b200-healthy.sections"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bundle.Section{}
	var name string
	var rc int
	var body []string
	flush := func() {
		if name != "" {
			hostSet(sections, name, strings.Join(body, "\n"), rc)
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "=== "); ok {
			flush()
			n, code, ok := strings.Cut(rest, " exit=")
			if !ok {
				t.Fatalf("bad fixture header %q", line)
			}
			if rc, err = strconv.Atoi(code); err != nil {
				t.Fatalf("bad fixture header %q", line)
			}
			name, body = n, nil
			continue
		}
		body = append(body, line)
	}
	flush()
	for _, c := range HostCommands(HostOptions{}) {
		if _, ok := sections[c.Name]; !ok {
			t.Fatalf("fixture lacks section %s", c.Name)
		}
	}
	return sections
}

// hostP6Expect is the p6-b200 profile plus the pins of the validated DLAMI build.
func hostP6Expect(t testing.TB) Expectations {
	t.Helper()
	p, ok := profile.Lookup("p6-b200.48xlarge")
	if !ok {
		t.Fatal("no p6-b200 profile")
	}
	yes := true
	return Merge(p, true, Expectations{
		NvidiaDriver:   "595.91.07",
		EFADriver:      ">= 3.3.0",
		EFAInstaller:   "1.50.0",
		Libfabric:      "2.6.0",
		AWSOFINCCL:     "1.21.1",
		GDRCopy:        ">= 2.4",
		Lustre:         "2.15.6",
		LustreExpected: &yes,
	})
}

var hostIDs = []string{
	result.GPU, result.NvidiaDriver, result.FabricManager, result.EFADriver, result.EFAInstaller,
	result.EFADevices, result.GDRCopy, result.Memlock, result.NVMe, result.Lustre, result.Xid,
}

func hostSet(s map[string]bundle.Section, name, out string, rc int) {
	s[name] = bundle.Section{Name: name, Output: out, ExitCode: rc, TimedOut: rc == 124 || rc == 137}
}

func hostRDMLines(domains []string, suffixes ...string) string {
	var b strings.Builder
	for _, d := range domains {
		for _, suf := range suffixes {
			typ := "FI_EP_RDM"
			if suf == "-dgrm" {
				typ = "FI_EP_DGRAM"
			}
			b.WriteString("provider: efa\n    fabric: efa\n    domain: " + d + suf + "\n    version: 206.0\n    type: " + typ + "\n    protocol: FI_PROTO_EFA\n")
		}
	}
	return b.String()
}

var hostP6RDMAP = []string{"rdmap82s0", "rdmap83s0", "rdmap99s0", "rdmap100s0", "rdmap118s0", "rdmap119s0", "rdmap135s0", "rdmap136s0"}

func TestEvaluateHostHealthyP6B200(t *testing.T) {
	checks := EvaluateHost(hostHealthy(t), hostP6Expect(t))
	var ids []string
	for _, c := range checks {
		ids = append(ids, c.ID)
		if c.Status != result.Pass {
			t.Errorf("%s: %s (expected %q, actual %q): %s\n%s", c.ID, c.Status, c.Expected, c.Actual, c.Message, c.Evidence)
		}
		if c.Expected == "" || c.Actual == "" || c.DurationMS != 0 {
			t.Errorf("%s: expected %q actual %q duration %d", c.ID, c.Expected, c.Actual, c.DurationMS)
		}
	}
	if !slices.Equal(ids, hostIDs) {
		t.Errorf("check order = %v, want %v", ids, hostIDs)
	}
	want := map[string]string{
		result.GPU:          "8 x NVIDIA B200",
		result.NvidiaDriver: "595.91.07 (license Dual MIT/GPL)",
		result.EFADriver:    "3.3.0g",
		result.EFAInstaller: "installer 1.50.0, libfabric 2.6.0amzn1.0, aws-ofi-nccl 1.21.1-1",
		result.EFADevices:   "8 rdmap devices, 8 fi_info domains",
		result.Memlock:      "unlimited",
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
	if result.Failed(checks) {
		t.Error("result.Failed on a healthy host")
	}
}

func TestEvaluateHostSingleFaults(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(s map[string]bundle.Section)
		expect  func(e *Expectations)
		fail    []string
		mention string // in the failing check's message
	}{
		{"7 GPUs", func(s map[string]bundle.Section) {
			lines := strings.Split(strings.TrimSpace(s[HostSectionNvidiaSMI].Output), "\n")
			hostSet(s, HostSectionNvidiaSMI, strings.Join(lines[:7], "\n"), 0)
		}, nil, []string{result.GPU}, "lists 7 GPUs"},
		{"wrong GPU model", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionNvidiaSMI, strings.ReplaceAll(s[HostSectionNvidiaSMI].Output, "NVIDIA B200", "NVIDIA H100 80GB HBM3"), 0)
		}, nil, []string{result.GPU}, "not B200"},
		{"driver library mismatch", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionNvidiaSMI, strings.ReplaceAll(s[HostSectionNvidiaSMI].Output, "595.91.07", "580.95.05"), 0)
		}, nil, []string{result.NvidiaDriver}, "mismatch"},
		{"driver pin", nil, func(e *Expectations) { e.NvidiaDriver = "580.95.05" }, []string{result.NvidiaDriver}, "does not satisfy"},
		{"bad driver setting", nil, func(e *Expectations) { e.NvidiaDriver = ">= abc" }, []string{result.NvidiaDriver}, "bad expected version"},
		{"fabric manager inactive", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionFabricManager, "inactive", 3)
		}, nil, []string{result.FabricManager}, "not active"},
		{"fabric manager failed", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionFabricManager, "failed", 3)
		}, nil, []string{result.FabricManager}, "not active"},
		{"efa driver missing", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionModinfoEFA, "modinfo: ERROR: Module efa not found.", 1)
		}, nil, []string{result.EFADriver}, "exited 1"},
		{"efa driver too old", nil, func(e *Expectations) { e.EFADriver = ">= 3.4" }, []string{result.EFADriver}, "does not satisfy"},
		{"efa section absent", func(s map[string]bundle.Section) {
			delete(s, HostSectionModinfoEFA)
		}, nil, []string{result.EFADriver}, "did not run"},
		{"libfabric pin", nil, func(e *Expectations) { e.Libfabric = "2.7.0" }, []string{result.EFAInstaller}, "libfabric"},
		{"installer pin", nil, func(e *Expectations) { e.EFAInstaller = "1.49.0" }, []string{result.EFAInstaller}, "EFA installer"},
		{"aws-ofi-nccl unrecorded", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionEFAPackages, "# EFA installer version: 1.50.0\nlibfabric1-aws 2.6.0amzn1.0\n", 0)
		}, nil, []string{result.EFAInstaller}, "not recorded"},
		{"installer record missing", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionEFAPackages, "cat: /opt/amazon/efa_installed_packages: No such file or directory", 1)
		}, nil, []string{result.EFAInstaller}, "exited 1"},
		{"7 rdmap vs 8 domains", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionInfiniband, strings.Join(append(slices.Clone(hostP6RDMAP[:7]), "ibp115s0f0"), "\n"), 0)
		}, nil, []string{result.EFADevices}, "7 EFA devices but fi_info lists 8"},
		{"7 rdmap and 7 domains", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionInfiniband, strings.Join(hostP6RDMAP[:7], "\n"), 0)
			hostSet(s, HostSectionFiInfo, hostRDMLines(hostP6RDMAP[:7], "-rdm"), 0)
		}, nil, []string{result.EFADevices}, "the instance type has 8"},
		{"fi_info names another device", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionFiInfo, hostRDMLines(append(slices.Clone(hostP6RDMAP[:7]), "rdmap999s0"), "-rdm"), 0)
		}, nil, []string{result.EFADevices}, "rdmap999s0"},
		{"fi_info missing", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionFiInfo, "sh: 1: fi_info: not found", 127)
		}, nil, []string{result.EFADevices}, "command not found"},
		{"fi_info no data", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionFiInfo, "fi_getinfo: -61 (No data available)", 1)
		}, nil, []string{result.EFADevices}, "exited 1"},
		{"fi_info garbage", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionFiInfo, "\x00\x01 garbage ####", 0)
		}, nil, []string{result.EFADevices}, "no provider"},
		{"no infiniband class", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionInfiniband, "ls: cannot access '/sys/class/infiniband/': No such file or directory", 2)
		}, nil, []string{result.EFADevices}, ""},
		{"no /dev/gdrdrv", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionGDRDevice, "stat: cannot statx '/dev/gdrdrv': No such file or directory", 1)
		}, nil, []string{result.GDRCopy}, "/dev/gdrdrv"},
		{"/dev/gdrdrv regular file", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionGDRDevice, "regular empty file", 0)
		}, nil, []string{result.GDRCopy}, "not a character device"},
		{"gdrdrv not loaded", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionLsmod, "Module                  Size  Used by\nnvidia              11698176  0\n", 0)
		}, nil, []string{result.GDRCopy}, "not loaded"},
		{"lsmod garbage", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionLsmod, "Segmentation fault", 0)
		}, nil, []string{result.GDRCopy}, "header"},
		{"gdrcopy pin", nil, func(e *Expectations) { e.GDRCopy = "2.6" }, []string{result.GDRCopy}, "GDRCopy"},
		{"memlock 64", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionMemlock, "64", 0)
		}, nil, []string{result.Memlock}, "limited"},
		{"memlock garbage", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionMemlock, "sh: ulimit: bad option", 0)
		}, nil, []string{result.Memlock}, "printed"},
		{"NVMe not mounted", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionNVMe, "", 1)
		}, nil, []string{result.NVMe}, "not mounted"},
		{"NVMe mounted elsewhere", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionNVMe, "/mnt /dev/nvme1n1 ext4 3.5T", 0)
		}, nil, []string{result.NVMe}, "unreadable"},
		{"lfs missing", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionLfs, "sh: 1: lfs: not found", 127)
		}, nil, []string{result.Lustre}, "command not found"},
		{"lustre module missing for kernel", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionModinfoLustre, "modinfo: ERROR: Module lustre not found.", 1)
		}, nil, []string{result.Lustre}, "running kernel"},
		{"lustre pin", nil, func(e *Expectations) { e.Lustre = "2.16" }, []string{result.Lustre}, "does not satisfy"},
		{"Xid 79", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionDmesg, s[HostSectionDmesg].Output+"\n[  812.000001] NVRM: Xid (PCI:0000:1e:00): 79, pid=4242, name=all_reduce_perf, GPU has fallen off the bus.", 0)
		}, nil, []string{result.Xid}, "retire the instance"},
		{"SXid fatal", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionDmesg, s[HostSectionDmesg].Output+"\n[ 9.1] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up", 0)
		}, nil, []string{result.Xid}, "SXid 20034"},
		{"unreadable Xid line", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionDmesg, s[HostSectionDmesg].Output+"\n[ 9.1] NVRM: Xid (PCI:0000:1e", 0)
		}, nil, []string{result.Xid}, "unreadable"},
		{"Xid 79 not ignored by other numbers", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionDmesg, s[HostSectionDmesg].Output+"\n[ 9.1] NVRM: Xid (PCI:0000:1e:00): 79, GPU has fallen off the bus.", 0)
		}, func(e *Expectations) { e.IgnoreXids = []int{31, 43} }, []string{result.Xid}, "Xid 79"},
		{"dmesg not permitted", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionDmesg, "dmesg: read kernel buffer failed: Operation not permitted", 1)
		}, nil, []string{result.Xid}, "sudo"},
		{"dmesg timed out", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionDmesg, "", 124)
		}, nil, []string{result.Xid}, "timed out"},
		{"nvidia-smi missing", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionNvidiaSMI, "sh: 1: nvidia-smi: not found", 127)
		}, nil, []string{result.GPU, result.NvidiaDriver}, "command not found"},
		{"nvidia-smi garbage", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionNvidiaSMI, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", 0)
		}, nil, []string{result.GPU, result.NvidiaDriver}, "line 1"},
		{"nvidia-smi timed out", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionNvidiaSMI, "", 137)
		}, nil, []string{result.GPU, result.NvidiaDriver}, "timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checks := hostEvaluate(t, tt.mutate, tt.expect)
			if len(checks) != len(hostIDs) {
				t.Fatalf("%d checks, want %d", len(checks), len(hostIDs))
			}
			for _, c := range checks {
				wantFail := slices.Contains(tt.fail, c.ID)
				switch {
				case wantFail && c.Status != result.Fail:
					t.Errorf("%s: %s, want fail (actual %q: %s)", c.ID, c.Status, c.Actual, c.Message)
				case !wantFail && c.Status != result.Pass:
					t.Errorf("%s: %s, want pass (actual %q: %s)", c.ID, c.Status, c.Actual, c.Message)
				case wantFail:
					if c.Evidence == "" {
						t.Errorf("%s failed without evidence", c.ID)
					}
					if len(c.Evidence) > 10*hostEvidenceMax {
						t.Errorf("%s evidence is %d bytes", c.ID, len(c.Evidence))
					}
					if !strings.Contains(c.Message, tt.mention) {
						t.Errorf("%s message %q does not mention %q", c.ID, c.Message, tt.mention)
					}
				}
			}
		})
	}
}

// hostEvaluate judges the healthy P6-B200 sections against its profile after mutate changes
// the sections and expect the expectations (either may be nil).
func hostEvaluate(t *testing.T, mutate func(map[string]bundle.Section), expect func(*Expectations)) []result.Check {
	t.Helper()
	s := hostHealthy(t)
	if mutate != nil {
		mutate(s)
	}
	exp := hostP6Expect(t)
	if expect != nil {
		expect(&exp)
	}
	return EvaluateHost(s, exp)
}

func TestEvaluateHostTolerates(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s map[string]bundle.Section)
		expect func(e *Expectations)
	}{
		{"fi_info lists RDM and DGRAM", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionFiInfo, hostRDMLines(hostP6RDMAP, "-rdm", "-dgrm"), 0)
		}, nil},
		{"ignored Xid 31", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionDmesg, s[HostSectionDmesg].Output+"\n[ 9.1] NVRM: Xid (PCI:0000:51:00): 31, pid=1, name=python3, Ch 00000008, intr 00000000. MMU Fault", 0)
		}, func(e *Expectations) { e.IgnoreXids = []int{31} }},
		{"nvidia-smi header line", func(s map[string]bundle.Section) {
			hostSet(s, HostSectionNvidiaSMI, "index, name, driver_version, pci.bus_id\n"+s[HostSectionNvidiaSMI].Output, 0)
		}, nil},
		{"model case-insensitive", nil, func(e *Expectations) { e.GPUModel = "nvidia b200" }},
		{"driver constraint", nil, func(e *Expectations) { e.NvidiaDriver = ">= 595, < 596" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range hostEvaluate(t, tt.mutate, tt.expect) {
				if c.Status != result.Pass {
					t.Errorf("%s: %s (actual %q): %s", c.ID, c.Status, c.Actual, c.Message)
				}
			}
		})
	}
}

// A G type without NVSwitch, EFA, Lustre: what is not expected is skipped, never failed, and
// never silently passed when absent.
func TestEvaluateHostNotExpectedIsSkipped(t *testing.T) {
	s := hostHealthy(t)
	hostSet(s, HostSectionProductName, "g5.xlarge", 0)
	hostSet(s, HostSectionNvidiaSMI, "0, NVIDIA A10G, 595.91.07, 00000000:00:1E.0", 0)
	hostSet(s, HostSectionFabricManager, "inactive", 3)
	hostSet(s, HostSectionInfiniband, "ls: cannot access '/sys/class/infiniband/': No such file or directory", 2)
	hostSet(s, HostSectionFiInfo, "fi_getinfo: -61 (No data available)", 1)
	hostSet(s, HostSectionLfs, "sh: 1: lfs: not found", 127)
	hostSet(s, HostSectionModinfoLustre, "modinfo: ERROR: Module lustre not found.", 1)
	p, ok := profile.Lookup("g5.xlarge")
	if !ok {
		t.Fatal("no g5.xlarge profile")
	}
	no := false
	exp := Merge(p, true, Expectations{NVMe: &no})
	hostSet(s, HostSectionNVMe, "", 1)
	want := map[string]result.Status{
		result.GPU: result.Pass, result.NvidiaDriver: result.Pass, result.FabricManager: result.Skip,
		result.EFADriver: result.Pass, result.EFAInstaller: result.Pass, result.EFADevices: result.Skip,
		result.GDRCopy: result.Pass, result.Memlock: result.Pass, result.NVMe: result.Skip,
		result.Lustre: result.Skip, result.Xid: result.Pass,
	}
	for _, c := range EvaluateHost(s, exp) {
		if c.Status != want[c.ID] {
			t.Errorf("%s: %s, want %s (actual %q): %s", c.ID, c.Status, want[c.ID], c.Actual, c.Message)
		}
	}
	// The same host where EFA appears without being expected: counts must still agree.
	hostSet(s, HostSectionInfiniband, "rdmap0s6\nrdmap0s7", 0)
	hostSet(s, HostSectionFiInfo, hostRDMLines([]string{"rdmap0s6"}, "-rdm"), 0)
	for _, c := range EvaluateHost(s, exp) {
		if c.ID == result.EFADevices && c.Status != result.Fail {
			t.Errorf("efa-devices with 2 rdmap and 1 domain: %s", c.Status)
		}
	}
}

func TestEvaluateHostNoProfile(t *testing.T) {
	exp := Merge(profile.Profile{}, false, Expectations{})
	if exp.NVMePath != DefaultNVMePath || exp.FabricManager != nil || exp.GPUCount != 0 {
		t.Fatalf("Merge without profile = %+v", exp)
	}
	for _, c := range EvaluateHost(hostHealthy(t), exp) {
		switch c.ID {
		case result.GPU:
			if c.Status != result.Pass || !strings.Contains(c.Message, "not judged") {
				t.Errorf("gpu without profile: %s %q", c.Status, c.Message)
			}
		case result.EFADevices:
			if c.Status != result.Pass || !strings.Contains(c.Message, "count not judged") {
				t.Errorf("efa-devices without profile: %s %q", c.Status, c.Message)
			}
		}
		if c.Status == result.Fail {
			t.Errorf("%s failed without expectations: %s", c.ID, c.Message)
		}
	}
}

func TestHostCommands(t *testing.T) {
	cmds := HostCommands(HostOptions{})
	byName := map[string]bundle.Command{}
	for _, c := range cmds {
		byName[c.Name] = c
		if strings.HasPrefix(c.Shell, "sudo ") && c.Name != HostSectionDmesg {
			t.Errorf("%s runs under sudo: %q", c.Name, c.Shell)
		}
	}
	if len(byName) != len(cmds) {
		t.Fatal("duplicate command names")
	}
	if _, err := bundle.Script(cmds); err != nil {
		t.Fatal(err)
	}
	exact := map[string]string{
		HostSectionProductName:   "cat /sys/devices/virtual/dmi/id/product_name",
		HostSectionNvidiaSMI:     "nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader",
		HostSectionFabricManager: "systemctl is-active nvidia-fabricmanager",
		HostSectionModinfoEFA:    "modinfo -F version efa",
		HostSectionModinfoNvidia: "modinfo -F version nvidia",
		HostSectionNvidiaLicense: "modinfo -F license nvidia",
		HostSectionModinfoGDRDrv: "modinfo -F version gdrdrv",
		HostSectionModinfoLustre: "modinfo -F version lustre",
		HostSectionEFAPackages:   "cat /opt/amazon/efa_installed_packages",
		HostSectionInfiniband:    "ls -1 /sys/class/infiniband/",
		HostSectionFiInfo:        "fi_info -p efa -t FI_EP_RDM",
		HostSectionFiInfoVersion: "fi_info --version",
		HostSectionLsmod:         "lsmod",
		HostSectionGDRDevice:     "stat -c %F /dev/gdrdrv",
		HostSectionMemlock:       "ulimit -l",
		HostSectionNVMe:          "findmnt -n -o TARGET,SOURCE,FSTYPE,SIZE --mountpoint /opt/dlami/nvme",
		HostSectionLfs:           "lfs --version",
		HostSectionDmesg:         "sudo -n dmesg 2>/dev/null || dmesg",
	}
	for name, shell := range exact {
		if got := byName[name].Shell; got != shell {
			t.Errorf("%s = %q, want %q", name, got, shell)
		}
		if byName[name].TimeoutSeconds != 30 {
			t.Errorf("%s timeout %d, want 30", name, byName[name].TimeoutSeconds)
		}
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
	sec := func(out string, rc int) bundle.Section { return bundle.Section{Output: out, ExitCode: rc} }
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
	_ = sec
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

func TestMerge(t *testing.T) {
	p, _ := profile.Lookup("p6-b200.48xlarge")
	no := false
	user := Expectations{GPUCount: 4, EFACount: -1, FabricManager: &no, BusBWFloorGBps: 500, IgnoreXids: []int{31}}
	got := Merge(p, true, user)
	if got.GPUCount != 4 || got.EFACount != -1 || *got.FabricManager || got.BusBWFloorGBps != 500 {
		t.Errorf("user settings lost: %+v", got)
	}
	if got.GPUModel != "B200" || got.InstanceType != "p6-b200.48xlarge" || got.NVMe == nil || !*got.NVMe || got.NVMePath != DefaultNVMePath {
		t.Errorf("profile defaults missing: %+v", got)
	}
	if got.LustreExpected != nil {
		t.Error("profile must not decide Lustre (it depends on FSx use)")
	}
	got.IgnoreXids[0] = 99
	if user.IgnoreXids[0] != 31 {
		t.Error("Merge aliases the user's IgnoreXids")
	}
	full := Merge(p, true, Expectations{})
	if full.GPUCount != 8 || full.EFACount != 8 || !*full.FabricManager || full.BusBWFloorGBps != 600 {
		t.Errorf("Merge(p6, empty) = %+v", full)
	}
	if none := Merge(p, false, Expectations{NVMePath: "/x"}); none.GPUCount != 0 || none.NVMePath != "/x" {
		t.Errorf("Merge(not found) = %+v", none)
	}
}

func TestHostModelMatches(t *testing.T) {
	tests := []struct {
		name, model string
		want        bool
	}{
		{"NVIDIA B200", "B200", true},
		{"NVIDIA B200", "b200", true},
		{"NVIDIA H100 80GB HBM3", "H100", true},
		{"NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB", true},
		{"NVIDIA A100-SXM4-80GB", "A100-SXM4-40GB", false},
		{"NVIDIA L40S", "L4", false},
		{"NVIDIA L4", "L4", true},
		{"NVIDIA L40S", "L40S", true},
		{"NVIDIA H200", "H100", false},
		{"NVIDIA GB200", "B200", false},
		{"anything", "", true},
	}
	for _, tt := range tests {
		if got := hostModelMatches(tt.name, tt.model); got != tt.want {
			t.Errorf("hostModelMatches(%q, %q) = %v", tt.name, tt.model, got)
		}
	}
}

func TestManifest(t *testing.T) {
	s := hostHealthy(t)
	want := map[string]string{
		"instance_type":       "p6-b200.48xlarge",
		"nvidia_driver":       "595.91.07",
		"nvidia_kmod_license": "Dual MIT/GPL",
		"gpu_model":           "NVIDIA B200",
		"gpu_count":           "8",
		"fabricmanager":       "active",
		"efa_driver":          "3.3.0g",
		"efa_installer":       "1.50.0",
		"libfabric":           "2.6.0amzn1.0",
		"aws_ofi_nccl":        "1.21.1-1",
		"gdrcopy":             "2.5.1",
		"lustre":              "2.15.6",
	}
	if got := Manifest(s); !maps.Equal(got, want) {
		t.Errorf("Manifest =\n%v\nwant\n%v", got, want)
	}

	// Failed commands leave their keys out; nothing is guessed.
	hostSet(s, HostSectionModinfoNvidia, "modinfo: ERROR: Module nvidia not found.", 1)
	hostSet(s, HostSectionEFAPackages, "cat: /opt/amazon/efa_installed_packages: No such file or directory", 1)
	hostSet(s, HostSectionModinfoLustre, "", 1)
	hostSet(s, HostSectionLfs, "sh: 1: lfs: not found", 127)
	hostSet(s, HostSectionFabricManager, "inactive", 3)
	got := Manifest(s)
	for _, k := range []string{"efa_installer", "aws_ofi_nccl", "lustre", "cuda_driver", "kernel"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s = %q after its command failed", k, v)
		}
	}
	if got["nvidia_driver"] != "595.91.07" || got["libfabric"] != "2.6.0amzn1.0" || got["fabricmanager"] != "inactive" {
		t.Errorf("fallbacks: %v", got)
	}

	// The table format also yields the CUDA driver version.
	hostSet(s, HostSectionNvidiaSMI, "| NVIDIA-SMI 595.91.07   Driver Version: 595.91.07   CUDA Version: 13.2 |\n+----+\n|   0  NVIDIA B200                    On  |   00000000:51:00.0 Off |                    0 |\n", 0)
	if got := Manifest(s); got["cuda_driver"] != "13.2" || got["gpu_count"] != "1" {
		t.Errorf("table manifest = %v", got)
	}
}

func BenchmarkEvaluateHost(b *testing.B) {
	s := hostHealthy(b)
	// A busy kernel log: the healthy one repeated, with Xid lines mixed in.
	var log strings.Builder
	for i := 0; i < 2000; i++ {
		log.WriteString(s[HostSectionDmesg].Output)
		log.WriteString("\n[ 9.1] NVRM: Xid (PCI:0000:51:00): 31, pid=1, name=python3, Ch 00000008\n")
	}
	hostSet(s, HostSectionDmesg, log.String(), 0)
	exp := hostP6Expect(b)
	exp.IgnoreXids = []int{31}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		EvaluateHost(s, exp)
	}
}

func BenchmarkManifest(b *testing.B) {
	s := hostHealthy(b)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Manifest(s)
	}
}

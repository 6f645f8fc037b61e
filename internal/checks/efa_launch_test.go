package checks

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// An EFA-capable host whose launch attached no EFA interface (what amazon-ebs launches, on any
// type) cannot have its EFA devices, their traffic or GPUDirect RDMA judged: each of those
// checks warns, naming where they are proven, and never passes. A host with some EFA devices
// but fewer than expected fails as ever, and a launch that knows what it attached is judged
// against exactly that.
func TestEFAWhereTheLaunchGaveIt(t *testing.T) {
	gpus := strings.Repeat("0000:51:00.0 0x10de 0x2901 0x030200\n", 8)
	efa := func(n int) string { return strings.Repeat("0000:82:00.0 0x1d0f 0xefa3 0x020000\n", n) }
	p6, _ := profile.Lookup("p6-b200.48xlarge")
	host := func(t *testing.T, n int) (facts.Host, facts.PCIInventory) {
		t.Helper()
		inv, err := pciParse(gpus + efa(n))
		if err != nil {
			t.Fatal(err)
		}
		var devs, domains []string
		for i := 0; i < n; i++ {
			d := "rdmap" + string(rune('a'+i)) + "s0"
			devs, domains = append(devs, d), append(domains, d)
		}
		h := facts.Host{PCI: facts.Read(inv, ""), RDMA: facts.Read(facts.RDMADevices{EFA: devs}, ""), RDMAPorts: upPorts(t, devs)}
		if n == 0 {
			h.Domains = facts.Unread[[]string]("fi_info: no provider found (exit 61)", "")
		} else {
			h.Domains = facts.Read(domains, "")
		}
		return h, inv
	}
	target := func(inv facts.PCIInventory, l Launch) Target {
		return Target{InstanceType: "p6-b200.48xlarge", Profile: &p6, PCI: &inv, Launch: l}
	}
	for _, tc := range []struct {
		name   string
		efa    int
		launch Launch
		status result.Status
		want   string
	}{
		{"amazon-ebs build: none attached", 0, Launch{}, result.Warn, "not judged here: no EFA interface was attached at launch"},
		{"half attached: fewer than the profile", 4, Launch{}, result.Fail, "says 8 EFA devices but the PCI bus has 4"},
		{"all attached by a builder that could", 8, Launch{}, result.Pass, ""},
		{"verification with efa = none", 0, Launch{Known: true, Setting: `efa = "none"`}, result.Warn, `the launch attached no EFA interface (efa = "none")`},
		{"verification attached 8, all present", 8, Launch{Known: true, EFA: 8, Setting: `efa = "all"`}, result.Pass, ""},
		{"verification attached 8, none came up", 0, Launch{Known: true, EFA: 8, Setting: `efa = "all"`}, result.Fail, ""},
		{"verification attached 2 of 8 by a count", 2, Launch{Known: true, EFA: 2, Setting: "efa = 2"}, result.Pass, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, inv := host(t, tc.efa)
			tg := target(inv, tc.launch)
			c := judgeEFADevices(facts.Run{Host: h}, tg)
			if c.Status != tc.status || !strings.Contains(c.Message, tc.want) {
				t.Errorf("efa-devices %s %q (%s), want %s with %q", c.Status, c.Message, c.Basis, tc.status, tc.want)
			}
			if tc.status != result.Warn {
				return
			}
			if !strings.Contains(c.Message, "post-processor") {
				t.Errorf("the warning does not say where the devices are proven: %q", c.Message)
			}
			run := facts.Run{Host: h, GDR: facts.NCCLRun{NotApplicable: "no EFA on this host: GPUDirect RDMA does not apply"}}
			for _, c := range []result.Check{judgeEFATraffic(run, tg), judgeGPUDirectRDMA(run, tg)} {
				if c.Status != result.Warn || !strings.Contains(c.Message, "not judged here") {
					t.Errorf("%s on a host without EFA attached: %s %q", c.ID, c.Status, c.Message)
				}
			}
			// NCCL's own choice (sockets, with no EFA device) is reported with a warning: the
			// EFA rule is not judged, and the run is not passed as if EFA had been proven.
			x := tg.NCCLExpect()
			cs, _ := judgeNCCLOutput(ncclTestdata(t, "derived-socket-fallback.txt"), 0, false, x, settings.NCCL{})
			if cs[2].Status != result.Warn || !strings.Contains(cs[2].Message, "EFA rule is not judged here") {
				t.Errorf("nccl-transport: %s %q", cs[2].Status, cs[2].Message)
			}
		})
	}
	// A type without EFA stays as it was: no device, none expected.
	g5, _ := profile.Lookup("g5.xlarge")
	inv, _ := pciParse("0000:00:1e.0 0x10de 0x2237 0x030200\n")
	tg := Target{InstanceType: "g5.xlarge", Profile: &g5, PCI: &inv}
	h := facts.Host{PCI: facts.Read(inv, ""), RDMA: facts.Read(facts.RDMADevices{}, ""), Domains: facts.Unread[[]string]("no provider", "")}
	if c := judgeEFADevices(facts.Run{Host: h}, tg); c.Status != result.Skip {
		t.Errorf("g5.xlarge efa-devices: %s %q", c.Status, c.Message)
	}
}

// A host whose launch should have given it EFA devices and shows none fails efa-devices,
// naming why, and nothing says the devices are proven elsewhere: a fleet node of an
// EFA-capable type (its launch template is the fleet's own and can declare the EFA network
// interfaces; a template without them is a fleet fault: jobs fall back to sockets), and a
// single-node verification whose launch asked for EFA interfaces EC2 did not give. A fleet that
// runs without EFA says so with expect.efa_count = -1.
func TestEFAMissingWhereItWasDue(t *testing.T) {
	gpus := strings.Repeat("0000:51:00.0 0x10de 0x2901 0x030200\n", 8)
	p6, _ := profile.Lookup("p6-b200.48xlarge")
	asked := func(described int) Launch {
		return Launch{Known: true, EFA: 8, Setting: `efa = "all"`, SecurityGroups: []string{"sg-0efa"}, Described: true, DescribedEFA: described}
	}
	for _, tc := range []struct {
		name     string
		efa      int
		launch   Launch
		efaCount int
		status   result.Status
		want     []string
		// others is the status efa-traffic and gpudirect-rdma take on this host ("": not checked).
		others result.Status
	}{
		{"fleet node, its launch template attached none", 0, Launch{FleetNode: true}, 0, result.Fail,
			[]string{"fleet node's launch attached no EFA interface", "launch template", "InterfaceType efa", "expect.efa_count = -1", `skip_checks = ["efa-devices"]`}, result.Warn},
		{"fleet node, half attached", 4, Launch{FleetNode: true}, 0, result.Fail, []string{"says 8 EFA devices but the PCI bus has 4"}, ""},
		{"fleet node, all attached", 8, Launch{FleetNode: true}, 0, result.Pass, nil, ""},
		{"fleet without EFA by choice", 0, Launch{FleetNode: true}, -1, result.Warn, []string{"count not judged: expect.efa_count = -1"}, result.Skip},
		{"verification: EC2 describes none of the 8 asked for", 0, asked(0), 0, result.Fail,
			[]string{`the launch asked for 8 EFA interfaces (efa = "all"), EC2 describes 0 on the instance and the PCI bus shows no EFA function`}, result.Warn},
		{"verification: EC2 describes 4 of the 8 asked for", 4, asked(4), 0, result.Fail,
			[]string{`4 EFA devices, launch (efa = "all") says 8`, `the launch asked for 8 EFA interfaces (efa = "all") but EC2 describes 4 on the instance`}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			efa := strings.Repeat("0000:82:00.0 0x1d0f 0xefa3 0x020000\n", tc.efa)
			inv, err := pciParse(gpus + efa)
			if err != nil {
				t.Fatal(err)
			}
			var devs []string
			for i := 0; i < tc.efa; i++ {
				devs = append(devs, "rdmap"+string(rune('a'+i))+"s0")
			}
			h := facts.Host{PCI: facts.Read(inv, ""), RDMA: facts.Read(facts.RDMADevices{EFA: devs}, ""), RDMAPorts: upPorts(t, devs), Domains: facts.Read(devs, "")}
			if tc.efa == 0 {
				h.Domains = facts.Unread[[]string]("fi_info: fi_getinfo: -61 (No data available)", "")
			}
			tg := Target{InstanceType: "p6-b200.48xlarge", Profile: &p6, PCI: &inv, Launch: tc.launch}
			tg.Expect.EFACount = tc.efaCount
			c := judgeEFADevices(facts.Run{Host: h}, tg)
			if c.Status != tc.status {
				t.Errorf("efa-devices %s %q, want %s", c.Status, c.Message, tc.status)
			}
			for _, w := range tc.want {
				if !strings.Contains(c.Message, w) {
					t.Errorf("efa-devices %q lacks %q", c.Message, w)
				}
			}
			if tc.others == "" {
				return
			}
			run := facts.Run{Host: h, GDR: facts.NCCLRun{NotApplicable: "no EFA on this host: GPUDirect RDMA does not apply"}}
			for _, c := range []result.Check{c, judgeEFATraffic(run, tg), judgeGPUDirectRDMA(run, tg)} {
				if strings.Contains(c.Message, "post-processor") || strings.Contains(c.Message, "not judged here") {
					t.Errorf("%s points elsewhere on a host where EFA was due: %q", c.ID, c.Message)
				}
				if c.ID != result.EFADevices && c.Status != tc.others {
					t.Errorf("%s %s %q, want %s", c.ID, c.Status, c.Message, tc.others)
				}
			}
			// NCCL over sockets on a host where EFA was due fails, naming why; a fleet that
			// runs without EFA by choice still requires EFA of NCCL unless nccl.transport says
			// otherwise (expect.efa_count = -1 turns only the count off).
			x := tg.NCCLExpect()
			cs, _ := judgeNCCLOutput(ncclTestdata(t, "derived-socket-fallback.txt"), 0, false, x, settings.NCCL{})
			if cs[2].Status != result.Fail || strings.Contains(cs[2].Message, "post-processor") {
				t.Errorf("nccl-transport over sockets: %s %q", cs[2].Status, cs[2].Message)
			}
			if tc.status == result.Fail && !strings.Contains(cs[2].Message, tc.want[0]) {
				t.Errorf("nccl-transport over sockets does not say why EFA is missing: %q", cs[2].Message)
			}
		})
	}
}

// The image's node check judges every instance as a fleet node, so on a verification instance
// launched without EFA (efa = "none") it fails efa-devices: the verification's node-check entry
// warns for that one failure, naming its own launch, and fails as ever for anything else, or
// where this launch attached EFA.
func TestNodeCheckOnAVerificationWithoutEFA(t *testing.T) {
	p6, _ := profile.Lookup("p6-b200.48xlarge")
	inv, err := pciParse(strings.Repeat("0000:51:00.0 0x10de 0x2901 0x030200\n", 8))
	if err != nil {
		t.Fatal(err)
	}
	none := Launch{Known: true, Setting: `efa = "none"`, Described: true}
	for _, tc := range []struct {
		name   string
		failed []string
		launch Launch
		status result.Status
		want   string
	}{
		{"efa = none, efa-devices only", []string{result.EFADevices}, none, result.Warn, `not judged here: the launch attached no EFA interface (efa = "none")`},
		{"efa = none, and the GPUs too", []string{result.GPU, result.EFADevices}, none, result.Fail, "fails on this instance: gpu, efa-devices"},
		{"efa = all, none came up", []string{result.EFADevices}, Launch{Known: true, EFA: 8, Setting: `efa = "all"`, Described: true}, result.Fail, "fails on this instance: efa-devices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := facts.Run{NodeCheck: facts.NodeCheckRun{ExitCode: 1, Result: "fail", Failed: tc.failed}}
			c := judgeNodeCheck(f, Target{InstanceType: "p6-b200.48xlarge", Profile: &p6, PCI: &inv, Launch: tc.launch})
			if c.Status != tc.status || !strings.Contains(c.Message, tc.want) {
				t.Errorf("node-check %s %q, want %s with %q", c.Status, c.Message, tc.status, tc.want)
			}
		})
	}
}

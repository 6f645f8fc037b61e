package checks

// Issue 28: a healthy host of any GPU generation passes the GPU checks and a broken one fails
// them, one row per generation (Ampere, Hopper, Blackwell, Ada), from the real tool outputs
// in the parsers' testdata (each with its .source).

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpuhealth"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

const (
	nvsmiFixtures = "../parse/nvsmi/testdata/"
	pciFixtures   = "../parse/pci/testdata/"
)

// nvsmiGPUs reads nvidia-smi's GPU list as the probe does: a list it left incomplete is
// unreadable.
func nvsmiGPUs(text string) facts.Fact[[]nvsmi.GPU] {
	gpus, err := nvsmi.Parse(text)
	if err != nil {
		return facts.Unread[[]nvsmi.GPU](err.Error(), text)
	}
	return facts.Read(gpus, text)
}

// dropLastGPU is nvidia-smi's list without its last line: a GPU the driver lost at the end
// of the list leaves no gap in the indexes.
func dropLastGPU(text string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	return strings.Join(lines[:len(lines)-1], "\n") + "\n"
}

// pciFixture reads a PCI inventory fixture.
func pciFixture(t *testing.T, name string) *facts.PCIInventory {
	t.Helper()
	inv, err := pci.Parse(readFixture(t, pciFixtures+name))
	if err != nil {
		t.Fatal(err)
	}
	return &inv
}

// pciOfGPUs is the PCI inventory of the GPUs nvidia-smi lists (device id dev, class 0302)
// and switches NVSwitch functions (10de:1af1, class 0680, as on HGX A100): for the types
// with no PCI capture in testdata.
func pciOfGPUs(t *testing.T, gpus facts.Fact[[]nvsmi.GPU], dev uint16, switches int) *facts.PCIInventory {
	t.Helper()
	var b strings.Builder
	for _, g := range gpus.Value {
		fmt.Fprintf(&b, "%s 0x10de 0x%04x 0x030200\n", strings.ToLower(strings.TrimPrefix(g.BusID, "0000")), dev)
	}
	for i := range switches {
		fmt.Fprintf(&b, "0000:%02x:00.0 0x10de 0x1af1 0x068000\n", 0xc0+i)
	}
	inv, err := pci.Parse(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return &inv
}

// queryAsList is the GPU list of an `nvidia-smi -q` capture (index, name, driver, bus), in the
// CSV form the gpu check reads: for the GPUs whose only capture in testdata is -q.
func queryAsList(t *testing.T, q string) string {
	t.Helper()
	r, err := gpuhealth.ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	driver := regexp.MustCompile(`(?m)^Driver Version\s+: (\S+)`).FindStringSubmatch(q)
	if driver == nil {
		t.Fatal("no driver version in the capture")
	}
	var b strings.Builder
	for _, g := range r.GPUs {
		fmt.Fprintf(&b, "%d, %s, %s, %s\n", g.Index, g.Name, driver[1], g.BusID)
	}
	return b.String()
}

func withPCI(t Target, inv *facts.PCIInventory) Target {
	t.PCI = inv
	return t
}

func TestGPUByGeneration(t *testing.T) {
	a100 := readFixture(t, nvsmiFixtures+"csv-noheader-8xA100-550.90.07-p4d.txt")
	h100 := readFixture(t, nvsmiFixtures+"csv-header-8xH100-550.90.07-p5.txt")
	b200 := readFixture(t, nvsmiFixtures+"csv-noheader-8xB200-595.91.07-p6-b200.txt")
	l4 := queryAsList(t, readFixture(t, gpuhealthFixtures+"q-1xL4-550.90.07-idle-x8-of-x16.txt"))
	l40s := queryAsList(t, readFixture(t, gpuhealthFixtures+"q-1xL40S-550.127.05.txt"))
	p4d := withPCI(profiled(t, "p4d.24xlarge"), pciOfGPUs(t, nvsmiGPUs(a100), 0x20b0, 6))
	p5 := withPCI(profiled(t, "p5.48xlarge"), pciFixture(t, "p5-48xlarge-like.txt"))
	p6 := withPCI(profiled(t, "p6-b200.48xlarge"), pciFixture(t, "p6-b200-like.txt"))
	g6 := withPCI(profiled(t, "g6.xlarge"), pciOfGPUs(t, nvsmiGPUs(l4), 0x27b8, 0))
	for _, tt := range []struct {
		name    string
		target  Target
		list    string
		status  result.Status
		mention string
	}{
		{"Ampere: 8 A100 on a p4d", p4d, a100, result.Pass, ""},
		{"Ampere: GPU 3 fell off the bus", p4d, readFixture(t, nvsmiFixtures+"derived-csv-noheader-8xA100-p4d-gpu3-fell-off.txt"), result.Fail, "could not open GPU 3"},
		{"Ampere: 7 of 8 listed", p4d, dropLastGPU(a100), result.Fail, "lists 7 GPUs but the PCI bus has 8"},
		{"Hopper: 8 H100 on a p5", p5, h100, result.Pass, ""},
		{"Hopper: 7 of 8 listed", p5, dropLastGPU(h100), result.Fail, "lists 7 GPUs but the PCI bus has 8"},
		{"Hopper: B200s where the p5 profile says H100", withPCI(profiled(t, "p5.48xlarge"), pciFixture(t, "p6-b200-like.txt")), b200, result.Fail, "not H100"},
		{"Blackwell: 8 B200 on a p6-b200", p6, b200, result.Pass, ""},
		{"Blackwell: 7 of 8 listed", p6, dropLastGPU(b200), result.Fail, "lists 7 GPUs but the PCI bus has 8"},
		{"Ada: 1 L4 on a g6.xlarge", g6, l4, result.Pass, ""},
		{"Ada: an L40S where the g6 profile says L4", withPCI(profiled(t, "g6.xlarge"), pciOfGPUs(t, nvsmiGPUs(l40s), 0x26b9, 0)), l40s, result.Fail, "L40S"},
	} {
		c := judgeGPU(facts.Run{Host: facts.Host{GPUs: nvsmiGPUs(tt.list)}}, tt.target)
		if c.Status != tt.status || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
}

func TestPersistenceByGeneration(t *testing.T) {
	q := func(name string) facts.Fact[[]facts.GPUHealth] {
		return healthQ(t, readFixture(t, gpuhealthFixtures+name))
	}
	daemon := func(state string) facts.Fact[string] { return facts.Read(state, state) }
	a100Off := q("q-8xA100-SXM4-40GB-535.129.03-nvswitch.txt") // persistence mode Disabled on all 8
	for _, tt := range []struct {
		name    string
		daemon  facts.Fact[string]
		gpus    facts.Fact[[]facts.GPUHealth]
		status  result.Status
		mention string
	}{
		{"Ampere: persistence mode off, nvidia-persistenced active", daemon("active"), a100Off, result.Pass, ""},
		{"Ampere: persistence mode off, nvidia-persistenced inactive", daemon("inactive"), a100Off, result.Fail, "off on GPU 0, 1, 2, 3, 4, 5, 6, 7"},
		{"Ampere: A10G's mode on, no daemon", daemon("inactive"), q("q-1xA10-550.90.12.txt"), result.Pass, ""},
		{"Hopper: mode on on all 8, no daemon", daemon("inactive"), q("q-8xH100-80GB-HBM3-565.57.01.txt"), result.Pass, ""},
		{"Hopper: H200 mode on, daemon unreadable", facts.Unread[string]("host.persistenced: exited 127", ""), q("q-1xH200-550.90.12.txt"), result.Pass, ""},
		{"Hopper: mode unreadable, no daemon", daemon("inactive"), facts.Unread[[]facts.GPUHealth]("host.gpu_health: timed out", ""), result.Fail, "could not be read"},
		// No -q capture of a Blackwell GPU in testdata: the CSV query's shape, 8 GPUs.
		{"Blackwell: mode off on GPU 5, no daemon", daemon("failed"), healthCSV(healthRows(8, gpuOnly(5, map[int]string{2: "Disabled"}))), result.Fail, "off on GPU 5"},
		{"Blackwell: mode [N/A] on GPU 5, no daemon", daemon("inactive"), healthCSV(healthRows(8, gpuOnly(5, map[int]string{2: "[N/A]"}))), result.Fail, "GPU 5"},
		{"Ada: L4 mode on, no daemon", daemon("inactive"), q("q-1xL4-550.90.07-idle-x8-of-x16.txt"), result.Pass, ""},
		{"Ada: L40S mode on, daemon active", daemon("active"), q("q-1xL40S-550.127.05.txt"), result.Pass, ""},
	} {
		c := judgePersistence(facts.Run{Host: facts.Host{Persistenced: tt.daemon, Health: facts.Health{GPUs: tt.gpus}}}, Target{})
		if c.Status != tt.status || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
}

func TestFabricManagerByGeneration(t *testing.T) {
	a100 := nvsmiGPUs(readFixture(t, nvsmiFixtures+"csv-noheader-8xA100-550.90.07-p4d.txt"))
	l4 := nvsmiGPUs(queryAsList(t, readFixture(t, gpuhealthFixtures+"q-1xL4-550.90.07-idle-x8-of-x16.txt")))
	p4dBus := pciOfGPUs(t, a100, 0x20b0, 6)
	p5Bus, p6Bus := pciFixture(t, "p5-48xlarge-like.txt"), pciFixture(t, "p6-b200-like.txt")
	g6Bus := pciOfGPUs(t, l4, 0x27b8, 0)
	state := func(s string) facts.Fact[string] { return facts.Read(s, s) }
	for _, tt := range []struct {
		name    string
		target  Target
		fm      facts.Fact[string]
		status  result.Status
		mention string
	}{
		{"Ampere: p4d, NVSwitches, active", withPCI(profiled(t, "p4d.24xlarge"), p4dBus), state("active"), result.Pass, ""},
		{"Ampere: p4d, NVSwitches, inactive", withPCI(profiled(t, "p4d.24xlarge"), p4dBus), state("inactive"), result.Fail, "not active"},
		{"Ampere: p4d, no NVSwitch on the bus", withPCI(profiled(t, "p4d.24xlarge"), pciOfGPUs(t, a100, 0x20b0, 0)), state("active"), result.Fail, "NVSwitch=true"},
		{"Hopper: p5, active", withPCI(profiled(t, "p5.48xlarge"), p5Bus), state("active"), result.Pass, ""},
		{"Hopper: p5, failed", withPCI(profiled(t, "p5.48xlarge"), p5Bus), state("failed"), result.Fail, "not active"},
		{"Hopper: p5, state unreadable", withPCI(profiled(t, "p5.48xlarge"), p5Bus), facts.Unread[string]("host.fabricmanager: timed out", ""), result.Fail, "timed out"},
		{"Blackwell: p6-b200, ConnectX-7 bridges, active", withPCI(profiled(t, "p6-b200.48xlarge"), p6Bus), state("active"), result.Pass, ""},
		{"Blackwell: p6-b200, inactive", withPCI(profiled(t, "p6-b200.48xlarge"), p6Bus), state("inactive"), result.Fail, "NVLSM"},
		{"Blackwell: unprofiled, judged from the bridges on the bus", withPCI(Target{}, p6Bus), state("inactive"), result.Fail, "not active"},
		{"Ada: g6.xlarge, no fabric, not installed", withPCI(profiled(t, "g6.xlarge"), g6Bus), state("inactive"), result.Skip, "not required"},
		{"Ada: g6.xlarge, active anyway", withPCI(profiled(t, "g6.xlarge"), g6Bus), state("active"), result.Pass, "not required"},
	} {
		c := judgeFabricManager(facts.Run{Host: facts.Host{FabricManager: tt.fm}}, tt.target)
		if c.Status != tt.status || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
}

func TestGPUClocksByGeneration(t *testing.T) {
	q := func(name string) facts.Fact[[]facts.GPUHealth] {
		return healthQ(t, readFixture(t, gpuhealthFixtures+name))
	}
	load := func(samples ...facts.Fact[[]facts.GPUHealth]) facts.Load {
		return facts.Load{Ran: true, Samples: samples}
	}
	for _, tt := range []struct {
		name    string
		load    facts.Load
		status  result.Status
		mention string
	}{
		{"Ampere: 8 A100, no slowdown", load(q("q-8xA100-SXM4-40GB-535.129.03-nvswitch.txt")), result.Pass, ""},
		{"Ampere: A10G, no slowdown", load(q("q-1xA10-550.90.12.txt")), result.Pass, ""},
		{"Hopper: 8 H100, no slowdown", load(q("q-8xH100-80GB-HBM3-565.57.01.txt")), result.Pass, ""},
		{"Hopper: hardware slowdown in a later sample", load(q("q-8xH100-80GB-HBM3-565.57.01.txt"), healthCSV(readFixture(t, gpuhealthFixtures+"derived-csv-header-8xH100-535.161.08-hw-slowdown-from-q.txt"))), result.Fail, "hardware slowdown"},
		// No -q capture of a Blackwell GPU in testdata: the CSV query's shape, 8 GPUs.
		{"Blackwell: 8 GPUs, no slowdown", load(healthCSV(healthRows(8, nil))), result.Pass, ""},
		{"Blackwell: hardware slowdown [GPU is lost] on GPU 4", load(healthCSV(healthRows(8, gpuOnly(4, map[int]string{colHWSlow: "[GPU is lost]"})))), result.Fail, "GPU 4: hardware slowdown reads"},
		{"Ada: L4, no slowdown", load(q("q-1xL4-550.90.07-idle-x8-of-x16.txt")), result.Pass, ""},
		{"Ada: L40S, no slowdown", load(q("q-1xL40S-550.127.05.txt")), result.Pass, ""},
	} {
		c := judgeGPUClocks(facts.Run{Load: tt.load}, Target{})
		if c.Status != tt.status || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
}

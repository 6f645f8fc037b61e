package checks

// Issue 28's verdicts of the GPU health checks, one table per GPU generation: a value the
// tool could not give is never a pass, and a healthy host of any generation never fails.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpuhealth"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvlink"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

const (
	gpuhealthFixtures = "../parse/gpuhealth/testdata/"
	nvlinkFixtures    = "../parse/nvlink/testdata/"
)

// healthHeader is the header line `--format=csv` prints for the rows healthRow renders: the
// parser reads their columns by these names.
const healthHeader = "index, pci.bus_id, persistence_mode, ecc.mode.current, ecc.errors.uncorrected.volatile.total, retired_pages.pending, remapped_rows.pending, remapped_rows.failure, pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max, clocks_event_reasons.hw_slowdown, clocks_event_reasons.hw_thermal_slowdown, clocks_event_reasons.hw_power_brake_slowdown, clocks_event_reasons.sw_power_cap\n"

// The columns healthRow renders (healthHeader's fields), by position.
const (
	colECCMode = 3
	colECCVol  = 4
	colRetired = 5
	colRemapP  = 6
	colRemapF  = 7
	colGen     = 8
	colGenMax  = 9
	colWidth   = 10
	colWidthMx = 11
	colHWSlow  = 12
)

// healthRow renders GPU i's line of the health query: a healthy GPU of PCIe gen 5 x16 whose
// retired pages read [N/A] (Ampere and later), with the columns of over replaced.
func healthRow(i int, over map[int]string) string {
	cells := []string{fmt.Sprint(i), fmt.Sprintf("00000000:%02X:00.0", 0x51+i), "Enabled", "Enabled", "0", "[N/A]", "No", "No",
		"5", "5", "16", "16", "Not Active", "Not Active", "Not Active", "Not Active"}
	for c, v := range over {
		cells[c] = v
	}
	return strings.Join(cells, ", ") + "\n"
}

// healthRows renders n GPUs, GPU i with over(i) replaced (nil: healthy).
func healthRows(n int, over func(i int) map[int]string) string {
	var b strings.Builder
	for i := range n {
		var o map[int]string
		if over != nil {
			o = over(i)
		}
		b.WriteString(healthRow(i, o))
	}
	return b.String()
}

// gpuOnly is over for GPU k only.
func gpuOnly(k int, o map[int]string) func(int) map[int]string {
	return func(i int) map[int]string {
		if i == k {
			return o
		}
		return nil
	}
}

// healthCSV reads the health query's output as the probe does: a list nvidia-smi left
// incomplete is unreadable, with its error. Rows without their header line (healthRow's, a
// fixture's rows) get healthHeader.
func healthCSV(text string) facts.Fact[[]facts.GPUHealth] {
	if !strings.HasPrefix(text, "index,") {
		text = healthHeader + text
	}
	gpus, err := gpuhealth.Parse(text)
	if err != nil {
		return facts.Unread[[]facts.GPUHealth](err.Error(), text)
	}
	return facts.Read(gpus, text)
}

// healthFixtureRows is a health query fixture's rows, without its header line (healthCSV adds
// healthHeader back, which names the same columns).
func healthFixtureRows(t *testing.T, name string) string {
	t.Helper()
	head, rows, _ := strings.Cut(readFixture(t, gpuhealthFixtures+name), "\n")
	if head+"\n" != healthHeader {
		t.Fatalf("%s: header %q, not healthHeader's columns", name, head)
	}
	return rows
}

// healthQ reads `nvidia-smi -q`'s GPUs.
func healthQ(t *testing.T, text string) facts.Fact[[]facts.GPUHealth] {
	t.Helper()
	r, err := gpuhealth.ParseQuery(text)
	if err != nil {
		t.Fatal(err)
	}
	return facts.Read(r.GPUs, text)
}

// faultyOf is the unreadable-fields A100 fixture with every GPU but k healthy (GPU 0's
// values, each GPU keeping its index and bus ID).
func faultyOf(t *testing.T, k int) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(healthFixtureRows(t, "derived-csv-header-8xA100-535.129.03-unreadable-fields.txt")), "\n")
	healthy := strings.Split(lines[0], ", ")
	var b strings.Builder
	for i, line := range lines {
		if i == k {
			b.WriteString(line + "\n")
			continue
		}
		cells := append([]string(nil), healthy...)
		own := strings.Split(line, ", ")
		cells[0], cells[1] = own[0], own[1]
		b.WriteString(strings.Join(cells, ", ") + "\n")
	}
	return b.String()
}

type memoryCase struct {
	name    string
	gpus    facts.Fact[[]facts.GPUHealth]
	status  result.Status
	mention string
}

func runMemory(t *testing.T, target Target, cases []memoryCase) {
	t.Helper()
	for _, tt := range cases {
		c := judgeGPUMemory(facts.Run{Host: facts.Host{Health: facts.Health{GPUs: tt.gpus}}}, target)
		if c.Status != tt.status || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
}

func TestGPUMemoryAmpere(t *testing.T) {
	lines := strings.SplitAfter(faultyOf(t, 0), "\n")
	runMemory(t, profiled(t, "p4d.24xlarge"), []memoryCase{
		{"healthy A100s (retired pages [N/A]: not applicable)", healthCSV(faultyOf(t, 0)), result.Pass, ""},
		{"ECC count [Unknown Error]", healthCSV(faultyOf(t, 1)), result.Fail, "GPU 1 (00000000:35:00.0): the volatile uncorrectable ECC count reads [Unknown Error]"},
		{"ECC count [N/A] with ECC enabled", healthCSV(faultyOf(t, 2)), result.Fail, "GPU 2 (00000000:62:00.0): the volatile uncorrectable ECC count reads [N/A]"},
		{"ECC count [GPU is lost]", healthCSV(faultyOf(t, 3)), result.Fail, "[GPU is lost]"},
		{"remap failure [Unknown Error] while pending reads No", healthCSV(faultyOf(t, 4)), result.Fail, "GPU 4 (00000000:9F:00.0): remapped_rows.failure reads [Unknown Error]"},
		{"remap fields [Insufficient Permissions]", healthCSV(faultyOf(t, 5)), result.Fail, "[Insufficient Permissions]"},
		{"remapping [Not Supported] (MIG instances)", healthCSV(strings.ReplaceAll(faultyOf(t, 0), "No, No, 4", "[Not Supported], [Not Supported], 4")), result.Warn, "[Not Supported]"},
		{"7 of 8 GPUs listed", healthCSV(strings.Join(lines[:7], "")), result.Fail, "GPU 7 missing"},
		{"1 of 8 GPUs listed", healthCSV(lines[0]), result.Fail, "GPUs 1, 2, 3, 4, 5, 6, 7 missing"},
		{"GPU 3 fell off the bus", healthCSV("Unable to determine the device handle for GPU3: 0000:67:00.0: Unknown Error\n" + strings.Join(append(lines[:3:3], lines[4:]...), "")),
			result.Fail, "GPU 3 at 0000:67:00.0: Unknown Error"},
		{"ECC mode [Unknown Error]", healthCSV(strings.Replace(faultyOf(t, 0), "Disabled, Enabled", "Disabled, [Unknown Error]", 1)), result.Fail, "ECC mode"},
		{"ECC disabled", healthCSV(strings.Replace(faultyOf(t, 0), "Disabled, Enabled, 0", "Disabled, Disabled, [N/A]", 1)), result.Fail, "ECC is disabled"},
	})
	g5 := healthRow(0, map[int]string{colGen: "4", colGenMax: "4"})
	runMemory(t, profiled(t, "g5.xlarge"), []memoryCase{
		{"healthy A10G", healthCSV(g5), result.Pass, ""},
		{"A10G remap pending", healthCSV(healthRow(0, map[int]string{colRemapP: "Yes"})), result.Fail, "reboot the instance to apply the remap"},
	})
	q := readFixture(t, gpuhealthFixtures+"q-4xA100-SXM4-80GB-555.42.02-gpu1-remap-pending.txt")
	runMemory(t, gpuCount(4), []memoryCase{
		{"4x A100 (nvidia-smi -q), GPU 1 remap pending", healthQ(t, q), result.Fail, "GPU 1 (00000000:9E:00.0): a row remap is pending"},
		{"4x A100 (nvidia-smi -q), applied", healthQ(t, strings.ReplaceAll(q, "Pending                           : Yes", "Pending                           : No")), result.Pass, ""},
	})
}

func TestGPUMemoryAda(t *testing.T) {
	q := readFixture(t, gpuhealthFixtures+"q-1xL4-550.90.07-idle-x8-of-x16.txt")
	runMemory(t, profiled(t, "g6.xlarge"), []memoryCase{
		{"healthy L4", healthQ(t, q), result.Pass, ""},
		{"L4 DRAM Uncorrectable N/A with ECC enabled", healthQ(t, strings.Replace(q, "DRAM Uncorrectable            : 0", "DRAM Uncorrectable            : N/A", 1)), result.Fail, "reads N/A"},
		{"L4 remap failure", healthQ(t, strings.Replace(q, "Remapping Failure Occurred        : No", "Remapping Failure Occurred        : Yes", 1)), result.Fail, "retire the instance"},
	})
}

func TestGPUMemoryHopper(t *testing.T) {
	csv := healthFixtureRows(t, "derived-csv-header-8xH100-535.183.01-from-q.txt")
	lines := strings.SplitAfter(strings.TrimSpace(csv)+"\n", "\n")
	runMemory(t, profiled(t, "p5.48xlarge"), []memoryCase{
		{"healthy H100s", healthCSV(csv), result.Pass, ""},
		{"H100 remap pending", healthCSV(strings.Replace(csv, "[N/A], No, No", "[N/A], Yes, No", 1)), result.Fail, "GPU 0 (00000000:53:00.0): a row remap is pending"},
		{"H100 ECC count [Unknown Error]", healthCSV(strings.Replace(csv, "Enabled, 0, [N/A]", "Enabled, [Unknown Error], [N/A]", 1)), result.Fail, "[Unknown Error]"},
		{"2 of 8 H100s listed", healthCSV(strings.Join(lines[:2], "")), result.Fail, "GPUs 2, 3, 4, 5, 6, 7 missing"},
	})
	h200 := readFixture(t, gpuhealthFixtures+"q-1xH200-550.90.12.txt")
	runMemory(t, gpuCount(1), []memoryCase{{"healthy H200 (nvidia-smi -q)", healthQ(t, h200), result.Pass, ""}})
}

func TestGPUMemoryBlackwell(t *testing.T) {
	runMemory(t, profiled(t, "p6-b200.48xlarge"), []memoryCase{
		{"healthy B200s", healthCSV(healthRows(8, nil)), result.Pass, ""},
		{"B200 remap failure [Unknown Error]", healthCSV(healthRows(8, gpuOnly(6, map[int]string{colRemapF: "[Unknown Error]"}))), result.Fail, "GPU 6"},
		{"7 of 8 B200s listed", healthCSV(healthRows(7, nil)), result.Fail, "GPU 7 missing"},
	})
	runMemory(t, profiled(t, "p6-b300.48xlarge"), []memoryCase{
		{"healthy B300s", healthCSV(healthRows(8, nil)), result.Pass, ""},
		{"B300 ECC [N/A] with ECC enabled", healthCSV(healthRows(8, gpuOnly(2, map[int]string{colECCVol: "[N/A]"}))), result.Fail, "GPU 2"},
	})
}

// Turing (T4G on g5g) and Volta retire pages instead of remapping rows: remapped_rows.* read
// [N/A] there and the retired-pages flag must be a value.
func TestGPUMemoryPageRetirement(t *testing.T) {
	t4g := func(retired string) string {
		return healthRow(0, map[int]string{colRetired: retired, colRemapP: "[N/A]", colRemapF: "[N/A]", colGen: "3", colGenMax: "3"})
	}
	runMemory(t, profiled(t, "g5g.xlarge"), []memoryCase{
		{"healthy T4G", healthCSV(t4g("No")), result.Pass, ""},
		{"T4G retirement pending", healthCSV(t4g("Yes")), result.Fail, "page retirement is pending"},
		{"T4G retired pages [N/A]", healthCSV(t4g("[N/A]")), result.Fail, "retired_pages.pending reads [N/A]"},
		{"T4G retired pages [Unknown Error]", healthCSV(t4g("[Unknown Error]")), result.Fail, "[Unknown Error]"},
	})
	v100 := readFixture(t, gpuhealthFixtures+"q-8xV100-SXM2-16GB-550.127.05-page-retirement.txt")
	runMemory(t, gpuCount(8), []memoryCase{
		{"healthy V100s (Volta: remapped rows N/A)", healthQ(t, v100), result.Pass, ""},
		{"V100 retirement pending", healthQ(t, strings.Replace(v100, "Pending Page Blacklist            : No", "Pending Page Blacklist            : Yes", 1)), result.Fail, "page retirement is pending"},
		{"V100 retired pages Unknown Error", healthQ(t, strings.Replace(v100, "Pending Page Blacklist            : No", "Pending Page Blacklist            : Unknown Error", 1)), result.Fail, "Unknown Error"},
	})
	// An unknown generation whose GPUs report neither keeps the warning.
	runMemory(t, gpuCount(1), []memoryCase{
		{"neither reported, generation unknown", healthCSV(healthRow(0, map[int]string{colRemapP: "[N/A]", colRemapF: "[N/A]"})), result.Warn, "neither row remapping nor page retirement"},
	})
}

// statusText renders `nvidia-smi nvlink -s` of n GPUs with links links each at speed.
func statusText(n, links int, name, speed string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "GPU %d: %s (UUID: GPU-%08d-0000-0000-0000-000000000000)\n", i, name, i)
		for l := range links {
			fmt.Fprintf(&b, "\t Link %d: %s\n", l, speed)
		}
	}
	return b.String()
}

// fabricText renders the GPU blocks of `nvidia-smi -q` with their architecture and Fabric
// section, n GPUs, GPU i with state(i)/status(i).
func fabricText(n int, arch string, state func(i int) (string, string)) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Attached GPUs                             : %d\n", n)
	for i := range n {
		st, ss := state(i)
		fmt.Fprintf(&b, "GPU 00000000:%02X:00.0\n    Product Architecture                  : %s\n    Fabric\n        State                             : %s\n        Status                            : %s\n\n", 0x51+i, arch, st, ss)
	}
	return b.String()
}

func registered(int) (string, string) { return "Completed", "Success" }

func statusFact(t *testing.T, text string) facts.Fact[[]facts.NVLinkStatus] {
	t.Helper()
	s, err := nvlink.ParseStatus(text)
	if err != nil {
		t.Fatal(err)
	}
	return facts.Read(s, text)
}

func fabricFact(text string) facts.Fact[[]facts.NVLinkFabric] {
	f, err := nvlink.ParseFabric(text)
	if err != nil {
		return facts.Unread[[]facts.NVLinkFabric](err.Error(), text)
	}
	return facts.Read(f, text)
}

type nvlinkCase struct {
	name    string
	status  facts.Fact[[]facts.NVLinkStatus]
	fabric  facts.Fact[[]facts.NVLinkFabric]
	fm      string
	want    result.Status
	mention string
}

func runNVLink(t *testing.T, target Target, cases []nvlinkCase) {
	t.Helper()
	for _, tt := range cases {
		h := facts.Host{FabricManager: facts.Read(tt.fm, ""), Health: facts.Health{NVLink: tt.status, Fabric: tt.fabric}}
		c := judgeNVLink(facts.Run{Host: h}, target)
		if c.Status != tt.want || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
}

// On NVSwitch A100s (p4d, p4de) the GPUs have no fabric state ("N/A"): Fabric Manager and the
// 12 links per GPU are judged instead.
func TestNVLinkAmpere(t *testing.T) {
	status := statusFact(t, readFixture(t, nvlinkFixtures+"status-8xA100-SXM4-80GB-gpud.txt"))
	na := fabricFact(readFixture(t, nvlinkFixtures+"query-8xA100-SXM4-40GB-535.129.03-nvswitch-fabric-na.txt"))
	runNVLink(t, profiled(t, "p4d.24xlarge"), []nvlinkCase{
		{"healthy p4d: fabric N/A, Fabric Manager active, 12 links", status, na, "active", result.Pass, ""},
		{"p4d with Fabric Manager failed", status, na, "failed", result.Fail, "Fabric Manager"},
		// A driver before R535 prints no Fabric section: the A100 has no state to print.
		{"p4d, no Fabric section, Fabric Manager active", status, fabricFact(strings.ReplaceAll(readFixture(t, nvlinkFixtures+"query-8xA100-SXM4-40GB-535.129.03-nvswitch-fabric-na.txt"), "    Fabric\n", "    Fabric Removed\n")), "active", result.Pass, ""},
		{"p4d, one A100's state In Progress", status, fabricFact(fabricText(8, "Ampere", func(i int) (string, string) {
			if i == 2 {
				return "In Progress", "N/A"
			}
			return "N/A", "N/A"
		})), "active", result.Fail, "In Progress"},
	})
}

func TestNVLinkHopper(t *testing.T) {
	status := statusFact(t, statusText(8, 18, "NVIDIA H100 80GB HBM3", "26.562 GB/s"))
	done := readFixture(t, nvlinkFixtures+"query-8xH100-565.57.01-fabric-completed.txt")
	runNVLink(t, profiled(t, "p5.48xlarge"), []nvlinkCase{
		{"healthy p5", status, fabricFact(done), "active", result.Pass, ""},
		{"In Progress and failed registrations", status, fabricFact(readFixture(t, nvlinkFixtures+"derived-query-8xH100-535.183.01-fabric-in-progress-and-failed.txt")), "active", result.Fail, "In Progress"},
		{"H100 on NVSwitch with fabric state N/A", status, fabricFact(strings.Replace(strings.Replace(done, "State                             : Completed", "State                             : N/A", 1), "Status                            : Success", "Status                            : N/A", 1)), "active", result.Fail, "N/A"},
		{"7 of 8 GPUs in nvlink -s", statusFact(t, statusText(7, 18, "NVIDIA H100 80GB HBM3", "26.562 GB/s")), fabricFact(done), "active", result.Fail, "7 of 8 GPUs"},
		{"7 of 8 GPUs in the fabric report", status, fabricFact(fabricText(7, "Hopper", registered)), "active", result.Fail, "7 of 8 GPUs"},
		{"no Fabric section (driver before R535)", status, fabricFact(strings.ReplaceAll(done, "    Fabric\n", "    Fabric Removed\n")), "active", result.Fail, "Fabric section"},
	})
	// A Hopper GPU off an NVSwitch fabric (GH200) prints N/A: not applicable there.
	gh200 := gpuCount(1)
	gh200.Expect.NVLinks = 18
	off := false
	gh200.Expect.FabricManager = &off
	runNVLink(t, gh200, []nvlinkCase{
		{"GH200, no NVSwitch: fabric N/A", statusFact(t, statusText(1, 18, "NVIDIA GH200 480GB", "26.562 GB/s")), fabricFact(readFixture(t, nvlinkFixtures+"query-1xGH200-550.127.05-hopper-no-nvswitch-fabric-na.txt")), "inactive", result.Pass, ""},
	})
}

func TestNVLinkBlackwell(t *testing.T) {
	b300 := statusFact(t, readFixture(t, nvlinkFixtures+"status-7xB300-SXM6-610.57.04.txt"))
	runNVLink(t, profiled(t, "p6-b300.48xlarge"), []nvlinkCase{
		{"healthy B300s", statusFact(t, statusText(8, 18, "NVIDIA B300 SXM6 AC", "53.125 GB/s")), fabricFact(fabricText(8, "Blackwell", registered)), "active", result.Pass, ""},
		{"7 B300s in nvlink -s", b300, fabricFact(fabricText(8, "Blackwell", registered)), "active", result.Fail, "7 of 8 GPUs"},
	})
	runNVLink(t, profiled(t, "p6-b200.48xlarge"), []nvlinkCase{
		{"B200 fabric N/A", statusFact(t, statusText(8, 18, "NVIDIA B200", "53.125 GB/s")), fabricFact(fabricText(8, "Blackwell", func(int) (string, string) { return "N/A", "N/A" })), "active", result.Fail, "N/A"},
	})
}

func errorCounters(t *testing.T, text string) facts.Fact[[]facts.NVLinkCounters] {
	t.Helper()
	c, err := nvlink.ParseErrors(text)
	if err != nil {
		t.Fatal(err)
	}
	return facts.Read(c, text)
}

// Counters that read N/A or an NVML error before and after the NCCL test cannot show it
// clean; BER figures ("15e-255") are values.
func TestNVLinkUnreadableCounters(t *testing.T) {
	h100 := profiled(t, "p5.48xlarge")
	h100.Expect.GPUCount = 1
	b300 := profiled(t, "p6-b300.48xlarge")
	b300.Expect.GPUCount = 1
	pass := result.Check{ID: result.NVLink, Status: result.Pass}
	before := errorCounters(t, readFixture(t, nvlinkFixtures+"derived-errors-H100-18-links-before.txt"))
	unreadable := errorCounters(t, readFixture(t, nvlinkFixtures+"derived-errors-H100-18-links-unreadable.txt"))
	blackwell := errorCounters(t, readFixture(t, nvlinkFixtures+"derived-errors-B300-595.91.07-blackwell-counter-names.txt"))
	for _, tt := range []struct {
		name          string
		target        Target
		before, after facts.Fact[[]facts.NVLinkCounters]
		want          result.Status
		mention       string
	}{
		{"H100 counters readable", h100, before, before, result.Pass, ""},
		{"H100 counters unreadable before and after", h100, unreadable, unreadable, result.Fail, "GPU 0 link 0 CRC Errors: [Unknown Error]"},
		{"H100 counters unreadable after", h100, before, unreadable, result.Fail, "GPU 0 link 0 CRC Errors: [Unknown Error]"},
		{"B300 counter names with BER figures", b300, blackwell, blackwell, result.Pass, ""},
	} {
		c := nvlinkDuring(pass, tt.before, tt.after, "during the NCCL test", tt.target)
		if c.Status != tt.want || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s: %s", tt.name, c.Status, c.Message)
		}
	}
}

// pcieSamples are readings under load of n GPUs, GPU i with over(i) replaced.
func pcieSamples(n int, overs ...func(i int) map[int]string) facts.Load {
	l := facts.Load{Ran: true}
	for _, o := range overs {
		l.Samples = append(l.Samples, healthCSV(healthRows(n, o)))
	}
	return l
}

func width(w string) func(int) map[int]string {
	return func(int) map[int]string { return map[int]string{colWidth: w} }
}

type loadCase struct {
	name    string
	target  Target
	load    facts.Load
	want    result.Status
	mention string
}

func TestPCIeLinkByType(t *testing.T) {
	l4 := readFixture(t, gpuhealthFixtures+"q-1xL4-550.90.07-idle-x8-of-x16.txt")
	// The capture is idle (gen 1): under load the L4 trains to its gen 4, at the slot's x8.
	l4Load := strings.Replace(l4, "Current                   : 1\n                Device Current            : 1", "Current                   : 4\n                Device Current            : 4", 1)
	l4x4 := strings.Replace(l4Load, "Current                   : 8x", "Current                   : 4x", 1)
	load := func(fs ...facts.Fact[[]facts.GPUHealth]) facts.Load { return facts.Load{Ran: true, Samples: fs} }
	x8on3 := gpuOnly(3, map[int]string{colWidth: "8"})
	for _, tt := range []loadCase{
		{"Ada g6.xlarge: the L4 at the slot's x8", profiled(t, "g6.xlarge"), load(healthQ(t, l4Load), healthQ(t, l4Load)), result.Pass, ""},
		{"Ada g6.xlarge: the L4 at x4", profiled(t, "g6.xlarge"), load(healthQ(t, l4x4)), result.Fail, "x4"},
		{"Ada g6.12xlarge: x8 of x16, the slot width unsettled", profiled(t, "g6.12xlarge"), pcieSamples(4, width("8")), result.Warn, "expect.pcie_width"},
		{"Hopper p5: x16", profiled(t, "p5.48xlarge"), pcieSamples(8, nil, nil), result.Pass, ""},
		{"Hopper p5: GPU 3 at x8", profiled(t, "p5.48xlarge"), pcieSamples(8, x8on3, x8on3), result.Fail, "GPU 3 at x8"},
		{"Hopper p5: GPU 3 drops to x8 in the second reading", profiled(t, "p5.48xlarge"), pcieSamples(8, nil, x8on3), result.Fail, "GPU 3"},
		{"Ampere p4d: gen 4 x16", profiled(t, "p4d.24xlarge"), pcieSamples(8, func(int) map[int]string { return map[int]string{colGen: "4", colGenMax: "4"} }), result.Pass, ""},
		{"Blackwell p6-b200: x16", profiled(t, "p6-b200.48xlarge"), pcieSamples(8, nil), result.Pass, ""},
		{"unprofiled: x8 of x16 on every GPU", gpuCount(8), pcieSamples(8, width("8"), width("8")), result.Warn, "expect.pcie_width"},
		{"width max [Unknown Error]", profiled(t, "p5.48xlarge"), pcieSamples(8, gpuOnly(5, map[int]string{colWidthMx: "[Unknown Error]"})), result.Fail, "GPU 5"},
		{"width [GPU is lost]", profiled(t, "p5.48xlarge"), pcieSamples(8, gpuOnly(5, map[int]string{colWidth: "[GPU is lost]"})), result.Fail, "[GPU is lost]"},
		{"width [Not Supported]", profiled(t, "p5.48xlarge"), pcieSamples(8, gpuOnly(6, map[int]string{colWidth: "[Not Supported]", colWidthMx: "[Not Supported]"})), result.Warn, "[Not Supported]"},
	} {
		c := judgePCIeLink(facts.Run{Load: tt.load}, tt.target)
		if c.Status != tt.want || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
}

func TestGPUClocksUnreadable(t *testing.T) {
	for _, tt := range []loadCase{
		{"hw_slowdown [Unknown Error]", profiled(t, "p5.48xlarge"), pcieSamples(8, gpuOnly(2, map[int]string{colHWSlow: "[Unknown Error]"})), result.Fail, "GPU 2"},
		{"hw_slowdown [Not Supported]", profiled(t, "p5.48xlarge"), pcieSamples(8, gpuOnly(2, map[int]string{colHWSlow: "[Not Supported]"})), result.Warn, "not reported"},
		{"healthy", profiled(t, "p5.48xlarge"), pcieSamples(8, nil), result.Pass, ""},
	} {
		c := judgeGPUClocks(facts.Run{Load: tt.load}, tt.target)
		if c.Status != tt.want || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
}

// expect.pcie_width sets the slot's width: what the GPUs must reach under load, on any type.
func TestPCIeWidthSetting(t *testing.T) {
	withWidth := func(tg Target, w int) Target { tg.Expect.PCIeWidth = w; return tg }
	for _, tt := range []loadCase{
		{"unprofiled, expect.pcie_width = 8: x8 of x16", withWidth(gpuCount(8), 8), pcieSamples(8, width("8"), width("8")), result.Pass, "the slot's width by design (setting)"},
		{"unprofiled, expect.pcie_width = 8: GPU 2 at x4", withWidth(gpuCount(8), 8), pcieSamples(8, gpuOnly(2, map[int]string{colWidth: "4"})), result.Fail, "GPU 2 at x4 under load, below the slot's x8 (setting)"},
		{"g6.12xlarge, expect.pcie_width = 8", withWidth(profiled(t, "g6.12xlarge"), 8), pcieSamples(4, width("8")), result.Pass, ""},
		{"p5, expect.pcie_width = 8, GPUs at x16", withWidth(profiled(t, "p5.48xlarge"), 8), pcieSamples(8, nil), result.Pass, ""},
		{"g6.xlarge, expect.pcie_width = 16 overrides the profile's x8", withWidth(profiled(t, "g6.xlarge"), 16), pcieSamples(1, width("8")), result.Fail, "below the slot's x16 (setting)"},
	} {
		c := judgePCIeLink(facts.Run{Load: tt.load}, tt.target)
		if c.Status != tt.want || !strings.Contains(c.Message, tt.mention) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
	if w, b := profiled(t, "g6.xlarge").SlotPCIeWidth(); w != 8 || b != "profile g6.xlarge" {
		t.Errorf("g6.xlarge slot: x%d (%s)", w, b)
	}
	if w, _ := profiled(t, "p5.48xlarge").SlotPCIeWidth(); w != 0 {
		t.Errorf("p5 slot: x%d, want none (the GPU's maximum)", w)
	}
	for w, ok := range map[int]bool{0: true, 8: true, 16: true, 3: false, -8: false, 64: false} {
		errs := settings.Expectations{PCIeWidth: w}.Validate()
		if (len(errs) == 0) != ok || !ok && !strings.Contains(errs[0].Error(), "expect.pcie_width") {
			t.Errorf("expect.pcie_width = %d: %v", w, errs)
		}
	}
}

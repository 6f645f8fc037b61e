package checks

import (
	"cmp"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/instancetype"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func init() {
	register(Entry{
		ID: result.GPU, Phase: PhaseHost, Family: "gpu", Order: 200, Judge: judgeGPU,
		Doc:   "GPU count and model equal the expectation (setting, profile, else the PCI bus), and `nvidia-smi` lists as many GPUs as the PCI bus has NVIDIA GPUs",
		Reads: "`nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader`, `/sys/bus/pci/devices`",
	})
	register(Entry{
		ID: result.NvidiaDriver, Phase: PhaseHost, Family: "gpu", Order: 210, Judge: judgeNvidiaDriver,
		Doc:   "every GPU reports the expected driver version, and it agrees with the loaded kernel module (no driver/library mismatch)",
		Reads: "`nvidia-smi` (same query), `modinfo -F version nvidia`",
	})
}

// judgeGPU judges the GPUs nvidia-smi lists. Whatever the profile or the settings say, fewer
// GPUs in nvidia-smi than NVIDIA GPUs on the PCI bus fails: that is the signature of a GPU
// that fell off the bus or that the driver lost.
func judgeGPU(f facts.Run, t Target) result.Check {
	h := f.Host
	id := result.GPU
	want, basis, counted := t.expectedGPUs()
	model, modelBasis := t.Expect.GPUModel, BasisSetting
	if model == "" && t.Profile != nil {
		model, modelBasis = t.Profile.GPUModel, t.profileName()
	}
	var parts []string
	if counted {
		parts = append(parts, fmt.Sprintf("%d GPUs", want))
	}
	if model != "" {
		parts = append(parts, model)
	}
	if t.PCI != nil {
		parts = append(parts, fmt.Sprintf("= %d NVIDIA GPUs on the PCI bus", len(t.PCI.GPUs)))
	}
	expected := strings.Join(parts, ", ")
	basisText := basis
	if model != "" && modelBasis != basis {
		basisText = strings.Trim(basis+", model: "+modelBasis, ", ")
	}
	ev := func() string { return evidence(h.GPUs.Evidence, h.PCI.Evidence) }

	if !h.GPUs.OK() {
		return check(id, result.Fail, basisText, expected, "nvidia-smi failed", h.GPUs.Problem, ev())
	}
	gpus := h.GPUs.Value
	names := map[string]int{}
	var wrong []string
	for _, g := range gpus {
		names[g.Name]++
		if !modelMatches(g.Name, model) {
			wrong = append(wrong, fmt.Sprintf("GPU %d %q", g.Index, g.Name))
		}
	}
	var have []string
	for n, c := range names {
		have = append(have, fmt.Sprintf("%d x %s", c, n))
	}
	sort.Strings(have)
	actual := strings.Join(have, ", ")
	if t.PCI != nil {
		actual += fmt.Sprintf("; PCI: %d NVIDIA GPUs", len(t.PCI.GPUs))
	}

	var fails []string
	switch {
	case t.PCI == nil:
		fails = append(fails, "the PCI inventory could not be read, so a GPU missing from nvidia-smi cannot be told from one missing from the bus: "+t.PCIProblem)
	case len(gpus) < len(t.PCI.GPUs):
		fails = append(fails, fmt.Sprintf("nvidia-smi lists %d GPUs but the PCI bus has %d NVIDIA GPUs: a GPU fell off the bus or the driver lost it (check dmesg for Xid 79; reboot, else retire the instance)", len(gpus), len(t.PCI.GPUs)))
	case len(gpus) > len(t.PCI.GPUs):
		fails = append(fails, fmt.Sprintf("nvidia-smi lists %d GPUs but the PCI bus has only %d NVIDIA GPUs (%s): the two cannot both be right", len(gpus), len(t.PCI.GPUs), facts.PCIIDs(t.PCI.GPUs)))
	}
	if basis == BasisEC2 && t.PCI != nil && len(t.PCI.GPUs) != want {
		fails = append(fails, fmt.Sprintf("DescribeInstanceTypes says %s has %d GPUs but the PCI bus has %d NVIDIA GPUs (%s)", t.InstanceType, want, len(t.PCI.GPUs), facts.PCIIDs(t.PCI.GPUs)))
	} else if basis != BasisEC2 && t.Profile != nil && t.PCI != nil && t.Expect.GPUCount == 0 && t.Profile.GPUCount > 0 && len(t.PCI.GPUs) != t.Profile.GPUCount {
		fails = append(fails, fmt.Sprintf("the %s says %d GPUs but the PCI bus has %d NVIDIA GPUs (%s)", t.profileName(), t.Profile.GPUCount, len(t.PCI.GPUs), facts.PCIIDs(t.PCI.GPUs)))
	}
	if counted && len(gpus) != want && (basis != BasisPCI || len(gpus) >= len(t.PCI.GPUs)) {
		fails = append(fails, fmt.Sprintf("nvidia-smi lists %d GPUs, %s says %d", len(gpus), basis, want))
	}
	if len(gpus) == 0 {
		fails = append(fails, "no GPU at all: this host cannot bake a GPU image")
	}
	if len(wrong) > 0 {
		fails = append(fails, fmt.Sprintf("not %s (%s): %s", model, modelBasis, strings.Join(wrong, ", ")))
	}
	memFails, memNote := judgeGPUMemorySize(h, t)
	fails = append(fails, memFails...)
	if memNote != "" {
		expected += "; " + memNote
	}
	if len(fails) > 0 {
		return check(id, result.Fail, basisText, expected, actual, strings.Join(fails, "; "), evidence(ev(), h.GPUMemory.Evidence))
	}
	if t.Profile == nil && t.EC2 != nil && t.Expect.GPUModel == "" {
		return check(id, result.Warn, basisText, expected, actual,
			t.noProfileNote()+": the GPU count and memory were judged from DescribeInstanceTypes, the model only roughly (EC2 names it "+strconv.Quote(t.EC2.GPUName)+"); set expect.gpu_model to pin it", "")
	}
	if t.Profile == nil && t.Expect.GPUCount <= 0 && t.Expect.GPUModel == "" {
		return check(id, result.Warn, basisText, expected, actual,
			t.noProfileNote()+": the GPU count was judged against the PCI inventory only and the model not at all; set expect.gpu_count and expect.gpu_model to pin them", "")
	}
	return check(id, result.Pass, basisText, expected, actual, "", "")
}

// judgeGPUMemorySize compares each GPU's memory.total with EC2's per-GPU figure within
// instancetype.MemoryTolerance. Without EC2's figure nothing is judged (note says so); with it,
// an unreadable memory.total fails: it cannot be told from a wrong GPU.
func judgeGPUMemorySize(h facts.Host, t Target) (fails []string, note string) {
	if t.EC2 == nil || t.EC2.GPUMemoryMiB <= 0 {
		return nil, ""
	}
	api := t.EC2.GPUMemoryMiB
	note = fmt.Sprintf("%d MiB per GPU ±%g%% (from DescribeInstanceTypes)", api, instancetype.MemoryTolerance*100)
	if !h.GPUMemory.OK() {
		return []string{"memory.total unreadable, so the GPUs' memory cannot be compared with DescribeInstanceTypes' " + strconv.Itoa(api) + " MiB: " + h.GPUMemory.Problem}, note
	}
	for _, g := range h.GPUMemory.Value {
		if !instancetype.MemoryAgrees(api, g.TotalMiB) {
			fails = append(fails, fmt.Sprintf("GPU %d has %d MiB, DescribeInstanceTypes says %d MiB per GPU for %s (tolerance %g%%): not the GPU this type has", g.Index, g.TotalMiB, api, t.InstanceType, instancetype.MemoryTolerance*100))
		}
	}
	return fails, note
}

// judgeNvidiaDriver judges that nvidia-smi and the kernel module report the same driver (a
// mismatch is NVML's "Driver/library version mismatch") and, when pinned, the version.
func judgeNvidiaDriver(f facts.Run, t Target) result.Check {
	h := f.Host
	id := result.NvidiaDriver
	pin := t.Expect.NvidiaDriver
	expected, basis := "nvidia-smi and kernel module agree", BasisRule
	if pin != "" {
		expected, basis = pin+" (nvidia-smi and kernel module agree)", BasisSetting
	}
	ev := func() string {
		return evidence(h.GPUs.Evidence, h.NvidiaModule.Evidence, h.NvidiaLicense.Evidence)
	}
	if !h.GPUs.OK() {
		return check(id, result.Fail, basis, expected, "unknown", h.GPUs.Problem, ev())
	}
	if !h.NvidiaModule.OK() || h.NvidiaModule.Value == "" {
		return check(id, result.Fail, basis, expected, "nvidia kernel module not found", cmp.Or(h.NvidiaModule.Problem, "modinfo reported no version of the nvidia module"), ev())
	}
	if len(h.GPUs.Value) == 0 {
		return check(id, result.Fail, basis, expected, "no GPU", "nvidia-smi lists no GPU: the driver it runs cannot be compared with the kernel module", ev())
	}
	kmod := h.NvidiaModule.Value
	actual := kmod
	if h.NvidiaLicense.OK() {
		actual += " (license " + h.NvidiaLicense.Value + ")"
	}
	var fails []string
	for _, g := range h.GPUs.Value {
		if g.DriverVersion != kmod {
			fails = append(fails, fmt.Sprintf("nvidia-smi reports driver %s on GPU %d but the nvidia kernel module is %s (driver/library mismatch: reboot, or reinstall one driver)", g.DriverVersion, g.Index, kmod))
			break
		}
	}
	if ok, msg := pinned(pin, kmod); !ok {
		fails = append(fails, msg)
	}
	if len(fails) > 0 {
		return check(id, result.Fail, basis, expected, actual, strings.Join(fails, "; "), ev())
	}
	msg := ""
	if pin == "" {
		msg = "the version is not pinned (set expect.nvidia_driver to judge it); nvidia-smi and the module agree"
	}
	return check(id, result.Pass, basis, expected, actual, msg, "")
}

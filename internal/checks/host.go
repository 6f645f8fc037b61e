package checks

import (
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// A Judge decides one check from a host's facts and what they are compared against. It reads
// nothing itself: a fact that could not be read fails the check with the fact's problem and
// raw evidence; it never passes.
type Judge func(facts.Host, Target) result.Check

// HostCheck is one entry of the host suite.
type HostCheck struct {
	ID string
	// Family groups checks in the docs: "gpu", "efa", "storage", "kernel".
	Family string
	Judge  Judge
}

// HostSuite is the host suite in report order, cheap to expensive: the one list of host
// checks. result.HostIDs is checked against it by a test.
var HostSuite = []HostCheck{
	{result.GPU, "gpu", judgeGPU},
	{result.NvidiaDriver, "gpu", judgeNvidiaDriver},
	{result.Persistence, "gpu", judgePersistence},
	{result.GPUMemory, "gpu", judgeGPUMemory},
	{result.NVLink, "gpu", judgeNVLink},
	{result.FabricManager, "gpu", judgeFabricManager},
	{result.EFADriver, "efa", judgeEFADriver},
	{result.EFAInstaller, "efa", judgeEFAInstaller},
	{result.EFADevices, "efa", judgeEFADevices},
	{result.GDRCopy, "gpu", judgeGDRCopy},
	{result.Memlock, "kernel", judgeMemlock},
	{result.NVMe, "storage", judgeNVMe},
	{result.Lustre, "storage", judgeLustre},
	{result.Xid, "kernel", judgeXid},
}

// EvaluateHost judges h against t with every check of HostSuite, in order.
func EvaluateHost(h facts.Host, t Target) []result.Check {
	out := make([]result.Check, len(HostSuite))
	for i, c := range HostSuite {
		out[i] = c.Judge(h, t)
	}
	return out
}

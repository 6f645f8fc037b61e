package checks

import (
	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// EvaluateHost judges the host command output against t. Checks come cheap to expensive, one
// result per stable ID, in result.HostIDs order. A command that is missing, exits non-zero,
// times out or prints something unreadable fails its check with the raw output as evidence;
// it never passes.
func EvaluateHost(sections map[string]bundle.Section, t Target) []result.Check {
	gpu, gpus := checkGPU(sections, t)
	return []result.Check{
		gpu,
		checkNvidiaDriver(sections, t, gpus),
		checkFabricManager(sections, t),
		checkEFADriver(sections, t),
		checkEFAInstaller(sections, t),
		checkEFADevices(sections, t),
		checkGDRCopy(sections, t),
		checkMemlock(sections, t),
		checkNVMe(sections, t),
		checkLustre(sections, t),
		checkXid(sections, t),
	}
}

// Package result holds the typed outcome of one check. The guard, the host validation and the
// NCCL test all judge into this type, and the reports render it; the check IDs are a stable
// interface that reports and CI tooling key on.
package result

// Status is the outcome of one check.
type Status string

const (
	Pass Status = "pass"
	Fail Status = "fail"
	Warn Status = "warn"
	Skip Status = "skip"
)

// Stable check IDs.
const (
	Kernel          = "kernel"
	Holds           = "holds"
	Packages        = "packages"
	NextBootKernel  = "next-boot-kernel"
	DKMS            = "dkms"
	GPU             = "gpu"
	NvidiaDriver    = "nvidia-driver"
	FabricManager   = "fabricmanager"
	EFADriver       = "efa-driver"
	EFAInstaller    = "efa-installer"
	EFADevices      = "efa-devices"
	GDRCopy         = "gdrcopy"
	Memlock         = "memlock"
	NVMe            = "nvme"
	Lustre          = "lustre"
	Xid             = "xid"
	NCCLCorrectness = "nccl-correctness"
	NCCLBusBW       = "nccl-busbw"
	NCCLTransport   = "nccl-transport"
)

// The check IDs in report order, by the part of the bake that judges them.
var (
	GuardIDs = []string{Kernel, Holds, Packages, NextBootKernel, DKMS}
	HostIDs  = []string{GPU, NvidiaDriver, FabricManager, EFADriver, EFAInstaller, EFADevices, GDRCopy, Memlock, NVMe, Lustre, Xid}
	NCCLIDs  = []string{NCCLCorrectness, NCCLBusBW, NCCLTransport}
	// IDs is every check in report order.
	IDs = append(append(append([]string{}, GuardIDs...), HostIDs...), NCCLIDs...)
)

// Check is the judged outcome of one check.
type Check struct {
	ID         string `json:"id"`
	Status     Status `json:"status"`
	Expected   string `json:"expected"`
	Actual     string `json:"actual"`
	Message    string `json:"message,omitempty"`
	Evidence   string `json:"evidence,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// Failed reports whether any check failed.
func Failed(checks []Check) bool {
	for _, c := range checks {
		if c.Status == Fail {
			return true
		}
	}
	return false
}

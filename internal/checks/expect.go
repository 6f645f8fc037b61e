// Package checks judges the output of the host validation commands and of the 1-node NCCL test
// into typed results. It runs nothing: the provisioner sends the commands this package lists and
// hands their output back.
package checks

// Expectations is what the host must look like. A zero value means "take it from the instance
// profile", and where the profile has nothing either, "report the value, do not judge it".
// Version fields take an exact version ("595.91.07") or a constraint (">= 3.3.0",
// ">= 3.3, < 4"), see package constraint.
type Expectations struct {
	// InstanceType is the resolved EC2 instance type (product_name, IMDSv2 or the setting).
	InstanceType string

	Kernel       string
	NvidiaDriver string
	EFADriver    string
	EFAInstaller string
	Libfabric    string
	AWSOFINCCL   string
	GDRCopy      string
	Lustre       string

	GPUCount int
	// GPUModel matches when the nvidia-smi name contains it as a whole word, case-insensitively
	// ("B200" matches "NVIDIA B200" but not "NVIDIA GB200").
	GPUModel string
	EFACount int

	// FabricManager, NVMe and LustreExpected are tri-state: nil takes the profile's answer.
	FabricManager  *bool
	NVMe           *bool
	LustreExpected *bool
	// NVMePath is where local NVMe must be mounted; default /opt/dlami/nvme.
	NVMePath string

	// BusBWFloorGBps is the lowest acceptable busbw (GB/s) at the largest message size.
	BusBWFloorGBps float64
	// IgnoreXids lists XID numbers that do not fail the xid check (they are still reported).
	IgnoreXids []int
}

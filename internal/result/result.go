// Package result holds the typed outcome of one check. The guard, the host validation and the
// NCCL test all judge into this type, and the reports render it; the check IDs are a stable
// interface that reports and CI tooling key on.
package result

// Status is the outcome of one check.
type Status string

const (
	// Pass: the check compared the host with an expectation and found it right.
	Pass Status = "pass"
	// Fail: the host is wrong, or could not be read (fail closed).
	Fail Status = "fail"
	// Warn: worth a look but not a failure; also every check that had nothing to compare
	// against ("not judged"), whose message names the setting that would make it judge.
	Warn Status = "warn"
	// Skip: the check does not apply here, or never ran because the bake stopped first.
	Skip Status = "skip"
	// Error: the check or stage could not complete (cancelled, internal error); it fails the
	// bake like Fail, and JUnit reports it as an <error>.
	Error Status = "error"
)

// Failing reports whether a status fails the bake.
func (s Status) Failing() bool { return s == Fail || s == Error }

// Stable check IDs (package checks owns what each means: its catalog lists them all, with the
// phase that judges them).
const (
	Kernel         = "kernel"
	Holds          = "holds"
	Packages       = "packages"
	NextBootKernel = "next-boot-kernel"
	DKMS           = "dkms"
	GPU            = "gpu"
	InstanceType   = "instance-type"
	NvidiaDriver   = "nvidia-driver"
	Persistence    = "persistence"
	GPUMemory      = "gpu-memory"
	NVLink         = "nvlink"
	FabricManager  = "fabricmanager"
	// IMEX is NVIDIA IMEX as the imex setting's owner wants it (multi-node NVLink types).
	IMEX = "imex"
	// NVLinkFabric is the multi-node NVLink fabric of an UltraServer tray (GB200).
	NVLinkFabric    = "nvlink-fabric"
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
	// Judged under load, and the deeper tests that follow the NCCL test.
	PCIeLink      = "pcie-link"
	GPUClocks     = "gpu-clocks"
	DCGM          = "dcgm"
	EFATraffic    = "efa-traffic"
	GPUDirectRDMA = "gpudirect-rdma"
	// ContainerGPU is a container started with all GPUs on each engine of the image.
	ContainerGPU = "container-gpu"
	// The NCCL test across a verification's nodes (post-processor, nodes >= 2).
	NCCLMultiNode = "nccl-multinode"
	// NCCLMNNVL is the same test over multi-node NVLink (NCCL_MNNVL_ENABLE=1) on UltraServer
	// trays (GB200).
	NCCLMNNVL = "nccl-mnnvl"
	// IMEXDomain is the IMEX domain brought up across the verification's trays before that
	// second run.
	IMEXDomain = "imex-domain"
	// The first boot of an instance launched from the baked AMI (post-processor).
	FirstBootKernel   = "first-boot-kernel"
	FirstBootPackages = "first-boot-packages"
	// The node check (cmd/dlami-node-check) at every boot of a node: memlock where jobs run,
	// and the node check's own verdict in a first-boot verification.
	JobMemlock = "job-memlock"
	NodeCheck  = "node-check"
	// ImageHygiene is the bake's last step with image_hygiene = true: the build's SSH key,
	// the host keys, the machine id, cloud-init's instance state and shell history are gone,
	// read back after the cleanup. Reported only by bakes that ask for it.
	ImageHygiene = "image-hygiene"
)

// Prefixes of the IDs of results that are not checks of the catalog (package checks): each
// layer is a result entry ("layer:slurm"), a stage that failed without a check of its own is
// one ("stage:reboot"), and so is the way the bake ended when it did not finish
// ("bake:cancelled", "bake:error"); each site check is one ("site:gpu-fans").
const (
	LayerPrefix = "layer:"
	StagePrefix = "stage:"
	BakePrefix  = "bake:"
	// SitePrefix starts the ids of the site checks: "site:<executable>".
	SitePrefix = "site:"
)

// Check is the judged outcome of one check.
type Check struct {
	ID     string `json:"id"`
	Status Status `json:"status"`
	// Basis says where the expectation came from ("setting", "profile p6-b200.48xlarge",
	// "PCI inventory", "baseline", "rule"). A pass always has one: a check that had nothing
	// to compare against warns instead.
	Basis      string `json:"basis,omitempty"`
	Expected   string `json:"expected"`
	Actual     string `json:"actual"`
	Message    string `json:"message,omitempty"`
	Evidence   string `json:"evidence,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	// ExitCode is a layer's exit status (layer entries only).
	ExitCode *int `json:"exit_code,omitempty"`
}

// Failed reports whether any check failed (status fail or error).
func Failed(checks []Check) bool {
	for _, c := range checks {
		if c.Status.Failing() {
			return true
		}
	}
	return false
}

// FailedIDs lists the IDs of the failing checks, in order.
func FailedIDs(checks []Check) []string {
	ids := []string{}
	for _, c := range checks {
		if c.Status.Failing() {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// Find returns the check with id.
func Find(checks []Check, id string) (Check, bool) {
	for _, c := range checks {
		if c.ID == id {
			return c, true
		}
	}
	return Check{}, false
}

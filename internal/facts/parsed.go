package facts

import (
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dcgmdiag"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/efapkgs"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpuhealth"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/lsmod"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nccltests"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvlink"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pingpong"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/rdmastat"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/xid"
)

// The parsed shapes the judges read, named here: each parser (internal/parse/...) owns its
// shape and its parsing, package probe runs the parsers, and package checks reads facts only,
// never raw output.
type (
	PCIInventory   = pci.Inventory
	NvidiaGPU      = nvsmi.GPU
	GPUHealth      = gpuhealth.GPU
	HealthFlag     = gpuhealth.Flag
	HealthCount    = gpuhealth.Count
	HealthKind     = gpuhealth.Kind
	NVLinkStatus   = nvlink.Status
	NVLinkCounters = nvlink.Counters
	NVLinkFabric   = nvlink.Fabric
	FabricKind     = nvlink.FabricKind
	FabricIDKind   = nvlink.IDKind
	NVLinkCounter  = nvlink.CounterRef
	RDMALink       = rdmastat.Link
	EFAInstalled   = efapkgs.Installed
	ModuleSet      = lsmod.Set
	DCGMReport     = dcgmdiag.Report
	DCGMOutcome    = dcgmdiag.Outcome
	DCGMExit       = dcgmdiag.Exit
	NCCLResult     = nccltests.Result
	NCCLHost       = nccltests.HostNet
	NCCLProvider   = nccltests.Provider
	NCCLTransport  = nccltests.Transport
	PingPongTable  = pingpong.Table
	PingPongRow    = pingpong.Row
	XidEvent       = xid.Event
	NVLinkChange   = nvlink.Change
	RDMAChange     = rdmastat.Change
)

// DCGM's outcomes of one test on one entity.
const (
	DCGMPass    = dcgmdiag.Pass
	DCGMFail    = dcgmdiag.Fail
	DCGMWarn    = dcgmdiag.Warn
	DCGMSkip    = dcgmdiag.Skip
	DCGMNotRun  = dcgmdiag.NotRun
	DCGMUnknown = dcgmdiag.Unknown
)

// What a health field printed: a value, or which kind of "no value" (see gpuhealth.Kind).
const (
	KindNotQueried    = gpuhealth.KindNotQueried
	KindValue         = gpuhealth.KindValue
	KindNotApplicable = gpuhealth.KindNotApplicable
	KindNotSupported  = gpuhealth.KindNotSupported
)

// What a GPU's Fabric section says of its NVSwitch fabric registration (see nvlink.FabricKind).
const (
	FabricRegistered    = nvlink.FabricRegistered
	FabricNotApplicable = nvlink.FabricNotApplicable
	FabricNotSupported  = nvlink.FabricNotSupported
	FabricPending       = nvlink.FabricPending
	FabricFailed        = nvlink.FabricFailed
	FabricUnreadable    = nvlink.FabricUnreadable
	FabricAbsent        = nvlink.FabricAbsent
)

// What a GPU's CliqueId or ClusterUUID says (see nvlink.IDKind): zero on a single-node
// NVSwitch board (healthy there), set on a multi-node NVLink tray.
const (
	FabricIDAbsent     = nvlink.IDAbsent
	FabricIDZero       = nvlink.IDZero
	FabricIDSet        = nvlink.IDSet
	FabricIDUnreadable = nvlink.IDUnreadable
)

// MissingGPUs returns the indexes 0..want-1 a health reading does not list (see
// gpuhealth.Missing).
func MissingGPUs(gpus []GPUHealth, want int) []int { return gpuhealth.Missing(gpus, want) }

// NVLinkUnreadable lists the NVLink counters whose value the driver could not give (see
// nvlink.Unreadable); NVLinkReadable counts those it gave as numbers.
func NVLinkUnreadable(cs []NVLinkCounters) []NVLinkCounter { return nvlink.Unreadable(cs) }

// NVLinkReadable counts the integer NVLink counters of all links (see nvlink.Readable).
func NVLinkReadable(cs []NVLinkCounters) int { return nvlink.Readable(cs) }

// DCGMExitStatus names dcgmi's exit status (see dcgmdiag.ExitStatus).
func DCGMExitStatus(status int) DCGMExit { return dcgmdiag.ExitStatus(status) }

// NVLinkDelta compares two readings of the NVLink error counters (see nvlink.Delta).
func NVLinkDelta(before, after []NVLinkCounters) ([]NVLinkChange, error) {
	return nvlink.Delta(before, after)
}

// RDMADelta compares two readings of the EFA device counters (see rdmastat.Delta).
func RDMADelta(before, after []RDMALink) ([]RDMAChange, error) {
	return rdmastat.Delta(before, after)
}

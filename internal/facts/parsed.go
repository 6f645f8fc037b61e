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
	NVLinkStatus   = nvlink.Status
	NVLinkCounters = nvlink.Counters
	NVLinkFabric   = nvlink.Fabric
	RDMALink       = rdmastat.Link
	EFAInstalled   = efapkgs.Installed
	ModuleSet      = lsmod.Set
	DCGMReport     = dcgmdiag.Report
	DCGMOutcome    = dcgmdiag.Outcome
	NCCLResult     = nccltests.Result
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

// NVLinkDelta compares two readings of the NVLink error counters (see nvlink.Delta).
func NVLinkDelta(before, after []NVLinkCounters) ([]NVLinkChange, error) {
	return nvlink.Delta(before, after)
}

// RDMADelta compares two readings of the EFA device counters (see rdmastat.Delta).
func RDMADelta(before, after []RDMALink) ([]RDMAChange, error) {
	return rdmastat.Delta(before, after)
}

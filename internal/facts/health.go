package facts

import (
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dcgmdiag"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpuhealth"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvlink"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pingpong"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/rdmastat"
)

// Health is what the GPUs and the fabric say of their own health, beyond being present: the
// facts fleet health checks read (AWS's GPU cluster health check, Azure's node health checks).
type Health struct {
	// GPUs are nvidia-smi's health fields per GPU (ECC, row remapping, PCIe link, clock event
	// reasons, persistence mode).
	GPUs Fact[[]gpuhealth.GPU]
	// NVLink is each GPU's link state (nvidia-smi nvlink -s); NVLinkErrors its error counters
	// (nvidia-smi nvlink -e); Fabric each GPU's NVSwitch fabric registration (nvidia-smi -q).
	NVLink       Fact[[]nvlink.Status]
	NVLinkErrors Fact[[]nvlink.Counters]
	Fabric       Fact[[]nvlink.Fabric]
	// RDMAStats are the EFA devices' counters (rdma statistic show).
	RDMAStats Fact[[]rdmastat.Link]
}

// Load is what the host showed while it worked: GPU health samples taken while the NCCL test
// ran (idle GPUs lower their PCIe link speed on purpose, so only these judge the link), and the
// NVLink counters before and after the test.
type Load struct {
	// Ran is false when no load ran (the NCCL test was skipped); Why says why.
	Ran bool
	Why string
	// Samples are the readings taken during the test; a sample that could not be read is kept
	// with its problem.
	Samples []Fact[[]gpuhealth.GPU]
	// NVLinkBefore and NVLinkAfter are the counters read around the test.
	NVLinkBefore, NVLinkAfter Fact[[]nvlink.Counters]
}

// DCGM is a dcgmi diag run: its report, or why it could not run. Level is the run level; 0
// when it was not run.
type DCGM struct {
	Level  int
	Report dcgmdiag.Report
	// StartedHostEngine is true when the run started nv-hostengine itself (and stopped it).
	StartedHostEngine bool
}

// PingPong is one EFA device's RDM ping-pong between a server and a client on the device,
// with shared-memory transfer off so the bytes cross the device.
type PingPong struct {
	Device string
	// Client is the client's table (its largest row carries the bandwidth); TimedOut when the
	// pair was stopped at its bound.
	Client   []pingpong.Table
	TimedOut bool
	ExitCode int
}

// EFATraffic is the traffic test of every EFA device, with the device counters around it.
type EFATraffic struct {
	Devices        []Fact[PingPong]
	StatsBefore    Fact[[]rdmastat.Link]
	StatsAfter     Fact[[]rdmastat.Link]
	ShmTransferOff bool
}

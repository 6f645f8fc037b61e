package facts

import (
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpuhealth"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvlink"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/rdmastat"
)

// Health is what the GPUs and the fabric say of their own health, beyond being present: the
// facts fleet health checks read (AWS's GPU cluster health check, Azure's node health checks).
type Health struct {
	// GPUs are nvidia-smi's health fields per GPU (ECC, row remapping, PCIe link, clock event
	// reasons, persistence mode).
	GPUs Fact[[]gpuhealth.GPU]
	// Query is the same fields as `nvidia-smi -q` prints them, with each GPU's product name
	// and architecture ("Ampere", "Hopper"...), which the CSV query cannot ask for: which
	// health fields a GPU has depends on its generation.
	Query Fact[[]gpuhealth.GPU]
	// NVLink is each GPU's link state (nvidia-smi nvlink -s); NVLinkErrors its error counters
	// (nvidia-smi nvlink -e); Fabric each GPU's NVSwitch fabric registration (nvidia-smi -q).
	NVLink       Fact[[]nvlink.Status]
	NVLinkErrors Fact[[]nvlink.Counters]
	Fabric       Fact[[]nvlink.Fabric]
	// RDMAStats are the EFA devices' counters (rdma statistic show).
	RDMAStats Fact[[]rdmastat.Link]
}

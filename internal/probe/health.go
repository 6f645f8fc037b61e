package probe

import (
	"context"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpuhealth"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvlink"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/rdmastat"
)

// gpuHealthCommand asks for gpuhealth.Query with its header line (--format=csv): the parser
// reads each column by the name the header gives it, not by its position.
func gpuHealthCommand(timeout time.Duration) bundle.Command {
	return bundle.Command{Name: sectionGPUHealth, Shell: `"$1" --query-gpu=` + gpuhealth.Query + ` --format=csv`,
		Timeout: timeout, Tool: hosttools.Ptr(hosttools.NvidiaSMI)}
}

func nvlinkErrorsCommand(timeout time.Duration) bundle.Command {
	return bundle.Command{Name: sectionNVLinkErrors, Shell: `"$1" nvlink -e`, Timeout: timeout, Tool: hosttools.Ptr(hosttools.NvidiaSMI)}
}

func rdmaStatsCommand(timeout time.Duration) bundle.Command {
	return bundle.Command{Name: sectionRDMAStats, Shell: `"$1" statistic show`, Timeout: timeout, Tool: hosttools.Ptr(hosttools.Rdma)}
}

// GPUHealth reads the GPUs' health fields once: sampled while the NCCL test runs, over a
// session of its own.
func GPUHealth(ctx context.Context, r Runner, o Options) (facts.Fact[[]gpuhealth.GPU], error) {
	sections, err := query(ctx, r, "GPU health sample", []bundle.Command{gpuHealthCommand(o.timeout())})
	if err != nil {
		return facts.Fact[[]gpuhealth.GPU]{}, err
	}
	return parseWith(sections, sectionGPUHealth, gpuhealth.Parse), nil
}

// NVLinkErrors reads the NVLink error counters: before and after a load, to see what grew.
func NVLinkErrors(ctx context.Context, r Runner, o Options) (facts.Fact[[]nvlink.Counters], error) {
	sections, err := query(ctx, r, "NVLink counters", []bundle.Command{nvlinkErrorsCommand(o.timeout())})
	if err != nil {
		return facts.Fact[[]nvlink.Counters]{}, err
	}
	return parseWith(sections, sectionNVLinkErrors, nvlink.ParseErrors), nil
}

// RDMAStats reads the EFA devices' counters: before and after the traffic test.
func RDMAStats(ctx context.Context, r Runner, o Options) (facts.Fact[[]rdmastat.Link], error) {
	sections, err := query(ctx, r, "EFA counters", []bundle.Command{rdmaStatsCommand(o.timeout())})
	if err != nil {
		return facts.Fact[[]rdmastat.Link]{}, err
	}
	return parseWith(sections, sectionRDMAStats, rdmastat.Parse), nil
}

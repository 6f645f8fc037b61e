//go:generate packer-sdc mapstructure-to-hcl2 -type MultiNodeConfig
//go:generate packer-sdc struct-markdown

package dlami

import (
	"errors"
	"fmt"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/layer"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// MultiNodeConfig is the `multi_node` block: the NCCL all-reduce across the verification's
// nodes (`nodes` of 2 or more).
type MultiNodeConfig struct {
	// all_reduce_perf's smallest message size (`-b`), bytes with an optional K, M or G.
	// Default `8`.
	MinBytes string `mapstructure:"min_bytes"`
	// all_reduce_perf's largest message size (`-e`). Default `2G`: where the published 2-node
	// figures are read, and what an A100 40GB holds three buffers of.
	MaxBytes string `mapstructure:"max_bytes"`
	// How long the whole run may take before it is stopped and fails (a collective across
	// nodes whose EFA traffic the security groups block never ends by itself). Default 10m.
	Timeout time.Duration `mapstructure:"timeout"`
	// The lowest acceptable inter-node bus bandwidth at the largest size, GB/s. Default: the
	// instance type's published 2-node figure (p5.48xlarge 350, p4de.24xlarge 60, at 2 GiB),
	// else the check warns and names this setting. Above 10000 is refused.
	BusBWFloorGBps float64 `mapstructure:"busbw_floor_gbps"`
	// Ranks per node, one per GPU. Default: the first node's GPU count.
	RanksPerNode int `mapstructure:"ranks_per_node"`
	// The CUDA version whose nccl-tests binaries run (`/usr/local/cuda-<v>/efa/test-cuda-<v>`).
	// Default: the newest on the image.
	CUDAVersion string `mapstructure:"cuda_version"`
	// NCCL and libfabric tuning passed to every rank (`NCCL_*`, `FI_*`, `OFI_NCCL_*`), never
	// written into a report or the image. Values that can be secret (a credential by the
	// variable's name, a URL's user and password, a token-like value of 20 characters or more)
	// are kept out of the build's output, its logs and the reports, as for the provisioner's
	// `nccl.env`. `NCCL_DEBUG_FILE` and `NCCL_DEBUG_SUBSYS` are refused: they hide the INFO
	// lines the check reads.
	Env map[string]string `mapstructure:"env"`
}

// Secrets are the values no log, UI line or report may show: the AWS credentials and the
// multi_node.env values that can be secret (layer.EnvSecrets: by the variable's name, inside a
// URL, or long enough to be a token), as the provisioner treats nccl.env.
func (c *Config) Secrets() []string {
	return append(c.AccessConfig.Secrets(), layer.EnvSecrets(c.MultiNode.Env)...)
}

// multiNode is the multi-node test's settings, nodes included.
func (c *Config) multiNode() settings.MultiNode {
	m := c.MultiNode
	return settings.MultiNode{Nodes: c.Nodes, RanksPerNode: m.RanksPerNode, CUDAVersion: m.CUDAVersion, MinBytes: m.MinBytes, MaxBytes: m.MaxBytes,
		Timeout: m.Timeout, BusBWFloorGBps: m.BusBWFloorGBps, Env: m.Env}
}

// prepareMultiNode validates nodes and the multi_node block: a test across nodes needs EFA
// and a placement group (a temporary one unless placement_group names one).
func (c *Config) prepareMultiNode() []error {
	var errs []error
	m, err := c.multiNode().Resolved()
	if err != nil {
		return []error{err}
	}
	c.Nodes, c.multi = m.Nodes, m
	if !m.On() {
		if c.MultiNode.MinBytes != "" || c.MultiNode.MaxBytes != "" || c.MultiNode.Timeout != 0 || c.MultiNode.BusBWFloorGBps != 0 ||
			c.MultiNode.RanksPerNode != 0 || c.MultiNode.CUDAVersion != "" || len(c.MultiNode.Env) > 0 {
			errs = append(errs, errors.New("multi_node without nodes: the block sets the test across nodes, which runs with nodes = 2 or more"))
		}
		return errs
	}
	if c.efa == 0 {
		errs = append(errs, fmt.Errorf(`nodes = %d with efa = "none": the test across nodes proves the EFA fabric; use efa = "all" (the default)`, c.Nodes))
	}
	if c.PlacementGroup == "" {
		// EFA fleets are launched into a cluster placement group: one made for the test when
		// the template names none.
		c.TemporaryPlacementGroup = true
	}
	return errs
}

package settings

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// MultiNode are the settings of the multi-node NCCL all-reduce a verification runs across
// Nodes instances (the post-processor's nodes and multi_node block).
type MultiNode struct {
	// Nodes is how many instances run the test; below 2 there is no multi-node test.
	Nodes int `json:"nodes"`
	// RanksPerNode is one rank per GPU of each node; 0 counts the GPUs of the first node.
	RanksPerNode int `json:"ranks_per_node,omitempty"`
	// CUDAVersion picks the nccl-tests binary as nccl.cuda_version does; "" the newest.
	CUDAVersion string `json:"cuda_version,omitempty"`
	// MinBytes and MaxBytes are all_reduce_perf's -b and -e ("8", "2G").
	MinBytes string `json:"min_bytes,omitempty"`
	MaxBytes string `json:"max_bytes,omitempty"`
	// Timeout bounds the whole run: a stalled collective (a security group without the
	// self rule) never ends by itself.
	Timeout time.Duration `json:"timeout,omitempty"`
	// BusBWFloorGBps is the lowest acceptable inter-node busbw at the largest size; 0 takes
	// the instance type's sourced figure, else the check warns.
	BusBWFloorGBps float64 `json:"busbw_floor_gbps,omitempty"`
	// Env is passed to every rank (NCCL_* and FI_* tuning); never written anywhere (values
	// may be secret).
	Env map[string]string `json:"-"`
}

// Defaults of the multi-node test. 2 GiB is where the sourced 2-node figures are read (the
// p5.48xlarge and p4de.24xlarge runs of awsome-distributed-training) and what an A100 40GB
// holds three buffers of; 20 iterations keep a 2-node p5 run near a minute.
const (
	MultiNodeDefaultMinBytes = "8"
	MultiNodeDefaultMaxBytes = "2G"
	MultiNodeDefaultTimeout  = 10 * time.Minute
	multiNodeMaxNodes        = 16
	// MultiNodeMaxBusBWGBps bounds busbw_floor_gbps: no EFA fabric comes near it (p5.48xlarge's
	// 3200 Gbps is 400 GB/s), so a floor above it is a unit mistake, and a floor nothing can
	// reach fails every healthy fleet.
	MultiNodeMaxBusBWGBps = 10000
	multiNodeIterations   = "20"
)

// multiNodeEnvKey is what multi_node.env may set: the NCCL and libfabric tuning variables.
var multiNodeEnvKey = regexp.MustCompile(`^(NCCL|FI|OFI_NCCL)_[A-Z0-9_]+$`)

// multiNodeReservedEnv are set by the test itself.
var multiNodeReservedEnv = map[string]bool{"NCCL_DEBUG": true, "FI_PROVIDER": true}

// sizeRE is an all_reduce_perf size: digits with an optional K, M or G.
var sizeRE = regexp.MustCompile(`^[1-9][0-9]{0,12}[KMG]?$`)

// On reports whether a multi-node test runs.
func (m MultiNode) On() bool { return m.Nodes >= 2 }

// Resolved checks m and fills in its defaults, naming the setting it refuses.
func (m MultiNode) Resolved() (MultiNode, error) {
	if m.Nodes < 0 || m.Nodes > multiNodeMaxNodes {
		return m, fmt.Errorf("nodes = %d: use 1 (one instance, no multi-node test) to %d", m.Nodes, multiNodeMaxNodes)
	}
	if m.Nodes == 0 {
		m.Nodes = 1
	}
	if m.RanksPerNode < 0 || m.RanksPerNode > 64 {
		return m, fmt.Errorf("multi_node.ranks_per_node = %d: use 1 to 64 (one per GPU), or 0 to count the GPUs", m.RanksPerNode)
	}
	if m.CUDAVersion != "" && !CUDAVersionPattern.MatchString(m.CUDAVersion) {
		return m, fmt.Errorf("multi_node.cuda_version %q: use MAJOR.MINOR as in /usr/local/cuda-13.2 (\"13.2\"), or leave it empty for the newest", m.CUDAVersion)
	}
	if m.MinBytes == "" {
		m.MinBytes = MultiNodeDefaultMinBytes
	}
	if m.MaxBytes == "" {
		m.MaxBytes = MultiNodeDefaultMaxBytes
	}
	lo, err := sizeBytes("multi_node.min_bytes", m.MinBytes)
	if err != nil {
		return m, err
	}
	hi, err := sizeBytes("multi_node.max_bytes", m.MaxBytes)
	if err != nil {
		return m, err
	}
	if lo > hi {
		return m, fmt.Errorf("multi_node.min_bytes %s is above multi_node.max_bytes %s", m.MinBytes, m.MaxBytes)
	}
	if m.Timeout != 0 && (m.Timeout < 10*time.Second || m.Timeout > 6*time.Hour) {
		return m, fmt.Errorf("multi_node.timeout = %s: use a duration from 10s to 6h, or leave it unset for %s", m.Timeout, MultiNodeDefaultTimeout)
	}
	if m.Timeout == 0 {
		m.Timeout = MultiNodeDefaultTimeout
	}
	if !(m.BusBWFloorGBps >= 0 && m.BusBWFloorGBps <= MultiNodeMaxBusBWGBps) {
		return m, fmt.Errorf("multi_node.busbw_floor_gbps = %g: use a bandwidth in GB/s up to %d (p5.48xlarge's 3200 Gbps of EFA is 400 GB/s), or 0 for the instance type's sourced figure", m.BusBWFloorGBps, MultiNodeMaxBusBWGBps)
	}
	for k, v := range m.Env {
		if !multiNodeEnvKey.MatchString(k) {
			return m, fmt.Errorf("multi_node.env key %q: only NCCL_*, FI_* and OFI_NCCL_* variables (NCCL and libfabric tuning) are passed to the ranks", k)
		}
		if multiNodeReservedEnv[k] {
			return m, fmt.Errorf("multi_node.env key %s: set by the test itself (the check reads NCCL_DEBUG=INFO lines; FI_PROVIDER is efa); remove it", k)
		}
		if why, hides := HiddenDebugEnv[k]; hides {
			return m, fmt.Errorf("multi_node.env key %s: %s; remove it", k, why)
		}
		if strings.ContainsAny(v, "\x00\n\r") {
			return m, fmt.Errorf("multi_node.env[%q]: the value contains a NUL or line break", k)
		}
	}
	return m, nil
}

// MaxSizeBytes is MaxBytes in bytes; 0 when it does not parse (Resolved refuses that).
func (m MultiNode) MaxSizeBytes() int64 {
	n, _ := sizeBytes("", m.MaxBytes)
	return n
}

// Args are all_reduce_perf's arguments: the sizes doubling, one GPU per rank, data validated.
func (m MultiNode) Args() []string {
	return []string{"-b", m.MinBytes, "-e", m.MaxBytes, "-f", "2", "-g", "1", "-c", "1", "-n", multiNodeIterations}
}

// sizeBytes reads an all_reduce_perf size ("8", "64M", "2G").
func sizeBytes(setting, s string) (int64, error) {
	if !sizeRE.MatchString(s) {
		return 0, fmt.Errorf("%s %q: use a byte count with an optional K, M or G suffix, as all_reduce_perf reads it (\"8\", \"64M\", \"2G\")", setting, s)
	}
	mult := int64(1)
	switch s[len(s)-1] {
	case 'K':
		mult = 1 << 10
	case 'M':
		mult = 1 << 20
	case 'G':
		mult = 1 << 30
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > (1<<50)/mult {
		return 0, fmt.Errorf("%s %q: too large", setting, s)
	}
	return n * mult, nil
}

// NCCLSettings are the multi-node test as the NCCL test's settings: its CUDA version, ranks per
// node, arguments, timeout and environment.
func (m MultiNode) NCCLSettings() NCCL {
	return NCCL{CUDAVersion: m.CUDAVersion, Ranks: m.RanksPerNode, Args: m.Args(), Timeout: m.Timeout, Env: m.Env, Transport: TransportEFA}
}

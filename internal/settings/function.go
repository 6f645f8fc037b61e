package settings

import (
	"fmt"
	"time"
)

// Function are the settings of the tests that prove the hardware works: DCGM's diagnostics,
// bytes across every EFA device, GPUDirect RDMA. One type serves the provisioner, the
// post-processor, the bill of materials (which carries the bake's, so a later verification
// and every node judge with them) and the node check.
type Function struct {
	DCGMLevel  DCGMLevel  `json:"dcgm_level"`
	EFATraffic EFATraffic `json:"efa_traffic"`
	GDR        GDR        `json:"gpudirect_rdma"`
	// Container is the container-gpu check's (container_check).
	Container ContainerCheck `json:"container_check"`
}

// DCGMLevel is dcgmi diag's run level: 0 turns the diagnostics off.
type DCGMLevel int

// DCGM levels. DefaultDCGMLevel is level 2, the production gate of AWS's GPU cluster health
// check (awsome-distributed-training 4.validation_and_observability/2.gpu-cluster-healthcheck):
// a few minutes, the medium set of tests (memory, PCIe, NVLink bandwidth...).
const (
	DCGMOff          DCGMLevel = 0
	DefaultDCGMLevel DCGMLevel = 2
	maxDCGMLevel     DCGMLevel = 3
)

// dcgmTimeouts bound a dcgmi diag run per level: DCGM's documentation gives level 1 a few
// seconds, level 2 about two minutes and level 3 up to 30 minutes; the bounds leave room.
var dcgmTimeouts = map[DCGMLevel]time.Duration{1: 5 * time.Minute, 2: 15 * time.Minute, 3: time.Hour}

// Off reports whether the diagnostics are off.
func (l DCGMLevel) Off() bool { return l == DCGMOff }

// Timeout bounds the diagnostics of level l.
func (l DCGMLevel) Timeout() time.Duration { return dcgmTimeouts[l] }

// Validate names setting when l is not a level DCGM runs.
func (l DCGMLevel) Validate(setting string) error {
	if l < DCGMOff || l > maxDCGMLevel {
		return fmt.Errorf("%s = %d: use 0 (off), 1, 2 or 3", setting, l)
	}
	return nil
}

// EFATraffic are the EFA traffic test's settings: an RDM ping-pong across every EFA device.
type EFATraffic struct {
	Skip bool `json:"skip"`
	// MinBandwidthMBps is the lowest acceptable fi_pingpong bandwidth per device; 0 reports
	// the figures with a warning.
	MinBandwidthMBps float64 `json:"min_bandwidth_mbps"`
	// Timeout bounds one device's ping-pong; Concurrency is how many devices are tested at
	// once.
	Timeout     time.Duration `json:"timeout"`
	Concurrency int           `json:"concurrency"`
}

// Defaults of EFATraffic: 32 devices on p5 in groups of 8 take four rounds of at most the
// per-device bound.
const (
	DefaultEFATrafficTimeout     = 60 * time.Second
	DefaultEFATrafficConcurrency = 8
	maxEFATrafficConcurrency     = 64
)

// GDR are the GPUDirect RDMA test's settings: the all-reduce with NVLink and shared memory off.
type GDR struct {
	Skip bool `json:"skip"`
	// BusBWFloorGBps is the lowest acceptable bus bandwidth; 0 reports it with a warning.
	BusBWFloorGBps float64 `json:"busbw_floor_gbps"`
}

// Resolved fills in the defaults of the fields left zero. The DCGM level has no zero default
// (0 is "off"): callers set DefaultDCGMLevel where the setting is absent.
func (f Function) Resolved() Function {
	if f.EFATraffic.Timeout <= 0 {
		f.EFATraffic.Timeout = DefaultEFATrafficTimeout
	}
	if f.EFATraffic.Concurrency <= 0 {
		f.EFATraffic.Concurrency = DefaultEFATrafficConcurrency
	}
	f.Container = f.Container.resolved()
	return f
}

// Validate reports every bad setting, each named with prefix ("" in the provisioner,
// "node_check." in its block).
func (f Function) Validate(prefix string) []error {
	var errs []error
	if err := f.DCGMLevel.Validate(prefix + "dcgm_level"); err != nil {
		errs = append(errs, err)
	}
	e := f.EFATraffic
	if e.MinBandwidthMBps < 0 {
		errs = append(errs, fmt.Errorf("%sefa_traffic.min_bandwidth_mbps = %g: must not be negative", prefix, e.MinBandwidthMBps))
	}
	if e.Timeout != 0 && e.Timeout < time.Second {
		errs = append(errs, fmt.Errorf("%sefa_traffic.timeout must be at least 1s, got %s", prefix, e.Timeout))
	}
	if e.Concurrency < 0 || e.Concurrency > maxEFATrafficConcurrency {
		errs = append(errs, fmt.Errorf("%sefa_traffic.concurrency = %d: use 1 to %d, or leave it unset for %d", prefix, e.Concurrency, maxEFATrafficConcurrency, DefaultEFATrafficConcurrency))
	}
	if f.GDR.BusBWFloorGBps < 0 {
		errs = append(errs, fmt.Errorf("%sgpudirect_rdma.busbw_floor_gbps = %g: must not be negative", prefix, f.GDR.BusBWFloorGBps))
	}
	errs = append(errs, f.Container.Validate(prefix)...)
	return errs
}

// Budget bounds the whole EFA traffic test of n devices.
func (e EFATraffic) Budget(n int) time.Duration {
	if e.Concurrency <= 0 {
		e.Concurrency = DefaultEFATrafficConcurrency
	}
	if e.Timeout <= 0 {
		e.Timeout = DefaultEFATrafficTimeout
	}
	rounds := (n + e.Concurrency - 1) / e.Concurrency
	return time.Duration(rounds)*(e.Timeout+5*time.Second) + 30*time.Second
}

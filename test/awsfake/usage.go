package awsfake

import (
	"strings"
	"time"
)

// The fake measures what a bake costs in instance time: each instance is
// metered from the moment it is running until it is stopped or terminated
// (its stopping and shutting-down time counts, as its host still runs), or
// until now while it runs, on the fake's clock (SetNow). GET /_fake/state
// reports the totals by instance type.

// IsGPUInstanceType reports whether an EC2 instance type is a GPU type: its
// family (the part before the dot) starts with p or g, as the P and G
// accelerated-computing families do (p5.48xlarge, p6-b200.48xlarge,
// g6e.xlarge, gr6.4xlarge). This is the fake's one classification of GPU
// types.
func IsGPUInstanceType(instanceType string) bool {
	family, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(instanceType)), ".")
	return strings.HasPrefix(family, "p") || strings.HasPrefix(family, "g")
}

// meter is the running time of one instance.
type meter struct {
	runningSince time.Time     // zero while the instance is not running
	ran          time.Duration // earlier running intervals
}

// start begins an interval at now; an interval already open stays as it is.
func (m *meter) start(now time.Time) {
	if m.runningSince.IsZero() {
		m.runningSince = now
	}
}

// stop closes the open interval, if any, at now.
func (m *meter) stop(now time.Time) {
	if !m.runningSince.IsZero() {
		m.ran += max(now.Sub(m.runningSince), 0)
		m.runningSince = time.Time{}
	}
}

// total is the running time up to now.
func (m meter) total(now time.Time) time.Duration {
	d := m.ran
	if !m.runningSince.IsZero() {
		d += max(now.Sub(m.runningSince), 0)
	}
	return d
}

// InstanceUsage is the instance time the fake has metered.
type InstanceUsage struct {
	// InstanceSeconds are the seconds instances ran, by instance type.
	InstanceSeconds map[string]float64 `json:"instance_seconds"`
	// GPUInstanceSeconds is the part of them on GPU types (IsGPUInstanceType).
	GPUInstanceSeconds float64 `json:"gpu_instance_seconds"`
}

// Usage returns the instance time metered in region, or in every region
// when region is "".
func (s *Server) Usage(region string) InstanceUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage(region)
}

// usage runs under s.mu. Running times are summed as whole nanoseconds and
// turned into seconds once, at the end: summing float seconds in the map's
// random order made two readings of the same instances differ in the last
// bit, so a delta of "no GPU time" came out as -3.6e-15.
func (s *Server) usage(region string) InstanceUsage {
	byType := map[string]time.Duration{}
	var gpu time.Duration
	now := s.now()
	for name, rd := range s.regions {
		if region != "" && name != region {
			continue
		}
		for _, r := range rd.instances {
			ran := r.meter.total(now)
			if ran <= 0 {
				continue
			}
			byType[r.InstanceType] += ran
			if IsGPUInstanceType(r.InstanceType) {
				gpu += ran
			}
		}
	}
	u := InstanceUsage{InstanceSeconds: make(map[string]float64, len(byType)), GPUInstanceSeconds: gpu.Seconds()}
	for instanceType, ran := range byType {
		u.InstanceSeconds[instanceType] = ran.Seconds()
	}
	return u
}

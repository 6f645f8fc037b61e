package engine

import (
	"context"
	"sync"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpuhealth"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// sampler reads the GPUs' health over a session of its own while the NCCL test runs: idle
// GPUs lower their PCIe link speed and clocks on purpose, so only readings under load can
// judge the link and the clock event reasons.
type sampler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	samples []facts.Fact[[]gpuhealth.GPU]
}

// firstSampleAfter is when the first reading under load is taken.
const firstSampleAfter = 500 * time.Millisecond

func (b *Bake) startSampler(ctx context.Context) *sampler {
	sctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		// The first reading comes half a second in, once the ranks have started, so that even a
		// short test is read under load; then one every LoadSampleEvery.
		t := time.NewTimer(min(firstSampleAfter, b.opt.LoadSampleEvery))
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
				t.Reset(b.opt.LoadSampleEvery)
			}
			// Each reading is bounded like any probe command; one that the end of the test
			// cut short is dropped, not counted as unreadable.
			f, err := probe.GPUHealth(sctx, b.host, b.probeOptions())
			if sctx.Err() != nil {
				return
			}
			if err != nil {
				f = facts.Unread[[]gpuhealth.GPU](err.Error(), "")
			}
			s.mu.Lock()
			s.samples = append(s.samples, f)
			s.mu.Unlock()
		}
	}()
	return s
}

// stop ends the sampling and returns what was read.
func (s *sampler) stop() facts.Load {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return facts.Load{Ran: true, Samples: s.samples}
}

// judgeLoad records the checks judged on the load: the PCIe link and clock reasons from the
// samples, and what the NVLink counters did, folded into the nvlink check.
func (b *Bake) judgeLoad(l facts.Load) {
	b.record(checks.JudgePCIeLink(l), checks.JudgeGPUClocks(l))
	if l.Ran {
		b.record(checks.NVLinkDuring(b.checkOf(result.NVLink), l.NVLinkBefore, l.NVLinkAfter, "during the NCCL test"))
	}
}

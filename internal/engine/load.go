package engine

import (
	"context"
	"fmt"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"sync"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
)

// ncclTest is the load phase: the 1-node NCCL test when the GPUs can run it, the GPUs' health
// sampled while it runs, the NVLink counters around it and the kernel log after it; then the
// load's checks, and the host checks its facts refine (nvlink, xid), are judged.
func (b *Bake) ncclTest(ctx context.Context) error {
	l := &b.run.Load
	switch {
	case b.opt.Checks.NCCL.Skip:
		l.NotRun = "nccl.skip = true"
	case b.allSkipped(checks.PhaseLoad):
		l.NotRun = "skip_checks names every check of the NCCL test"
	case !b.gpuOK():
		l.NotRun = "the GPU checks failed"
	}
	if l.NotRun != "" {
		l.NCCL.NotRun = l.NotRun
		b.judge(checks.PhaseLoad, 0)
		return nil
	}
	mark := facts.Mark{Position: facts.EndOf(b.run.Host.KernelLog, b.run.Host.KernelJournal), During: "during the NCCL test"}
	sampler := b.startSampler(ctx)
	run, err := b.runNCCL(ctx)
	l.Samples = sampler.stop()
	l.NCCL = run
	if err != nil {
		// Cancelled: the checks stay unjudged (a bake reports them not run, a node fails them).
		return err
	}
	l.Ran = true
	l.NVLinkBefore = b.run.Host.Health.NVLinkErrors
	if l.NVLinkAfter, err = probe.NVLinkErrors(ctx, b.host, b.probeOptions()); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.NVLinkAfter = facts.Unread[[]facts.NVLinkCounters](err.Error(), "")
	}
	log, journal, err := probe.KernelLogAndJournal(ctx, b.host, b.probeOptions())
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log, journal = facts.Unread[facts.KernelLog](err.Error(), ""), facts.Unread[facts.KernelJournal](err.Error(), "")
	}
	l.Mark, l.KernelLog, l.KernelJournal = &mark, log, journal
	b.judge(checks.PhaseLoad, run.Took)
	return nil
}

// allSkipped reports whether skip_checks names every check of phase p: its test need not run.
func (b *Bake) allSkipped(p checks.Phase) bool {
	for _, id := range checks.IDs(p) {
		if !b.target.Skips(id) {
			return false
		}
	}
	return true
}

// runNCCL runs the 1-node NCCL test as a job in its own process group, streaming its result
// rows to the UI. It returns an error only when the bake must stop (cancelled); a test that
// failed, or could not run, is a fact for the checks.
func (b *Bake) runNCCL(ctx context.Context) (facts.NCCLRun, error) {
	o := b.opt.Checks.NCCL
	x := b.target.NCCLExpect()
	if o.Ranks == 0 {
		// Zero leaves it to the script, which starts one rank per GPU nvidia-smi lists.
		o.Ranks = x.Ranks
	}
	script, err := probe.NCCLScript("the NCCL test", "nccl", o, o.Ranks)
	if err != nil {
		return facts.NCCLRun{ScriptErrors: []string{"bad nccl settings: " + err.Error()}, ExitCode: -1}, nil
	}
	for _, w := range o.Warnings() {
		b.ui.Error("dlami: warning: " + w)
	}
	b.ui.Say(fmt.Sprintf("dlami: running the 1-node NCCL all-reduce test (transport policy %s: %s)", x.Transport, x.TransportBasis))
	out, err := b.runJob(ctx, script, true)
	if ctx.Err() != nil {
		return facts.NCCLRun{}, ctx.Err()
	}
	run := probe.ParseNCCLRun(out.output, out.code, out.timedOut, script.Timeout)
	run.Took = out.took
	if err != nil {
		run.Problem = err.Error()
	}
	fig := ncclFigures(run)
	if x.BusBWFloorGBps > 0 {
		floor := x.BusBWFloorGBps
		fig.BusBWFloorGBps = &floor
	}
	b.update(func(r *report.Report) { r.NCCL = &fig })
	return run, nil
}

// ncclFigures are the report's figures of an NCCL run.
func ncclFigures(run facts.NCCLRun) result.NCCLFigures {
	res := run.Result
	f := result.NCCLFigures{
		Binary:         run.Binary,
		NCCLVersion:    res.NCCLVersion,
		BusBWPlacement: "out-of-place",
		AvgBusBWGBps:   res.AvgBusBW,
		OutOfBounds:    res.OutOfBounds,
		ExitCode:       run.ExitCode,
		TimedOut:       run.TimedOut,
		Seconds:        run.Took.Seconds(),
	}
	for _, row := range res.Rows {
		f.Points = append(f.Points, result.NCCLPoint{SizeBytes: row.SizeBytes, BusBWGBps: row.OutOfPlace.BusBW, InPlaceBusBWGBps: row.InPlace.BusBW})
	}
	if l := res.Largest; l != nil {
		f.LargestSizeBytes = l.SizeBytes
		f.BusBWGBps = l.OutOfPlace.BusBW
	}
	if n := res.Transport.Networks; len(n) > 0 {
		f.Network = n[0]
	}
	f.DataTransport = res.Transport.DataTransport()
	if p := res.Transport.Providers; len(p) > 0 {
		f.Provider = p[0].Name
		f.NICs = p[0].NICs
	}
	return f
}

// sampler reads the GPUs' health over a session of its own while the NCCL test runs: idle
// GPUs lower their PCIe link speed and clocks on purpose, so only readings under load can
// judge the link and the clock event reasons.
type sampler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	samples []facts.Fact[[]facts.GPUHealth]
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
				f = facts.Unread[[]facts.GPUHealth](err.Error(), "")
			}
			s.mu.Lock()
			s.samples = append(s.samples, f)
			s.mu.Unlock()
		}
	}()
	return s
}

// stop ends the sampling and returns what was read.
func (s *sampler) stop() []facts.Fact[[]facts.GPUHealth] {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// ncclFailed reports whether a check of the NCCL test failed or errored.
func (b *Bake) ncclFailed() bool {
	for _, id := range checks.IDs(checks.PhaseLoad) {
		if e, _ := checks.Lookup(id); e.Family == "nccl" && b.checkOf(id).Status.Failing() {
			return true
		}
	}
	return false
}

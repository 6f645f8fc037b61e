package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/rdmastat"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// job is a long script the bake runs on the host: the NCCL test, DCGM's diagnostics, the EFA
// traffic test.
type job struct {
	name, file, script string
	timeout            time.Duration
	// rows streams nccl-tests result rows to the UI as they come.
	rows bool
}

// jobRun is how a job ended.
type jobRun struct {
	output   string
	code     int
	timedOut bool
	took     time.Duration
}

// runJob uploads the script (never on the command line: Packer's SSH communicator logs command
// lines at debug level, and settings may be secret) and runs it in its own process group,
// bounded by its timeout plus slack; a job that outlives it is stopped. When the bake is
// cancelled the job is stopped after the reports are written and ctx's error is returned.
func (b *Bake) runJob(ctx context.Context, j job) (jobRun, error) {
	b.checkpoint(j.name)
	jctx, cancel := context.WithTimeout(ctx, j.timeout+2*time.Minute)
	defer cancel()
	scriptPath := b.workDir + "/" + j.file + ".sh"
	if err := b.host.Upload(ctx, scriptPath, strings.NewReader(j.script)); err != nil {
		return jobRun{}, fmt.Errorf("uploading %s: %w", j.name, err)
	}
	out := newTailWriter(ncclOutputMax)
	var w io.Writer = out
	var progress *rowPrinter
	if j.rows {
		progress = newRowPrinter(b.ui)
		w = io.MultiWriter(out, progress)
	}
	hj := host.Job{Name: j.name, Script: scriptPath, PIDFile: path.Join(b.workDir, j.file+".pid"), Output: w}
	start := b.now()
	code, err := b.host.Run(jctx, hj)
	if progress != nil {
		progress.Flush()
	}
	run := jobRun{output: out.String(), code: code, took: b.now().Sub(start)}
	if ctx.Err() != nil {
		b.stopLater = append(b.stopLater, hj)
		return run, ctx.Err()
	}
	run.timedOut = bundle.TimedOut(code) || jctx.Err() != nil
	if jctx.Err() != nil {
		b.kill(ctx, hj)
	}
	if err != nil && !run.timedOut {
		return run, fmt.Errorf("%s: %w", j.name, err)
	}
	return run, nil
}

// alongside runs steps that share no hardware at the same time (DCGM's diagnostics load the
// GPUs and NVLink, the EFA traffic test the EFA devices), so the deeper checks do not make
// the host suite the long pole of a bake. The first error, in step order, is the step's.
func (b *Bake) alongside(steps ...func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		errs := make([]error, len(steps))
		var wg sync.WaitGroup
		for i, s := range steps {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = s(ctx) }()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
}

// dcgmTest runs DCGM's diagnostics at dcgm_level.
func (b *Bake) dcgmTest(ctx context.Context) error {
	level := b.opt.Function.DCGMLevel
	if level == 0 {
		b.record(checks.JudgeDCGM(facts.Fact[facts.DCGM]{}, 0, false))
		return nil
	}
	if !gpuOK(b.ordered()) {
		b.record(skipped("the GPU checks failed", result.DCGM)...)
		return nil
	}
	script, err := checks.DCGMCommand(level)
	if err != nil {
		return err
	}
	b.stage(fmt.Sprintf("DCGM diagnostics (dcgmi diag -r %d)", level))
	run, err := b.runJob(ctx, job{name: "the DCGM diagnostics", file: "dcgm", script: script, timeout: time.Duration(checks.DCGMTimeout(level)) * time.Second})
	if ctx.Err() != nil {
		b.record(skipped("the bake was cancelled during the DCGM diagnostics", result.DCGM)...)
		return ctx.Err()
	}
	f := checks.ParseDCGMRun(run.output, level)
	if err != nil {
		f = facts.Unread[facts.DCGM](err.Error(), run.output)
	}
	c := checks.JudgeDCGM(f, level, run.timedOut)
	c.DurationMS = run.took.Milliseconds()
	b.record(c)
	return nil
}

// efaTraffic moves bytes across every EFA device, with the device counters read around it.
func (b *Bake) efaTraffic(ctx context.Context) error {
	o := b.opt.Function.EFATraffic
	devices := b.facts.RDMA.Value.EFA
	switch {
	case o.Skip:
		b.record(skipped("efa_traffic.skip = true", result.EFATraffic)...)
		return nil
	case !b.facts.RDMA.OK() || b.checkOf(result.EFADevices).Status.Failing():
		b.record(skipped("the efa-devices check failed", result.EFATraffic)...)
		return nil
	case len(devices) == 0:
		b.record(result.Check{ID: result.EFATraffic, Status: result.Skip, Basis: checks.BasisRule, Expected: "no EFA device", Actual: "no EFA device", Message: "no EFA on this host: nothing to test"})
		return nil
	}
	script, err := checks.EFATrafficCommand(devices, o)
	if err != nil {
		return err
	}
	b.stage(fmt.Sprintf("EFA traffic across %d devices", len(devices)))
	t := facts.EFATraffic{ShmTransferOff: true}
	t.StatsBefore = b.rdmaStats(ctx)
	run, err := b.runJob(ctx, job{name: "the EFA traffic test", file: "efa-traffic", script: script, timeout: time.Duration(checks.EFATrafficBudgetSeconds(len(devices), o)) * time.Second})
	if ctx.Err() != nil {
		b.record(skipped("the bake was cancelled during the EFA traffic test", result.EFATraffic)...)
		return ctx.Err()
	}
	t.StatsAfter = b.rdmaStats(ctx)
	if err == nil && !run.timedOut {
		t.Devices, err = checks.ParseEFATraffic(run.output)
	}
	if err != nil || run.timedOut {
		why := "the EFA traffic test did not finish within its bound"
		if err != nil {
			why = err.Error()
		}
		b.record(result.Check{ID: result.EFATraffic, Status: result.Fail, Basis: checks.BasisRule, Expected: "an RDM ping-pong across every EFA device", Actual: "could not run", Message: why, Evidence: run.output})
		return nil
	}
	c := checks.JudgeEFATraffic(t, devices, o)
	c.DurationMS = run.took.Milliseconds()
	b.record(c)
	return nil
}

func (b *Bake) rdmaStats(ctx context.Context) facts.Fact[[]rdmastat.Link] {
	f, err := probe.RDMAStats(ctx, b.host, b.probeOptions())
	if err != nil {
		return facts.Unread[[]rdmastat.Link](err.Error(), "")
	}
	return f
}

// gdrTest runs the forced-network all-reduce on EFA hosts: NVLink and shared memory off, so
// the ranks of the one node talk through aws-ofi-nccl and the EFA devices.
func (b *Bake) gdrTest(ctx context.Context) error {
	o := b.opt.Function.GDR
	switch {
	case o.Skip:
		b.record(skipped("gpudirect_rdma.skip = true", result.GPUDirectRDMA)...)
		return nil
	case b.opt.SkipNCCL:
		b.record(skipped("nccl.skip = true", result.GPUDirectRDMA)...)
		return nil
	case len(b.facts.RDMA.Value.EFA) == 0 && b.facts.RDMA.OK():
		b.record(result.Check{ID: result.GPUDirectRDMA, Status: result.Skip, Basis: checks.BasisRule, Expected: "no EFA device", Actual: "no EFA device", Message: "no EFA on this host: GPUDirect RDMA does not apply"})
		return nil
	case !gpuOK(b.ordered()) || b.checkOf(result.EFADevices).Status.Failing():
		b.record(skipped("the GPU or EFA device checks failed", result.GPUDirectRDMA)...)
		return nil
	case b.ncclFailed():
		// The forced-network run is the NCCL test again with fewer paths: it says nothing new
		// about a host whose NCCL test already failed.
		b.record(skipped("the NCCL test failed", result.GPUDirectRDMA)...)
		return nil
	}
	n := checks.GDROptionsFor(b.opt.NCCL)
	if n.Ranks == 0 {
		n.Ranks = b.target.NCCLExpect(b.opt.NCCL).Ranks
	}
	script, err := checks.NCCLCommand(n)
	if err != nil {
		return err
	}
	b.stage("GPUDirect RDMA: the all-reduce over the EFA devices")
	run, err := b.runJob(ctx, job{name: "the GPUDirect RDMA all-reduce", file: "gdr", script: script, timeout: ncclTimeout(n)})
	if ctx.Err() != nil {
		b.record(skipped("the bake was cancelled during the GPUDirect RDMA test", result.GPUDirectRDMA)...)
		return ctx.Err()
	}
	if err != nil {
		b.record(result.Check{ID: result.GPUDirectRDMA, Status: result.Error, Expected: "the forced-network all-reduce runs", Actual: "could not run", Message: err.Error(), Evidence: run.output})
		return nil
	}
	c := checks.JudgeGPUDirectRDMA(run.output, run.code, run.timedOut, o, b.facts.EFAInstaller, b.facts.Loaded)
	c.DurationMS = run.took.Milliseconds()
	b.record(c)
	return nil
}

// ncclFailed reports whether a check of the NCCL test failed or errored.
func (b *Bake) ncclFailed() bool {
	for _, id := range result.NCCLIDs {
		if b.checkOf(id).Status.Failing() {
			return true
		}
	}
	return false
}

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
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// jobRun is how a job ended.
type jobRun struct {
	output   string
	code     int
	timedOut bool
	took     time.Duration
}

// jobOutputMax bounds the output of a job kept for judging: the NCCL table and trailer are at
// the end, and the INFO lines that matter come first, well inside it for any 1-node run.
const jobOutputMax = 8 << 20

// runJob uploads a probe script (never on the command line: Packer's SSH communicator logs
// command lines at debug level, and settings may be secret) and runs it in its own process
// group, bounded by its timeout plus slack; a job that outlives it is stopped. rows streams
// nccl-tests result rows to the UI as they come. When the run is cancelled the job is stopped
// after the reports are written and ctx's error is returned.
func (b *Bake) runJob(ctx context.Context, s probe.Script, rows bool) (jobRun, error) {
	return b.runJobOn(ctx, b.host, b.workDir, s, rows)
}

// runJobOn is runJob on host h, with its script uploaded into dir (a node of a run across
// nodes).
func (b *Bake) runJobOn(ctx context.Context, h host.Host, dir string, s probe.Script, rows bool) (jobRun, error) {
	b.checkpoint(s.Name)
	jctx, cancel := context.WithTimeout(ctx, s.Timeout+2*time.Minute)
	defer cancel()
	scriptPath := dir + "/" + s.File + ".sh"
	if err := h.Upload(ctx, scriptPath, strings.NewReader(s.Text)); err != nil {
		return jobRun{}, fmt.Errorf("uploading %s: %w", s.Name, err)
	}
	out := newTailWriter(jobOutputMax)
	var w io.Writer = out
	var progress *rowPrinter
	if rows {
		progress = newRowPrinter(b.ui)
		w = io.MultiWriter(out, progress)
	}
	hj := host.Job{Name: s.Name, Script: scriptPath, AsRoot: s.AsRoot, PIDFile: path.Join(dir, s.File+".pid"), Output: w}
	start := b.now()
	stop := b.waiting(s.Name, s.Timeout)
	code, err := h.Run(jctx, hj)
	stop()
	if progress != nil {
		progress.Flush()
	}
	run := jobRun{output: out.String(), code: code, took: b.now().Sub(start)}
	if ctx.Err() != nil {
		b.stopLater = append(b.stopLater, runningJob{h, hj})
		return run, ctx.Err()
	}
	run.timedOut = bundle.TimedOut(code) || jctx.Err() != nil
	if jctx.Err() != nil {
		b.killOn(ctx, h, hj)
	}
	if err != nil && !run.timedOut {
		return run, fmt.Errorf("%s: %w", s.Name, err)
	}
	return run, nil
}

// functionTests is the function phase: in a bake the one-node IMEX domain first (it restarts
// nvidia-imex, so nothing else runs beside it), DCGM's diagnostics alongside the EFA traffic test (they
// share no hardware), then the GPUDirect RDMA all-reduce; then the phase's checks are judged.
func (b *Bake) functionTests(ctx context.Context) error {
	start := b.now()
	err := b.imexDomainTest(ctx)
	if err == nil {
		err = b.containerTest(ctx)
	}
	if err == nil {
		err = b.alongside(b.dcgmTest, b.efaTraffic)(ctx)
	}
	if err == nil {
		err = b.gdrTest(ctx)
	}
	if ctx.Err() != nil {
		// Cancelled: the checks stay unjudged (a bake reports them not run, a node fails them).
		return err
	}
	b.judge(checks.PhaseFunction, b.now().Sub(start))
	return err
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
	level := b.opt.Checks.Function.DCGMLevel
	d := &b.run.DCGM
	switch {
	case level.Off():
		return nil
	case b.target.Skips(result.DCGM):
		d.NotRun = "skip_checks names dcgm"
		return nil
	case !b.gpuOK():
		d.NotRun = "the GPU checks failed"
		return nil
	}
	// DCGM's pcie test wants x16 unless told the slot's width: a GPU the instance type puts in
	// a narrower slot by design (the single-GPU G6 sizes) would fail it.
	width, _ := b.target.SlotPCIeWidth()
	script, err := probe.DCGMScriptWith(level, probe.DCGMOptions{MinPCIeWidth: width})
	if err != nil {
		return err
	}
	b.stage(fmt.Sprintf("DCGM diagnostics (dcgmi diag -r %d)", level))
	run, err := b.runJob(ctx, script, false)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	d.Result, d.Missing = probe.ParseDCGMRun(run.output, level)
	if err != nil {
		d.Result, d.Missing = facts.Unread[facts.DCGM](err.Error(), run.output), false
	}
	d.TimedOut, d.Took = run.timedOut, run.took
	return nil
}

// efaTraffic moves bytes across every EFA device, with the device counters read around it.
func (b *Bake) efaTraffic(ctx context.Context) error {
	o := b.opt.Checks.Function.EFATraffic
	t := &b.run.EFATraffic
	h := b.run.Host
	switch {
	case o.Skip:
		t.NotRun = "efa_traffic.skip = true"
		return nil
	case b.target.Skips(result.EFATraffic):
		t.NotRun = "skip_checks names efa-traffic"
		return nil
	case !h.RDMA.OK() || b.checkOf(result.EFADevices).Status.Failing():
		t.NotRun = "the efa-devices check failed"
		return nil
	case len(h.RDMA.Value.EFA) == 0:
		return nil
	}
	devices := h.RDMA.Value.EFA
	t.Tested = devices
	script, err := probe.EFATrafficScript(devices, o)
	if err != nil {
		return err
	}
	b.stage(fmt.Sprintf("EFA traffic across %d devices", len(devices)))
	t.ShmTransferOff = true
	t.StatsBefore = b.rdmaStats(ctx)
	run, err := b.runJob(ctx, script, false)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	t.StatsAfter = b.rdmaStats(ctx)
	t.Took = run.took
	if err == nil && !run.timedOut {
		t.Devices, err = probe.ParseEFATraffic(run.output)
	}
	if err != nil || run.timedOut {
		t.Problem = "the EFA traffic test did not finish within its bound"
		if err != nil {
			t.Problem = err.Error()
		}
		t.Evidence = run.output
	}
	return nil
}

func (b *Bake) rdmaStats(ctx context.Context) facts.Fact[[]facts.RDMALink] {
	f, err := probe.RDMAStats(ctx, b.host, b.probeOptions())
	if err != nil {
		return facts.Unread[[]facts.RDMALink](err.Error(), "")
	}
	return f
}

// gdrTest runs the forced-network all-reduce on EFA hosts: NVLink and shared memory off, so
// the ranks of the one node talk through aws-ofi-nccl and the EFA devices.
func (b *Bake) gdrTest(ctx context.Context) error {
	g := &b.run.GDR
	h := b.run.Host
	switch {
	case b.opt.Checks.Function.GDR.Skip:
		g.NotRun = "gpudirect_rdma.skip = true"
	case b.opt.Checks.NCCL.Skip:
		g.NotRun = "nccl.skip = true"
	case b.target.Skips(result.GPUDirectRDMA):
		g.NotRun = "skip_checks names gpudirect-rdma"
	case len(h.RDMA.Value.EFA) == 0 && h.RDMA.OK():
		g.NotApplicable = "no EFA on this host: GPUDirect RDMA does not apply"
	case !b.gpuOK() || b.checkOf(result.EFADevices).Status.Failing():
		g.NotRun = "the GPU or EFA device checks failed"
	case b.ncclFailed():
		// The forced-network run is the NCCL test again with fewer paths: it says nothing new
		// about a host whose NCCL test already failed.
		g.NotRun = "the NCCL test failed"
	}
	if g.NotRun != "" || g.NotApplicable != "" {
		return nil
	}
	n := b.opt.Checks.NCCL.ForcedNetwork()
	if n.Ranks == 0 {
		n.Ranks = b.target.NCCLExpect().Ranks
	}
	script, err := probe.NCCLScript("the GPUDirect RDMA all-reduce", "gdr", n, n.Ranks)
	if err != nil {
		return err
	}
	b.stage("GPUDirect RDMA: the all-reduce over the EFA devices")
	run, err := b.runJob(ctx, script, false)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	*g = probe.ParseNCCLRun(run.output, run.code, run.timedOut, script.Timeout)
	g.Took = run.took
	if err != nil {
		g.Problem = err.Error()
	}
	return nil
}

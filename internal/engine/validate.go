package engine

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/kernlog"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvlink"
	"github.com/dlami-bake/packer-plugin-dlami/internal/pause"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// probeOptions are the host probe's settings for this run.
func (b *Bake) probeOptions() probe.Options {
	return probe.Options{NVMePath: b.opt.Expect.NVMeMount(), CheckTimeoutSeconds: int(b.opt.CheckTimeout / time.Second)}
}

// readHost reads the host suite's facts and resolves what they are compared against.
func (b *Bake) readHost(ctx context.Context) (facts.Host, checks.Target, time.Duration, error) {
	start := b.now()
	h, err := probe.Host(ctx, b.host, b.probeOptions())
	took := b.now().Sub(start)
	if err != nil {
		return h, checks.Target{}, took, err
	}
	t := checks.Resolve(h, b.opt.Expect, b.opt.InstanceType)
	t.SessionIsLogin = b.freshLogin
	if b.rebootLayer != "" {
		// A mark of the old boot puts every line of the current boot after it.
		t.KernelLogSince = &facts.Mark{
			Position: kernlog.Position{BootID: "before the reboot of layer " + b.rebootLayer},
			During:   fmt.Sprintf("since the reboot of layer %q", b.rebootLayer),
		}
	}
	return h, t, took, nil
}

// hostSuite reads the host (one round trip) and judges it with the host suite. It keeps the
// facts and the target for the NCCL test.
func (b *Bake) hostSuite(ctx context.Context) error {
	b.stage("validation")
	h, t, took, err := b.readHost(ctx)
	if err != nil {
		return err
	}
	b.update(func(r *report.Report) { r.InstanceType, r.InstanceTypeSource = t.InstanceType, t.InstanceTypeSource })
	b.sayTarget(t)
	host := checks.EvaluateHost(h, t)
	// EFA devices can register late after boot (seen on p5en): when the device count is the
	// only failure, look again a couple of times before failing the bake.
	for try := 1; try <= b.opt.EFARetries && onlyFailure(host, result.EFADevices); try++ {
		c, _ := result.Find(host, result.EFADevices)
		b.ui.Say(fmt.Sprintf("dlami: efa-devices failed (%s); looking again in %s (%d/%d)", c.Actual, b.opt.EFARetryDelay, try, b.opt.EFARetries))
		if err := pause.Sleep(ctx, b.opt.EFARetryDelay); err != nil {
			return err
		}
		if h, t, took, err = b.readHost(ctx); err != nil {
			return err
		}
		host = checks.EvaluateHost(h, t)
	}
	for i := range host {
		if host[i].ID == result.Xid {
			host[i] = b.xidBeforeLayers(host[i], h, t)
		}
		if host[i].DurationMS == 0 {
			host[i].DurationMS = took.Milliseconds()
		}
	}
	b.record(host...)
	b.facts, b.target = h, t
	b.update(func(r *report.Report) { r.Manifest = mergeManifest(r.Manifest, h.Manifest()) })
	if result.Failed(host) && !b.opt.KeepGoing {
		return verdict("host validation failed: %s", failedIDs(host))
	}
	return nil
}

// jobMemlock judges the locked-memory limit where jobs will run (the scheduler's and the
// container runtimes' units and defaults, as layers installed them): the limit of Packer's own
// SSH session, which the memlock check reads, is not what a job gets.
func (b *Bake) jobMemlock(ctx context.Context) error {
	f, err := probe.JobMemlock(ctx, b.host, b.probeOptions())
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f.Units = facts.Unread[[]facts.UnitLimit](err.Error(), "")
	}
	b.record(checks.JudgeJobMemlock(f))
	return nil
}

// xidBeforeLayers keeps the verdict on an Xid the kernel logged before the layers ran, in this
// same boot, when the log no longer shows it: a layer cleared the ring buffer.
func (b *Bake) xidBeforeLayers(cur result.Check, h facts.Host, t checks.Target) result.Check {
	if !b.bootLog.OK() || len(b.bootLog.Value.Lines()) == 0 || b.rebootLayer != "" || cur.Status == result.Fail ||
		!h.KernelLog.OK() || h.KernelLog.Value.BootID != b.bootLog.Value.BootID {
		return cur
	}
	early := checks.JudgeKernelLog(b.bootLog, nil, t)
	if early.Status != result.Fail {
		return cur
	}
	early.Message = "logged before the layers ran and no longer in the kernel log (a layer cleared it): " + early.Message
	return early
}

// ncclTest runs the 1-node NCCL test when the GPUs can run it, and judges the kernel log it
// left behind.
func (b *Bake) ncclTest(ctx context.Context) error {
	why := ""
	switch {
	case b.opt.SkipNCCL:
		why = "nccl.skip = true"
	case !gpuOK(b.ordered()):
		why = "the GPU checks failed"
	}
	if why != "" {
		b.record(skipped(why, result.NCCLIDs...)...)
		b.judgeLoad(facts.Load{Why: why})
		return nil
	}
	mark := facts.Mark{Position: b.facts.KernelLog.Value.End(), During: "during the NCCL test"}
	sampler := b.startSampler(ctx)
	err := b.runNCCL(ctx, b.target)
	load := sampler.stop()
	if err != nil {
		return err
	}
	load.NVLinkBefore = b.facts.Health.NVLinkErrors
	if load.NVLinkAfter, err = probe.NVLinkErrors(ctx, b.host, b.probeOptions()); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		load.NVLinkAfter = facts.Unread[[]nvlink.Counters](err.Error(), "")
	}
	b.judgeLoad(load)
	return b.xidSince(ctx, mark)
}

func (b *Bake) sayTarget(t checks.Target) {
	typ := t.InstanceType
	if typ == "" {
		typ = "unknown"
	}
	switch {
	case t.Profile != nil:
		msg := fmt.Sprintf("dlami: instance type %s (from %s): built-in profile (%s)", typ, t.InstanceTypeSource, t.Profile.Source)
		if t.Profile.Untested {
			msg += "; this profile is built from public figures and has not been run against: report what you see"
		}
		b.ui.Say(msg)
		if t.Profile.Note != "" {
			b.ui.Say("dlami: note: " + t.Profile.Note)
		}
	default:
		b.ui.Say(fmt.Sprintf("dlami: instance type %s (from %s) has no built-in profile: counts are judged against the host's PCI inventory, and checks with nothing to compare against warn", typ, cmp.Or(t.InstanceTypeSource, "nowhere")))
	}
	if t.PCI == nil {
		b.ui.Error("dlami: the PCI inventory could not be read: " + t.PCIProblem)
	}
}

// onlyFailure reports whether id is the one failed check in cs.
func onlyFailure(cs []result.Check, id string) bool {
	ids := result.FailedIDs(cs)
	return len(ids) == 1 && ids[0] == id
}

func gpuOK(cs []result.Check) bool {
	for _, c := range cs {
		if (c.ID == result.GPU || c.ID == result.NvidiaDriver) && c.Status.Failing() {
			return false
		}
	}
	return true
}

// runNCCL runs the 1-node NCCL test as a job in its own process group, streaming its result
// rows to the UI, and records the three NCCL checks. It returns an error only when the bake
// must stop (cancelled); a failed test is a verdict in the checks.
func (b *Bake) runNCCL(ctx context.Context, t checks.Target) error {
	o := b.opt.NCCL
	x := t.NCCLExpect(o)
	if o.Ranks == 0 {
		// Zero leaves it to the script, which starts one rank per GPU nvidia-smi lists.
		o.Ranks = x.Ranks
	}
	script, err := checks.NCCLCommand(o)
	if err != nil {
		b.record(result.Check{ID: result.NCCLCorrectness, Status: result.Fail, Expected: "a runnable NCCL test", Actual: "bad nccl settings", Message: err.Error()})
		return nil
	}
	for _, w := range checks.NCCLWarnings(o) {
		b.ui.Error("dlami: warning: " + w)
	}
	b.ui.Say(fmt.Sprintf("dlami: running the 1-node NCCL all-reduce test (transport policy %s: %s)", x.Transport, x.TransportBasis))
	run, err := b.runJob(ctx, job{name: "the NCCL test", file: "nccl", script: script, timeout: ncclTimeout(o), rows: true})
	switch {
	case ctx.Err() != nil:
		b.record(skipped("the bake was cancelled during the NCCL test; all_reduce_perf is stopped on the host", result.NCCLIDs...)...)
		return ctx.Err()
	case err != nil:
		b.record(result.Check{ID: result.NCCLCorrectness, Status: result.Error, Expected: "the NCCL test runs to completion", Actual: "could not run", Message: err.Error(), Evidence: run.output})
		return nil
	}
	cs, figures := checks.JudgeNCCL(run.output, run.code, run.timedOut, x, o)
	for i := range cs {
		cs[i].DurationMS = run.took.Milliseconds()
	}
	b.record(cs...)
	b.update(func(r *report.Report) { r.NCCL = &figures })
	return nil
}

func ncclTimeout(o checks.NCCLOptions) time.Duration {
	if o.TimeoutSeconds == 0 {
		return checks.NCCLDefaultTimeout
	}
	return time.Duration(o.TimeoutSeconds) * time.Second
}

// ncclOutputMax bounds the NCCL output kept for judging: the table and trailer are at the end,
// and the INFO lines that matter come first, well inside it for any 1-node run.
const ncclOutputMax = 8 << 20

// xidSince reads the kernel log again and judges the lines written since mark, folded into
// the xid check of the host suite: NVLink and fallen-off-the-bus Xids typically fire under the
// NCCL test's load.
func (b *Bake) xidSince(ctx context.Context, mark facts.Mark) error {
	log, err := probe.KernelLog(ctx, b.host, b.probeOptions())
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log = facts.Unread[facts.KernelLog](err.Error(), "")
	}
	before := b.checkOf(result.Xid)
	c := checks.FoldXid(before, checks.JudgeKernelLog(log, &mark, b.target))
	c.DurationMS = before.DurationMS
	b.record(c)
	if c.Status.Failing() && before.Status != c.Status {
		b.ui.Error("dlami: xid failed " + mark.During + ": " + c.Message)
	}
	return nil
}

// deferValidation records the host suite and the NCCL test as deferred: skipped, never passed,
// with a message naming the settings that complete them. The build instance of a two-phase
// bake has no GPUs to judge.
func (b *Bake) deferValidation(ctx context.Context) error {
	b.stage("validation deferred")
	typ := b.buildInstanceType(ctx)
	ids := append(append([]string{}, result.HostIDs...), result.JobMemlock)
	if b.opt.SkipNCCL {
		b.record(skipped("nccl.skip = true", result.NCCLIDs...)...)
	} else {
		ids = append(ids, result.NCCLIDs...)
	}
	ids = append(ids, result.FunctionIDs...)
	on := "this build instance"
	if typ != "" {
		on += " (" + typ + ")"
	}
	why := fmt.Sprintf("deferred (defer_validation = true): not judged on %s; the dlami post-processor with complete_validation = true judges it on a GPU instance launched from the AMI", on)
	for _, id := range ids {
		b.record(result.Check{ID: id, Status: result.Skip, Expected: "judged on a GPU instance", Actual: "deferred", Message: why})
	}
	b.deferred = &bom.Deferred{Checks: ids, BuildInstanceType: typ,
		Reason: "defer_validation = true: the host suite and the NCCL test run in the dlami post-processor (complete_validation = true)"}
	b.update(func(r *report.Report) {
		r.DeferredChecks = ids
		if typ != "" {
			r.InstanceType, r.InstanceTypeSource = typ, "product_name"
		}
	})
	b.ui.Say(fmt.Sprintf("dlami: validation deferred (defer_validation = true): %d checks are left to the dlami post-processor with complete_validation = true; this image is not validated until it has run them", len(ids)))
	return nil
}

// buildInstanceType is the instance type the host names (DMI product name, else IMDS), else
// the configured one.
func (b *Bake) buildInstanceType(ctx context.Context) string {
	if in, err := probe.InstanceType(ctx, b.host); err == nil && in.Type != "" {
		return in.Type
	}
	return b.opt.InstanceType
}

// writeBOM writes the bill of materials into the image.
func (b *Bake) writeBOM(ctx context.Context) error {
	if b.opt.ManifestPath == "" {
		return nil
	}
	guarded := map[string]bom.Package{}
	for _, n := range b.guarded {
		if p, ok := b.lastSnapshot.Packages[n]; ok && p.Present() {
			guarded[n] = bom.Package{Version: p.Version, Held: p.Held}
		}
	}
	doc := bom.BOM{
		GeneratedAt: b.now().UTC(), PluginVersion: b.opt.PluginVersion, BuildName: b.opt.BuildName,
		RunUUID: b.opt.RunUUID, InstanceType: b.rep.InstanceType,
		Kernel: b.lastSnapshot.RunningKernel, NextBootKernel: b.lastSnapshot.NextBootKernel,
		Components: b.rep.Manifest, Guarded: guarded, NCCL: b.rep.NCCL,
		GuardPolicy: &b.opt.Policy, Expect: &b.opt.Expect, Deferred: b.deferred,
	}
	data, err := doc.Encode()
	if err != nil {
		return err
	}
	if err := b.host.Install(ctx, data, b.opt.ManifestPath, 0o644); err != nil {
		return fmt.Errorf("writing the bill of materials: %w", err)
	}
	local := filepath.Join(b.opt.ReportDir, bom.LocalFileName)
	if err := os.MkdirAll(b.opt.ReportDir, 0o755); err != nil {
		return fmt.Errorf("saving the bill of materials: %w", err)
	}
	if err := report.WriteAtomic(local, data); err != nil {
		return fmt.Errorf("saving the bill of materials: %w", err)
	}
	b.ui.Say("dlami: wrote the bill of materials into the image at " + b.opt.ManifestPath + " (copy: " + local + ")")
	return nil
}

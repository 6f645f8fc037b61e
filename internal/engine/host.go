package engine

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/pause"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// probeOptions are the host probe's settings for this run.
func (b *Bake) probeOptions() probe.Options {
	return probe.Options{NVMePath: b.opt.Checks.Expect.NVMeMount(), CheckTimeout: b.opt.CheckTimeout, LoginUser: b.opt.LoginUser}
}

// judge records the verdicts of the checks the catalog judges after phase p, from what the run
// has read so far: the checks of p, whose duration is took, and the earlier checks whose
// verdict p's facts refine (they keep their own duration). It returns the checks of p.
func (b *Bake) judge(p checks.Phase, took time.Duration) []result.Check {
	var own []result.Check
	for _, c := range checks.JudgePhase(p, b.run, b.target) {
		before := b.checkOf(c.ID)
		e, _ := checks.Lookup(c.ID)
		switch {
		case e.Phase != p:
			c.DurationMS = before.DurationMS
			if c.Status.Failing() && !before.Status.Failing() {
				b.ui.Error(fmt.Sprintf("dlami: %s failed %s: %s", c.ID, phaseDuring(p), c.Message))
			}
		default:
			c.DurationMS = took.Milliseconds()
			own = append(own, c)
		}
		b.record(c)
	}
	return own
}

// phaseDuring names when a refined check failed, for the build log.
func phaseDuring(p checks.Phase) string {
	if p == checks.PhaseLoad {
		return "during the NCCL test"
	}
	return "during the " + string(p) + " phase"
}

// readHost reads the host phase's facts (the host suite in one round trip, the job units'
// memlock limits, the site checks) and resolves what they are compared against.
func (b *Bake) readHost(ctx context.Context) (time.Duration, error) {
	start := b.now()
	h, err := probe.Host(ctx, b.host, b.probeOptions())
	if err != nil {
		return b.now().Sub(start), err
	}
	jm, err := probe.JobMemlock(ctx, b.host, b.probeOptions())
	if err != nil {
		if ctx.Err() != nil {
			return b.now().Sub(start), ctx.Err()
		}
		jm.Units = facts.Unread[[]facts.UnitLimit](err.Error(), "")
	}
	site, err := b.siteChecks(ctx)
	if err != nil {
		return b.now().Sub(start), err
	}
	b.run.Host, b.run.JobMemlock, b.run.Site = h, jm, site
	t := b.withEC2(ctx, checks.Resolve(h, b.opt.Checks, b.opt.InstanceType))
	t.SessionIsLogin = b.freshLogin
	t.LoginUnjudged = b.loginUnjudged
	t.Launch = b.opt.Launch
	if b.rebootLayer != "" {
		// A mark of the old boot puts every line of the current boot after it.
		t.KernelLogSince = &facts.Mark{
			Position: facts.LogPosition{BootID: "before the reboot of layer " + b.rebootLayer},
			During:   fmt.Sprintf("since the reboot of layer %q", b.rebootLayer),
		}
	}
	b.target = t
	return b.now().Sub(start), nil
}

// hostSuite reads the host and judges it with the host phase's checks. EFA devices can
// register late after boot (seen on p5en): when the device count is the only failure and the
// PCI bus shows EFA functions, it looks again a couple of times before failing the bake.
func (b *Bake) hostSuite(ctx context.Context) error {
	b.stage("validation")
	took, err := b.readHost(ctx)
	if err != nil {
		return err
	}
	t := b.target
	b.update(func(r *report.Report) { r.InstanceType, r.InstanceTypeSource = t.InstanceType, t.InstanceTypeSource })
	b.sayTarget(t)
	host := b.judge(checks.PhaseHost, took)
	// A bus without any EFA function is not a late device: EC2 attaches EFA only at launch,
	// so looking again cannot find one.
	noEFAOnBus := t.PCI != nil && len(t.PCI.EFA) == 0
	for try := 1; try <= b.opt.EFARetries && !noEFAOnBus && onlyFailure(host, result.EFADevices); try++ {
		c, _ := result.Find(host, result.EFADevices)
		b.ui.Say(fmt.Sprintf("dlami: efa-devices failed (%s); looking again in %s (%d/%d)", c.Actual, b.opt.EFARetryDelay, try, b.opt.EFARetries))
		if err := pause.Sleep(ctx, b.opt.EFARetryDelay); err != nil {
			return err
		}
		if took, err = b.readHost(ctx); err != nil {
			return err
		}
		host = b.judge(checks.PhaseHost, took)
	}
	for _, s := range b.run.Site {
		c := checks.JudgeSite(s, b.target)
		c.DurationMS = s.Took.Milliseconds()
		host = append(host, c)
		b.record(c)
	}
	b.update(func(r *report.Report) { r.Manifest = mergeManifest(r.Manifest, b.run.Host.Manifest()) })
	if result.Failed(host) && !b.opt.KeepGoing {
		return verdict("host validation failed: %s", failedIDs(host))
	}
	return nil
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

// gpuOK reports whether the GPU checks passed so far: the tests that load the GPUs need them.
func (b *Bake) gpuOK() bool {
	return !b.checkOf(result.GPU).Status.Failing() && !b.checkOf(result.NvidiaDriver).Status.Failing()
}

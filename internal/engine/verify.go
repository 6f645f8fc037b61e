package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// VerifyOptions configure the check of an instance's first boot. Common.Policy is used only
// for a bill of materials that does not carry the bake's own.
type VerifyOptions struct {
	Common
	// BOM is the bill of materials read from the instance; the first boot is compared with it.
	BOM bom.BOM
	// SettleTimeout bounds the wait for cloud-init and apt before judging.
	SettleTimeout time.Duration
	// CompleteValidation (complete_validation = true) accepts a bill of materials whose bake
	// deferred its validation: this verification is then the image's validation. Its Checks
	// (the bake's under the verification's own, settings.Checks.Overlay) run the NCCL test.
	CompleteValidation bool
	// Launch is how the instance was launched, for the report.
	Launch *report.Launch
}

// ErrDeferredNotCompleted is why a verification refuses a bill of materials whose bake
// deferred its validation, unless CompleteValidation.
var ErrDeferredNotCompleted = errors.New("the image was baked with defer_validation = true (its host suite and NCCL test were not run): set complete_validation = true in the dlami post-processor to run them on this instance; a deferred image is never tagged verified without them")

// Verify checks the first boot of an instance launched from a baked image: it waits for the
// first boot to settle, compares the running kernel, the next-boot kernel and the guarded
// packages with the bill of materials, runs the host suite and, unless SkipNCCL, the NCCL test,
// and writes the reports on every ending. It changes nothing on the instance.
func Verify(ctx context.Context, h host.Host, ui UI, o VerifyOptions) error {
	if o.BOM.GuardPolicy != nil {
		o.Policy = *o.BOM.GuardPolicy
	}
	b := newBake(h, ui, Options{Common: o.Common, Validate: true})
	b.rep.Launch = o.Launch
	b.freshLogin = true
	b.plan = b.firstBootPlan(o)
	return b.withReports(ctx, b.plan.run)
}

// firstBootPlan is a verification of a launched image: the first boot settles and is compared
// with the bill of materials, then the same host suite and NCCL test as a bake's. It has no
// guard of its own and writes no bill of materials.
func (b *Bake) firstBootPlan(o VerifyOptions) plan {
	return plan{
		checkIDs: checks.IDs(checks.PhaseFirstBoot, checks.PhaseHost, checks.PhaseLoad, checks.PhaseFunction, checks.PhaseNode),
		steps: []func(context.Context) error{
			b.needCompletion(o), b.makeWorkDir("dlami-verify"), b.settle(o.SettleTimeout), b.firstBoot(o.BOM, "at first boot"),
			b.hostSuite, b.ncclTest, b.functionTests, b.nodeCheckVerify, b.judged("validation"),
		},
		verdict: func(err error) error {
			var v *verdictError
			if result.Failed(b.firstBootChecks()) && (err == nil || errors.As(err, &v)) {
				// Every failed check, the first-boot ones first: the build's error is what a
				// reader of the CI log sees.
				return verdict("first boot failed: %s", failedIDs(b.ordered()))
			}
			return err
		},
	}
}

// needCompletion refuses a bill of materials whose bake deferred its validation unless this
// verification completes it.
func (b *Bake) needCompletion(o VerifyOptions) func(context.Context) error {
	return func(context.Context) error {
		if o.BOM.Deferred == nil {
			return nil
		}
		if !o.CompleteValidation {
			b.stage("deferred validation")
			return ErrDeferredNotCompleted
		}
		b.ui.Say(fmt.Sprintf("dlami: completing the validation the bake deferred (complete_validation = true): %d checks, on this instance", len(o.BOM.Deferred.Checks)))
		return nil
	}
}

func (b *Bake) firstBootChecks() []result.Check {
	var cs []result.Check
	for _, id := range checks.IDs(checks.PhaseFirstBoot) {
		if c := b.checkOf(id); c.ID != "" {
			cs = append(cs, c)
		}
	}
	return cs
}

// settle waits for cloud-init and apt: a first boot that is still changing cannot be judged.
func (b *Bake) settle(timeout time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		b.stage("first boot: waiting for cloud-init and apt to settle")
		stop := b.waiting("cloud-init and apt to settle (settle_timeout)", timeout)
		f, err := probe.Settle(ctx, b.host, timeout)
		stop()
		if err != nil {
			return err
		}
		if problem := checks.SettleProblem(f); problem != "" {
			b.record(checks.Unsettled(problem, f.Evidence)...)
			return verdict("first boot: %s", problem)
		}
		return nil
	}
}

// firstBoot compares the running kernel, the next-boot kernel and the guarded packages with
// the bill of materials; when names the boot in messages ("at first boot", "on this boot").
// Its failures do not stop the host suite: the report shows both.
func (b *Bake) firstBoot(doc bom.BOM, when string) func(context.Context) error {
	return func(ctx context.Context) error {
		b.stage("first boot")
		cur, err := b.snapshot(ctx, "the first boot")
		if err != nil {
			return err
		}
		baked := guard.Baked{Kernel: doc.Kernel, Packages: map[string]guard.BakedPackage{}}
		for n, p := range doc.Guarded {
			baked.Packages[n] = guard.BakedPackage{Version: p.Version, Held: p.Held}
		}
		cs := guard.JudgeFirstBoot(baked, cur, b.opt.Policy, when)
		for i := range cs {
			cs[i].DurationMS = b.guardTook.Milliseconds()
		}
		b.record(cs...)
		b.update(func(r *report.Report) {
			r.Manifest = mergeManifest(r.Manifest, map[string]string{"kernel": cur.RunningKernel, "next_boot_kernel": cur.NextBootKernel})
		})
		for _, c := range cs {
			if c.Status.Failing() {
				b.ui.Error(fmt.Sprintf("dlami: %s failed: %s", c.ID, c.Message))
			}
		}
		return nil
	}
}

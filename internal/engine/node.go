package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// NodeOptions configure a node's check of itself (dlami-node-check): the node against the bill
// of materials of the image it booted from, the host suite with the bake's expectations, and
// the load and function phases the node's settings turn on.
type NodeOptions struct {
	// Common's ReportDir may be "" (no reports written); its Checks are what the node judges
	// with: the bake's, from the bill of materials, under the node's own settings
	// (settings.Checks.Overlay), which turn the load and function phases on.
	Common
	// BOM is the image's bill of materials; nil when it could not be read, and BOMProblem says
	// why (the node then fails closed: it cannot be compared with its image).
	BOM        *bom.BOM
	BOMProblem string
	// Timeout bounds the whole run: a node that cannot be judged in time fails.
	Timeout time.Duration
	// TimeoutSetting names the setting of Timeout in messages.
	TimeoutSetting string
	// LoginUnjudged, when set, says why memlock has no login user to judge.
	LoginUnjudged string
	// Read, when set, receives what the run read of the node (the node check keeps the
	// kernel log's Xid lines as evidence).
	Read *facts.Run
}

// CheckNode judges the node h is. It never stops at a failure: every check runs, one that
// could not be judged (a probe that failed, the run's bound reached) fails, and the report is
// returned whole, and written when ReportDir is set (the error says when it could not be).
func CheckNode(ctx context.Context, h host.Host, ui UI, o NodeOptions) (report.Report, error) {
	doc := bom.BOM{}
	if o.BOM != nil {
		doc = *o.BOM
		if doc.GuardPolicy != nil {
			o.Policy = *doc.GuardPolicy
		}
		o.InstanceType = doc.InstanceType
	}
	b := newBake(h, ui, Options{Common: o.Common, Validate: true, KeepGoing: true})
	b.loginUnjudged = o.LoginUnjudged
	b.rep.BuildName = doc.BuildName
	b.rep.Stage = "node check"
	bctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	b.plan = b.nodePlan(bctx, o, doc)
	_ = b.withReports(ctx, b.plan.run)
	b.mu.Lock()
	defer b.mu.Unlock()
	if o.Read != nil {
		*o.Read = b.run
	}
	n, err := report.Normalize(b.rep)
	if err != nil {
		n = b.rep
		n.Result = report.ResultError
	}
	return n, b.writeErr
}

// nodePlan is a node's check of itself: the bill of materials, the node against it, the host
// suite, then the load and function phases it asks for. Every step runs under bctx, the run's
// bound; a step that fails or runs out of time fails the checks it did not judge, and the
// next step runs.
func (b *Bake) nodePlan(bctx context.Context, o NodeOptions, doc bom.BOM) plan {
	type step struct {
		name string
		ids  []string
		run  func(context.Context) error
		// off says why the step does not run on this node ("" runs it): its checks are
		// reported skipped with why, never passed.
		off string
	}
	functionsOff := ""
	f := o.Checks.Function
	if f.DCGMLevel.Off() && f.EFATraffic.Skip && f.GDR.Skip && f.Container.Skip {
		functionsOff = "the function tests are off at boot (node_check.dcgm_level, efa_traffic, gpudirect_rdma and container_gpu; --dcgm-level, --efa-traffic, --gpudirect-rdma and --container-gpu turn them on)"
	}
	ncclOff := ""
	if o.Checks.NCCL.Skip {
		ncclOff = "the NCCL test is off at boot (node_check.nccl = false; --nccl turns it on)"
	}
	steps := []step{
		{"the bill of materials comparison", checks.IDs(checks.PhaseFirstBoot), b.againstBOM(o, doc), ""},
		{"the host suite", checks.IDs(checks.PhaseHost), b.hostSuite, ""},
		{"the NCCL test", checks.IDs(checks.PhaseLoad), b.ncclTest, ncclOff},
		{"the function tests", checks.IDs(checks.PhaseFunction), b.functionTests, functionsOff},
	}
	var p plan
	for _, s := range steps {
		p.checkIDs = append(p.checkIDs, s.ids...)
	}
	outOfTime := func(step string) string {
		return fmt.Sprintf("the node check did not finish within its timeout (%s %s) and stopped during %s: a node that cannot be judged in time fails", o.TimeoutSetting, o.Timeout, step)
	}
	p.steps = append(p.steps, b.makeWorkDir("dlami-node-check"))
	for _, s := range steps {
		if s.off != "" {
			p.steps = append(p.steps, func(context.Context) error { b.record(skipped(s.off, s.ids...)...); return nil })
			continue
		}
		p.steps = append(p.steps, func(ctx context.Context) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if bctx.Err() != nil {
				b.failUnjudged(s.ids, "not run: "+outOfTime(s.name))
				return nil
			}
			err := s.run(bctx)
			switch {
			case ctx.Err() != nil:
			case bctx.Err() != nil:
				// The run's bound ended the step: what it left unjudged fails.
				b.failUnjudged(s.ids, outOfTime(s.name)+errText(err))
			case err != nil:
				b.failUnjudged(s.ids, err.Error())
			}
			return ctx.Err()
		})
	}
	p.verdict = func(err error) error {
		if err == nil && result.Failed(b.ordered()) {
			return verdict("the node check failed: %s", failedIDs(b.ordered()))
		}
		return err
	}
	return p
}

// againstBOM compares the running and next-boot kernel and the guarded packages with the
// bill of materials, with the guard policy the bake used; without one the node fails closed.
func (b *Bake) againstBOM(o NodeOptions, doc bom.BOM) func(context.Context) error {
	return func(ctx context.Context) error {
		if o.BOM == nil {
			b.record(result.Check{ID: result.StagePrefix + "bill-of-materials", Status: result.Fail,
				Expected: "the bill of materials the bake wrote into the image", Actual: "unreadable", Message: o.BOMProblem})
			b.failUnjudged(checks.IDs(checks.PhaseFirstBoot), "no bill of materials to compare with (see stage:bill-of-materials)")
			return nil
		}
		return b.firstBoot(doc, "on this boot")(ctx)
	}
}

// failUnjudged records ids that have no verdict yet as failed with msg: on a node, what could
// not be judged fails.
func (b *Bake) failUnjudged(ids []string, msg string) {
	for _, id := range ids {
		if b.checkOf(id).ID != "" {
			continue
		}
		b.record(result.Check{ID: id, Status: result.Fail, Expected: "judged", Actual: "not judged", Message: msg})
	}
}

// errText is ": " and err's text, or "" without one.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

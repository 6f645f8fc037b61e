package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// deferValidation records the host suite and the NCCL test as deferred: skipped, never passed,
// with a message naming the settings that complete them. The build instance of a two-phase
// bake has no GPUs to judge.
func (b *Bake) deferValidation(ctx context.Context) error {
	b.stage("validation deferred")
	typ := b.buildInstanceType(ctx)
	var ids []string
	for _, id := range checks.IDs(checks.PhaseHost, checks.PhaseLoad, checks.PhaseFunction) {
		if e, _ := checks.Lookup(id); e.Family == "nccl" && b.opt.Checks.NCCL.Skip {
			b.record(skipped("nccl.skip = true", id)...)
			continue
		}
		ids = append(ids, id)
	}
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
		GuardPolicy: &b.opt.Policy, Deferred: b.deferred, Checks: bakeChecks(b.opt.Checks),
	}
	if prev := b.opt.PreviousBOM; prev != nil {
		changes := bom.Changes(*prev, doc, b.opt.PreviousBOMFile)
		b.update(func(r *report.Report) { r.Changes = &changes })
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

// bakeChecks are the bake's settings as the bill of materials carries them: whole, less what
// belongs to the bake's own run (the messages' setting names, a verification's multi-node test).
func bakeChecks(s settings.Checks) *settings.Checks {
	s.SkipSetting, s.WarnSetting, s.MultiNode = "", "", settings.MultiNode{}
	return &s
}

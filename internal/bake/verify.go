package bake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// VerifyOptions configure the check of an instance's first boot.
type VerifyOptions struct {
	BuildName     string
	PluginVersion string
	ReportDir     string
	// BOM is the bill of materials read from the instance; the first boot is compared with it.
	BOM bom.BOM
	// InstanceType is what the instance was launched as.
	InstanceType string
	Expect       checks.Expectations
	Policy       guard.Policy
	CheckTimeout time.Duration
	// SettleTimeout bounds the wait for cloud-init and apt before judging.
	SettleTimeout time.Duration
	// NCCL runs the NCCL test too (it costs GPU minutes).
	NCCL        bool
	NCCLOptions checks.NCCLOptions
	RemoteDir   string
	KillTimeout time.Duration
	Now         func() time.Time
}

// Verify checks the first boot of an instance launched from a baked image: it waits for the
// first boot to settle, compares the running kernel, the next-boot kernel and the guarded
// packages with the bill of materials, runs the host suite and, if asked, the NCCL test, and
// writes the reports on every ending. It changes nothing on the instance.
func Verify(ctx context.Context, h host.Host, ui UI, o VerifyOptions) error {
	b := newBake(h, ui, Options{
		BuildName: o.BuildName, PluginVersion: o.PluginVersion, ReportDir: o.ReportDir, InstanceType: o.InstanceType,
		Validate: true, CheckTimeout: o.CheckTimeout, Expect: o.Expect, Policy: o.Policy, NCCL: o.NCCLOptions,
		SkipNCCL: !o.NCCL, KillTimeout: o.KillTimeout, Now: o.Now,
	})
	b.firstBoot = true
	return b.withReports(ctx, func(ctx context.Context) error { return b.verify(ctx, o) })
}

func (b *Bake) verify(ctx context.Context, o VerifyOptions) error {
	b.workDir = fmt.Sprintf("%s/dlami-verify-%d", o.RemoteDir, b.now().UnixNano())
	if err := b.host.MakeDir(ctx, b.workDir); err != nil {
		return fmt.Errorf("creating the remote folder: %w", err)
	}
	b.stage("first boot: waiting for cloud-init and apt to settle")
	settleSecs := int(o.SettleTimeout / time.Second)
	sections, _, err := b.query(ctx, "settle", []bundle.Command{checks.SettleCommand(settleSecs)})
	if err != nil {
		return err
	}
	s, ok := sections[checks.HostSectionSettle]
	if problem := checks.JudgeSettle(s, ok); problem != "" {
		b.record(checks.Unsettled(problem, s.Output)...)
		return verdict("first boot: %s", problem)
	}
	b.stage("first boot")
	cur, err := b.snapshot(ctx, "the first boot")
	if err != nil {
		return err
	}
	baked := guard.Baked{Kernel: o.BOM.Kernel, Packages: map[string]guard.BakedPackage{}}
	for n, p := range o.BOM.Guarded {
		baked.Packages[n] = guard.BakedPackage{Version: p.Version, Held: p.Held}
	}
	cs := guard.JudgeFirstBoot(baked, cur, o.Policy)
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
	b.stage("validation")
	err = b.validate(ctx)
	var v *verdictError
	if result.Failed(cs) && (err == nil || errors.As(err, &v)) {
		// Every failed check, the first-boot ones first: the build's error is what a reader of
		// the CI log sees.
		err = verdict("first boot failed: %s", failedIDs(b.ordered()))
	}
	return err
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// snapshot reads the guarded state. When it cannot be read or parsed, the five guard checks
// are recorded as failed with the raw evidence: an unreadable host never passes the guard.
func (b *Bake) snapshot(ctx context.Context, stage string) (guard.Snapshot, error) {
	start := b.now()
	s, err := probe.Snapshot(ctx, b.host)
	if err == nil {
		s.TakenAt = b.now().UTC().Truncate(time.Second)
		b.guardTook = b.now().Sub(start)
		return s, nil
	}
	if ctx.Err() != nil {
		return guard.Snapshot{}, ctx.Err()
	}
	b.record(guard.Unjudgeable(stage, err)...)
	return guard.Snapshot{}, verdict("kernel guard after %s: %w", stage, err)
}

// startGuard loads this run's baseline, or takes it when this is the run's first dlami
// provisioner, and judges the host against it.
func (b *Bake) startGuard(ctx context.Context) error {
	b.stage("kernel guard")
	// Guard messages read "after <stage>".
	stage := "the baseline was taken"
	cur, err := b.snapshot(ctx, stage)
	if err != nil {
		return err
	}
	base, found, err := b.loadBaseline(ctx)
	if err != nil {
		return err
	}
	if !found {
		base = cur
	} else {
		stage = "the provisioners before this one"
	}
	guarded := guard.Union(guard.Guarded(base, b.opt.Policy), guard.Guarded(cur, b.opt.Policy))
	if unheld := guard.Unheld(cur, guarded); len(unheld) > 0 && b.opt.HoldUnheld {
		b.ui.Say("dlami: putting on hold (hold_unheld = true): " + strings.Join(unheld, " "))
		if err := b.host.Hold(ctx, unheld); err != nil {
			return fmt.Errorf("hold_unheld: %w", err)
		}
		b.update(func(r *report.Report) { r.HeldByPlugin = append(r.HeldByPlugin, unheld...) })
		if cur, err = b.snapshot(ctx, stage); err != nil {
			return err
		}
		if !found {
			base = cur
		}
	}
	if !found {
		if err := b.saveBaseline(ctx, base); err != nil {
			return err
		}
		b.ui.Say(fmt.Sprintf("dlami: recorded the baseline of this build at %s: kernel %s, next boot %s, %d guarded packages",
			guard.BaselinePath(b.opt.RunUUID), base.RunningKernel, base.NextBootKernel, len(guarded)))
	} else {
		b.ui.Say(fmt.Sprintf("dlami: comparing against this build's baseline, recorded at %s (kernel %s)", base.TakenAt.Format(time.RFC3339), base.RunningKernel))
	}
	b.guarded = guarded
	b.base = base
	// The kernel log as it stands before any layer: a layer that clears the ring buffer
	// (dmesg -c) must not hide an Xid logged earlier in this boot.
	bootLog, err := probe.KernelLog(ctx, b.host, b.probeOptions())
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		bootLog = facts.Unread[facts.KernelLog](err.Error(), "")
	}
	b.run.BootLog = &bootLog
	return b.judgeGuard(base, cur, guarded, stage)
}

// finalGuard takes the guard's last look, after the host suite and the NCCL test: a process a
// layer left behind (a daemonised upgrade, unattended-upgrades during a long NCCL run) can
// change the image after the last layer's drift check, and the bill of materials is written
// from this snapshot.
// after names what ran since the last look.
func (b *Bake) finalGuard(after string) func(context.Context) error {
	return func(ctx context.Context) error {
		b.stage("final drift check")
		return b.guardAfter(ctx, after)
	}
}

// guardAfter takes a new snapshot and judges it against the baseline.
func (b *Bake) guardAfter(ctx context.Context, stage string) error {
	base := b.base
	cur, err := b.snapshot(ctx, stage)
	if err != nil {
		return err
	}
	// A package that appears only now (a layer installed a new kernel) is guarded too.
	b.guarded = guard.Union(b.guarded, guard.Guarded(cur, b.opt.Policy))
	return b.judgeGuard(base, cur, b.guarded, stage)
}

func (b *Bake) judgeGuard(base, cur guard.Snapshot, guarded []string, stage string) error {
	cs := guard.Judge(base, cur, guarded, stage, guard.Options{PinnedKernel: b.opt.Checks.Expect.Kernel, RequireHolds: b.opt.RequireHolds})
	for i := range cs {
		cs[i].DurationMS = b.guardTook.Milliseconds()
	}
	b.record(cs...)
	b.lastSnapshot = cur
	drift := guard.Diff(base, cur, guarded)
	b.update(func(r *report.Report) {
		r.Manifest = mergeManifest(r.Manifest, map[string]string{"kernel": cur.RunningKernel, "next_boot_kernel": cur.NextBootKernel})
		r.Drift = drift
	})
	for _, c := range cs {
		if c.Status == result.Warn {
			b.ui.Error(fmt.Sprintf("dlami: warning: %s: %s", c.ID, c.Message))
		}
	}
	var failed []string
	for _, c := range cs {
		if c.Status.Failing() {
			failed = append(failed, c.ID)
			b.ui.Error(fmt.Sprintf("dlami: %s failed: %s", c.ID, c.Message))
		}
	}
	if len(failed) > 0 {
		for _, d := range drift {
			b.ui.Error("  " + d.String())
		}
		return &DriftError{Stage: stage, Failed: failed}
	}
	return nil
}

// loadBaseline reads this run's baseline. Not found means this is the run's first dlami
// provisioner. Anything else that stops it being read is a failure, never "no baseline":
// taking a new one would hide what the provisioners before this one changed.
func (b *Bake) loadBaseline(ctx context.Context) (guard.Snapshot, bool, error) {
	path := guard.BaselinePath(b.opt.RunUUID)
	data, err := b.host.ReadFile(ctx, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return guard.Snapshot{}, false, nil
	case err != nil:
		return guard.Snapshot{}, false, verdict("cannot read this build's baseline %s: %w (the guard fails closed: it will not take a new baseline over one it cannot read)", path, err)
	}
	s, err := guard.DecodeSnapshot(data)
	if err != nil {
		return s, false, verdict("this build's baseline %s is unreadable: %w", path, err)
	}
	return s, true, nil
}

// saveBaseline writes this run's baseline and removes the baselines of other runs: a golden
// image baked from another golden image carries its parent's, which must neither be used nor
// stay in the new image.
func (b *Bake) saveBaseline(ctx context.Context, s guard.Snapshot) error {
	data, err := s.Encode()
	if err != nil {
		return fmt.Errorf("encoding the baseline: %w", err)
	}
	own := guard.BaselinePath(b.opt.RunUUID)
	if err := b.host.Install(ctx, data, own, 0o644); err != nil {
		return fmt.Errorf("recording the baseline: %w", err)
	}
	paths, err := probe.Baselines(ctx, b.host)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if p == own {
			continue
		}
		if err := b.host.RemoveAll(ctx, p); err != nil {
			return fmt.Errorf("removing another build's baseline: %w", err)
		}
		b.ui.Say("dlami: removed the baseline of an earlier build: " + p)
	}
	return nil
}

func mergeManifest(dst, src map[string]string) map[string]string {
	if dst == nil {
		dst = map[string]string{}
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

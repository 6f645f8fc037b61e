package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/layer"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// layerTailBytes is how much of a layer's output its result entry keeps.
const layerTailBytes = 4000

// runLayer uploads and runs one layer, handles its reboot (asked for, or done by the layer's
// own scripts), records it as a result entry and runs the drift check after it.
func (b *Bake) runLayer(ctx context.Context, l layer.Spec) error {
	stage := fmt.Sprintf("layer %q", l.Name)
	b.stage(stage)
	entry := result.Check{ID: result.LayerPrefix + l.Name, Basis: checks.BasisRule, Expected: "exit 0"}
	start := b.now()
	tail := newTailWriter(layerTailBytes)
	done := func(st result.Status, actual, msg string) {
		entry.Status, entry.Actual, entry.Message = st, actual, msg
		entry.DurationMS = b.now().Sub(start).Milliseconds()
		entry.Evidence = textcut.Tail(tail.String(), layerTailBytes)
		b.record(entry)
	}

	bootBefore, err := b.host.BootID(ctx)
	if err != nil {
		done(result.Error, "host not answering", err.Error())
		return fmt.Errorf("%s: %w", stage, err)
	}
	dir := fmt.Sprintf("%s/layer-%d", b.workDir, len(b.layerEntries()))
	plan := layer.Build(l, dir)
	if err := b.upload(ctx, plan); err != nil {
		done(result.Error, "upload failed", err.Error())
		return fmt.Errorf("%s: %w", stage, err)
	}
	uiw := &uiWriter{ui: b.ui}
	job := host.Job{Name: stage, Script: plan.ScriptPath, AsRoot: true, PIDFile: path.Join(dir, "pid"), Output: io.MultiWriter(uiw, tail)}
	code, err := b.host.Run(ctx, job)
	uiw.Flush()
	switch {
	case ctx.Err() != nil:
		b.stopLater = append(b.stopLater, runningJob{b.host, job})
		done(result.Error, "cancelled", "the bake was cancelled while the layer ran; its process group is stopped on the host")
		return ctx.Err()
	case errors.Is(err, host.ErrDisconnected):
		return b.layerDropped(ctx, l, stage, bootBefore, err, done)
	case err != nil:
		done(result.Error, "error", err.Error())
		return fmt.Errorf("%s: %w", stage, err)
	}
	exit := code
	entry.ExitCode = &exit
	if code != 0 {
		done(result.Fail, fmt.Sprintf("exit %d", code), fmt.Sprintf("the layer failed with exit status %d (its output is above and in the evidence)", code))
		// Record what the failed layer left behind, so the report shows any drift too.
		_ = b.guardAfter(ctx, "failed "+stage)
		return verdict("layer %q failed with exit status %d (its output is above)", l.Name, code)
	}
	if l.Reboot {
		b.ui.Say("dlami: rebooting the host (reboot = true)")
		rctx, cancel := context.WithTimeout(ctx, b.opt.RebootTimeout)
		stop := b.waiting("the host to reboot and answer SSH again (reboot_timeout)", b.opt.RebootTimeout)
		err := b.host.Reboot(rctx)
		stop()
		cancel()
		if err != nil {
			done(result.Error, "reboot failed", err.Error())
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%s: reboot: %w (reboot_timeout %s)", stage, err, b.opt.RebootTimeout)
		}
		b.afterReboot(ctx, l.Name)
		stage += " and its reboot"
	}
	done(result.Pass, "exit 0", "")
	return b.guardAfter(ctx, stage)
}

// layerDropped decides what a dropped connection during a layer means. The host either
// rebooted (its boot id changed: a vendor script did it) or the connection broke.
func (b *Bake) layerDropped(ctx context.Context, l layer.Spec, stage, bootBefore string, cause error, done func(result.Status, string, string)) error {
	b.ui.Say(fmt.Sprintf("dlami: the connection dropped during %s; waiting up to %s (reboot_timeout) for the host", stage, b.opt.RebootTimeout))
	rctx, cancel := context.WithTimeout(ctx, b.opt.RebootTimeout)
	stop := b.waiting("the host to answer SSH again after the dropped connection (reboot_timeout)", b.opt.RebootTimeout)
	err := b.host.Reconnect(rctx)
	var bootAfter string
	if err == nil {
		bootAfter, err = b.host.BootID(rctx)
	}
	stop()
	cancel()
	if ctx.Err() != nil {
		done(result.Error, "cancelled", "the bake was cancelled while waiting for the host")
		return ctx.Err()
	}
	if err != nil {
		done(result.Error, "host gone", fmt.Sprintf("the connection dropped (%v) and the host did not answer again within %s: %v", cause, b.opt.RebootTimeout, err))
		return fmt.Errorf("%s: the connection dropped and the host did not come back within reboot_timeout %s: %w", stage, b.opt.RebootTimeout, err)
	}
	if bootAfter == bootBefore {
		done(result.Fail, "connection dropped", fmt.Sprintf("the connection dropped but the host did not reboot (same boot id %s): %v; the layer's exit status is unknown", bootBefore, cause))
		_ = b.guardAfter(ctx, "failed "+stage)
		return verdict("%s: the connection dropped without a reboot (%v); the layer's outcome is unknown", stage, cause)
	}
	b.afterReboot(ctx, l.Name)
	if l.ExpectReboot {
		b.ui.Say(fmt.Sprintf("dlami: the host rebooted during %s, as expect_reboot says; checking for drift", stage))
		done(result.Pass, "rebooted (expected)", fmt.Sprintf("the layer rebooted the host (boot id %s → %s), as expect_reboot = true says", bootBefore, bootAfter))
		return b.guardAfter(ctx, stage+" and its own reboot")
	}
	drift := b.guardAfter(ctx, stage+" and its own reboot")
	found := "nothing"
	if drift != nil {
		found = failedIDs(b.ordered())
	}
	msg := fmt.Sprintf("the host rebooted during layer %q (boot id %s → %s) although the layer does not say it reboots; the drift check after the reboot found %s. If the layer reboots on purpose, set expect_reboot = true on it; to reboot after a layer, set reboot = true",
		l.Name, bootBefore, bootAfter, found)
	done(result.Fail, "rebooted unexpectedly", msg)
	b.ui.Error("dlami: " + msg)
	return verdict("%s", msg)
}

// afterReboot notes the new boot for the xid check.
func (b *Bake) afterReboot(ctx context.Context, layerName string) {
	b.rebootLayer = layerName
	if id, err := b.host.BootID(ctx); err == nil {
		b.ui.Say("dlami: the host is back (boot id " + id + ")")
	}
}

// kill stops a job's process group on the host over a new session, bounded by KillTimeout,
// whatever the state of the bake's context.
func (b *Bake) kill(ctx context.Context, j host.Job) { b.killOn(ctx, b.host, j) }

// killOn is kill on host h (a node of a run across nodes).
func (b *Bake) killOn(ctx context.Context, h host.Host, j host.Job) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.opt.KillTimeout)
	defer cancel()
	if err := h.Kill(kctx, j); err != nil {
		b.ui.Error(fmt.Sprintf("dlami: could not stop %s on the host: %v", j.Name, err))
		return
	}
	b.ui.Say("dlami: stopped " + j.Name + " on the host")
}

// upload puts a layer's script and files on the host.
func (b *Bake) upload(ctx context.Context, plan layer.Plan) error {
	if err := b.host.MakeDir(ctx, plan.Dir); err != nil {
		return err
	}
	for _, u := range plan.Uploads {
		var r io.Reader
		if u.Content != nil {
			r = bytes.NewReader(u.Content)
		} else {
			f, err := os.Open(u.Local)
			if err != nil {
				return err
			}
			defer f.Close()
			r = f
		}
		if err := b.host.Upload(ctx, u.Remote, r); err != nil {
			return err
		}
	}
	return nil
}

// layerEntries are the layer results recorded so far.
func (b *Bake) layerEntries() []result.Check {
	var out []result.Check
	for _, c := range b.ordered() {
		if strings.HasPrefix(c.ID, result.LayerPrefix) {
			out = append(out, c)
		}
	}
	return out
}

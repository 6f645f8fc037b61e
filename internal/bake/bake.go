// Package bake runs one `dlami` provisioner's work on a host: guard the kernel holds, run the
// layers with a drift check after each, validate the host, run the NCCL test, and write the
// reports. It decides the order and when to stop; the commands and the judging come from the
// guard, layer and checks packages, and everything remote goes through remote.Host.
package bake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/layer"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/remote"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// BaselinePath is where the first dlami provisioner of a build records the baseline, so later
// dlami provisioners (after shell or ansible steps) compare against the same one.
const BaselinePath = guard.BaselinePath

// UI is the part of packersdk.Ui the bake talks to.
type UI interface {
	Say(string)
	Message(string)
	Error(string)
}

// Options is one provisioner's resolved configuration.
type Options struct {
	BuildName     string
	PluginVersion string
	ReportDir     string
	InstanceType  string
	KeepGoing     bool
	HoldUnheld    bool
	Validate      bool
	CheckTimeout  time.Duration
	RemoteFolder  string
	ManifestPath  string
	RebootTimeout time.Duration
	Policy        guard.Policy
	Layers        []layer.Spec
	Expect        checks.Expectations
	SkipNCCL      bool
	NCCL          checks.NCCLOptions
}

// Bake holds the state of one run.
type Bake struct {
	host remote.Host
	ui   UI
	opt  Options
	now  func() time.Time

	workDir   string
	guardTook time.Duration
	rep       report.Report
	checks    map[string]result.Check
	order     []string
}

// DriftError is returned when the guard finds drift or an unheld package.
type DriftError struct {
	Stage  string
	Failed []string
}

func (e *DriftError) Error() string {
	return fmt.Sprintf("kernel guard failed after %s: %s (see the report for before → after)", e.Stage, strings.Join(e.Failed, ", "))
}

// Run does the whole provisioner's work and writes the reports, also when it fails.
func Run(ctx context.Context, host remote.Host, ui UI, opt Options) error {
	b := &Bake{host: host, ui: ui, opt: opt, now: time.Now, checks: map[string]result.Check{}}
	b.rep = report.Report{
		SchemaVersion: report.SchemaVersion,
		PluginVersion: opt.PluginVersion,
		BuildName:     opt.BuildName,
		StartedAt:     b.now().UTC(),
		InstanceType:  opt.InstanceType,
	}
	err := b.run(ctx)
	if werr := b.finish(err); werr != nil {
		if err == nil {
			return werr
		}
		ui.Error(werr.Error())
	}
	return err
}

func (b *Bake) run(ctx context.Context) error {
	b.workDir = fmt.Sprintf("%s/dlami-bake-%d", strings.TrimRight(b.opt.RemoteFolder, "/"), b.now().UnixNano())
	if err := b.sh(ctx, "mkdir -p -m 0700 "+bundle.Quote(b.workDir)); err != nil {
		return fmt.Errorf("creating remote folder %s: %w", b.workDir, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = b.sh(cctx, "sudo -n rm -rf "+bundle.Quote(b.workDir)+" 2>/dev/null || rm -rf "+bundle.Quote(b.workDir))
	}()

	b.stage("kernel guard")
	base, guarded, err := b.startGuard(ctx)
	if err != nil {
		return err
	}
	for _, l := range b.opt.Layers {
		stage := fmt.Sprintf("layer %q", l.Name)
		b.stage(stage)
		if err := b.runLayer(ctx, l); err != nil {
			// Record what the failed layer left behind, so the report shows any drift too.
			if !errors.Is(err, remote.ErrDisconnected) {
				_ = b.guardAfter(ctx, base, guarded, "failed "+stage)
			}
			return err
		}
		if l.Reboot {
			stage += " and its reboot"
		}
		if err := b.guardAfter(ctx, base, guarded, stage); err != nil {
			return err
		}
	}
	if !b.opt.Validate {
		b.stage("done (validation disabled)")
		return nil
	}
	b.stage("validation")
	return b.validate(ctx)
}

func (b *Bake) stage(s string) {
	b.rep.Stage = s
	b.ui.Say("dlami: " + s)
}

// record stores checks in the report, replacing earlier results of the same id (the guard runs
// after every layer; the last verdict stands, and the first failure ends the bake).
func (b *Bake) record(cs ...result.Check) {
	for _, c := range cs {
		if _, ok := b.checks[c.ID]; !ok {
			b.order = append(b.order, c.ID)
		}
		b.checks[c.ID] = c
	}
}

// sh runs a short command and fails on a non-zero exit, with the command's output.
func (b *Bake) sh(ctx context.Context, cmd string) error {
	var out remote.Buffer
	code, err := b.host.Run(ctx, cmd, nil, &out, &out)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("%s: exit status %d: %s", cmd, code, strings.TrimSpace(out.String()))
	}
	return nil
}

// batch runs read-only commands in one round trip and splits their output.
func (b *Bake) batch(ctx context.Context, what string, cmds []bundle.Command) (map[string]bundle.Section, time.Duration, error) {
	script, err := bundle.Script(cmds)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", what, err)
	}
	var budget time.Duration = 30 * time.Second
	for _, c := range cmds {
		t := c.TimeoutSeconds
		if t <= 0 {
			t = 30
		}
		budget += time.Duration(t+2) * time.Second
	}
	bctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	start := b.now()
	out, code, err := remote.Output(bctx, b.host, script)
	took := b.now().Sub(start)
	if err != nil {
		return nil, took, fmt.Errorf("%s: %w", what, err)
	}
	if code != 0 {
		return nil, took, fmt.Errorf("%s: the check script exited %d: %s", what, code, tail(out, 2000))
	}
	sections, err := bundle.Parse(out, cmds)
	if err != nil {
		return nil, took, fmt.Errorf("%s: %w", what, err)
	}
	return sections, took, nil
}

// snapshot reads the guarded state. When it cannot be read or parsed, the five guard checks
// are recorded as failed with the raw evidence: an unreadable host never passes the guard.
func (b *Bake) snapshot(ctx context.Context, stage string) (guard.Snapshot, error) {
	sections, took, err := b.batch(ctx, "kernel guard snapshot", guard.Commands())
	if err == nil {
		var s guard.Snapshot
		if s, err = guard.ParseSnapshot(sections); err == nil {
			s.TakenAt = b.now().UTC()
			b.guardTook = took
			return s, nil
		}
	}
	b.record(guard.Unjudgeable(stage, err)...)
	return guard.Snapshot{}, fmt.Errorf("kernel guard %s: %w", stage, err)
}

func (b *Bake) startGuard(ctx context.Context) (guard.Snapshot, []string, error) {
	// Guard messages read "after <stage>".
	stage := "the baseline was taken"
	cur, err := b.snapshot(ctx, stage)
	if err != nil {
		return cur, nil, err
	}
	base, found, err := b.loadBaseline(ctx)
	if err != nil {
		return cur, nil, err
	}
	if !found {
		base = cur
	} else {
		stage = "the provisioners before this one"
	}
	guarded := guard.Union(guard.Guarded(base, b.opt.Policy), guard.Guarded(cur, b.opt.Policy))
	if unheld := guard.Unheld(cur, guarded); len(unheld) > 0 && b.opt.HoldUnheld {
		b.ui.Say("dlami: putting on hold (hold_unheld = true): " + strings.Join(unheld, " "))
		args := make([]string, len(unheld))
		for i, p := range unheld {
			args[i] = bundle.Quote(p)
		}
		if err := b.sh(ctx, "sudo -n apt-mark hold "+strings.Join(args, " ")); err != nil {
			return cur, nil, fmt.Errorf("hold_unheld: %w", err)
		}
		b.rep.HeldByPlugin = append(b.rep.HeldByPlugin, unheld...)
		if cur, err = b.snapshot(ctx, stage); err != nil {
			return cur, nil, err
		}
		if !found {
			base = cur
		}
	}
	if !found {
		if err := b.saveBaseline(ctx, base); err != nil {
			return base, nil, err
		}
		b.ui.Say(fmt.Sprintf("dlami: recorded the baseline at %s: kernel %s, next boot %s, %d guarded packages", BaselinePath, base.RunningKernel, base.NextBootKernel, len(guarded)))
	} else {
		b.ui.Say(fmt.Sprintf("dlami: comparing against the baseline recorded at %s (kernel %s)", base.TakenAt.Format(time.RFC3339), base.RunningKernel))
	}
	return base, guarded, b.judgeGuard(base, cur, guarded, stage)
}

func (b *Bake) guardAfter(ctx context.Context, base guard.Snapshot, guarded []string, stage string) error {
	cur, err := b.snapshot(ctx, stage)
	if err != nil {
		return err
	}
	// A package that appears only now (a layer installed a new kernel) is guarded too.
	guarded = guard.Union(guarded, guard.Guarded(cur, b.opt.Policy))
	return b.judgeGuard(base, cur, guarded, stage)
}

func (b *Bake) judgeGuard(base, cur guard.Snapshot, guarded []string, stage string) error {
	cs := guard.Judge(base, cur, guarded, stage, guard.Options{PinnedKernel: b.opt.Expect.Kernel})
	for i := range cs {
		cs[i].DurationMS = b.guardTook.Milliseconds()
	}
	b.record(cs...)
	b.rep.Manifest = mergeManifest(b.rep.Manifest, map[string]string{"kernel": cur.RunningKernel, "next_boot_kernel": cur.NextBootKernel})
	drift := guard.Diff(base, cur, guarded)
	b.rep.Drift = b.rep.Drift[:0]
	for _, d := range drift {
		b.rep.Drift = append(b.rep.Drift, d.String())
	}
	var failed []string
	for _, c := range cs {
		if c.Status == result.Fail {
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

func (b *Bake) loadBaseline(ctx context.Context) (guard.Snapshot, bool, error) {
	out, code, err := remote.Output(ctx, b.host, "cat "+BaselinePath+" 2>/dev/null || echo __DLAMI_NO_BASELINE__\n")
	if err != nil {
		return guard.Snapshot{}, false, fmt.Errorf("reading baseline %s: %w", BaselinePath, err)
	}
	if code != 0 || strings.TrimSpace(out) == "__DLAMI_NO_BASELINE__" {
		return guard.Snapshot{}, false, nil
	}
	s, err := guard.DecodeSnapshot([]byte(out))
	if err != nil {
		return s, false, fmt.Errorf("baseline %s on the host is unreadable (delete it to record a new one only if no layer has run yet): %w", BaselinePath, err)
	}
	return s, true, nil
}

func (b *Bake) saveBaseline(ctx context.Context, s guard.Snapshot) error {
	data, err := s.Encode()
	if err != nil {
		return fmt.Errorf("encoding baseline: %w", err)
	}
	return b.installFile(ctx, data, BaselinePath, "0644")
}

// installFile puts data at an absolute remote path as root.
func (b *Bake) installFile(ctx context.Context, data []byte, dst, mode string) error {
	tmp := b.workDir + "/upload-" + fmt.Sprint(b.now().UnixNano())
	if err := b.host.Upload(ctx, tmp, bytes.NewReader(data)); err != nil {
		return err
	}
	err := b.sh(ctx, fmt.Sprintf("sudo -n install -D -m %s %s %s", bundle.Quote(mode), bundle.Quote(tmp), bundle.Quote(dst)))
	if err != nil {
		return fmt.Errorf("installing %s: %w", dst, err)
	}
	return nil
}

func (b *Bake) runLayer(ctx context.Context, l layer.Spec) error {
	start := b.now()
	status := "fail"
	defer func() {
		b.rep.Layers = append(b.rep.Layers, report.Layer{Name: l.Name, DurationMS: b.now().Sub(start).Milliseconds(), Status: status})
	}()
	plan := layer.Build(l, fmt.Sprintf("%s/layer-%d", b.workDir, len(b.rep.Layers)))
	if err := b.sh(ctx, "mkdir -p -m 0700 "+bundle.Quote(plan.Dir)); err != nil {
		return fmt.Errorf("layer %q: %w", l.Name, err)
	}
	for _, u := range plan.Uploads {
		var r io.Reader
		if u.Content != nil {
			r = bytes.NewReader(u.Content)
		} else {
			f, err := os.Open(u.Local)
			if err != nil {
				return fmt.Errorf("layer %q: %w", l.Name, err)
			}
			defer f.Close()
			r = f
		}
		if err := b.host.Upload(ctx, u.Remote, r); err != nil {
			return fmt.Errorf("layer %q: %w", l.Name, err)
		}
	}
	w := &uiWriter{ui: b.ui}
	code, err := b.host.Run(ctx, "sudo -n /bin/sh "+bundle.Quote(plan.ScriptPath), nil, w, w)
	w.Flush()
	if err != nil {
		return fmt.Errorf("layer %q: %w", l.Name, err)
	}
	if code != 0 {
		return fmt.Errorf("layer %q failed with exit status %d (its output is above)", l.Name, code)
	}
	if l.Reboot {
		if err := b.reboot(ctx); err != nil {
			return fmt.Errorf("layer %q: %w", l.Name, err)
		}
	}
	status = "pass"
	return nil
}

// reboot restarts the host and waits until it answers again. It first waits to see the old
// boot go away, so a command that still reaches the old sshd is not taken for the new boot.
func (b *Bake) reboot(ctx context.Context) error {
	b.ui.Say("dlami: rebooting the host")
	rctx, cancel := context.WithTimeout(ctx, b.opt.RebootTimeout)
	defer cancel()
	cctx, ccancel := context.WithTimeout(rctx, 30*time.Second)
	_, err := b.host.Run(cctx, "sudo -n sh -c '(sleep 1; reboot || shutdown -r now) >/dev/null 2>&1 &'", nil, nil, nil)
	ccancel()
	if err != nil && !errors.Is(err, remote.ErrDisconnected) {
		return fmt.Errorf("requesting reboot: %w", err)
	}
	wentDown := errors.Is(err, remote.ErrDisconnected)
	for deadline := b.now().Add(90 * time.Second); !wentDown; {
		if b.now().After(deadline) {
			return fmt.Errorf("reboot: the host still answered 90s after the reboot request")
		}
		pctx, pcancel := context.WithTimeout(rctx, 5*time.Second)
		_, perr := b.host.Run(pctx, "true", nil, nil, nil)
		pcancel()
		if perr != nil {
			wentDown = true
			break
		}
		if err := sleep(rctx, time.Second); err != nil {
			return fmt.Errorf("reboot: %w", err)
		}
	}
	for {
		pctx, pcancel := context.WithTimeout(rctx, 10*time.Second)
		var out remote.Buffer
		code, perr := b.host.Run(pctx, "uname -r", nil, &out, &out)
		pcancel()
		if perr == nil && code == 0 {
			b.ui.Say("dlami: host is back, running kernel " + strings.TrimSpace(out.String()))
			return nil
		}
		if err := sleep(rctx, 2*time.Second); err != nil {
			return fmt.Errorf("reboot: the host did not come back within %s", b.opt.RebootTimeout)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (b *Bake) validate(ctx context.Context) error {
	timeout := int(b.opt.CheckTimeout / time.Second)
	cmds := checks.HostCommands(checks.HostOptions{NVMePath: b.opt.Expect.NVMePath, CheckTimeoutSeconds: timeout})
	sections, took, err := b.batch(ctx, "host validation", cmds)
	if err != nil {
		return err
	}
	typ, source := checks.InstanceType(sections, b.opt.InstanceType)
	b.rep.InstanceType, b.rep.InstanceTypeSource = typ, source
	prof, found := profile.Lookup(typ)
	if found {
		b.ui.Say(fmt.Sprintf("dlami: instance type %s (from %s): profile %s", typ, source, prof.Source))
	} else {
		b.ui.Say(fmt.Sprintf("dlami: instance type %q (from %s) has no built-in profile; only explicit expectations are judged", typ, source))
	}
	exp := checks.Merge(prof, found, b.opt.Expect)
	host := checks.EvaluateHost(sections, exp)
	// EFA devices can register late after boot (seen on p5en): when the device count is the
	// only failure, look again a couple of times before failing the bake.
	for try := 1; try <= EFARetries && onlyFailure(host, result.EFADevices); try++ {
		b.ui.Say(fmt.Sprintf("dlami: efa-devices failed (%s); looking again in %s (%d/%d)", failedActual(host, result.EFADevices), EFARetryDelay, try, EFARetries))
		if err := sleep(ctx, EFARetryDelay); err != nil {
			return err
		}
		if sections, took, err = b.batch(ctx, "host validation", cmds); err != nil {
			return err
		}
		host = checks.EvaluateHost(sections, exp)
	}
	for i := range host {
		if host[i].DurationMS == 0 {
			host[i].DurationMS = took.Milliseconds()
		}
	}
	b.record(host...)
	b.rep.Manifest = mergeManifest(b.rep.Manifest, checks.Manifest(sections))
	if result.Failed(host) && !b.opt.KeepGoing {
		return b.failed("host validation", host)
	}
	if b.opt.SkipNCCL {
		b.record(skipped("nccl.skip = true", result.NCCLIDs...)...)
	} else if gpuOK(host) {
		b.runNCCL(ctx, exp)
	} else {
		b.record(skipped("the GPU checks failed", result.NCCLIDs...)...)
	}
	all := b.ordered()
	if result.Failed(all) {
		return b.failed("validation", all)
	}
	return b.writeManifest(ctx)
}

// EFARetries and EFARetryDelay bound the second looks at a late EFA device count.
var (
	EFARetries    = 2
	EFARetryDelay = 5 * time.Second
)

// onlyFailure reports whether id is the one failed check in cs.
func onlyFailure(cs []result.Check, id string) bool {
	n := 0
	for _, c := range cs {
		if c.Status == result.Fail {
			if c.ID != id {
				return false
			}
			n++
		}
	}
	return n == 1
}

func failedActual(cs []result.Check, id string) string {
	for _, c := range cs {
		if c.ID == id {
			return c.Actual
		}
	}
	return ""
}

func gpuOK(cs []result.Check) bool {
	for _, c := range cs {
		if (c.ID == result.GPU || c.ID == result.NvidiaDriver) && c.Status == result.Fail {
			return false
		}
	}
	return true
}

func (b *Bake) runNCCL(ctx context.Context, exp checks.Expectations) {
	o := b.opt.NCCL
	if o.Ranks == 0 {
		// Zero leaves it to the script, which starts one rank per GPU nvidia-smi lists.
		o.Ranks = exp.GPUCount
	}
	script, err := checks.NCCLCommand(o)
	if err != nil {
		b.record(result.Check{ID: result.NCCLCorrectness, Status: result.Fail, Expected: "a runnable NCCL test", Actual: "bad nccl settings", Message: err.Error()})
		return
	}
	for _, w := range checks.NCCLWarnings(o) {
		b.ui.Error("dlami: warning: " + w)
	}
	b.ui.Say("dlami: running the 1-node NCCL all-reduce test")
	timeout := time.Duration(o.TimeoutSeconds) * time.Second
	nctx, cancel := context.WithTimeout(ctx, timeout+2*time.Minute)
	defer cancel()
	// Uploaded rather than sent on the command line: Packer's SSH communicator logs command
	// lines at debug level, and nccl.env values may be secret.
	path := b.workDir + "/nccl.sh"
	if err := b.host.Upload(ctx, path, strings.NewReader(script)); err != nil {
		b.record(result.Check{ID: result.NCCLCorrectness, Status: result.Fail, Expected: "the NCCL test runs to completion", Actual: "upload failed", Message: err.Error()})
		return
	}
	var out remote.Buffer
	start := b.now()
	code, runErr := b.host.Run(nctx, "sh "+bundle.Quote(path), nil, &out, &out)
	took := b.now().Sub(start)
	timedOut := code == 124 || code == 137 || errors.Is(runErr, context.DeadlineExceeded)
	if runErr != nil && !timedOut {
		b.record(result.Check{ID: result.NCCLCorrectness, Status: result.Fail, Expected: "the NCCL test runs to completion", Actual: runErr.Error(), Evidence: tail(out.String(), 4000)})
		return
	}
	cs, figures := checks.JudgeNCCL(out.String(), code, timedOut, exp, o)
	for i := range cs {
		cs[i].DurationMS = took.Milliseconds()
	}
	b.record(cs...)
	b.rep.NCCL = figures
}

func skipped(why string, ids ...string) []result.Check {
	cs := make([]result.Check, len(ids))
	for i, id := range ids {
		cs[i] = result.Check{ID: id, Status: result.Skip, Message: "not run: " + why}
	}
	return cs
}

func (b *Bake) failed(stage string, cs []result.Check) error {
	var ids []string
	for _, c := range cs {
		if c.Status == result.Fail {
			ids = append(ids, c.ID)
		}
	}
	return fmt.Errorf("%s failed: %s", stage, strings.Join(ids, ", "))
}

func (b *Bake) writeManifest(ctx context.Context) error {
	if b.opt.ManifestPath == "" {
		return nil
	}
	data, err := json.MarshalIndent(struct {
		GeneratedAt   time.Time         `json:"generated_at"`
		PluginVersion string            `json:"plugin_version"`
		BuildName     string            `json:"build_name"`
		InstanceType  string            `json:"instance_type"`
		Components    map[string]string `json:"components"`
		NCCL          any               `json:"nccl"`
	}{b.now().UTC(), b.opt.PluginVersion, b.opt.BuildName, b.rep.InstanceType, b.rep.Manifest, b.rep.NCCL}, "", "  ")
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if err := b.installFile(ctx, data, b.opt.ManifestPath, "0644"); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	b.ui.Say("dlami: wrote the bill of materials into the image at " + b.opt.ManifestPath)
	return nil
}

func (b *Bake) ordered() []result.Check {
	out := make([]result.Check, 0, len(b.order))
	for _, id := range b.order {
		out = append(out, b.checks[id])
	}
	return out
}

// finish fills in checks that never ran, writes the reports and shows the table.
func (b *Bake) finish(runErr error) error {
	if b.opt.Validate {
		why := "the bake stopped at " + b.rep.Stage
		for _, id := range result.IDs {
			if _, ok := b.checks[id]; !ok {
				b.record(skipped(why, id)...)
			}
		}
	}
	b.rep.Checks = b.ordered()
	b.rep.FinishedAt = b.now().UTC()
	b.rep.Result = "pass"
	if runErr != nil || result.Failed(b.rep.Checks) {
		b.rep.Result = "fail"
	}
	if runErr != nil {
		b.rep.Error = runErr.Error()
	}
	b.ui.Message(report.Table(b.rep.Checks))
	paths, err := report.Write(b.opt.ReportDir, b.rep)
	if err != nil {
		return fmt.Errorf("writing reports to %s: %w", b.opt.ReportDir, err)
	}
	b.ui.Say("dlami: result " + strings.ToUpper(b.rep.Result) + "; reports: " + strings.Join(paths, ", "))
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

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// uiWriter streams a layer's output to the Packer UI line by line.
type uiWriter struct {
	mu  sync.Mutex
	ui  UI
	buf []byte
}

func (w *uiWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.ui.Message(strings.TrimRight(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// Flush prints a final line without a newline.
func (w *uiWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.ui.Message(string(w.buf))
		w.buf = nil
	}
}

// Package engine is the one engine of the checks: it gathers a host's facts phase by phase
// (the host suite, the NCCL test's load, the function tests, the site checks) through the probe,
// judges them with the catalog of package checks, and runs three plans over the same phases: a
// bake (one `dlami` provisioner's work: guard the kernel holds, run the layers with a drift
// check after each, the phases, the bill of materials), the first-boot verification of an
// instance launched from the image, and a node's check of itself. It writes the reports on
// every ending (pass, fail, cancel, error) and decides the order and when to stop; the commands
// come from the probe and the layer package, the judging from the checks and guard packages,
// and everything on the host goes through the typed host API (package host): SSH in a bake,
// this machine on a node.
package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/layer"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// UI is the part of packersdk.Ui the bake talks to.
type UI interface {
	Say(string)
	Message(string)
	Error(string)
}

// Common are the settings a bake and a first-boot verification share.
type Common struct {
	BuildName     string
	PluginVersion string
	ReportDir     string
	// InstanceType is what the host was launched as; the host's own answer comes first.
	InstanceType string
	// CheckTimeout bounds each check command and RemoteFolder is where scripts are uploaded
	// (it must allow execution): both resolved by the caller (the provisioner's and the
	// post-processor's Prepare, the node check's start), as every field of Common is.
	CheckTimeout time.Duration
	RemoteFolder string
	Policy       settings.GuardPolicy
	// Checks are what the judges compare against: the expect block, the NCCL and function
	// tests' settings, and the checks skipped or demoted.
	Checks settings.Checks
	// LoginUser is the user whose new logins the memlock check judges; "" is the user the
	// probe runs as (the SSH user).
	LoginUser string
	// Launch is what the host's launch attached, when the caller launched it (the
	// post-processor's verification); zero when unknown (a bake inside a builder).
	Launch checks.Launch
	// LoadSampleEvery is how often the GPUs' health is sampled while the NCCL test runs; 0
	// means DefaultLoadSampleEvery.
	LoadSampleEvery time.Duration
	// KillTimeout bounds stopping a running job when the run is cancelled.
	KillTimeout time.Duration
	// ProgressEvery is how often a long wait says what it waits for; 0 means
	// DefaultProgressEvery.
	ProgressEvery time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// DescribeType reads EC2's description of the instance type (ec2:DescribeInstanceTypes),
	// once per run; nil when the run has no AWS access.
	DescribeType DescribeFunc
	// Secrets are values that must never appear in a report (layer environment values,
	// nccl.env values, repository passwords): the reports are redacted.
	Secrets []string
}

// Options is one provisioner's resolved configuration.
type Options struct {
	Common
	// RunUUID is Packer's run id; the baseline is keyed to it so that a baseline an earlier
	// bake left in the image is never used.
	RunUUID       string
	KeepGoing     bool
	HoldUnheld    bool
	RequireHolds  bool
	Validate      bool
	ManifestPath  string
	RebootTimeout time.Duration
	Layers        []layer.Spec

	// BuildInstanceID is the instance the builder launched (Packer's build.ID, amazon-ebs's
	// instance id); "" when the builder gave none, and the host's own answer is used.
	BuildInstanceID string

	// EFARetries and EFARetryDelay bound the second looks at a late EFA device count.
	EFARetries    int
	EFARetryDelay time.Duration

	// DeferValidation is the first phase of a two-phase bake (defer_validation = true): the
	// guard, the layers and the last drift check run, the host suite and the NCCL test are
	// recorded as deferred (skipped, with why) and left to the post-processor's
	// complete_validation, and the bill of materials says so.
	DeferValidation bool
	// NodeCheck, when set, installs dlami-node-check into the image (nodecheck.go).
	NodeCheck *nodeconf.Config
	// SiteChecks are installed into the image before the validation (site_checks_dir).
	SiteChecks []SiteCheck
	// PreviousBOM, when set, is a previous bake's bill of materials (previous_bom_file, read
	// from PreviousBOMFile): the report says what changed since (result.Changes).
	PreviousBOM     *bom.BOM
	PreviousBOMFile string
	// ImageHygiene, when set, is the bake's last step (hygiene.go): after the bill of
	// materials, it removes the build's SSH key, the host keys, the machine id, cloud-init's
	// instance state, logs and shell history, and checks that they are gone (image-hygiene).
	ImageHygiene *Hygiene
}

// Defaults of Options fields left zero.
const (
	DefaultEFARetries    = 2
	DefaultEFARetryDelay = 5 * time.Second
	DefaultKillTimeout   = 5 * time.Second
	// DefaultLoadSampleEvery keeps a p5's 8-GPU query (well under a second) a small share of
	// the NCCL test's time while giving a 1-3 minute test a dozen readings under load.
	DefaultLoadSampleEvery = 5 * time.Second
)

// Bake holds the state of one run.
type Bake struct {
	// mu guards checks, order and rep, which the report written at cancellation reads from
	// another goroutine.
	mu   sync.Mutex
	host host.Host
	ui   UI
	opt  Options
	now  func() time.Time

	workDir   string
	guardTook time.Duration
	rep       report.Report
	checks    map[string]result.Check
	order     []string
	// lastSnapshot is the guard's latest view, for the bill of materials.
	lastSnapshot guard.Snapshot
	guarded      []string
	// rebootLayer names the last layer whose reboot (asked for or not) was seen: the kernel
	// log is then a new boot's, and the xid check says so.
	rebootLayer string
	// build is the instance a bake runs on, read at its start (readBuildInstance); guarded by
	// mu.
	build *buildInstance
	// plan is what this run does.
	plan plan
	// freshLogin: the SSH session is a fresh login of the image (a first boot), so its own
	// memlock limit counts (checks.Target.SessionIsLogin).
	freshLogin bool
	// imexOneNode: this run is a bake, which may change the host, so it brings up a one-node
	// IMEX domain where check imex wants one (imexdomain.go); a verification and a node check
	// judge what the image has and change nothing.
	imexOneNode bool
	// base is the guard's baseline, the layers are judged against it.
	base guard.Snapshot
	// run is what this run has read of the host so far, phase by phase, and target what it is
	// compared against: the judges read both.
	run    facts.Run
	target checks.Target
	// ec2 is the run's one DescribeInstanceTypes answer (platform.go).
	ec2 ec2Description
	// loginUnjudged, when set, says why memlock has no login user to judge (checks.Target).
	loginUnjudged string
	// deferred is the validation this bake left to the post-processor, once deferValidation ran.
	deferred *bom.Deferred
	// writeErr is why the final reports could not be written.
	writeErr error
	// stopLater are jobs a cancellation left running: finish stops them after the reports
	// are on disk, because Packer may kill the plugin right after it cancels.
	stopLater []runningJob
}

// runningJob is a job and the host it runs on.
type runningJob struct {
	h host.Host
	j host.Job
}

// verdictError is a bake that ended because the host was judged and found wrong (drift, a
// failed layer, a failed check): the report's result is "fail".
type verdictError struct{ err error }

func (e *verdictError) Error() string { return e.err.Error() }
func (e *verdictError) Unwrap() error { return e.err }

func verdict(format string, a ...any) error { return &verdictError{fmt.Errorf(format, a...)} }

// Judged reports whether err ended a bake or a verification because the host was judged and
// found wrong, as opposed to an error that kept it from being judged (SSH, a tool that could
// not run, a cancellation).
func Judged(err error) bool {
	var ve *verdictError
	var de *DriftError
	return errors.As(err, &ve) || errors.As(err, &de)
}

// DriftError is returned when the guard finds drift or an unheld package.
type DriftError struct {
	Stage  string
	Failed []string
}

func (e *DriftError) Error() string {
	return fmt.Sprintf("kernel guard failed after %s: %s (see the report for before → after)", e.Stage, strings.Join(e.Failed, ", "))
}

// A plan is what one run does: the checks it reports (those that never ran are reported
// skipped, with why) and its steps, in order. A bake and a first-boot verification are two
// plans of the same steps.
type plan struct {
	checkIDs []string
	// image is true when the run bakes the image it runs on: what it leaves on the host stays
	// in the image.
	image bool
	steps []func(context.Context) error
	// verdict turns the error the steps ended with into the run's; nil keeps it.
	verdict func(error) error
}

// run carries out the plan: the first step that fails ends it.
func (p plan) run(ctx context.Context) error {
	var err error
	for _, step := range p.steps {
		if err = step(ctx); err != nil {
			break
		}
	}
	if p.verdict != nil {
		err = p.verdict(err)
	}
	return err
}

// Run does the whole provisioner's work and writes the reports on every ending.
func Run(ctx context.Context, h host.Host, ui UI, opt Options) error {
	b := newBake(h, ui, opt)
	b.plan = b.bakePlan()
	return b.withReports(ctx, b.plan.run)
}

// bakePlan is a bake: the guard's baseline, the layers behind it, then the host suite, the
// NCCL test and the bill of materials.
func (b *Bake) bakePlan() plan {
	p := plan{checkIDs: checks.IDs(checks.PhaseGuard, checks.PhaseHost, checks.PhaseLoad, checks.PhaseFunction), image: true}
	if !b.opt.Validate {
		// A bake without validation reports only what it did.
		p.checkIDs = nil
	}
	if b.opt.ImageHygiene != nil {
		p.checkIDs = append(slices.Clone(p.checkIDs), result.ImageHygiene)
	}
	p.steps = append(p.steps, b.needRunUUID, b.readBuildInstance, b.checkPlatform, b.makeWorkDir("dlami-bake"), b.startGuard)
	for _, l := range b.opt.Layers {
		p.steps = append(p.steps, func(ctx context.Context) error { return b.runLayer(ctx, l) })
	}
	// Image hygiene ends every plan: it takes the build's SSH access away.
	if b.opt.DeferValidation {
		// The first phase of a two-phase bake, on a build instance without GPUs: everything
		// the guard judges, nothing that needs the GPU host. The node check is installed as
		// in a one-phase bake: the GPU instances launched from the image run it at boot.
		return p.then(b.finalGuard("the layers (the last drift check before the bill of materials)"), b.installSiteChecks, b.deferValidation, b.judged("the first phase"), b.installNodeCheck, b.writeBOM, b.imageHygiene)
	}
	if !b.opt.Validate {
		return p.then(b.installSiteChecks, func(context.Context) error { b.stage("done (validation disabled)"); return nil }, b.imageHygiene)
	}
	b.imexOneNode = true
	return p.then(b.installSiteChecks, b.hostSuite, b.ncclTest, b.functionTests,
		b.finalGuard("the host suite and the NCCL test"), b.judged("validation"), b.installNodeCheck, b.writeBOM, b.imageHygiene)
}

// then adds steps to the end of p.
func (p plan) then(steps ...func(context.Context) error) plan {
	p.steps = append(p.steps, steps...)
	return p
}

func (b *Bake) needRunUUID(context.Context) error {
	if b.opt.RunUUID == "" {
		return errors.New("no Packer run id (PackerRunUUID): the baseline cannot be keyed to this build; use Packer 1.16 or later")
	}
	return nil
}

// makeWorkDir creates this run's staging folder on the host: a new folder with an
// unpredictable name (mktemp -d, mode 0700, the login user's) inside remote_folder, so nobody
// else on the host can create it first or put a script in it.
func (b *Bake) makeWorkDir(prefix string) func(context.Context) error {
	return func(ctx context.Context) error {
		dir, err := b.host.MakeTempDir(ctx, b.opt.RemoteFolder, prefix)
		if err != nil {
			return fmt.Errorf("creating the staging folder in remote_folder %s (it must be a folder the SSH user can write to): %w", b.opt.RemoteFolder, err)
		}
		b.workDir = dir
		return nil
	}
}

// judged ends the checks of a run: any failed check so far is the run's verdict.
func (b *Bake) judged(what string) func(context.Context) error {
	return func(context.Context) error {
		if all := b.ordered(); result.Failed(all) {
			return verdict("%s failed: %s", what, failedIDs(all))
		}
		return nil
	}
}

// newBake applies the defaults of the engine's own tuning fields left zero (the clock, retries,
// sampling and progress intervals; never a user's setting) and starts the report.
func newBake(h host.Host, ui UI, opt Options) *Bake {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.EFARetryDelay == 0 {
		opt.EFARetries, opt.EFARetryDelay = DefaultEFARetries, DefaultEFARetryDelay
	}
	if opt.LoadSampleEvery == 0 {
		opt.LoadSampleEvery = DefaultLoadSampleEvery
	}
	if opt.ProgressEvery == 0 {
		opt.ProgressEvery = DefaultProgressEvery
	}
	if opt.KillTimeout == 0 {
		opt.KillTimeout = DefaultKillTimeout
	}
	b := &Bake{host: h, ui: ui, opt: opt, now: opt.Now, checks: map[string]result.Check{}}
	b.rep = report.Report{
		PluginVersion: opt.PluginVersion,
		BuildName:     opt.BuildName,
		StartedAt:     b.now().UTC(),
		InstanceType:  opt.InstanceType,
	}
	return b
}

// withReports runs body and writes the final reports whatever its ending. On Ctrl-C Packer
// cancels and kills the plugin within moments: a report saying so goes to disk the moment the
// context ends, before anything else happens.
func (b *Bake) withReports(ctx context.Context, body func(context.Context) error) error {
	written := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(written)
		b.cancelledReport()
	})
	err := body(ctx)
	if !stop() {
		<-written // the final report must land after the cancellation's
	}
	if werr := b.finish(ctx, err); werr != nil {
		if err == nil {
			return werr
		}
		b.ui.Error(werr.Error())
	}
	return err
}

func (b *Bake) stage(s string) {
	b.update(func(r *report.Report) { r.Stage = s })
	b.ui.Say("dlami: " + s)
	b.checkpoint(s)
}

// checkpoint writes the reports a stop during step would leave. Packer does not wait for a
// cancelled provisioner: it kills the plugin moments after Ctrl-C, often before the
// cancellation reaches it. So the reports on disk always say what a stop now would mean, with
// the checks done so far; finish replaces them with the verdict.
func (b *Bake) checkpoint(step string) {
	b.writeUnfinished("the bake stopped during " + step + " (Packer cancelled the build or killed the plugin)")
}

// update changes the report under the lock.
func (b *Bake) update(f func(r *report.Report)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(&b.rep)
}

// cancelledReport writes the reports the moment the bake's context ends.
func (b *Bake) cancelledReport() {
	b.writeUnfinished("the bake was cancelled during " + b.stageName())
}

// writeUnfinished writes the reports as they stand, with result cancelled, why as the error
// and every check not yet run skipped. finish writes the final reports over them.
func (b *Bake) writeUnfinished(why string) {
	b.mu.Lock()
	r := b.rep
	r.Checks = b.orderedLocked()
	build := b.build
	b.mu.Unlock()
	r.Checks = append(r.Checks, b.notRun(r.Checks, why)...)
	r.FinishedAt = b.now().UTC()
	r.Result, r.Error = report.ResultCancelled, why
	r.BuildInstance = build.at(r.FinishedAt)
	if b.opt.ReportDir != "" {
		_, _ = report.Write(b.opt.ReportDir, r, b.opt.Secrets...)
	}
}

// notRun are the checks this run's plan reports that cs lacks, skipped with why.
func (b *Bake) notRun(cs []result.Check, why string) []result.Check {
	have := make(map[string]bool, len(cs))
	for _, c := range cs {
		have[c.ID] = true
	}
	var out []result.Check
	for _, id := range b.plan.checkIDs {
		if !have[id] {
			out = append(out, skipped(why, id)...)
		}
	}
	return out
}

// record stores checks in the report, replacing earlier results of the same id (the guard runs
// after every layer; the last verdict stands, and the first failure ends the bake).
func (b *Bake) record(cs ...result.Check) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		if _, ok := b.checks[c.ID]; !ok {
			b.order = append(b.order, c.ID)
		}
		b.checks[c.ID] = c
	}
}

// checkOf is the recorded result of id; the zero Check when there is none.
func (b *Bake) checkOf(id string) result.Check {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.checks[id]
}

func (b *Bake) ordered() []result.Check {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.orderedLocked()
}

func (b *Bake) orderedLocked() []result.Check {
	out := make([]result.Check, 0, len(b.order))
	for _, id := range b.order {
		out = append(out, b.checks[id])
	}
	return out
}

// stageName is where the bake is.
func (b *Bake) stageName() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rep.Stage
}

func skipped(why string, ids ...string) []result.Check {
	cs := make([]result.Check, len(ids))
	for i, id := range ids {
		cs[i] = result.Check{ID: id, Status: result.Skip, Message: "not run: " + why}
	}
	return cs
}

func failedIDs(cs []result.Check) string {
	return strings.Join(result.FailedIDs(cs), ", ")
}

// finish classifies how the bake ended, fills in checks that never ran, writes the reports
// and shows the table. It runs on every ending, cancellation included: nothing in it uses
// the bake's context except to know whether it was cancelled.
func (b *Bake) finish(ctx context.Context, runErr error) error {
	ended := report.ResultFail
	switch {
	case runErr == nil:
		ended = ""
		if b.deferred != nil {
			ended = report.ResultDeferred
		}
	case ctx.Err() != nil && (errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) || errors.Is(runErr, ctx.Err())):
		ended = report.ResultCancelled
	case Judged(runErr):
	default:
		ended = report.ResultError
		b.record(result.Check{ID: result.StagePrefix + b.stageName(), Status: result.Error, Expected: "the stage completes", Actual: "error", Message: runErr.Error()})
	}
	why := "the bake stopped at " + b.stageName()
	if ended == report.ResultCancelled {
		why = "the bake was cancelled at " + b.stageName()
	}
	if b.opt.DeferValidation && b.deferred == nil {
		why += " (defer_validation = true: the host suite and the NCCL test were left to the post-processor, which Packer does not run after a failed build: no GPU instance is launched for them)"
	}
	b.record(b.notRun(b.ordered(), why)...)
	errText := ""
	if runErr != nil {
		errText = runErr.Error()
	}
	// The reports first: on Ctrl-C Packer cancels and then kills the plugin within moments,
	// and a report must be on disk by then. The UI and the stopping of remote jobs come after.
	n, paths, werr, err := b.writeFinal(ended, errText)
	if err != nil {
		return err
	}
	for _, r := range b.stopLater {
		b.killOn(ctx, r.h, r.j)
	}
	// The staging folder goes last: the jobs stopped above read their pid files from it.
	var leftErr error
	if b.workDir != "" {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		rerr := b.host.RemoveAll(cctx, b.workDir)
		cancel()
		if rerr != nil && !b.plan.image {
			// Not an image: the host is thrown away, but until it is, its scripts (for the test
			// across nodes, the test's private key and the script with every multi_node.env
			// value) stay on it.
			b.ui.Error(fmt.Sprintf("dlami: the staging folder %s could not be removed (%v): the scripts in it (for the test across nodes, its private key and its environment values) stay on the host until it is terminated", b.workDir, rerr))
		}
		if rerr != nil && b.plan.image {
			// The layers' scripts and the apt auth file are in it: an image that keeps them
			// fails, whatever its checks said.
			leftErr = fmt.Errorf("the staging folder %s could not be removed (%v): this bake's layer scripts and apt auth file stay in the image", b.workDir, rerr)
			b.record(result.Check{ID: result.StagePrefix + "staging-cleanup", Status: result.Fail, Expected: "the staging folder removed",
				Actual: "left in the image", Message: leftErr.Error() + "; rebake, and never use an image that kept it"})
			if ended == "" || ended == report.ResultDeferred {
				ended, errText = report.ResultFail, leftErr.Error()
			}
			if n, paths, werr, err = b.writeFinal(ended, errText); err != nil {
				return err
			}
		}
	}
	b.ui.Message(report.Table(n.Checks))
	// The table cuts messages short; the build log names what failed or warned and why, whole
	// (the guard's were said when they happened).
	for _, c := range n.Checks {
		if e, _ := checks.Lookup(c.ID); (c.Status.Failing() || c.Status == result.Warn) && e.Phase != checks.PhaseGuard {
			b.ui.Error(fmt.Sprintf("dlami: %s %s: %s", c.ID, c.Status, c.Message))
		}
	}
	if werr != nil {
		b.writeErr = fmt.Errorf("writing reports to %s: %w", b.opt.ReportDir, werr)
		return b.writeErr
	}
	b.ui.Say("dlami: result " + strings.ToUpper(n.Result) + "; reports: " + strings.Join(paths, ", "))
	if n.BuildInstance != nil {
		// Last: what the build instance cost in time up to here.
		b.ui.Say("dlami: " + n.BuildInstance.Summary())
	}
	return leftErr
}

// writeFinal puts the final verdict into the report and writes it (when the run has a report
// folder): the normalized, redacted report, where it went, and why it could not be written.
func (b *Bake) writeFinal(ended, errText string) (n report.Report, paths []string, werr, err error) {
	all := b.ordered()
	b.update(func(r *report.Report) {
		r.Checks = all
		r.FinishedAt = b.now().UTC()
		r.Result = ended
		r.Error = errText
		r.BuildInstance = b.build.at(r.FinishedAt)
	})
	b.mu.Lock()
	n, err = report.Normalize(b.rep)
	b.mu.Unlock()
	if err == nil {
		// The table in the UI shows what the reports say: redacted too.
		n, err = report.Redact(n, b.opt.Secrets)
	}
	if err != nil {
		return n, nil, nil, fmt.Errorf("report: %w", err)
	}
	if b.opt.ReportDir != "" {
		paths, werr = report.Write(b.opt.ReportDir, n, b.opt.Secrets...)
	}
	return n, paths, werr, nil
}

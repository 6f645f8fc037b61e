// Package nodecheck is the engine of dlami-node-check, the command a baked image runs at every
// boot (and Slurm, node-problem-detector or a cron job may run again later): the provisioner's
// host suite with the expectations the bake used, the node against its bill of materials
// (running and next-boot kernel, every guarded package's version and hold), memlock where jobs
// run, and optionally the 1-node NCCL test. It is the same engine as the provisioner's: the
// probe (package probe) reads the node through a probe.Runner that runs the same commands
// locally instead of over SSH, and packages checks and guard judge the facts.
//
// It runs nothing itself: the caller hands it an Env (a runner, a way to run a program, the
// clock, the host name), so every mode and action is tested with a fake runner.
package nodecheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Modes of the command (--mode).
const (
	// ModeBoot is the systemd unit's: judge, write the reports and the textfile, act on a
	// failure (Action), exit 1 when the node failed.
	ModeBoot = "boot"
	// ModeReport judges and writes, never acts; exit 1 when the node failed. The
	// post-processor runs it on the verification instance (with --json).
	ModeReport = "report"
	// ModeSlurm is Slurm's HealthCheckProgram: the program drains the node itself with the
	// reason, and undrains a node it drained once the node passes again.
	ModeSlurm = "slurm"
	// ModeNPD is a node-problem-detector custom plugin: exit 0 healthy, 1 problem, 2 unknown,
	// one short line on stdout.
	ModeNPD = "npd"
)

// Actions on a failure in ModeBoot (node_check.action).
const (
	// ActionBlock: the units named in node_check.before do not start (the unit is RequiredBy
	// them, and fails).
	ActionBlock = "block"
	// ActionDrain: drain the node in Slurm with the failed check ids as the reason.
	ActionDrain = "drain"
	// ActionReport: only report (journal, reports, textfile).
	ActionReport = "report"
)

// Modes and Actions in the order the docs list them.
var (
	Modes   = []string{ModeBoot, ModeReport, ModeSlurm, ModeNPD}
	Actions = []string{ActionBlock, ActionDrain, ActionReport}
)

// NPD's exit statuses (custom plugin protocol: OK, NonOK, Unknown).
const (
	NPDOK      = 0
	NPDProblem = 1
	NPDUnknown = 2
)

// NPDMaxMessage is node-problem-detector's default max_output_length: the condition message
// is cut there.
const NPDMaxMessage = 80

// Env is what the engine may do on the node.
type Env struct {
	// Runner runs the probe's read-only commands on this node.
	Runner probe.Runner
	// Command runs argv (no shell) with extra environment and returns its combined output and
	// exit status; err when it could not be started or ctx ended first.
	Command func(ctx context.Context, argv []string, env []string) (out string, code int, err error)
	// ReadFile reads a local file (the bill of materials).
	ReadFile func(path string) ([]byte, error)
	// Hostname is the node's host name (the Slurm node name is its short form unless
	// SLURMD_NODENAME says otherwise).
	Hostname func() (string, error)
	// Getenv reads the process's environment (SLURMD_NODENAME, which slurmd sets for its
	// HealthCheckProgram); nil reads nothing.
	Getenv func(key string) string
	// Now is the clock.
	Now func() time.Time
}

// Options are one run's settings (flags over the config file the provisioner installed).
type Options struct {
	Mode   string
	Action string
	// BOMPath is the bill of materials in the image.
	BOMPath string
	// OutDir receives dlami-report.json, .junit.xml and .md; "" writes none.
	OutDir string
	// Textfile is the node_exporter textfile (*.prom) to write; "" writes none.
	Textfile string
	// Timeout bounds the whole run; a run that reaches it fails.
	Timeout time.Duration
	// CheckTimeout bounds each probe command.
	CheckTimeout time.Duration
	// NCCL runs the 1-node NCCL test too.
	NCCL bool
	// Scontrol is Slurm's scontrol, by absolute path.
	Scontrol string
	// Version is this command's version, for the reports and the info metric.
	Version string
	// LoginUser is the user whose new logins the memlock check judges; "" leaves memlock
	// unjudged (a warning): the command runs as root, whose limits are not a user's.
	LoginUser string
}

// Outcome is what one run found and did.
type Outcome struct {
	// Report is the normalized report (also written to OutDir).
	Report report.Report
	// Exit is the process's exit status for the mode.
	Exit int
	// Line is the one-line verdict (the journal's, NPD's message).
	Line string
	// Notes are what the run did or could not do besides judging (drained, undrained, a
	// report that could not be written), one line each, for stderr.
	Notes []string
}

// Failed reports whether the node failed.
func (o Outcome) Failed() bool { return o.Report.Result != report.ResultPass }

// Validate reports bad options, naming the flag.
func (o Options) Validate() error {
	var errs []error
	if !contains(Modes, o.Mode) {
		errs = append(errs, fmt.Errorf("--mode %q: use %s", o.Mode, strings.Join(Modes, ", ")))
	}
	if !contains(Actions, o.Action) {
		errs = append(errs, fmt.Errorf("--action %q: use %s", o.Action, strings.Join(Actions, ", ")))
	}
	if !filepath.IsAbs(o.BOMPath) {
		errs = append(errs, fmt.Errorf("--bom %q: must be an absolute path", o.BOMPath))
	}
	if o.OutDir != "" && !filepath.IsAbs(o.OutDir) {
		errs = append(errs, fmt.Errorf("--out %q: must be an absolute path", o.OutDir))
	}
	if o.Textfile != "" && (!filepath.IsAbs(o.Textfile) || !strings.HasSuffix(o.Textfile, ".prom")) {
		errs = append(errs, fmt.Errorf("--textfile %q: must be an absolute path ending in .prom (node_exporter's textfile collector reads only *.prom)", o.Textfile))
	}
	if o.Timeout < time.Second {
		errs = append(errs, fmt.Errorf("--timeout %s: must be at least 1s", o.Timeout))
	}
	if o.CheckTimeout < time.Second {
		errs = append(errs, fmt.Errorf("--check-timeout %s: must be at least 1s", o.CheckTimeout))
	}
	if !filepath.IsAbs(o.Scontrol) {
		errs = append(errs, fmt.Errorf("--scontrol %q: must be an absolute path", o.Scontrol))
	}
	return errors.Join(errs...)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// run is the state of one Run.
type run struct {
	env    Env
	opt    Options
	ctx    context.Context
	doc    bom.BOM
	hasBOM bool
	checks []result.Check
	facts  facts.Host
	target checks.Target
	rep    report.Report
}

// Run judges the node and acts as the mode and action say. It never panics on what the node
// answers; everything it cannot read fails the check that needed it.
func Run(ctx context.Context, env Env, opt Options) Outcome {
	if env.Now == nil {
		env.Now = time.Now
	}
	bctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	r := &run{env: env, opt: opt, ctx: bctx}
	r.rep = report.Report{PluginVersion: opt.Version, StartedAt: env.Now().UTC(), Stage: "node check (" + opt.Mode + ")"}
	r.readBOM()
	for _, step := range []struct {
		name string
		ids  []string
		fn   func() error
	}{
		{"the bill of materials comparison", result.FirstBootIDs, r.againstBOM},
		{"the host suite", result.HostIDs, r.hostSuite},
		{"the job memlock check", []string{result.JobMemlock}, r.jobMemlock},
		{"the NCCL test", result.NCCLIDs, r.nccl},
	} {
		if bctx.Err() != nil {
			r.failAll(step.ids, "not run: "+r.outOfTime(step.name))
			continue
		}
		if err := step.fn(); err != nil {
			msg := err.Error()
			if bctx.Err() != nil {
				msg = r.outOfTime(step.name) + ": " + msg
			}
			r.failAll(step.ids, msg)
		}
	}
	return r.finish(ctx)
}

// outOfTime says that the run's bound ran out.
func (r *run) outOfTime(step string) string {
	return fmt.Sprintf("the node check did not finish within its timeout (--timeout %s) and stopped during %s: a node that cannot be judged in time fails", r.opt.Timeout, step)
}

// failAll records ids failed with msg, except those already judged.
func (r *run) failAll(ids []string, msg string) {
	for _, id := range ids {
		if _, ok := result.Find(r.checks, id); ok {
			continue
		}
		r.checks = append(r.checks, result.Check{ID: id, Status: result.Fail, Expected: "judged", Actual: "not judged", Message: msg})
	}
}

// readBOM reads the bill of materials; without it the node cannot be compared with its image,
// which fails (fail closed), and the host suite runs with no expectations of its own.
func (r *run) readBOM() {
	data, err := r.env.ReadFile(r.opt.BOMPath)
	if err == nil {
		r.doc, err = bom.Decode(data)
	}
	if err != nil {
		r.checks = append(r.checks, result.Check{ID: result.StagePrefix + "bill-of-materials", Status: result.Fail,
			Expected: "the bill of materials the bake wrote into the image", Actual: "unreadable",
			Message: fmt.Sprintf("%s: %v (the node cannot be compared with its image; was it baked by the dlami provisioner with manifest_path there?)", r.opt.BOMPath, err)})
		return
	}
	r.hasBOM = true
	r.rep.BuildName = r.doc.BuildName
	r.rep.InstanceType = r.doc.InstanceType
}

// againstBOM compares the running and next-boot kernel and the guarded packages with the
// bill of materials, with the guard policy the bake used.
func (r *run) againstBOM() error {
	if !r.hasBOM {
		r.failAll(result.FirstBootIDs, "no bill of materials to compare with (see stage:bill-of-materials)")
		return nil
	}
	start := r.env.Now()
	cur, err := probe.Snapshot(r.ctx, r.env.Runner)
	if err != nil {
		return fmt.Errorf("reading the kernels and packages: %w", err)
	}
	baked := guard.Baked{Kernel: r.doc.Kernel, Packages: map[string]guard.BakedPackage{}}
	for n, p := range r.doc.Guarded {
		baked.Packages[n] = guard.BakedPackage{Version: p.Version, Held: p.Held}
	}
	var policy guard.Policy
	if r.doc.GuardPolicy != nil {
		policy = *r.doc.GuardPolicy
	}
	cs := guard.JudgeFirstBoot(baked, cur, policy)
	for i := range cs {
		cs[i].DurationMS = r.env.Now().Sub(start).Milliseconds()
		// The guard words it for the first boot; on a node it is any boot.
		cs[i].Message = strings.ReplaceAll(cs[i].Message, "at first boot", "on this boot")
	}
	r.checks = append(r.checks, cs...)
	r.rep.Manifest = map[string]string{"kernel": cur.RunningKernel, "next_boot_kernel": cur.NextBootKernel}
	return nil
}

// expect is the expect block the bake judged with.
func (r *run) expect() checks.Expectations {
	if r.hasBOM && r.doc.Expect != nil {
		return *r.doc.Expect
	}
	return checks.Expectations{}
}

func (r *run) probeOptions() probe.Options {
	return probe.Options{NVMePath: r.expect().NVMeMount(), CheckTimeoutSeconds: int(r.opt.CheckTimeout / time.Second), LoginUser: r.opt.LoginUser}
}

// hostSuite is the provisioner's host suite with the bake's expectations and instance type.
func (r *run) hostSuite() error {
	start := r.env.Now()
	h, err := probe.Host(r.ctx, r.env.Runner, r.probeOptions())
	if err != nil {
		return fmt.Errorf("reading the host: %w", err)
	}
	t := checks.Resolve(h, r.expect(), r.doc.InstanceType)
	cs := checks.EvaluateHost(h, t)
	for i := range cs {
		if cs[i].ID == result.Memlock && r.opt.LoginUser == "" {
			cs[i] = result.Check{ID: result.Memlock, Status: result.Warn, Expected: cs[i].Expected, Actual: "not judged",
				Message: "no login user to judge: the node check runs as root; set --login-user (the provisioner's node_check.login_user, by default the bake's SSH user, sets it in " + ConfigPath + ")"}
		}
		cs[i].DurationMS = r.env.Now().Sub(start).Milliseconds()
	}
	r.checks = append(r.checks, cs...)
	r.facts, r.target = h, t
	if t.InstanceType != "" {
		r.rep.InstanceType, r.rep.InstanceTypeSource = t.InstanceType, t.InstanceTypeSource
	}
	if r.rep.Manifest == nil {
		r.rep.Manifest = map[string]string{}
	}
	for k, v := range h.Manifest() {
		r.rep.Manifest[k] = v
	}
	return nil
}

func (r *run) jobMemlock() error {
	f, err := probe.JobMemlock(r.ctx, r.env.Runner, r.probeOptions())
	if err != nil {
		return fmt.Errorf("reading the job units' memlock limits: %w", err)
	}
	r.checks = append(r.checks, checks.JudgeJobMemlock(f))
	return nil
}

// ncclEnv lets Open MPI's mpirun start as root (the unit runs as root): its documented
// environment switches, instead of --allow-run-as-root on the command line.
var ncclEnv = []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}

// nccl runs the 1-node NCCL test when --nccl is given and the GPU checks passed.
func (r *run) nccl() error {
	skip := func(why string) {
		for _, id := range result.NCCLIDs {
			r.checks = append(r.checks, result.Check{ID: id, Status: result.Skip, Message: "not run: " + why})
		}
	}
	if !r.opt.NCCL {
		skip("the NCCL test is off at boot (node_check.nccl = false; --nccl turns it on)")
		return nil
	}
	for _, c := range r.checks {
		if (c.ID == result.GPU || c.ID == result.NvidiaDriver) && c.Status.Failing() {
			skip("the GPU checks failed")
			return nil
		}
	}
	deadline, _ := r.ctx.Deadline()
	left := time.Until(deadline) - 5*time.Second
	if left < 10*time.Second {
		return errors.New("too little of --timeout is left for the NCCL test")
	}
	o := checks.NCCLOptions{TimeoutSeconds: int(left / time.Second)}
	x := r.target.NCCLExpect(o)
	o.Ranks = x.Ranks
	script, err := checks.NCCLCommand(o)
	if err != nil {
		return err
	}
	start := r.env.Now()
	out, code, err := r.env.Command(r.ctx, []string{"/bin/sh", "-c", script}, ncclEnv)
	if err != nil && r.ctx.Err() == nil {
		return fmt.Errorf("starting the NCCL test: %w", err)
	}
	cs, figures := checks.JudgeNCCL(out, code, r.ctx.Err() != nil, x, o)
	for i := range cs {
		cs[i].DurationMS = r.env.Now().Sub(start).Milliseconds()
	}
	r.checks = append(r.checks, cs...)
	r.rep.NCCL = &figures
	return nil
}

// finish builds the report, acts, writes the outputs and picks the exit status.
func (r *run) finish(parent context.Context) Outcome {
	r.rep.Checks = r.checks
	r.rep.FinishedAt = r.env.Now().UTC()
	n, err := report.Normalize(r.rep)
	if err != nil { // Normalize fails only on a bad Result, which is never set here
		n = r.rep
		n.Result = report.ResultError
	}
	out := Outcome{Report: n}
	failed := result.FailedIDs(n.Checks)
	// Actions get their own bound: the run's may be spent, and a node that timed out must
	// still be drained.
	actx, cancel := context.WithTimeout(context.WithoutCancel(parent), 30*time.Second)
	defer cancel()
	drained := false
	switch {
	case len(failed) > 0 && (r.opt.Mode == ModeSlurm || r.opt.Mode == ModeBoot && r.opt.Action == ActionDrain):
		note, err := r.slurm().Drain(actx, failed)
		out.Notes = append(out.Notes, note)
		drained = err == nil
	case len(failed) == 0 && r.opt.Mode == ModeSlurm:
		if note := r.slurm().Resume(actx); note != "" {
			out.Notes = append(out.Notes, note)
		}
	}
	out.Line = r.line(n, failed)
	if r.opt.OutDir != "" {
		if _, err := report.Write(r.opt.OutDir, n); err != nil {
			out.Notes = append(out.Notes, "could not write the reports: "+err.Error())
		}
	}
	if r.opt.Textfile != "" {
		if err := writeTextfile(r.opt.Textfile, n, r.opt.Version, r.env.Now()); err != nil {
			out.Notes = append(out.Notes, "could not write the node_exporter textfile: "+err.Error())
		}
	}
	switch {
	case len(failed) == 0:
		out.Exit = 0
	case r.opt.Mode == ModeNPD:
		out.Exit = NPDProblem
	case r.opt.Mode == ModeSlurm && drained:
		// Slurm's contract: the program drains the node itself; a non-zero status at slurmd's
		// start would also keep slurmd from registering, and a drained node must be seen.
		out.Exit = 0
	default:
		out.Exit = 1
	}
	return out
}

// line is the one-line verdict.
func (r *run) line(n report.Report, failed []string) string {
	if r.opt.Mode == ModeNPD {
		if len(failed) == 0 {
			return npdLine(fmt.Sprintf("DLAMI node check passed (%d checks)", len(n.Checks)))
		}
		// The failed ids first: NPD keeps max_output_length bytes of the line.
		return npdLine(strings.Join(failed, ",") + " failed the DLAMI node check")
	}
	build := n.BuildName
	if build == "" {
		build = "unknown"
	}
	if len(failed) == 0 {
		warn := 0
		for _, c := range n.Checks {
			if c.Status == result.Warn {
				warn++
			}
		}
		return fmt.Sprintf("dlami-node-check: PASS (%d checks, %d warnings; image build %s)", len(n.Checks), warn, build)
	}
	first, _ := result.Find(n.Checks, failed[0])
	return oneLine(fmt.Sprintf("dlami-node-check: FAIL %s (image build %s): %s: %s", strings.Join(failed, ", "), build, first.ID, textcut.Head(first.Message, 300)))
}

// npdLine is s on one line within NPD's max_output_length (bytes), "..." marking a cut.
func npdLine(s string) string {
	s = oneLine(s)
	if len(s) <= NPDMaxMessage {
		return s
	}
	return textcut.Prefix(s, NPDMaxMessage-3) + "..."
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// OSEnvReadFile is os.ReadFile, for Env.ReadFile.
func OSEnvReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

// slurm is this run's way to act in Slurm.
func (r *run) slurm() Slurm {
	return Slurm{Scontrol: r.opt.Scontrol, Command: r.env.Command, Hostname: r.env.Hostname, Getenv: r.env.Getenv}
}

// Package nodecheck is dlami-node-check's run: what a baked image does at every boot (and
// Slurm, node-problem-detector or a cron job may run again later). The engine judges the node
// (package engine's node plan: the node against its bill of materials, the provisioner's host
// suite with the bake's expectations, and the load and function phases the node's settings
// turn on), over a host.Host that runs the same probe commands and job scripts locally; this
// package then acts as the mode and action say (a Slurm drain, node-problem-detector's one
// line and exit status, the node_exporter textfile).
//
// It runs nothing itself: the caller hands it an Env (the host, a way to run a program, the
// clock, the host name), so every mode and action is tested with a fake host.
package nodecheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
	"github.com/dlami-bake/packer-plugin-dlami/internal/evidence"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Env is what the run may do on the node.
type Env struct {
	// Host is the node, as the engine reads it.
	Host host.Host
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
	// Cloud reaches AWS from the node (IMDSv2, S3, Auto Scaling); nil reaches nothing, and
	// what needed it says so.
	Cloud Cloud
}

// Options are one run's settings: the node check's settings (the config file the provisioner
// installed, the command's flags over it, resolved and validated: nodeconf.Config) and what
// only a run has.
type Options struct {
	nodeconf.Config
	Mode nodeconf.Mode
	// Version is this command's version, for the reports and the info metric.
	Version string
	// Simulate is a check id to fail on purpose (--simulate-failure): a drill of the whole
	// pipeline, marked simulated in every output; the load and function tests do not run.
	Simulate string
	// SimulateReplace lets a drill send the replacement request (--simulate-failure-replace):
	// without it a drill finds the Auto Scaling group and stops before SetInstanceHealth, since
	// the group would terminate a healthy node.
	SimulateReplace bool
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

// Validate reports bad options, naming each by its flag (FlagName): the node check's settings
// by the provisioner's own rule (nodeconf.Config.Validate), and the run's.
func (o Options) Validate() error {
	c := o.Config
	if o.Mode != nodeconf.ModeNPD && c.NPDCondition == nodeconf.NPDConditionAcceleratedHardwareReady {
		// Only node-problem-detector's runs report the condition, each bounded by the
		// installed file's timeout: a run in another mode may take longer.
		c.NPDCondition = nodeconf.NPDConditionFailed
	}
	errs := []error{o.Mode.Validate("--mode"), c.Validate(FlagName), checkSimulate(o.Simulate)}
	if o.SimulateReplace && o.Simulate == "" {
		errs = append(errs, errors.New("--simulate-failure-replace without --simulate-failure: it lets a drill send the replacement request; name the check to fail with --simulate-failure CHECK"))
	}
	return errors.Join(errs...)
}

// FlagName names a setting of the config file by the flag that sets it (--bom for bom_path),
// or as the file spells it where no flag does.
func FlagName(setting string) string {
	base, rest, _ := strings.Cut(setting, "[")
	if rest != "" {
		rest = "[" + rest
	}
	switch base {
	case "bom_path":
		return "--bom" + rest
	case "out_dir":
		return "--out" + rest
	case "action", "textfile", "timeout", "check_timeout", "nccl", "dcgm_level", "efa_traffic", "gpudirect_rdma", "container_gpu",
		"skip_checks", "warn_checks", "scontrol", "login_user", "replace", "npd_condition", "evidence.dir", "evidence.s3_uri":
		return "--" + strings.NewReplacer("_", "-", ".", "-").Replace(base) + rest
	}
	return setting
}

// run is the state of one Run.
type run struct {
	env Env
	opt Options
	// start is when the run began; facts what the engine read of the node; bomDoc the bill of
	// materials (nil when unreadable).
	start  time.Time
	facts  facts.Run
	bomDoc *bom.BOM
	// id is the instance's identity, read once (idDone) for the evidence and the replacement.
	id     evidence.Identity
	idErr  error
	idDone bool
}

// Run judges the node and acts as the mode and action say. It never panics on what the node
// answers; everything it cannot read fails the check that needed it.
func Run(ctx context.Context, env Env, opt Options) Outcome {
	if env.Now == nil {
		env.Now = time.Now
	}
	r := &run{env: env, opt: opt, start: env.Now()}
	if opt.Simulate != "" {
		// A drill touches no hardware: no NCCL, DCGM, EFA traffic, GPUDirect RDMA or container test.
		opt.NCCL, opt.DCGMLevel, opt.EFATraffic, opt.GPUDirectRDMA, opt.ContainerGPU = false, settings.DCGMOff, false, false, false
	}
	o := engine.NodeOptions{
		Common: engine.Common{
			PluginVersion: opt.Version, ReportDir: opt.OutDir, CheckTimeout: opt.CheckTimeout, RemoteFolder: workFolder, Now: env.Now, LoginUser: opt.LoginUser,
			// A fleet node was launched by its fleet's own launch template, which can attach
			// EFA: an EFA-capable node without EFA is the fleet's fault, not a builder's limit.
			Launch: checks.Launch{FleetNode: true},
		},
		Timeout: opt.Timeout, TimeoutSetting: "--timeout", Read: &r.facts,
	}
	if opt.LoginUser == "" {
		o.LoginUnjudged = "no login user to judge: the node check runs as root; set --login-user (the provisioner's node_check.login_user, by default the bake's SSH user, sets it in " + nodeconf.ConfigPath + ")"
	}
	var bake *settings.Checks
	if doc, err := r.readBOM(); err != nil {
		o.BOMProblem = err.Error()
	} else {
		o.BOM = &doc
		r.bomDoc = &doc
		bake = doc.Checks
	}
	o.Checks = bake.Overlay(opt.overlay())
	rep, werr := engine.CheckNode(ctx, env.Host, quietUI{}, o)
	rep.Stage = "node check (" + string(opt.Mode) + ")"
	if opt.Simulate != "" {
		rep = simulate(rep, opt.Simulate)
	}
	out := r.finish(ctx, rep)
	if werr != nil {
		out.Notes = append(out.Notes, "could not write the reports: "+werr.Error())
	} else if opt.OutDir != "" && (rep.Simulated != "" || out.Report.Evidence != nil || out.Report.Replacement != nil) {
		// The engine wrote the verdict; what was simulated, kept and asked is added to it.
		if _, err := report.Write(opt.OutDir, out.Report); err != nil {
			out.Notes = append(out.Notes, "could not write the reports: "+err.Error())
		}
	}
	return out
}

// overlay is what the node sets of its own on the bake's settings: its check selection, and
// the load and function tests its settings turn on, with the bake's floors and bounds.
func (o Options) overlay() settings.Overlay {
	on := func(b bool) settings.Run {
		if b {
			return settings.RunOn
		}
		return settings.RunOff
	}
	return settings.Overlay{
		Skip: o.SkipChecks, Warn: o.WarnChecks,
		SkipSetting: "node_check.skip_checks (or the bake's skip_checks)", WarnSetting: "node_check.warn_checks (or the bake's warn_checks)",
		NCCL: on(o.NCCL), EFATraffic: on(o.EFATraffic), GDR: on(o.GPUDirectRDMA), Container: on(o.ContainerGPU),
		DCGM: settings.RunOn, DCGMLevel: o.DCGMLevel,
	}
}

// workFolder is where a run stages its job scripts on the node: the node check runs as root
// on its own host, where the provisioner's remote_folder default serves.
const workFolder = settings.DefaultRemoteFolder

// readBOM reads the bill of materials; without it the node cannot be compared with its image,
// which fails (fail closed), and the host suite runs with no expectations of its own.
func (r *run) readBOM() (bom.BOM, error) {
	data, err := r.env.ReadFile(r.opt.BOMPath)
	if err == nil {
		var doc bom.BOM
		if doc, err = bom.Decode(data); err == nil {
			return doc, nil
		}
	}
	return bom.BOM{}, fmt.Errorf("%s: %v (the node cannot be compared with its image; was it baked by the dlami provisioner with manifest_path there?)", r.opt.BOMPath, err)
}

// quietUI drops the engine's progress: the node check's verdict is its one line, its reports
// and its textfile.
type quietUI struct{}

func (quietUI) Say(string)     {}
func (quietUI) Message(string) {}
func (quietUI) Error(string)   {}

// finish builds the report, acts, writes the outputs and picks the exit status.
func (r *run) finish(parent context.Context, n report.Report) Outcome {
	out := Outcome{Report: n}
	failed := result.FailedIDs(n.Checks)
	drained := false
	if len(failed) > 0 && r.isolates() && !r.opt.Evidence.Disable {
		// Evidence first: the node may be drained, replaced and gone next. It has its own
		// bound (the bug report may take minutes), so the actions' starts after it.
		out.Report.Evidence = r.keepEvidence(parent, n, failed)
		out.Notes = append(out.Notes, evidenceNotes(out.Report.Evidence)...)
	}
	// Actions get their own bound: the run's may be spent, and a node that timed out must
	// still be drained.
	actx, cancel := context.WithTimeout(context.WithoutCancel(parent), actionBudget)
	defer cancel()
	var drain *drainResult // the Slurm drain of this run, nil when it drains nothing
	switch {
	case len(failed) > 0 && (r.opt.Mode == nodeconf.ModeSlurm || r.opt.Mode == nodeconf.ModeBoot && r.opt.Action == nodeconf.ActionDrain):
		d, err := r.slurm(n.Simulated != "").Drain(actx, failed)
		out.Notes = append(out.Notes, d.Note)
		drained = err == nil
		drain = &drainResult{DrainOutcome: d, err: err}
	case len(failed) == 0 && r.opt.Mode == nodeconf.ModeSlurm:
		if note := r.slurm(false).Resume(actx); note != "" {
			out.Notes = append(out.Notes, note)
		}
	}
	if len(failed) > 0 && r.isolates() {
		if rep := r.replace(actx, drain, n.Simulated != ""); rep != nil {
			out.Report.Replacement = rep
			out.Notes = append(out.Notes, replacementNote(rep))
		}
	}
	out.Line = r.line(n, failed)
	if rep := out.Report.Replacement; rep != nil && r.opt.Mode != nodeconf.ModeNPD && rep.Status != report.ReplacementRequested {
		// What the replacement did not do is part of the verdict: a person reading the journal
		// must not assume the node is on its way out. (NPD's line is its condition message, cut
		// at 80 bytes: its failed ids come first; the notes and the report say it.)
		out.Line += "; " + replacementNote(rep)
	}
	if path := r.opt.TextfilePath(); path != "" {
		if err := writeTextfile(path, out.Report, r.opt.Version, r.env.Now()); err != nil {
			out.Notes = append(out.Notes, "could not write the node_exporter textfile: "+err.Error())
		}
	}
	switch {
	case len(failed) == 0 && r.opt.Mode == nodeconf.ModeNPD:
		out.Exit = nodeconf.NPDExit(r.opt.NPDCondition, false)
	case len(failed) == 0:
		out.Exit = 0
	case r.opt.Mode == nodeconf.ModeNPD:
		out.Exit = nodeconf.NPDExit(r.opt.NPDCondition, true)
	case r.opt.Mode == nodeconf.ModeSlurm && drained:
		// Slurm's contract: the program drains the node itself; a non-zero status at slurmd's
		// start would also keep slurmd from registering, and a drained node must be seen.
		out.Exit = 0
	default:
		out.Exit = 1
	}
	return out
}

// actionBudget bounds the actions after the verdict and the evidence (drain, replacement
// request); a variable so that a test can shorten it.
var actionBudget = nodeconf.ActionBudget

// line is the one-line verdict.
func (r *run) line(n report.Report, failed []string) string {
	if r.opt.Mode == nodeconf.ModeNPD {
		if len(failed) == 0 {
			return npdLine(fmt.Sprintf("DLAMI node check passed (%d checks)", len(n.Checks)))
		}
		// The failed ids first: NPD keeps max_output_length bytes of the line.
		if n.Simulated != "" {
			return npdLine(simulatedMarker + ": " + strings.Join(failed, ",") + " failed the DLAMI node check (a drill)")
		}
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
	verdict := "FAIL"
	if n.Simulated != "" {
		verdict = simulatedMarker + " FAIL"
	}
	return oneLine(fmt.Sprintf("dlami-node-check: %s %s (image build %s): %s: %s", verdict, strings.Join(failed, ", "), build, first.ID, textcut.Head(first.Message, 300)))
}

// npdLine is s on one line within NPD's max_output_length (bytes), "..." marking a cut.
func npdLine(s string) string {
	s = oneLine(s)
	if len(s) <= nodeconf.NPDMaxMessage {
		return s
	}
	return textcut.Prefix(s, nodeconf.NPDMaxMessage-3) + "..."
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// slurm is this run's way to act in Slurm.
func (r *run) slurm(simulated bool) Slurm {
	return Slurm{Scontrol: r.opt.Scontrol, Command: r.env.Command, Hostname: r.env.Hostname, Getenv: r.env.Getenv, Simulated: simulated}
}

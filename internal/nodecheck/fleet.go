package nodecheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/evidence"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeaws"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Cloud is what a run asks of AWS from the node: its identity (IMDSv2), the upload of an
// evidence bundle (S3) and the replacement request (Auto Scaling), all with the instance's
// role. nodeaws.Client is the real one.
type Cloud interface {
	Identity(ctx context.Context) (evidence.Identity, error)
	Upload(ctx context.Context, region, bucket, key, path string, metadata map[string]string) error
	// MarkUnhealthy asks the instance's Auto Scaling group to replace it; with send false it
	// stops before SetInstanceHealth (a drill).
	MarkUnhealthy(ctx context.Context, region, instanceID string, send bool) (nodeaws.ASGOutcome, error)
}

// Tools the evidence bundle runs, by the absolute paths the DLAMI's driver, NVIDIA's and
// DCGM's packages install them at.
const (
	NvidiaSMI       = "/usr/bin/nvidia-smi"
	NvidiaBugReport = "/usr/bin/nvidia-bug-report.sh"
	Dcgmi           = "/usr/bin/dcgmi"
	// nvidiaSMITimeout bounds nvidia-smi -q: seconds on a healthy driver, a hung one never ends.
	nvidiaSMITimeout = 15 * time.Second
	// maxPartBytes bounds what one command's output adds to a bundle (the bug report is a file
	// of its own, bounded by the store).
	maxPartBytes = 16 << 20
)

// SimulateIDs are the check ids --simulate-failure accepts: the checks a node judges.
func SimulateIDs() []string {
	return checks.IDs(checks.PhaseFirstBoot, checks.PhaseHost, checks.PhaseLoad, checks.PhaseFunction)
}

// checkSimulate refuses an id --simulate-failure does not know, listing the valid ones.
func checkSimulate(id string) error {
	if id == "" || slices.Contains(SimulateIDs(), id) {
		return nil
	}
	return fmt.Errorf("--simulate-failure %q: no such check of the node check; use one of %s", id, strings.Join(SimulateIDs(), ", "))
}

// simulatedMarker starts every message of a simulated failure.
const simulatedMarker = "SIMULATED"

// simulate fails check id on purpose, whatever its real verdict (which the message keeps), and
// marks the report simulated: every output made from it says so.
func simulate(n report.Report, id string) report.Report {
	n.Simulated = id
	found := false
	for i, c := range n.Checks {
		if c.ID != id {
			continue
		}
		found = true
		n.Checks[i] = result.Check{ID: id, Status: result.Fail, Basis: c.Basis, Expected: c.Expected, Actual: "simulated failure",
			Message: fmt.Sprintf("%s failure (dlami-node-check --simulate-failure %s), a drill of the pipeline: the check's real verdict was %s: %s",
				simulatedMarker, id, c.Status, textcut.Head(c.Message, 300)),
			Evidence: c.Evidence, DurationMS: c.DurationMS}
	}
	if !found {
		n.Checks = append(n.Checks, result.Check{ID: id, Status: result.Fail, Expected: "judged", Actual: "simulated failure",
			Message: fmt.Sprintf("%s failure (dlami-node-check --simulate-failure %s), a drill of the pipeline: the run did not judge %s", simulatedMarker, id, id)})
	}
	n.Result = ""
	if norm, err := report.Normalize(n); err == nil {
		return norm
	}
	return n
}

// isolates reports whether this run acts on a failure (a drain, node-problem-detector's
// condition, a boot that blocks or drains): only then is evidence kept first and the node
// handed over for replacement. Report mode and a boot with action report only report.
func (r *run) isolates() bool {
	switch r.opt.Mode {
	case nodeconf.ModeSlurm, nodeconf.ModeNPD:
		return true
	case nodeconf.ModeBoot:
		return r.opt.Action != nodeconf.ActionReport
	}
	return false
}

// identity reads the instance's identity once per run (the evidence and the replacement both
// need it).
func (r *run) identity(ctx context.Context) (evidence.Identity, error) {
	if r.idDone {
		return r.id, r.idErr
	}
	r.idDone = true
	if r.env.Cloud == nil {
		r.idErr = errors.New("no access to AWS in this run")
		return r.id, r.idErr
	}
	r.id, r.idErr = r.env.Cloud.Identity(ctx)
	return r.id, r.idErr
}

// evidenceBudget bounds the bundle: the settings' budget in mode, and in slurm mode never
// past what slurmd allows (it kills the program 60 seconds after its start), keeping the
// drain's time.
func (r *run) evidenceBudget() time.Duration {
	b := r.opt.Evidence.Budget(r.opt.Mode)
	if r.opt.Mode == nodeconf.ModeSlurm && !r.start.IsZero() {
		const slurmKill, drainReserve = 60 * time.Second, 10 * time.Second
		left := slurmKill - drainReserve - r.env.Now().Sub(r.start)
		b = min(b, left)
	}
	return b
}

// keepEvidence writes the evidence bundle of a failing node before it is isolated, uploads it
// when asked, and returns what it did. It never fails the run: whatever cannot be kept is in
// the record's problems and the run's notes.
func (r *run) keepEvidence(parent context.Context, n report.Report, failed []string) *report.Evidence {
	e := r.opt.Evidence
	rec := &report.Evidence{Collected: []string{}, Missing: []string{}, Skipped: []string{}, Problems: []string{}, UploadTo: e.S3URI}
	budget := r.evidenceBudget()
	if budget < time.Second {
		rec.Problems = append(rec.Problems, fmt.Sprintf("no time left for evidence before the drain (slurmd kills its HealthCheckProgram 60s after its start; this run took %s): none kept", r.env.Now().Sub(r.start).Round(time.Second)))
		return rec
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), budget)
	defer cancel()
	store := evidence.Store{Dir: e.Dir, MaxBundles: e.MaxBundles, MaxBytes: e.MaxBytes()}
	host, _ := r.env.Hostname()
	man := evidence.Manifest{CreatedAt: r.env.Now().UTC(), Host: host, BootID: r.facts.Host.KernelLog.Value.BootID, Mode: string(r.opt.Mode),
		Simulated: n.Simulated, FailedChecks: failed}
	if man.BootID == "" {
		man.BootID = r.bootID()
	}
	id, idErr := r.identity(ctx)
	man.Identity = id
	if idErr != nil {
		man.Identity.Problem = idErr.Error()
	}
	man.Identity.Build = buildInfo(r.bomDoc)

	// A bundle of the same boot and the same failures is already kept (node-problem-detector
	// and Slurm run the check again and again): keep that one, upload it if it is not yet.
	if path, prev, ok := store.Latest(); ok && prev.Same(man) {
		rec.Path, rec.Reused, rec.XidLines = path, true, prev.XidLines
		rec.Collected, rec.Missing, rec.Skipped = prev.Names(evidence.Collected), prev.Names(evidence.Missing), prev.Names(evidence.Skipped)
		if fi, err := os.Stat(path); err == nil {
			rec.Bytes = fi.Size()
		}
		r.upload(ctx, rec, prev, path)
		return rec
	}

	b := evidence.New(man)
	js, err := report.JSON(n)
	if err == nil {
		b.Add(evidence.Part{Name: report.JSONFile, Source: "this run's report", Status: evidence.Collected}, js)
	}
	dm, jr, xids := evidence.XidContext(r.facts.Host.KernelLog, r.facts.Host.KernelJournal, evidence.DefaultRadius)
	b.Manifest.XidLines = xids
	b.Add(evidence.Part{Name: "dmesg-xid.txt", Source: "dmesg (this run's reading)", Status: evidence.Collected}, []byte(dm))
	b.Add(evidence.Part{Name: "journal-xid.txt", Source: "journalctl -k -b 0 (this run's reading)", Status: evidence.Collected}, []byte(jr))
	if idJSON, err := json.MarshalIndent(man.Identity, "", "  "); err == nil {
		b.Add(evidence.Part{Name: "identity.json", Source: "IMDSv2 instance identity document; the bill of materials", Status: evidence.Collected}, append(idJSON, '\n'))
	}
	r.runPart(ctx, b, "nvidia-smi-q.txt", nvidiaSMITimeout, NvidiaSMI, "-q")

	work := ""
	slow := func(what string) string {
		switch {
		case r.opt.Mode == nodeconf.ModeSlurm:
			return "not run in slurm mode: slurmd kills its HealthCheckProgram after 60 seconds, and " + what + " takes longer"
		case n.Simulated != "" && what == "DCGM's diagnostics":
			return "not run for a simulated failure: the drill does not load the GPUs"
		}
		return ""
	}
	if why := slow("NVIDIA's bug report"); why != "" {
		b.Add(evidence.Part{Name: "nvidia-bug-report.log.gz", Source: NvidiaBugReport, Status: evidence.Skipped, Detail: why}, nil)
	} else if work, err = workDir(e.Dir); err != nil {
		b.Add(evidence.Part{Name: "nvidia-bug-report.log.gz", Source: NvidiaBugReport, Status: evidence.Failed, Detail: "no work directory: " + err.Error()}, nil)
		work = ""
	} else {
		r.bugReport(ctx, b, work)
	}
	if work != "" {
		defer os.RemoveAll(work)
	}
	if lvl := e.DCGMLevel; lvl.Off() {
		b.Add(evidence.Part{Name: "dcgmi-diag.json", Source: Dcgmi + " diag", Status: evidence.Skipped, Detail: "node_check.evidence.dcgm_level is 0 (3 runs DCGM's long diagnostics into the bundle)"}, nil)
	} else if why := slow("DCGM's diagnostics"); why != "" {
		b.Add(evidence.Part{Name: "dcgmi-diag.json", Source: Dcgmi + " diag", Status: evidence.Skipped, Detail: why}, nil)
	} else {
		r.runPart(ctx, b, "dcgmi-diag.json", lvl.Timeout(), Dcgmi, "diag", "-r", fmt.Sprint(int(lvl)), "-j")
	}

	rec.XidLines = xids
	path, size, removed, err := store.Save(b)
	rec.Collected, rec.Missing, rec.Skipped = b.Manifest.Names(evidence.Collected), b.Manifest.Names(evidence.Missing), b.Manifest.Names(evidence.Skipped)
	for _, p := range b.Manifest.Parts {
		if p.Status == evidence.Failed {
			rec.Problems = append(rec.Problems, fmt.Sprintf("%s (%s): %s", p.Name, p.Source, p.Detail))
		}
	}
	rec.Removed = removed
	if err != nil {
		rec.Problems = append(rec.Problems, "could not keep the evidence bundle: "+err.Error())
	}
	if path == "" {
		return rec
	}
	rec.Path, rec.Bytes = path, size
	r.upload(ctx, rec, b.Manifest, path)
	return rec
}

// upload uploads the bundle at path when evidence.s3_uri asks for it.
func (r *run) upload(ctx context.Context, rec *report.Evidence, m evidence.Manifest, path string) {
	uri := r.opt.Evidence.S3URI
	if uri == "" {
		return
	}
	rec.UploadTo = uri
	bucket, prefix, err := nodeconf.ParseS3URI(uri)
	if err != nil {
		rec.Problems = append(rec.Problems, "evidence.s3_uri: "+err.Error())
		return
	}
	id, err := r.identity(ctx)
	if err != nil {
		rec.Problems = append(rec.Problems, fmt.Sprintf("could not upload the evidence bundle to %s: the instance's region and role come from IMDSv2: %v", uri, err))
		return
	}
	m.Identity.InstanceID = id.InstanceID
	key := evidence.Object(prefix, m)
	meta := map[string]string{"dlami-failed-checks": strings.Join(m.FailedChecks, ","), "dlami-host": m.Host}
	if id.InstanceID != "" {
		meta["dlami-instance-id"] = id.InstanceID
	}
	if m.Simulated != "" {
		meta["dlami-simulated"] = m.Simulated
	}
	object := "s3://" + bucket + "/" + key
	if m.Uploaded == object {
		// An earlier run of the same failure uploaded this bundle: once per failure.
		rec.Uploaded = object
		return
	}
	if err := r.env.Cloud.Upload(ctx, id.Region, bucket, key, path, meta); err != nil {
		rec.Problems = append(rec.Problems, "could not upload the evidence bundle: "+err.Error())
		return
	}
	rec.Uploaded = object
	store := evidence.Store{Dir: r.opt.Evidence.Dir}
	if err := store.MarkUploaded(path, object); err != nil {
		rec.Problems = append(rec.Problems, fmt.Sprintf("uploaded, but could not record it beside the bundle (the next run of this failure uploads it again): %v", err))
	}
}

// runPart runs a tool into the bundle: its output, or why there is none (not installed, timed
// out, failed to start). A tool's non-zero exit keeps its output: that is evidence too.
func (r *run) runPart(ctx context.Context, b *evidence.Bundle, name string, bound time.Duration, argv ...string) {
	src := strings.Join(argv, " ")
	cctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	start := r.env.Now()
	out, code, err := r.env.Command(cctx, argv, nil)
	took := r.env.Now().Sub(start).Milliseconds()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b.Add(evidence.Part{Name: name, Source: src, Status: evidence.Missing, Detail: argv[0] + " is not installed"}, nil)
	case cctx.Err() != nil:
		b.Add(evidence.Part{Name: name, Source: src, Status: evidence.Failed, Detail: fmt.Sprintf("stopped after %s (bound %s): %s", time.Duration(took)*time.Millisecond, bound, textcut.Tail(out, 300)), TookMS: took}, nil)
	case err != nil:
		b.Add(evidence.Part{Name: name, Source: src, Status: evidence.Failed, Detail: err.Error(), TookMS: took}, nil)
	default:
		detail := fmt.Sprintf("exit %d", code)
		if len(out) > maxPartBytes {
			out = out[:maxPartBytes]
			detail += fmt.Sprintf(", cut at %d bytes", maxPartBytes)
		}
		b.Add(evidence.Part{Name: name, Source: src, Status: evidence.Collected, Detail: detail, TookMS: took}, []byte(out))
	}
}

// bugReport runs NVIDIA's bug report into work and adds its file. NVIDIA: usually quick, allow
// up to an hour, and rerun with --safe-mode when it hangs: a run stopped at its bound says so.
func (r *run) bugReport(ctx context.Context, b *evidence.Bundle, work string) {
	const name = "nvidia-bug-report.log.gz"
	bound := r.opt.Evidence.BugReportTimeout
	base := filepath.Join(work, "nvidia-bug-report.log")
	argv := []string{NvidiaBugReport, "--output-file", base}
	cctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	start := r.env.Now()
	out, code, err := r.env.Command(cctx, argv, nil)
	took := r.env.Now().Sub(start).Milliseconds()
	src := strings.Join(argv, " ")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b.Add(evidence.Part{Name: name, Source: src, Status: evidence.Missing, Detail: NvidiaBugReport + " is not installed (the NVIDIA driver ships it)"}, nil)
		return
	case cctx.Err() != nil:
		b.Add(evidence.Part{Name: name, Source: src, Status: evidence.Failed, TookMS: took,
			Detail: fmt.Sprintf("stopped at its bound (node_check.evidence.bug_report_timeout %s); NVIDIA: rerun it by hand with --safe-mode --extra-system-data: %s", bound, textcut.Tail(out, 300))}, nil)
		return
	case err != nil:
		b.Add(evidence.Part{Name: name, Source: src, Status: evidence.Failed, Detail: err.Error(), TookMS: took}, nil)
		return
	}
	if err := b.AddFile(evidence.Part{Name: name, Source: src, Detail: fmt.Sprintf("exit %d", code), TookMS: took}, base+".gz"); err != nil {
		b.Add(evidence.Part{Name: name, Source: src, Status: evidence.Failed, TookMS: took,
			Detail: fmt.Sprintf("exit %d and no %s.gz: %v: %s", code, base, err, textcut.Tail(out, 300))}, nil)
	}
}

// workDir is a directory for the bug report inside the store's (the same file system, so the
// report never fills another), which the store does not count.
func workDir(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return os.MkdirTemp(dir, ".bug-report-")
}

// bootID is the kernel's boot id when the kernel log reading had none.
func (r *run) bootID() string {
	data, err := r.env.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.ReplaceAll(strings.TrimSpace(string(data)), "-", "")
}

// buildInfo is the image's build as its bill of materials records it, under the dlami:* names
// the image's tags use.
func buildInfo(doc *bom.BOM) map[string]string {
	if doc == nil {
		return nil
	}
	m := map[string]string{"dlami:build_name": doc.BuildName, "dlami:plugin_version": doc.PluginVersion,
		"dlami:packer_run_uuid": doc.RunUUID, "dlami:build_instance_type": doc.InstanceType, "dlami:kernel": doc.Kernel}
	if !doc.GeneratedAt.IsZero() {
		m["dlami:built_at"] = doc.GeneratedAt.UTC().Format(time.RFC3339)
	}
	for k, v := range doc.Components {
		m["dlami:component:"+k] = v
	}
	for k, v := range m {
		if v == "" {
			delete(m, k)
		}
	}
	return m
}

// drainResult is this run's Slurm drain: what it found and whether it failed.
type drainResult struct {
	DrainOutcome
	err error
}

// simulateReplaceFlag is the flag that lets a drill send the replacement request.
const simulateReplaceFlag = "--simulate-failure-replace"

// replace hands the failing node to the engine node_check.replace names, unless it must not
// be handed over yet or at all: an operator holds it in Slurm (a drain this command did not
// set), or Slurm still runs jobs on it (the group would terminate it under them; a later run,
// once the node is drained and idle, asks). drain is this run's Slurm drain (nil when the run
// drains nothing). A drill (simulated) goes as far as the decision and sends nothing unless
// --simulate-failure-replace says so.
func (r *run) replace(ctx context.Context, drain *drainResult, simulated bool) *report.Replacement {
	if nodeconf.ReplaceOf(r.opt.Replace) != nodeconf.ReplaceASG {
		return nil
	}
	rep := &report.Replacement{Engine: nodeconf.ReplaceASG}
	if drain != nil {
		if held, msg := r.slurmGate(ctx, drain); msg != "" {
			rep.Status, rep.Message = report.ReplacementDeferred, msg
			if held {
				rep.Status = report.ReplacementOperatorHold
			}
			return rep
		}
	}
	id, err := r.identity(ctx)
	if err != nil {
		rep.Status, rep.Problem = report.ReplacementFailed, "the instance id and region come from IMDSv2: "+err.Error()
		rep.Message = "could not ask the Auto Scaling group to replace the node"
		return rep
	}
	rep.InstanceID = id.InstanceID
	send := !simulated || r.opt.SimulateReplace
	o, err := r.env.Cloud.MarkUnhealthy(ctx, id.Region, id.InstanceID, send)
	rep.Group, rep.Requested, rep.Message = o.Group, o.Requested, o.Message
	switch {
	case err != nil:
		rep.Status, rep.Problem = report.ReplacementFailed, err.Error()
		rep.Message = "could not ask the Auto Scaling group to replace the node"
	case o.Requested:
		rep.Status = report.ReplacementRequested
	case o.WouldRequest:
		rep.Status = report.ReplacementSimulated
		rep.Message = fmt.Sprintf("simulated: would mark %s Unhealthy in group %s; not sent, add %s to send it", id.InstanceID, o.Group, simulateReplaceFlag)
	default:
		rep.Status = report.ReplacementNotRequested
	}
	if simulated && send && err == nil {
		rep.Message = "simulated failure, sent as " + simulateReplaceFlag + " asks: " + rep.Message
	}
	return rep
}

// slurmGate says whether the node, as Slurm sees it after this run's drain, may be handed over
// for replacement: msg is "" when it may, else why not (held: an operator holds it). The
// node is read again after the drain (no job starts on a drained node, but one may have
// started between the first reading and the drain); whatever cannot be read defers the
// request (a job might be running).
func (r *run) slurmGate(ctx context.Context, d *drainResult) (held bool, msg string) {
	if d.OperatorHold {
		return true, fmt.Sprintf("replacement not requested: an operator holds Slurm node %s (state %s, reason %q%s), and the node check leaves a node an operator holds to the operator (resume it to hand it back, or replace it by hand)",
			d.Node, d.Before.State, d.Before.Reason, d.Before.setBy())
	}
	if d.err != nil {
		return false, "replacement deferred: the node could not be drained in Slurm, so jobs may run or start on it; a later run requests it once the node is drained and idle"
	}
	now, err := r.slurm(false).Read(ctx, d.Node)
	switch {
	case err != nil:
		return false, fmt.Sprintf("replacement deferred: Slurm node %s could not be read after the drain (%v), so whether it runs jobs is unknown; a later run requests it", d.Node, err)
	case now.Drained() && !now.DrainedByCheck():
		return true, fmt.Sprintf("replacement not requested: an operator holds Slurm node %s (state %s, reason %q%s), and the node check leaves a node an operator holds to the operator (resume it to hand it back, or replace it by hand)",
			d.Node, now.State, now.Reason, now.setBy())
	case now.HasJobs():
		return false, fmt.Sprintf("replacement deferred until the node's jobs end; a later run requests it (Slurm node %s is %s: drained, jobs still running)", d.Node, now.State)
	case !now.Drained():
		return false, fmt.Sprintf("replacement deferred: Slurm node %s is %s after the drain, not drained; a later run requests it once it is drained and idle", d.Node, now.State)
	}
	return false, ""
}

// evidenceNotes are the run's lines about its evidence.
func evidenceNotes(e *report.Evidence) []string {
	var notes []string
	switch {
	case e.Reused:
		notes = append(notes, fmt.Sprintf("evidence of these failures in this boot is already kept: %s", e.Path))
	case e.Path != "":
		notes = append(notes, fmt.Sprintf("kept the evidence in %s (%d bytes, %d Xid/SXid record(s); missing: %s)", e.Path, e.Bytes, e.XidLines, orNone(e.Missing)))
	}
	switch {
	case e.Uploaded != "" && e.Reused:
		notes = append(notes, "the kept evidence is uploaded to "+e.Uploaded)
	case e.Uploaded != "":
		notes = append(notes, "uploaded the evidence to "+e.Uploaded)
	}
	for _, p := range e.Problems {
		notes = append(notes, "evidence: "+p)
	}
	return notes
}

// replacementNote is the run's line about the replacement request.
func replacementNote(r *report.Replacement) string {
	if r.Problem != "" {
		return r.Message + ": " + r.Problem
	}
	return r.Message
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "; ")
}

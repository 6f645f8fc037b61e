package nodecheck

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// replaceRun is a node with an Xid booting with action drain and replace asg, its evidence
// uploaded: the setup of the replacement's safety tests.
func replaceRun(t *testing.T) (*fleet, *fakeNode, Options) {
	t.Helper()
	f := newFleet(t)
	n := newNode(t)
	n.withXid()
	o := options(t, nodeconf.ModeBoot, nodeconf.ActionDrain)
	o.Replace = nodeconf.ReplaceASG
	o.Evidence.S3URI = "s3://" + fleetBucket + "/fleet"
	var seen []bool
	n.withTools(t, o, &seen)
	return f, n, o
}

// wantEveryOutput checks that the report (returned and written), the line, the notes and the
// textfile all say what became of the replacement.
func wantEveryOutput(t *testing.T, out Outcome, o Options, status, msg string) {
	t.Helper()
	r := out.Report.Replacement
	if r == nil || r.Status != status || r.Requested || !strings.Contains(r.Message, msg) {
		t.Errorf("replacement %+v, want status %s and a message with %q", r, status, msg)
	}
	if !strings.Contains(out.Line, msg) {
		t.Errorf("line %q lacks %q", out.Line, msg)
	}
	if !strings.Contains(strings.Join(out.Notes, "\n"), msg) {
		t.Errorf("notes lack %q: %q", msg, out.Notes)
	}
	var written report.Report
	data, err := os.ReadFile(filepath.Join(o.OutDir, report.JSONFile))
	if err != nil || json.Unmarshal(data, &written) != nil || written.Replacement == nil || written.Replacement.Status != status || !strings.Contains(written.Replacement.Message, msg) {
		t.Errorf("written report: %v %+v", err, written.Replacement)
	}
	md, _ := os.ReadFile(filepath.Join(o.OutDir, report.MarkdownFile))
	if !strings.Contains(string(md), msg) {
		t.Errorf("markdown report lacks %q", msg)
	}
	tf, _ := os.ReadFile(o.Textfile)
	if want := `dlami_node_check_replacement_requested{engine="asg",state="` + status + `"} 0`; !strings.Contains(string(tf), want+"\n") {
		t.Errorf("textfile lacks %s:\n%s", want, tf)
	}
}

// A node an operator already holds in Slurm (drained with a reason of their own) is left as it
// is, and the group is not asked to replace it: the operator decides, and every output says so.
func TestOperatorHeldNodeIsNotReplaced(t *testing.T) {
	f, n, o := replaceRun(t)
	n.slurm.drained, n.slurm.reason, n.slurm.setBy = true, "fan replaced, burn-in", "admin"
	out := Run(context.Background(), f.env(n), o)
	if !out.Failed() || out.Report.Evidence == nil || out.Report.Evidence.Path == "" {
		t.Fatalf("failed %v, evidence %+v", out.Failed(), out.Report.Evidence)
	}
	if len(n.slurm.updates) != 0 || n.slurm.reason != "fan replaced, burn-in" {
		t.Errorf("the operator's drain changed: updates %q, reason %q", n.slurm.updates, n.slurm.reason)
	}
	if c := f.aws.CallCount(awsfake.OpSetInstanceHealth, "") + f.aws.CallCount(awsfake.OpDescribeAutoScalingInstances, ""); c != 0 {
		t.Errorf("Auto Scaling was called %d times for a node an operator holds: %+v", c, f.aws.Calls())
	}
	wantEveryOutput(t, out, o, report.ReplacementOperatorHold, `replacement not requested: an operator holds Slurm node ip-10-1-42-17 (state IDLE+DRAIN, reason "fan replaced, burn-in", set by admin@2026-12-01T18:36:52)`)
}

// A node running a job is drained (no new job starts) but not handed to the group, which would
// terminate it under the job: the request is deferred, and a later run, once Slurm shows the
// node drained and idle, sends it. Drain before SetInstanceHealth, evidence before both.
func TestReplacementDeferredWhileJobsRun(t *testing.T) {
	f, n, o := replaceRun(t)
	n.slurm.base = "MIXED" // a job holds some of the node's CPUs
	first := Run(context.Background(), f.env(n), o)
	if n.slurm.state() != "MIXED+DRAIN" || n.slurm.reason != "dlami: xid" {
		t.Fatalf("not drained: state %s reason %q (%q)", n.slurm.state(), n.slurm.reason, first.Notes)
	}
	if in, _ := f.aws.AutoScalingInstance(fleetRegion, fleetInstance); len(in.HealthCalls) != 0 {
		t.Errorf("SetInstanceHealth sent while a job runs: %+v", in.HealthCalls)
	}
	wantEveryOutput(t, first, o, report.ReplacementDeferred, "replacement deferred until the node's jobs end; a later run requests it")
	if !strings.Contains(first.Report.Replacement.Message, "MIXED+DRAIN") {
		t.Errorf("the message does not name Slurm's state: %q", first.Report.Replacement.Message)
	}

	// The job still runs at the next run: still deferred.
	if again := Run(context.Background(), f.env(n), o); again.Report.Replacement == nil || again.Report.Replacement.Status != report.ReplacementDeferred {
		t.Errorf("second run while the job runs: %+v", again.Report.Replacement)
	}
	// A job completing (its epilog running) is a job too.
	n.slurm.base = "IDLE+COMPLETING"
	if again := Run(context.Background(), f.env(n), o); again.Report.Replacement == nil || again.Report.Replacement.Status != report.ReplacementDeferred {
		t.Errorf("run while the job completes: %+v", again.Report.Replacement)
	}
	// The job ended: DRAINED (IDLE+DRAIN). The next run sends the request, once.
	n.slurm.base = "IDLE"
	last := Run(context.Background(), f.env(n), o)
	in, _ := f.aws.AutoScalingInstance(fleetRegion, fleetInstance)
	if len(in.HealthCalls) != 1 || in.HealthCalls[0].HealthStatus != "Unhealthy" {
		t.Fatalf("after the job ended: SetInstanceHealth %+v, notes %q", in.HealthCalls, last.Notes)
	}
	if r := last.Report.Replacement; r == nil || !r.Requested || r.Status != report.ReplacementRequested {
		t.Errorf("replacement: %+v", r)
	}
	if strings.Contains(last.Line, "replacement") {
		t.Errorf("a requested replacement is in the line as if it were not: %q", last.Line)
	}
	if n.slurm.reason != "dlami: xid" || len(n.slurm.updates) != 1 {
		t.Errorf("the drain was rewritten: updates %q, reason %q", n.slurm.updates, n.slurm.reason)
	}
}

// A drain that could not be read back (or failed) defers the request: whether jobs run is not
// known, and a job killed is worse than a request a run later.
func TestReplacementDeferredWhenSlurmUnreadable(t *testing.T) {
	f, n, o := replaceRun(t)
	ctl := n.scontrol
	reads := 0
	n.scontrol = func(argv []string) (string, int) {
		if argv[1] == "-o" {
			if reads++; reads > 1 {
				return "slurm_load_node error: Unable to contact slurm controller (connect failure)", 1
			}
		}
		return ctl(argv)
	}
	out := Run(context.Background(), f.env(n), o)
	if f.aws.CallCount(awsfake.OpSetInstanceHealth, "") != 0 {
		t.Errorf("SetInstanceHealth sent for a node whose jobs are unknown")
	}
	wantEveryOutput(t, out, o, report.ReplacementDeferred, "could not be read after the drain")
}

// --simulate-failure-replace lets a drill send the request; the message says it was a drill.
func TestSimulateFailureReplaceOptIn(t *testing.T) {
	f := newFleet(t)
	n := newNode(t)
	o := options(t, nodeconf.ModeSlurm, nodeconf.ActionBlock)
	o.Simulate, o.Replace, o.SimulateReplace = result.GPU, nodeconf.ReplaceASG, true
	var seen []bool
	n.withTools(t, o, &seen)
	out := Run(context.Background(), f.env(n), o)
	in, _ := f.aws.AutoScalingInstance(fleetRegion, fleetInstance)
	if len(in.HealthCalls) != 1 || in.HealthCalls[0].HealthStatus != "Unhealthy" {
		t.Fatalf("the opted-in drill did not send SetInstanceHealth: %+v", in.HealthCalls)
	}
	r := out.Report.Replacement
	if r == nil || !r.Requested || r.Status != report.ReplacementRequested || !strings.HasPrefix(r.Message, "simulated failure, sent as --simulate-failure-replace asks: marked instance "+fleetInstance+" Unhealthy") {
		t.Errorf("replacement: %+v", r)
	}
	tf, _ := os.ReadFile(o.Textfile)
	if want := `dlami_node_check_replacement_requested{engine="asg",state="requested",simulated="true"} 1`; !strings.Contains(string(tf), want) {
		t.Errorf("textfile lacks %s:\n%s", want, tf)
	}
	if err := (Options{SimulateReplace: true}).Validate(); err == nil || !strings.Contains(err.Error(), "--simulate-failure-replace without --simulate-failure") {
		t.Errorf("opt-in without a drill: %v", err)
	}
}

// With npd_condition AcceleratedHardwareReady the npd mode refuses a run bound that could keep
// a healthy node "not ready" past half of node repair's 10-minute toleration.
func TestNPDAcceleratedHardwareReadyTimeout(t *testing.T) {
	o := options(t, nodeconf.ModeNPD, nodeconf.ActionBlock)
	o.NPDCondition = nodeconf.NPDConditionAcceleratedHardwareReady
	o.Timeout = 5 * time.Minute
	if err := o.Validate(); err != nil {
		t.Errorf("5m: %v", err)
	}
	o.Timeout = 6 * time.Minute
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), `--timeout 6m0s together with --npd-condition = "AcceleratedHardwareReady"`) || !strings.Contains(err.Error(), "set --timeout to at most 5m0s") {
		t.Errorf("6m: %v", err)
	}
	o.NPDCondition = nodeconf.NPDConditionFailed
	if err := o.Validate(); err != nil {
		t.Errorf("6m with the node check's own condition: %v", err)
	}
	o.Mode, o.NPDCondition = nodeconf.ModeBoot, nodeconf.NPDConditionAcceleratedHardwareReady
	if err := o.Validate(); err != nil {
		t.Errorf("boot mode does not answer node-problem-detector: %v", err)
	}
}

// NVIDIA's bug report that hangs is stopped at its bound, and one that is not installed is
// recorded as missing: either way the bundle is kept without it, and the node is drained and
// handed over all the same.
func TestBugReportHangsOrMissing(t *testing.T) {
	for _, c := range []struct {
		name   string
		tool   func(*fakeNode, *bool)
		check  func(t *testing.T, out Outcome)
		bounds bool
	}{
		{name: "hangs", tool: func(n *fakeNode, stopped *bool) {
			n.ctxTools = map[string]func(context.Context, []string) (string, int, error){
				NvidiaBugReport: func(ctx context.Context, argv []string) (string, int, error) {
					select {
					case <-ctx.Done():
						*stopped = true
						return "nvidia-bug-report.sh will now collect information", -1, ctx.Err()
					case <-time.After(time.Minute):
						return "never stopped", 0, nil
					}
				},
			}
		}, check: func(t *testing.T, out Outcome) {
			p := strings.Join(out.Report.Evidence.Problems, "\n")
			if !strings.Contains(p, "nvidia-bug-report.log.gz ("+NvidiaBugReport+" --output-file ") || !strings.Contains(p, "stopped at its bound (node_check.evidence.bug_report_timeout 300ms); NVIDIA: rerun it by hand with --safe-mode --extra-system-data") {
				t.Errorf("problems: %s", p)
			}
			if !strings.Contains(strings.Join(out.Notes, "\n"), "evidence: nvidia-bug-report.log.gz") {
				t.Errorf("notes: %q", out.Notes)
			}
		}, bounds: true},
		{name: "not installed", tool: func(n *fakeNode, _ *bool) {
			n.tools[NvidiaBugReport] = func([]string) (string, int, error) {
				return "", -1, &fs.PathError{Op: "fork/exec", Path: NvidiaBugReport, Err: fs.ErrNotExist}
			}
		}, check: func(t *testing.T, out Outcome) {
			e := out.Report.Evidence
			if !slices.ContainsFunc(e.Missing, func(m string) bool {
				return strings.HasPrefix(m, "nvidia-bug-report.log.gz ("+NvidiaBugReport) && strings.HasSuffix(m, NvidiaBugReport+" is not installed (the NVIDIA driver ships it)")
			}) || len(e.Problems) != 0 {
				t.Errorf("missing %q, problems %q", e.Missing, e.Problems)
			}
			if !strings.Contains(strings.Join(out.Notes, "\n"), "missing: nvidia-bug-report.log.gz") {
				t.Errorf("notes: %q", out.Notes)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFleet(t)
			n := newNode(t)
			n.withXid()
			o := options(t, nodeconf.ModeBoot, nodeconf.ActionDrain)
			o.Replace = nodeconf.ReplaceASG
			o.Evidence.BugReportTimeout = 300 * time.Millisecond
			var seen []bool
			n.withTools(t, o, &seen)
			stopped := false
			c.tool(n, &stopped)
			out := Run(context.Background(), f.env(n), o)
			if c.bounds && !stopped {
				t.Errorf("the bug report was not stopped at its bound")
			}
			e := out.Report.Evidence
			if e == nil || e.Path == "" || slices.Contains(e.Collected, "nvidia-bug-report.log.gz") {
				t.Fatalf("evidence: %+v", e)
			}
			if m := members(t, e.Path); m["dmesg-xid.txt"] == "" || m["nvidia-smi-q.txt"] == "" {
				t.Errorf("the bundle lacks its other parts: %d members", len(m))
			}
			c.check(t, out)
			if len(seen) != 1 || !seen[0] {
				t.Errorf("drains %v: the node was not drained after the bundle", seen)
			}
			if r := out.Report.Replacement; r == nil || !r.Requested {
				t.Errorf("replacement: %+v", r)
			}
		})
	}
}

func TestSlurmNodeHasJobs(t *testing.T) {
	for state, want := range map[string]bool{
		"IDLE": false, "IDLE+DRAIN": false, "DOWN+DRAIN": false, "DOWN+NOT_RESPONDING": false,
		"MIXED": true, "MIXED+DRAIN": true, "ALLOCATED+DRAIN": true, "ALLOCATED": true,
		"IDLE+COMPLETING+DRAIN": true, "MIXED*+DRAIN": true, "DRAINING": true,
	} {
		if got := (SlurmNode{State: state}).HasJobs(); got != want {
			t.Errorf("%s: HasJobs %v, want %v", state, got, want)
		}
	}
}

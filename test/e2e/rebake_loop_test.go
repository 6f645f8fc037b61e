package e2e

// The scheduled rebake exactly as examples/rebake/rebake.yml runs it: its own `run:` scripts,
// read from the workflow file and run with bash, against the rebake template with only the
// AWS endpoints added. TestRebakeLoopCoversTheWorkflow keeps the steps the loop knows in
// sync with the workflow's.

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// loopStep is how the rebake loop test treats one step of the workflow's job.
type loopStep struct {
	label string // the step's name, or its action (uses:) when it has no name
	// verbatim: the step's run script is executed as written. Otherwise standIn says what
	// takes its place on this machine, and why.
	verbatim bool
	standIn  string
}

// rebakeLoopSteps lists, in order, every step of jobs.rebake in rebake.yml.
func rebakeLoopSteps() []loopStep {
	return []loopStep{
		{label: "actions/checkout@v5", standIn: "a workspace holding TEMPLATE_DIR with the rebake template (endpoints added)"},
		{label: "hashicorp/setup-packer@v3", standIn: "bin/packer first in PATH; its version must be env.PACKER_VERSION"},
		{label: "aws-actions/configure-aws-credentials@v5", standIn: "fake static keys in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_REGION = with.aws-region"},
		{label: "packer init", standIn: "plugins installed by run-scenario --prepare (packer init needs GitHub, and the dev plugin's 0.1.0-dev does not satisfy >= 0.1.0)"},
		{label: "Subnet for this region", verbatim: true},
		{label: "Is a rebake due?", verbatim: true},
		// No GitHub here: the script finds no earlier run (gh is absent or cannot list runs) and
		// the bake runs without previous_bom_file, as a first rebake does.
		{label: "Previous bill of materials", verbatim: true},
		{label: "packer build", verbatim: true},
		{label: uploadAction, standIn: "the artifact's path must hold the reports the action would upload"},
		{label: uploadAction, standIn: "the HTML artifact's path must match the HTML reports (the bake's and the first boot's)"},
		{label: "Report to the job summary", verbatim: true},
		{label: junitAction, standIn: "every JUnit report under with.report_paths (the bake's and the first boot's) parses, with at least one test case (require_tests)"},
		{label: "Clean up what the job left behind", standIn: "the fake holds nothing of the job's run id to clean up (no instance running, no key pair or security group), and the job's instances carry it; TestRebakeCleanupStepTerminatesWhatTheJobLeft runs the script against a stand-in aws (the CI container has no AWS CLI)"},
	}
}

func readRebakeWorkflow(t *testing.T) (map[string]string, workflowJob) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "rebake", "rebake.yml"))
	if err != nil {
		t.Fatal(err)
	}
	env, jobs, err := parseWorkflow(string(b))
	if err != nil {
		t.Fatalf("examples/rebake/rebake.yml: %v", err)
	}
	job, ok := jobs["rebake"]
	if !ok {
		t.Fatal("examples/rebake/rebake.yml has no job \"rebake\"")
	}
	return env, job
}

// stepKey is what rebakeLoopSteps matches: the action for uses: steps (their names are for the
// UI), the name for run: steps.
func stepKey(s workflowStep) string {
	if s.Uses != "" {
		return s.Uses
	}
	return s.label()
}

// TestRebakeLoopCoversTheWorkflow fails when rebake.yml gains, loses, renames or reorders a
// step, or when a step the loop runs verbatim stops being a run: step (or the reverse), so the
// loop test always runs what the workflow runs.
func TestRebakeLoopCoversTheWorkflow(t *testing.T) {
	_, job := readRebakeWorkflow(t)
	var got, want []string
	for _, s := range job.Steps {
		kind := "uses"
		if s.Run != "" {
			kind = "run"
		}
		got = append(got, kind+" "+stepKey(s))
	}
	for _, s := range rebakeLoopSteps() {
		kind := "uses"
		if s.verbatim || !strings.Contains(s.label, "@") {
			kind = "run"
		}
		want = append(want, kind+" "+s.label)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rebake.yml's steps and the rebake loop test's differ: update rebakeLoopSteps (and the loop) with the workflow\nworkflow:\n  %s\nloop test:\n  %s",
			strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for _, s := range rebakeLoopSteps() {
		if !s.verbatim && s.standIn == "" {
			t.Errorf("step %q is neither run verbatim nor has a stand-in", s.label)
		}
	}
}

// withFakeEndpoints returns a template with the fake's endpoint added to every data "dlami"
// block (custom_endpoint_ec2, ssm_endpoint, sts_endpoint) and every source "amazon-ebs" block
// (custom_endpoint_ec2, and skip_credential_validation: the amazon plugin has no STS endpoint
// setting), as lines inserted before each block's closing brace. Nothing else changes; a
// template with neither block is an error.
func withFakeEndpoints(src []byte, name, endpoint string) ([]byte, error) {
	f, diags := hclsyntax.ParseConfig(src, name, hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		return nil, fmt.Errorf("%s: %s", name, diags.Error())
	}
	quoted := strconv.Quote(endpoint)
	type insertion struct {
		at    int
		lines []string
	}
	var ins []insertion
	// The blocks that talk to AWS: top-level data and sources, and the dlami post-processors
	// inside build blocks (alone or in a post-processors sequence).
	var blocks []*hclsyntax.Block
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		blocks = append(blocks, b)
		if b.Type != "build" {
			continue
		}
		for _, inner := range b.Body.Blocks {
			blocks = append(blocks, inner)
			if inner.Type == "post-processors" {
				blocks = append(blocks, inner.Body.Blocks...)
			}
		}
	}
	for _, b := range blocks {
		if len(b.Labels) == 0 {
			continue
		}
		var attrs []string
		switch {
		case b.Type == "data" && b.Labels[0] == "dlami":
			attrs = []string{"custom_endpoint_ec2 = " + quoted, "ssm_endpoint = " + quoted, "sts_endpoint = " + quoted}
		case b.Type == "source" && b.Labels[0] == "amazon-ebs":
			attrs = []string{"custom_endpoint_ec2 = " + quoted, "skip_credential_validation = true"}
		case b.Type == "post-processor" && b.Labels[0] == "dlami":
			attrs = []string{"custom_endpoint_ec2 = " + quoted, "sts_endpoint = " + quoted}
		default:
			continue
		}
		for _, a := range attrs {
			if _, set := b.Body.Attributes[strings.Fields(a)[0]]; set {
				return nil, fmt.Errorf("%s: %s %q already sets %s", name, b.Type, b.Labels, strings.Fields(a)[0])
			}
		}
		// The closing brace starts its own line in a formatted template.
		closing := b.CloseBraceRange.Start.Byte
		lineStart := bytes.LastIndexByte(src[:closing], '\n') + 1
		if strings.TrimSpace(string(src[lineStart:closing])) != "" {
			return nil, fmt.Errorf("%s: the closing brace of %s %q is not on a line of its own (run packer fmt)", name, b.Type, b.Labels)
		}
		ins = append(ins, insertion{at: lineStart, lines: attrs})
	}
	if len(ins) == 0 {
		return nil, fmt.Errorf("%s has no data \"dlami\" or source \"amazon-ebs\" block to point at the fake", name)
	}
	var out bytes.Buffer
	prev := 0
	for _, in := range ins {
		out.Write(src[prev:in.at])
		for _, l := range in.lines {
			out.WriteString("  " + l + " # fake endpoint (added by the rebake loop test)\n")
		}
		prev = in.at
	}
	out.Write(src[prev:])
	return out.Bytes(), nil
}

func TestWithFakeEndpointsOnlyAddsEndpoints(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "rebake", "rebake.pkr.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	const ep = "http://127.0.0.1:4566"
	got, err := withFakeEndpoints(src, "rebake.pkr.hcl", ep)
	if err != nil {
		t.Fatal(err)
	}
	// Every original line is still there, in order; the only new lines are the endpoints.
	orig := strings.Split(string(src), "\n")
	added := map[string]int{}
	i := 0
	for _, line := range strings.Split(string(got), "\n") {
		if i < len(orig) && line == orig[i] {
			i++
			continue
		}
		added[strings.Join(strings.Fields(strings.SplitN(line, "#", 2)[0]), " ")]++
	}
	if i != len(orig) {
		t.Fatalf("original line %d %q is missing or changed in the derived template", i+1, orig[i])
	}
	want := map[string]int{
		`custom_endpoint_ec2 = "` + ep + `"`: 3, `ssm_endpoint = "` + ep + `"`: 1, `sts_endpoint = "` + ep + `"`: 2,
		`skip_credential_validation = true`: 1,
	}
	if fmt.Sprint(added) != fmt.Sprint(want) {
		t.Errorf("added lines %v, want %v", added, want)
	}
	if _, err := withFakeEndpoints([]byte("variable \"x\" {}\n"), "x.pkr.hcl", ep); err == nil {
		t.Error("a template with nothing to point at the fake was accepted")
	}
}

// rebakeJob runs the rebake workflow's job for one matrix entry on this machine.
type rebakeJob struct {
	t         *testing.T
	e         ebsEnv
	fake      *fakeAWS
	workflow  map[string]string
	job       workflowJob
	workspace string
	runnerTmp string
	exprs     map[string]string // ${{ … }} → value
}

// jobRun is the outcome of one run of the job.
type jobRun struct {
	outputs map[string]map[string]string // step id → outputs
	ran     []string                     // labels of the steps that ran (stand-ins included)
	summary string
	logs    string
}

var exprPattern = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// expand replaces every ${{ expr }} by its value; an expression the loop does not know is an
// error, so a workflow change cannot slip past the test.
func (j *rebakeJob) expand(s string) (string, error) {
	var err error
	out := exprPattern.ReplaceAllStringFunc(s, func(m string) string {
		expr := exprPattern.FindStringSubmatch(m)[1]
		v, ok := j.exprs[expr]
		if !ok {
			err = errors.Join(err, fmt.Errorf("unknown expression ${{ %s }}: teach the rebake loop test its value", expr))
		}
		return v
	})
	return out, err
}

var conditionTerm = regexp.MustCompile(`^steps\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+) == '([^']*)'$`)

// condition evaluates a step's if: (the forms rebake.yml uses); ok=false for an unknown form.
func condition(cond string, outputs map[string]map[string]string, failed bool) (run bool, err error) {
	if cond == "" {
		return !failed, nil
	}
	always := false
	run = true
	for _, term := range strings.Split(cond, "&&") {
		term = strings.TrimSpace(term)
		if term == "always()" {
			always = true
			continue
		}
		m := conditionTerm.FindStringSubmatch(term)
		if m == nil {
			return false, fmt.Errorf("unknown condition %q: teach the rebake loop test", term)
		}
		run = run && outputs[m[1]][m[2]] == m[3]
	}
	return run && (always || !failed), nil
}

// run executes the job's steps in order, as Actions would for a scheduled run.
func (j *rebakeJob) run(name string) jobRun {
	t := j.t
	t.Helper()
	res := jobRun{outputs: map[string]map[string]string{}}
	dir := filepath.Join(j.runnerTmp, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(dir, "step-summary.md")
	githubEnv := map[string]string{}
	env := map[string]string{}
	for k, v := range j.workflow {
		env[k] = v
	}
	for k, v := range j.job.Env {
		env[k] = v
	}
	var logs strings.Builder
	failed := false
	steps := rebakeLoopSteps()
	for i, s := range j.job.Steps {
		if i >= len(steps) || steps[i].label != stepKey(s) {
			t.Fatalf("step %d %q is not the loop's %d-th step: TestRebakeLoopCoversTheWorkflow says how to fix it", i, stepKey(s), i)
		}
		run, err := condition(s.If, res.outputs, failed)
		if err != nil {
			t.Fatal(err)
		}
		if !run {
			continue
		}
		res.ran = append(res.ran, s.label())
		stepEnv := map[string]string{}
		for k, v := range env {
			stepEnv[k] = v
		}
		for k, v := range githubEnv {
			stepEnv[k] = v
		}
		for k, v := range s.Env {
			stepEnv[k] = v
		}
		for k, v := range stepEnv {
			x, err := j.expand(v)
			if err != nil {
				t.Fatalf("step %q env %s: %v", s.label(), k, err)
			}
			stepEnv[k] = x
		}
		if !steps[i].verbatim {
			if err := j.standIn(s, stepEnv); err != nil {
				t.Fatalf("step %q (stand-in: %s): %v", s.label(), steps[i].standIn, err)
			}
			continue
		}
		script, err := j.expand(s.Run)
		if err != nil {
			t.Fatalf("step %q: %v", s.label(), err)
		}
		outFile, envFile := filepath.Join(dir, fmt.Sprintf("%d.output", i)), filepath.Join(dir, fmt.Sprintf("%d.env", i))
		for _, f := range []string{outFile, envFile} {
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		stepEnv["GITHUB_OUTPUT"], stepEnv["GITHUB_ENV"], stepEnv["GITHUB_STEP_SUMMARY"] = outFile, envFile, summary
		stepEnv["GITHUB_WORKSPACE"], stepEnv["RUNNER_TEMP"] = j.workspace, j.runnerTmp
		stepEnv["PATH"] = filepath.Join(j.e.repo, "bin") + ":" + os.Getenv("PATH")
		// Actions runs a run: step with `bash -e {0}`; its own process group, so a timeout kills
		// Packer and its plugins with it.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Minute
		cmd.Dir = j.workspace
		cmd.Env = j.fake.packerEnv(j.e, "AWS_REGION="+j.exprs["matrix.region"])
		for k, v := range stepEnv {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		start := time.Now()
		out, err := cmd.CombinedOutput()
		cancel()
		fmt.Fprintf(&logs, "=== %s (%s)\n%s\n", s.label(), time.Since(start).Round(time.Millisecond), out)
		if err != nil {
			failed = true
			t.Errorf("step %q failed: %v\n%s", s.label(), err, out)
		}
		if s.ID != "" {
			res.outputs[s.ID] = readKeyValues(t, outFile)
		}
		for k, v := range readKeyValues(t, envFile) {
			githubEnv[k] = v
		}
	}
	b, _ := os.ReadFile(summary)
	res.summary, res.logs = string(b), logs.String()
	_ = os.WriteFile(filepath.Join(dir, "steps.log"), []byte(res.logs), 0o644)
	return res
}

// standIn does on this machine what a uses: step (or packer init) does on a runner.
func (j *rebakeJob) standIn(s workflowStep, env map[string]string) error {
	with := map[string]string{}
	for k, v := range s.With {
		x, err := j.expand(v)
		if err != nil {
			return err
		}
		with[k] = x
	}
	switch stepKey(s) {
	case "actions/checkout@v5", "packer init":
		return nil // the workspace is prepared once, the plugins by run-scenario --prepare
	case "hashicorp/setup-packer@v3":
		out, err := exec.Command(j.e.packer, "version").Output()
		if err != nil {
			return err
		}
		if want := "Packer v" + with["version"]; !strings.HasPrefix(string(out), want) {
			return fmt.Errorf("bin/packer says %q, the workflow installs %q", strings.TrimSpace(string(out)), want)
		}
		return nil
	case "aws-actions/configure-aws-credentials@v5":
		if with["aws-region"] != j.exprs["matrix.region"] {
			return fmt.Errorf("aws-region %q, want the matrix region %q", with["aws-region"], j.exprs["matrix.region"])
		}
		return nil // packerEnv carries the fake keys; AWS_REGION is set per step
	case "Clean up what the job left behind":
		return j.nothingLeftOfRun(env["PKR_VAR_run_id"])
	case junitAction:
		return junitReportsPublishable(with["report_paths"])
	case uploadAction:
		if dir, ok := strings.CutSuffix(with["path"], "/**/dlami-report.html"); ok {
			return htmlReportsUnder(dir)
		}
		for _, f := range []string{"dlami-report.json", "dlami-report.junit.xml", "dlami-report.md", "dlami-report.html"} {
			if _, err := os.Stat(filepath.Join(with["path"], f)); err != nil {
				return fmt.Errorf("the artifact path lacks %s: %w", f, err)
			}
		}
		return nil
	}
	return fmt.Errorf("no stand-in for %q", stepKey(s))
}

// nothingLeftOfRun checks the fake as the cleanup step would query EC2: every instance tagged
// with the job's run id is terminated (the build's and the post-processor's, both tagged), and
// no key pair or security group carries it.
func (j *rebakeJob) nothingLeftOfRun(runID string) error {
	if runID == "" {
		return errors.New("PKR_VAR_run_id is empty")
	}
	region := j.exprs["matrix.region"]
	rs := j.fake.state(j.t).Regions[region]
	var errs []error
	tagged := 0
	for _, in := range rs.Instances {
		if in.Tags[ciRunTag] != runID {
			continue
		}
		tagged++
		if in.State != "terminated" {
			errs = append(errs, fmt.Errorf("instance %s of run %s is %s", in.ID, runID, in.State))
		}
	}
	if tagged < 2 {
		errs = append(errs, fmt.Errorf("%d instances tagged %s = %s in %s: want the build's and the verification's", tagged, ciRunTag, runID, region))
	}
	for _, kp := range rs.KeyPairs {
		if kp.Tags[ciRunTag] == runID {
			errs = append(errs, fmt.Errorf("key pair %s of run %s left", kp.Name, runID))
		}
	}
	for _, sg := range rs.SecurityGroups {
		if sg.Tags[ciRunTag] == runID {
			errs = append(errs, fmt.Errorf("security group %s of run %s left", sg.ID, runID))
		}
	}
	return errors.Join(errs...)
}

// readKeyValues reads a GITHUB_OUTPUT/GITHUB_ENV file of name=value lines.
func readKeyValues(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.Contains(k, "<<") {
			t.Fatalf("%s: line %q is not name=value (multi-line values are not supported here)", path, line)
		}
		out[k] = v
	}
	return out
}

// rebakeLoop (TestAmazonEBS/scenarios/hosts/rebake-loop): decide (no golden AMI → rebake),
// bake, decide (no rebake), AWS publishes a newer DLAMI, decide (rebake), bake; the new golden
// AMI's dlami:source_ami is the new DLAMI and dlami:previous the first golden AMI. Its family
// (golden-p6-b200-48xlarge) is its own on the shared fake.
func rebakeLoop(t *testing.T, e ebsEnv, fake *fakeAWS) {
	workflowEnv, job := readRebakeWorkflow(t)
	if _, err := exec.LookPath("jq"); err != nil {
		missing(t, "jq not found (the rebake workflow's steps use it, as GitHub's runners provide it): apt-get install jq")
	}
	out := outDir(t, "ebs-rebake")
	workspace, runnerTmp := filepath.Join(out, "workspace"), filepath.Join(out, "runner-temp")

	// The checkout: TEMPLATE_DIR with the example's templates, endpoints added.
	tmplDir := filepath.Join(workspace, workflowEnv["TEMPLATE_DIR"])
	if err := os.MkdirAll(tmplDir, 0o755); err != nil {
		t.Fatal(err)
	}
	srcs, _ := filepath.Glob(filepath.Join("..", "..", workflowEnv["TEMPLATE_DIR"], "*.pkr.hcl"))
	if len(srcs) == 0 {
		t.Fatalf("no templates in TEMPLATE_DIR=%s", workflowEnv["TEMPLATE_DIR"])
	}
	for _, src := range srcs {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		derived, err := withFakeEndpoints(b, filepath.Base(src), fake.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmplDir, filepath.Base(src)), derived, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const region, instanceType = ebsRegion, "p6-b200.48xlarge"
	j := &rebakeJob{t: t, e: e, fake: fake, workflow: workflowEnv, job: job, workspace: workspace, runnerTmp: runnerTmp, exprs: map[string]string{
		"matrix.region": region, "matrix.instance_type": instanceType,
		"github.workspace": workspace, "runner.temp": runnerTmp,
		"inputs.force":         "", // a scheduled run has no inputs
		"secrets.GITHUB_TOKEN": "fake-github-token", "vars.PACKER_ROLE_ARN": "arn:aws:iam::123456789012:role/fake-packer",
		"toJSON(vars)": "{}", "env.PACKER_VERSION": workflowEnv["PACKER_VERSION"],
		"github.run_id": "4242",
	}}
	reportDir, err := j.expand(job.Env["PKR_VAR_report_dir"])
	if err != nil {
		t.Fatal(err)
	}
	j.exprs["env.PKR_VAR_report_dir"] = reportDir
	family := "golden-" + strings.ReplaceAll(instanceType, ".", "-")
	goldens := func() []awsfake.Image {
		var out []awsfake.Image
		for _, img := range ownImages(fake.state(t), region) {
			if img.Tags["dlami:family"] == family {
				out = append(out, img)
			}
		}
		return out
	}
	decideAndBake := func(name string, wantRebake bool) jobRun {
		t.Helper()
		start := time.Now()
		// Each run of the loop is a new attempt: its own run id.
		j.exprs["github.run_attempt"] = strings.SplitN(name, "-", 2)[0]
		r := j.run(name)
		t.Logf("%s: rebake=%v, steps %q, %s", name, wantRebake, r.ran, time.Since(start).Round(time.Second))
		if got := r.outputs["decide"]["needed"]; got != fmt.Sprint(wantRebake) {
			t.Fatalf("%s: decide said needed=%q, want %v\n%s", name, got, wantRebake, r.logs)
		}
		if !strings.Contains(r.summary, fmt.Sprintf("| rebake | **%v** |", wantRebake)) {
			t.Errorf("%s: the job summary lacks the decision:\n%s", name, r.summary)
		}
		baked := strings.Contains(strings.Join(r.ran, "\n"), "packer build")
		if baked != wantRebake {
			t.Errorf("%s: packer build ran = %v, want %v", name, baked, wantRebake)
		}
		if wantRebake {
			md, err := os.ReadFile(filepath.Join(reportDir, "dlami-report.md"))
			if err != nil || len(md) == 0 || !strings.Contains(r.summary, string(md)) {
				t.Errorf("%s: the dlami report (%v) did not reach the job summary:\n%s", name, err, r.summary)
			}
		}
		assertCleanedUp(t, fake.state(t), region)
		return r
	}

	decideAndBake("1-no-golden", true)
	g := goldens()
	if len(g) != 1 || g[0].Tags["dlami:source_ami"] != seedDLAMI(region, latestSeedBuild()) {
		t.Fatalf("after the first bake: golden AMIs %+v, want one from %s", g, seedDLAMI(region, latestSeedBuild()))
	}
	first := g[0]

	decideAndBake("2-up-to-date", false)

	newBuild := newerBuild(t, latestSeedBuild())
	var pub awsfake.PublishResult
	if err := json.Unmarshal(fake.control(t, "POST", "/_fake/publish?build="+newBuild+"&region="+region), &pub); err != nil {
		t.Fatal(err)
	}
	newDLAMI := pub.Images[region]
	if newDLAMI == "" {
		t.Fatalf("publish answered %+v: no image in %s", pub, region)
	}

	r := decideAndBake("3-new-dlami", true)
	if !strings.Contains(r.summary, newDLAMI) {
		t.Errorf("the summary of the third run does not name the new DLAMI %s:\n%s", newDLAMI, r.summary)
	}
	g = goldens()
	if len(g) != 2 {
		t.Fatalf("after the second bake: %d golden AMIs, want 2", len(g))
	}
	var second awsfake.Image
	for _, img := range g {
		if img.ID != first.ID {
			second = img
		}
	}
	if second.Tags["dlami:source_ami"] != newDLAMI || second.Tags["dlami:build"] != newBuild || second.Tags["dlami:previous"] != first.ID {
		t.Errorf("new golden AMI tags %v, want dlami:source_ami=%s dlami:build=%s dlami:previous=%s", second.Tags, newDLAMI, newBuild, first.ID)
	}
	assertNoInstanceState(t, fake)
}

// newerBuild is a DLAMI build date a week after build.
func newerBuild(t *testing.T, build string) string {
	t.Helper()
	d, err := time.Parse("20060102", build)
	if err != nil {
		t.Fatal(err)
	}
	return d.AddDate(0, 0, 7).Format("20060102")
}

// junitAction is the workflow's JUnit check-run action, pinned by commit (v6.4.2).
const junitAction = "mikepenz/action-junit-report@d9f48fc87bc235f7e214acf696ca5abc0a986f16"

// uploadAction is actions/upload-artifact v4.6.2, pinned by its commit as rebake.yml pins it.
const uploadAction = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02"

// htmlReportsUnder checks what the HTML artifact's path (dir/**/dlami-report.html) uploads: the
// bake's HTML report and at least one of the first boot's, each a whole page.
func htmlReportsUnder(dir string) error {
	var found []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "dlami-report.html" {
			found = append(found, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	if !slices.Contains(found, filepath.Join(dir, "dlami-report.html")) || len(found) < 2 {
		return fmt.Errorf("the HTML artifact would hold %q, want the bake's and the first boot's", found)
	}
	for _, f := range found {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(strings.TrimSpace(string(b)), "</html>") || !strings.Contains(string(b), `id="verdict"`) {
			return fmt.Errorf("%s is not a whole HTML report", f)
		}
	}
	return nil
}

// junitReportsPublishable checks what the JUnit action would publish: the files pattern (a
// directory, then "**/" and a file name) matches, in the directory or any below it, at least two
// reports (the bake's and the first boot's), and each is a JUnit document with test cases.
func junitReportsPublishable(pattern string) error {
	dir, name, ok := strings.Cut(pattern, "/**/")
	if !ok || strings.ContainsAny(name, "*?[") {
		return fmt.Errorf("report_paths %q: the stand-in knows DIR/**/NAME only", pattern)
	}
	var found []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == name {
			found = append(found, p)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("report_paths %q: %w", pattern, err)
	}
	if len(found) < 2 {
		return fmt.Errorf("report_paths %q matches %v: want the bake's and the first boot's report", pattern, found)
	}
	for _, f := range found {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var doc struct {
			Suites []struct {
				Cases []struct {
					Name string `xml:"name,attr"`
				} `xml:"testcase"`
			} `xml:"testsuite"`
		}
		if err := xml.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if len(doc.Suites) == 0 || len(doc.Suites[0].Cases) == 0 {
			return fmt.Errorf("%s: no test case (require_tests would fail the check)", f)
		}
	}
	return nil
}

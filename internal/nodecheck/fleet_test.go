package nodecheck

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/evidence"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeaws"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
	"github.com/dlami-bake/packer-plugin-dlami/test/awstest"
	"github.com/dlami-bake/packer-plugin-dlami/test/imdsfake"
)

const (
	fleetRegion   = "us-west-2"
	fleetInstance = "i-0fa11edc0ffee0001"
	fleetBucket   = "gpu-evidence"
	xidLine       = "NVRM: Xid (PCI:0000:75:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
)

// fleet is the AWS a node reaches: the fake (S3 with the evidence bucket, Auto Scaling with
// the node in a group) through the real SDK, and an IMDSv2 stand-in with the node's identity
// and role.
type fleet struct {
	aws  *awsfake.Server
	imds *imdsfake.Server
	// cloud is the node check's real client, pointed at them.
	cloud *nodeaws.Client
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	awstest.IsolateEnv(t)
	f := &fleet{aws: awsfake.New()}
	srv := f.aws.Start()
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL", srv.URL)
	f.aws.CreateBucket(fleetRegion, fleetBucket)
	f.aws.PutAutoScalingGroup(fleetRegion, "p5-workers", fleetInstance)
	f.imds = imdsfake.New(imdsfake.Instance{InstanceID: fleetInstance, InstanceType: "p6-b200.48xlarge", AvailabilityZone: fleetRegion + "a",
		Region: fleetRegion, ImageID: "ami-0golden0000000001", AccountID: awsfake.DefaultAccount, Role: "gpu-node",
		AccessKeyID: "ASIAINSTANCEROLE0001", SecretAccessKey: "fakeRoleSecret000000000000000000000000000"})
	md := httptest.NewServer(f.imds)
	t.Cleanup(md.Close)
	f.cloud = nodeaws.New(nodeaws.Options{IMDSEndpoint: md.URL})
	return f
}

// withXid puts an Xid 79 into the node's kernel log, as dmesg and the journal read it.
func (n *fakeNode) withXid() {
	d := n.host["host.dmesg"]
	d.out = strings.TrimRight(d.out, "\n") + "\n[ 4211.083419] " + xidLine
	n.host["host.dmesg"] = d
	j := n.host["host.journal_kernel"]
	j.out = strings.TrimRight(j.out, "\n") + "\n[ 4211.083419] ip-10-1-42-17 kernel: " + xidLine
	n.host["host.journal_kernel"] = j
}

// withTools installs the GPU tools the evidence runs: nvidia-smi -q and a bug report that
// writes its file. seen records, at each drain, whether a bundle was already kept.
func (n *fakeNode) withTools(t *testing.T, o Options, seen *[]bool) {
	n.tools = map[string]func([]string) (string, int, error){
		NvidiaSMI: func(argv []string) (string, int, error) {
			return "==============NVSMI LOG==============\nAttached GPUs : 8\n", 0, nil
		},
		NvidiaBugReport: func(argv []string) (string, int, error) {
			i := slices.Index(argv, "--output-file")
			if i < 0 || i+1 >= len(argv) {
				return "usage", 1, nil
			}
			return "nvidia-bug-report.sh will now collect information", 0, os.WriteFile(argv[i+1]+".gz", []byte("gzipped bug report"), 0o600)
		},
	}
	n.slurm = &slurmCtl{base: "IDLE"}
	prev := n.slurm.scontrol
	n.scontrol = func(argv []string) (string, int) {
		if slices.Contains(argv, "update") && slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "state=drain") }) {
			es, _ := filepath.Glob(filepath.Join(o.Evidence.Dir, "*.tar.gz"))
			*seen = append(*seen, len(es) > 0)
		}
		return prev(argv)
	}
}

// slurmCtl is the controller the fleet tests' node talks to: one node, ip-10-1-42-17, whose
// record follows the updates as Slurm 22.05 prints it (testdata/scontrol/idle.txt with its
// State and Reason): a drain adds DRAIN to the base state (IDLE, or MIXED while a job runs),
// a resume takes it away.
type slurmCtl struct {
	base          string
	drained       bool
	reason, setBy string
	updates       []string
}

func (c *slurmCtl) state() string {
	if c.drained {
		return c.base + "+DRAIN"
	}
	return c.base
}

func (c *slurmCtl) scontrol(argv []string) (string, int) {
	switch {
	case len(argv) > 1 && argv[1] == "-o":
		b, err := os.ReadFile(filepath.Join("testdata", "scontrol", "idle.txt"))
		if err != nil {
			return err.Error(), 1
		}
		rec := strings.Replace(strings.TrimRight(string(b), "\n"), " State=IDLE ", " State="+c.state()+" ", 1)
		if c.reason != "" {
			rec += " Reason=" + c.reason + " [" + c.setBy + "@2026-12-01T18:36:52]"
		}
		return rec + "\n", 0
	case slices.Contains(argv, "state=drain"):
		c.updates = append(c.updates, "drain")
		c.drained, c.setBy = true, "root"
		for _, a := range argv {
			if r, ok := strings.CutPrefix(a, "reason="); ok {
				c.reason = r
			}
		}
	case slices.Contains(argv, "state=resume"):
		c.updates = append(c.updates, "resume")
		c.drained, c.reason = false, ""
	}
	return "", 0
}

func (f *fleet) env(n *fakeNode) Env {
	e := n.env(n.bom())
	e.Cloud = f.cloud
	return e
}

// members reads a bundle.
func members(t *testing.T, path string) map[string]string {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	return untarBytes(t, fh)
}

func untarBytes(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}

// A node with an Xid, booting with action drain and replace asg: the evidence bundle (with the
// Xid's kernel log lines) is kept and uploaded before the node is drained, then its Auto
// Scaling group is asked to replace it; the report, the line and the textfile say so.
func TestEvidenceThenDrainThenReplace(t *testing.T) {
	f := newFleet(t)
	n := newNode(t)
	n.withXid()
	o := options(t, nodeconf.ModeBoot, nodeconf.ActionDrain)
	o.Replace = nodeconf.ReplaceASG
	o.Evidence.S3URI = "s3://" + fleetBucket + "/fleet"
	var seen []bool
	n.withTools(t, o, &seen)
	// The order: the drain comes before SetInstanceHealth (the group must find the node
	// already out of Slurm's service).
	healthAtDrain := -1
	drainer := n.scontrol
	n.scontrol = func(argv []string) (string, int) {
		if slices.Contains(argv, "state=drain") {
			healthAtDrain = f.aws.CallCount(awsfake.OpSetInstanceHealth, "")
		}
		return drainer(argv)
	}
	out := Run(context.Background(), f.env(n), o)
	if healthAtDrain != 0 || f.aws.CallCount(awsfake.OpSetInstanceHealth, "") != 1 {
		t.Errorf("SetInstanceHealth calls at the drain: %d (want 0), after the run: %d (want 1)", healthAtDrain, f.aws.CallCount(awsfake.OpSetInstanceHealth, ""))
	}

	if out.Exit != 1 || !slices.Contains(out.Report.FailedChecks, result.Xid) {
		t.Fatalf("exit %d, failed %v: %s", out.Exit, out.Report.FailedChecks, out.Line)
	}
	if len(seen) != 1 || !seen[0] {
		t.Fatalf("the drain came before the evidence was kept (drains seeing a bundle: %v)\nnotes: %q", seen, out.Notes)
	}
	e := out.Report.Evidence
	if e == nil || e.Path == "" || e.XidLines != 1 || len(e.Problems) != 0 {
		t.Fatalf("evidence: %+v", e)
	}
	m := members(t, e.Path)
	for name, want := range map[string]string{
		"dmesg-xid.txt": xidLine, "journal-xid.txt": "kernel: " + xidLine, "nvidia-smi-q.txt": "NVSMI LOG",
		"nvidia-bug-report.log.gz": "gzipped bug report", "identity.json": fleetInstance, report.JSONFile: `"xid"`,
	} {
		if !strings.Contains(m[name], want) {
			t.Errorf("bundle member %s lacks %q:\n%s", name, want, m[name])
		}
	}
	var man evidence.Manifest
	if err := json.Unmarshal([]byte(m[evidence.ManifestName]), &man); err != nil {
		t.Fatal(err)
	}
	if man.Identity.InstanceID != fleetInstance || man.Identity.ImageID != "ami-0golden0000000001" || man.Identity.Build["dlami:build_name"] != "golden" || man.Simulated != "" {
		t.Errorf("manifest identity: %+v", man.Identity)
	}
	key := "fleet/" + fleetInstance + "/" + filepath.Base(e.Path)
	if e.Uploaded != "s3://"+fleetBucket+"/"+key {
		t.Errorf("uploaded %q, want key %s", e.Uploaded, key)
	}
	obj, ok := f.aws.Object(fleetBucket, key)
	if !ok || !strings.Contains(untarBytes(t, strings.NewReader(string(obj.Body)))["dmesg-xid.txt"], xidLine) || obj.Metadata["dlami-failed-checks"] != "xid" {
		t.Errorf("the uploaded object: ok %v, metadata %v", ok, obj.Metadata)
	}
	in, _ := f.aws.AutoScalingInstance(fleetRegion, fleetInstance)
	if len(in.HealthCalls) != 1 || in.HealthCalls[0].HealthStatus != "Unhealthy" || in.HealthCalls[0].RespectGracePeriod {
		t.Errorf("SetInstanceHealth: %+v", in.HealthCalls)
	}
	if r := out.Report.Replacement; r == nil || !r.Requested || r.Status != report.ReplacementRequested || r.Group != "p5-workers" || r.InstanceID != fleetInstance {
		t.Errorf("replacement: %+v", r)
	}
	// What was kept and asked is in the written report, the textfile and the notes.
	var written report.Report
	data, err := os.ReadFile(filepath.Join(o.OutDir, report.JSONFile))
	if err != nil || json.Unmarshal(data, &written) != nil || written.Evidence == nil || written.Evidence.Uploaded != e.Uploaded || written.Replacement == nil {
		t.Errorf("written report: %v\n%s", err, data)
	}
	tf, _ := os.ReadFile(o.Textfile)
	for _, want := range []string{`dlami_node_check_evidence_ok{step="write"} 1`, `dlami_node_check_evidence_ok{step="upload"} 1`,
		`dlami_node_check_replacement_requested{engine="asg",state="requested"} 1`, `dlami_node_check{check="xid",status="fail"} 0`} {
		if !strings.Contains(string(tf), want+"\n") {
			t.Errorf("textfile lacks %q:\n%s", want, tf)
		}
	}
	if strings.Contains(string(tf), `simulated="`) {
		t.Errorf("a real failure's textfile says simulated:\n%s", tf)
	}
	notes := strings.Join(out.Notes, "\n")
	for _, want := range []string{"kept the evidence in " + e.Path, "uploaded the evidence to s3://", "drained Slurm node", "marked instance " + fleetInstance + " Unhealthy"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

// An upload that fails (S3 denies it), a store that cannot be written, no IMDS: the node is
// drained all the same and the failure is reported.
func TestEvidenceFailuresNeverBlockIsolation(t *testing.T) {
	for _, c := range []struct {
		name    string
		setup   func(*fleet, *Options)
		problem string
		write   int
	}{
		{"upload denied", func(f *fleet, o *Options) {
			f.aws.SetFault(awsfake.OpPutObject, "", awsfake.Fault{AccessDenied: true})
		}, "could not upload the evidence bundle: s3:PutObject", 1},
		{"store unwritable", func(f *fleet, o *Options) {
			file := filepath.Join(filepath.Dir(o.Evidence.Dir), "a-file")
			_ = os.WriteFile(file, nil, 0o600)
			o.Evidence.Dir = filepath.Join(file, "evidence")
		}, "could not keep the evidence bundle", 0},
		{"no IMDS", func(f *fleet, o *Options) { f.imds.SetDown(true) }, "the instance's region and role come from IMDSv2", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFleet(t)
			n := newNode(t)
			n.withXid()
			o := options(t, nodeconf.ModeSlurm, nodeconf.ActionBlock)
			o.Evidence.S3URI = "s3://" + fleetBucket
			c.setup(f, &o)
			var seen []bool
			n.withTools(t, o, &seen)
			out := Run(context.Background(), f.env(n), o)
			if len(seen) != 1 {
				t.Fatalf("the node was not drained (drains %v): %q", seen, out.Notes)
			}
			if out.Exit != 0 {
				t.Errorf("slurm mode, drained: exit %d, want 0", out.Exit)
			}
			e := out.Report.Evidence
			if e == nil || !strings.Contains(strings.Join(e.Problems, "\n"), c.problem) {
				t.Fatalf("evidence problems %+v, want %q", e, c.problem)
			}
			if !strings.Contains(strings.Join(out.Notes, "\n"), "evidence: "+c.problem) {
				t.Errorf("notes lack the problem: %q", out.Notes)
			}
			tf, _ := os.ReadFile(o.Textfile)
			if want := `dlami_node_check_evidence_ok{step="write"} ` + map[int]string{0: "0", 1: "1"}[c.write]; !strings.Contains(string(tf), want+"\n") || !strings.Contains(string(tf), `dlami_node_check_evidence_ok{step="upload"} 0`) {
				t.Errorf("textfile lacks %q and a failed upload:\n%s", want, tf)
			}
		})
	}
}

// In slurm mode the slow parts are left out (slurmd kills the program after 60 seconds), and
// the bundle says why; a tool that is not installed is recorded, not fatal.
func TestSlurmModeEvidenceIsQuick(t *testing.T) {
	f := newFleet(t)
	n := newNode(t)
	n.withXid()
	o := options(t, nodeconf.ModeSlurm, nodeconf.ActionBlock)
	o.Evidence.DCGMLevel = 3
	var seen []bool
	n.withTools(t, o, &seen)
	delete(n.tools, NvidiaSMI)
	n.tools[NvidiaSMI] = func([]string) (string, int, error) {
		return "", -1, &fs.PathError{Op: "fork/exec", Path: NvidiaSMI, Err: fs.ErrNotExist}
	}
	out := Run(context.Background(), f.env(n), o)
	e := out.Report.Evidence
	if e == nil || e.Path == "" {
		t.Fatalf("evidence: %+v %q", e, out.Notes)
	}
	skipped := strings.Join(e.Skipped, "\n")
	for _, want := range []string{"nvidia-bug-report.log.gz (" + NvidiaBugReport + "): not run in slurm mode", "dcgmi-diag.json (" + Dcgmi + " diag): not run in slurm mode"} {
		if !strings.Contains(skipped, want) {
			t.Errorf("skipped lacks %q:\n%s", want, skipped)
		}
	}
	if !slices.Contains(e.Missing, "nvidia-smi-q.txt ("+NvidiaSMI+" -q): "+NvidiaSMI+" is not installed") {
		t.Errorf("missing: %q", e.Missing)
	}
	n.mu.Lock()
	for _, c := range n.commands {
		if c[0] == NvidiaBugReport || c[0] == Dcgmi {
			t.Errorf("slurm mode ran %q", c)
		}
	}
	n.mu.Unlock()
}

// --simulate-failure gpu on a healthy node: the whole pipeline runs (evidence uploaded, the
// drain, the replacement request) and every output says simulated.
func TestSimulateFailure(t *testing.T) {
	f := newFleet(t)
	n := newNode(t)
	o := options(t, nodeconf.ModeSlurm, nodeconf.ActionBlock)
	o.Simulate, o.Replace = result.GPU, nodeconf.ReplaceASG
	o.Evidence.S3URI = "s3://" + fleetBucket + "/drills"
	var drains []string
	ctl := &slurmCtl{base: "IDLE"}
	n.scontrol = func(argv []string) (string, int) {
		for _, a := range argv {
			if r, ok := strings.CutPrefix(a, "reason="); ok {
				drains = append(drains, r)
			}
		}
		return ctl.scontrol(argv)
	}
	out := Run(context.Background(), f.env(n), o)
	if out.Report.Simulated != result.GPU || !slices.Equal(out.Report.FailedChecks, []string{result.GPU}) {
		t.Fatalf("report: simulated %q, failed %v", out.Report.Simulated, out.Report.FailedChecks)
	}
	if c, _ := result.Find(out.Report.Checks, result.GPU); !strings.HasPrefix(c.Message, "SIMULATED failure") || !strings.Contains(c.Message, "real verdict was pass") {
		t.Errorf("gpu check: %+v", c)
	}
	if !strings.HasPrefix(out.Line, "dlami-node-check: SIMULATED FAIL gpu") {
		t.Errorf("line %q", out.Line)
	}
	if len(drains) != 1 || drains[0] != "dlami: simulated gpu" {
		t.Errorf("drain reasons %q", drains)
	}
	e := out.Report.Evidence
	if e == nil || !strings.Contains(e.Path, "-simulated-gpu") || !strings.Contains(e.Uploaded, "/drills/"+fleetInstance+"/") {
		t.Fatalf("evidence: %+v", e)
	}
	obj, ok := f.aws.Object(fleetBucket, strings.TrimPrefix(e.Uploaded, "s3://"+fleetBucket+"/"))
	if !ok || obj.Metadata["dlami-simulated"] != "gpu" {
		t.Errorf("object metadata %v (found %v)", obj.Metadata, ok)
	}
	var man evidence.Manifest
	if err := json.Unmarshal([]byte(members(t, e.Path)[evidence.ManifestName]), &man); err != nil || man.Simulated != "gpu" {
		t.Errorf("manifest simulated %q (%v)", man.Simulated, err)
	}
	// The drill finds the group (permissions and membership proven) and sends nothing: the
	// group would terminate a healthy node.
	if in, _ := f.aws.AutoScalingInstance(fleetRegion, fleetInstance); len(in.HealthCalls) != 0 || f.aws.CallCount(awsfake.OpDescribeAutoScalingInstances, "") != 1 {
		t.Errorf("the drill: DescribeAutoScalingInstances %d (want 1), SetInstanceHealth %+v (want none)", f.aws.CallCount(awsfake.OpDescribeAutoScalingInstances, ""), in.HealthCalls)
	}
	wantMsg := "simulated: would mark " + fleetInstance + " Unhealthy in group p5-workers; not sent, add --simulate-failure-replace to send it"
	if r := out.Report.Replacement; r == nil || r.Requested || r.Status != report.ReplacementSimulated || r.Message != wantMsg || r.Group != "p5-workers" {
		t.Errorf("replacement: %+v", r)
	}
	if !strings.Contains(out.Line, wantMsg) || !slices.Contains(out.Notes, wantMsg) {
		t.Errorf("line %q / notes %q lack %q", out.Line, out.Notes, wantMsg)
	}
	var written report.Report
	if data, err := os.ReadFile(filepath.Join(o.OutDir, report.JSONFile)); err != nil || json.Unmarshal(data, &written) != nil || written.Replacement == nil || written.Replacement.Message != wantMsg {
		t.Errorf("written report: %v %+v", err, written.Replacement)
	}
	tf, _ := os.ReadFile(o.Textfile)
	for _, want := range []string{`dlami_node_check{check="gpu",status="fail",simulated="true"} 0`, `dlami_node_check_replacement_requested{engine="asg",state="simulated",simulated="true"} 0`} {
		if !strings.Contains(string(tf), want) {
			t.Errorf("textfile lacks %q:\n%s", want, tf)
		}
	}
	for _, l := range strings.Split(string(tf), "\n") {
		if strings.HasPrefix(l, "dlami_node_check") && !strings.HasPrefix(l, "dlami_node_check_last_run") && !strings.Contains(l, `simulated="true"`) {
			t.Errorf("a series without the simulated label: %s", l)
		}
	}
	n.mu.Lock()
	if slices.Contains(n.jobs, "nccl.sh") || slices.Contains(n.jobs, "dcgm.sh") {
		t.Errorf("the drill loaded the GPUs: jobs %q", n.jobs)
	}
	n.mu.Unlock()

	// node-problem-detector's line says it too.
	o.Mode = nodeconf.ModeNPD
	out = Run(context.Background(), f.env(n), o)
	if out.Line != "SIMULATED: gpu failed the DLAMI node check (a drill)" || out.Exit != nodeconf.NPDProblem {
		t.Errorf("npd: exit %d, line %q", out.Exit, out.Line)
	}
	if err := (Options{Simulate: "gpus"}).Validate(); err == nil || !strings.Contains(err.Error(), `--simulate-failure "gpus": no such check of the node check; use one of`) || !strings.Contains(err.Error(), "xid") {
		t.Errorf("unknown id: %v", err)
	}
}

// node-problem-detector runs the check every 10 minutes: a failure already kept for this boot
// is not kept again (the first bundle would be pushed out), and its upload is not repeated.
func TestEvidenceKeptOncePerFailure(t *testing.T) {
	f := newFleet(t)
	n := newNode(t)
	n.withXid()
	o := options(t, nodeconf.ModeNPD, nodeconf.ActionBlock)
	o.Evidence.S3URI = "s3://" + fleetBucket
	var seen []bool
	n.withTools(t, o, &seen)
	first := Run(context.Background(), f.env(n), o)
	second := Run(context.Background(), f.env(n), o)
	third := Run(context.Background(), f.env(n), o)
	if first.Report.Evidence == nil || second.Report.Evidence == nil || !second.Report.Evidence.Reused || second.Report.Evidence.Path != first.Report.Evidence.Path {
		t.Fatalf("first %+v\nsecond %+v", first.Report.Evidence, second.Report.Evidence)
	}
	if es, _ := filepath.Glob(filepath.Join(o.Evidence.Dir, "*.tar.gz")); len(es) != 1 {
		t.Errorf("bundles: %q", es)
	}
	if len(f.aws.ObjectKeys(fleetBucket)) != 1 {
		t.Errorf("objects: %q", f.aws.ObjectKeys(fleetBucket))
	}
	// Uploaded once over the three runs; the later runs name the object it went to.
	if n := f.aws.CallCount(awsfake.OpPutObject, ""); n != 1 {
		t.Errorf("PutObject %d times over three runs of the same failure, want 1", n)
	}
	for i, out := range []Outcome{second, third} {
		if e := out.Report.Evidence; e.Uploaded != first.Report.Evidence.Uploaded || e.Uploaded == "" || len(e.Problems) != 0 {
			t.Errorf("run %d: uploaded %q (first %q), problems %q", i+2, e.Uploaded, first.Report.Evidence.Uploaded, e.Problems)
		}
	}
	// A run that fails other checks keeps a new bundle, and uploads it.
	n.dropGPU()
	fourth := Run(context.Background(), f.env(n), o)
	if fourth.Report.Evidence == nil || fourth.Report.Evidence.Reused || f.aws.CallCount(awsfake.OpPutObject, "") != 2 {
		t.Errorf("a new failure reused the bundle or was not uploaded: %+v", fourth.Report.Evidence)
	}
}

// With npd_condition AcceleratedHardwareReady, the npd mode answers readiness: exit 0 (the
// condition False) when the node fails, 1 (True) when it passes.
func TestNPDAcceleratedHardwareReady(t *testing.T) {
	n := newNode(t)
	o := options(t, nodeconf.ModeNPD, nodeconf.ActionBlock)
	o.NPDCondition = nodeconf.NPDConditionAcceleratedHardwareReady
	if out := Run(context.Background(), n.env(n.bom()), o); out.Exit != nodeconf.NPDProblem || out.Failed() {
		t.Errorf("healthy: exit %d (%s), want 1: AcceleratedHardwareReady=True", out.Exit, out.Line)
	}
	n.dropGPU()
	if out := Run(context.Background(), n.env(n.bom()), o); out.Exit != nodeconf.NPDOK || !out.Failed() {
		t.Errorf("failing: exit %d (%s), want 0: AcceleratedHardwareReady=False", out.Exit, out.Line)
	}
	o.Replace = nodeconf.ReplaceASG
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), `--replace = "asg" together with --npd-condition = "AcceleratedHardwareReady"`) {
		t.Errorf("two owners: %v", err)
	}
}

// A report-only run keeps no evidence and asks for no replacement.
func TestReportModeKeepsNothing(t *testing.T) {
	f := newFleet(t)
	n := newNode(t)
	n.withXid()
	o := options(t, nodeconf.ModeReport, nodeconf.ActionBlock)
	o.Replace = nodeconf.ReplaceASG
	out := Run(context.Background(), f.env(n), o)
	if !out.Failed() || out.Report.Evidence != nil || out.Report.Replacement != nil {
		t.Errorf("report mode: failed %v, evidence %+v, replacement %+v", out.Failed(), out.Report.Evidence, out.Report.Replacement)
	}
	if es, _ := filepath.Glob(filepath.Join(o.Evidence.Dir, "*")); len(es) != 0 {
		t.Errorf("files: %q", es)
	}
	if f.aws.CallCount("", "") != 0 {
		t.Errorf("AWS calls: %+v", f.aws.Calls())
	}
}

// The evidence has its own bound, and the actions theirs after it: a bug report that takes
// longer than the actions' whole budget still leaves the drain and the replacement request
// their time.
func TestSlowEvidenceLeavesTheActionsTheirTime(t *testing.T) {
	defer func(b time.Duration) { actionBudget = b }(actionBudget)
	actionBudget = 300 * time.Millisecond
	f := newFleet(t)
	n := newNode(t)
	n.withXid()
	o := options(t, nodeconf.ModeBoot, nodeconf.ActionDrain)
	o.Replace = nodeconf.ReplaceASG
	var seen []bool
	n.withTools(t, o, &seen)
	write := n.tools[NvidiaBugReport]
	n.tools[NvidiaBugReport] = func(argv []string) (string, int, error) {
		time.Sleep(2 * actionBudget)
		return write(argv)
	}
	out := Run(context.Background(), f.env(n), o)
	if len(seen) != 1 || !seen[0] {
		t.Errorf("not drained after a slow bundle (drains %v): %q", seen, out.Notes)
	}
	if r := out.Report.Replacement; r == nil || !r.Requested {
		t.Errorf("replacement after a slow bundle: %+v", r)
	}
	if e := out.Report.Evidence; e == nil || !slices.Contains(e.Collected, "nvidia-bug-report.log.gz") {
		t.Errorf("evidence: %+v", e)
	}
}

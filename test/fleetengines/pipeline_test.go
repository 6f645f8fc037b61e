package fleetengines

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/evidence"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
	"github.com/dlami-bake/packer-plugin-dlami/test/imdsfake"
)

const (
	pipeRegion   = "us-west-2"
	pipeInstance = "i-0fa11edc0ffee0017"
	pipeBucket   = "gpu-evidence"
	pipeGroup    = "p5-workers"
	// imdsAddr is the instance metadata service's own address, on the host's loopback: the
	// node check runs with its default IMDS endpoint.
	imdsAddr = "169.254.169.254"
	pipeXid  = "NVRM: Xid (PCI:0000:75:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
)

// TestPipeline drives the whole detection → evidence → isolation → replacement pipeline with the
// real dlami-node-check on a simulated node, against Debian's real Slurm (slurmctld, slurmd,
// munge, scontrol), the fake AWS (S3 and Auto Scaling, through the real AWS SDK in the binary,
// signed with the instance role's keys from IMDSv2) and an IMDSv2 stand-in at 169.254.169.254
// inside the node's network namespace, in the order an operator proves it:
//
//   - the drill: --simulate-failure gpu on a healthy node; every output says simulated;
//   - an Xid: the boot unit (action drain, replace asg) keeps the bundle (with the Xid's kernel
//     log lines) and uploads it, drains the node, and asks its Auto Scaling group to replace it;
//   - S3 refuses the upload: the node is drained all the same and the failure is reported.
func TestPipeline(t *testing.T) {
	needEngines(t)
	layer := script(t, 30*time.Minute, "test/fleetengines/build-slurm-layer")
	cfg := nodeconf.Config{Action: nodeconf.ActionDrain, BOMPath: bom.DefaultPath, OutDir: nodeconf.DefaultOutDir,
		Textfile: nodeconf.DefaultTextfile, Timeout: 2 * time.Minute, CheckTimeout: time.Minute,
		Scontrol: nodeconf.DefaultScontrol, Before: []string{"slurmd.service"},
		Replace: nodeconf.ReplaceASG, Evidence: nodeconf.Evidence{S3URI: "s3://" + pipeBucket + "/fleet", BugReportTimeout: 30 * time.Second}}
	start := time.Now()
	h := bootHost(t, layer, imageLayer(t, cfg))
	h.writeBOM()
	bugReport, err := os.ReadFile(filepath.Join(repoRoot(t), "test/fleetengines/testdata/nvidia-bug-report.sh"))
	if err != nil {
		t.Fatal(err)
	}
	h.writeFile("/usr/bin/nvidia-bug-report.sh", bugReport, 0o755)
	slurmScript := filepath.Join(repoRoot(t), "test/fleetengines/slurm")
	h.daemons(slurmScript, "controller", h.merged)
	h.daemons(slurmScript, "slurmd", h.merged)
	aws, md, endpoint := h.startAWS(t)
	t.Logf("host booted, cluster and AWS up in %s", time.Since(start).Round(100*time.Millisecond))
	env := []string{"AWS_ENDPOINT_URL=" + endpoint}

	t.Run("simulated gpu failure through every output", func(t *testing.T) {
		r := h.nodeCheck(t, append(env, "SLURMD_NODENAME="+hostNode), "--mode", string(nodeconf.ModeSlurm), "--config", nodeconf.ConfigPath, "--simulate-failure", "gpu")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "dlami-node-check: SIMULATED FAIL gpu") {
			t.Fatalf("exit %d (want 0: drained), line:\n%s", r.code, r)
		}
		if n := h.node(hostNode); !n.drained() || n.reason != "dlami: simulated gpu" {
			t.Errorf("Slurm: state %s, reason %q; want drained with \"dlami: simulated gpu\"", n.state, n.reason)
		}
		rep := h.fullReport(t)
		// The drill finds the group and stops before SetInstanceHealth: the group would
		// terminate a healthy node.
		wouldMark := "simulated: would mark " + pipeInstance + " Unhealthy in group " + pipeGroup + "; not sent, add --simulate-failure-replace to send it"
		if rep.Simulated != "gpu" || rep.Evidence == nil || !strings.Contains(rep.Evidence.Uploaded, "-simulated-gpu") || rep.Replacement == nil || rep.Replacement.Requested ||
			rep.Replacement.Status != report.ReplacementSimulated || rep.Replacement.Message != wouldMark {
			t.Fatalf("report: simulated %q, evidence %+v, replacement %+v", rep.Simulated, rep.Evidence, rep.Replacement)
		}
		if !strings.Contains(r.stdout, wouldMark) || !strings.Contains(r.stderr, wouldMark) {
			t.Errorf("the line or the notes lack %q:\n%s", wouldMark, r)
		}
		obj, ok := aws.Object(pipeBucket, strings.TrimPrefix(rep.Evidence.Uploaded, "s3://"+pipeBucket+"/"))
		if !ok || obj.Metadata["dlami-simulated"] != "gpu" {
			t.Errorf("S3 object %s: found %v, metadata %v", rep.Evidence.Uploaded, ok, obj.Metadata)
		}
		if man := manifestOf(t, bundleMembers(t, obj.Body)); man.Simulated != "gpu" || man.Identity.InstanceID != pipeInstance {
			t.Errorf("bundle manifest: %+v", man)
		}
		tf := h.readFile(nodeconf.DefaultTextfile)
		if !strings.Contains(tf, `dlami_node_check{check="gpu",status="fail",simulated="true"} 0`) || !strings.Contains(tf, `dlami_node_check_replacement_requested{engine="asg",state="simulated",simulated="true"} 0`) {
			t.Errorf("textfile:\n%s", grepLines(tf, "dlami_"))
		}
		if in, _ := aws.AutoScalingInstance(pipeRegion, pipeInstance); len(in.HealthCalls) != 0 || aws.CallCount(awsfake.OpDescribeAutoScalingInstances, "") != 1 {
			t.Errorf("Auto Scaling: DescribeAutoScalingInstances %d (want 1), %+v (want no SetInstanceHealth)", aws.CallCount(awsfake.OpDescribeAutoScalingInstances, ""), in)
		}
		// The operator opts in: the drill sends it.
		r = h.nodeCheck(t, append(env, "SLURMD_NODENAME="+hostNode), "--mode", string(nodeconf.ModeSlurm), "--config", nodeconf.ConfigPath, "--simulate-failure", "gpu", "--simulate-failure-replace")
		if in, _ := aws.AutoScalingInstance(pipeRegion, pipeInstance); r.code != 0 || len(in.HealthCalls) != 1 || in.HealthCalls[0].HealthStatus != "Unhealthy" {
			t.Errorf("opted-in drill: SetInstanceHealth %+v\n%s", in.HealthCalls, r)
		}
		if rep := h.fullReport(t); rep.Replacement == nil || !rep.Replacement.Requested || !strings.HasPrefix(rep.Replacement.Message, "simulated failure, sent as --simulate-failure-replace asks") {
			t.Errorf("opted-in drill: replacement %+v", rep.Replacement)
		}
		// node-problem-detector's line says it too.
		r = h.nodeCheck(t, env, "--mode", string(nodeconf.ModeNPD), "--config", nodeconf.ConfigPath, "--simulate-failure", "gpu")
		if r.code != nodeconf.NPDProblem || strings.TrimSpace(r.stdout) != "SIMULATED: gpu failed the DLAMI node check (a drill)" {
			t.Errorf("npd: %s", r)
		}
		// An unknown check is refused with the valid ids.
		r = h.nodeCheck(t, env, "--mode", string(nodeconf.ModeReport), "--config", nodeconf.ConfigPath, "--simulate-failure", "gpus")
		// The valid ids are listed in the catalog's order, which new checks extend: the
		// assertion names a few that must be among them, not the whole list.
		if r.code != 2 || !strings.Contains(r.stderr, `--simulate-failure "gpus": no such check of the node check; use one of first-boot-kernel, `) ||
			!strings.Contains(r.stderr, " gpu, ") || !strings.Contains(r.stderr, " nccl-busbw, ") {
			t.Errorf("unknown check: %s", r)
		}
		// The next real run passes and resumes the drill's drain (its reason is the check's).
		if r := h.healthCheck(hostNode); r.code != 0 || !strings.Contains(r.stderr, "resumed Slurm node "+hostNode) {
			t.Errorf("passing run: %s", r)
		}
		aws.PutAutoScalingGroup(pipeRegion, pipeGroup, pipeInstance) // the group's replacement, InService again
	})

	t.Run("Xid: evidence, then drain, then replacement", func(t *testing.T) {
		h.kernelLog(t, pipeXid)
		r := h.nodeCheck(t, env, nodeconf.BinaryPath, "--mode", string(nodeconf.ModeBoot), "--config", nodeconf.ConfigPath)
		if r.code != 1 || !strings.Contains(r.stdout, "dlami-node-check: FAIL xid") {
			t.Fatalf("boot unit: %s", r)
		}
		n := h.node(hostNode)
		if !n.drained() || n.reason != "dlami: xid" {
			t.Errorf("Slurm: state %s, reason %q; want drained with \"dlami: xid\"", n.state, n.reason)
		}
		rep := h.fullReport(t)
		e := rep.Evidence
		if e == nil || e.Path == "" || e.XidLines < 1 || e.Uploaded == "" || len(e.Problems) != 0 {
			t.Fatalf("evidence: %+v\n%s", e, r)
		}
		local := bundleMembers(t, []byte(h.readFile(e.Path)))
		obj, ok := aws.Object(pipeBucket, strings.TrimPrefix(e.Uploaded, "s3://"+pipeBucket+"/"))
		if !ok {
			t.Fatalf("no S3 object %s; keys %q", e.Uploaded, aws.ObjectKeys(pipeBucket))
		}
		remote := bundleMembers(t, obj.Body)
		for _, m := range []map[string]string{local, remote} {
			for name, want := range map[string]string{"dmesg-xid.txt": pipeXid, "journal-xid.txt": "kernel: " + pipeXid, "nvidia-smi-q.txt": "Attached GPUs",
				"nvidia-bug-report.log.gz": "nvidia-bug-report.sh stand-in", "identity.json": pipeInstance} {
				if _, ok := m[name]; !ok || !strings.Contains(m[name], want) {
					t.Errorf("bundle member %s lacks %q:\n%s", name, want, m[name])
				}
			}
		}
		man := manifestOf(t, local)
		if man.Identity.ImageID != "ami-0golden0000000017" || man.Identity.Build["dlami:build_name"] != "fleetengines" || man.Simulated != "" {
			t.Errorf("manifest: %+v", man)
		}
		// The bundle was written before the drain: its time is not after the reason's.
		if drainAt := h.drainTime(t, hostNode); man.CreatedAt.Truncate(time.Second).After(drainAt) {
			t.Errorf("bundle created %s, after the drain at %s", man.CreatedAt, drainAt)
		}
		in, _ := aws.AutoScalingInstance(pipeRegion, pipeInstance)
		if len(in.HealthCalls) != 1 || in.HealthCalls[0].HealthStatus != "Unhealthy" || in.HealthCalls[0].RespectGracePeriod {
			t.Errorf("SetInstanceHealth: %+v", in.HealthCalls)
		}
		var roleSigned bool
		for _, c := range aws.Calls() {
			if c.Op == awsfake.OpPutObject && c.AccessKeyID == "ASIAPIPELINEROLE0001" {
				roleSigned = true
			}
		}
		if !roleSigned || !strings.Contains(strings.Join(md.Calls(), "\n"), "PUT /latest/api/token 200") {
			t.Errorf("the upload was not signed with the instance role from IMDSv2: IMDS calls %q", md.Calls())
		}
		h.must("/usr/bin/scontrol", "update", "nodename="+hostNode, "state=resume")
		aws.PutAutoScalingGroup(pipeRegion, pipeGroup, pipeInstance)
	})

	t.Run("operator's drain: left, not replaced", func(t *testing.T) {
		h.must("/usr/bin/scontrol", "update", "nodename="+hostNode, "state=drain", "reason=fan replaced, burn-in")
		defer h.must("/usr/bin/scontrol", "update", "nodename="+hostNode, "state=resume")
		calls := aws.CallCount(awsfake.OpSetInstanceHealth, "")
		r := h.nodeCheck(t, env, nodeconf.BinaryPath, "--mode", string(nodeconf.ModeBoot), "--config", nodeconf.ConfigPath)
		msg := "replacement not requested: an operator holds Slurm node " + hostNode
		if r.code != 1 || !strings.Contains(r.stdout, msg) || !strings.Contains(r.stdout, `reason "fan replaced, burn-in"`) {
			t.Errorf("boot unit: %s", r)
		}
		if n := h.node(hostNode); !n.drained() || n.reason != "fan replaced, burn-in" {
			t.Errorf("Slurm: state %s, reason %q; want the operator's drain kept", n.state, n.reason)
		}
		if n := aws.CallCount(awsfake.OpSetInstanceHealth, ""); n != calls {
			t.Errorf("SetInstanceHealth sent for a node the operator holds (%d calls, was %d)", n, calls)
		}
		if rep := h.fullReport(t); rep.Replacement == nil || rep.Replacement.Status != report.ReplacementOperatorHold || !strings.Contains(rep.Replacement.Message, msg) {
			t.Errorf("replacement: %+v", rep.Replacement)
		}
		if tf := h.readFile(nodeconf.DefaultTextfile); !strings.Contains(tf, `dlami_node_check_replacement_requested{engine="asg",state="operator-hold"} 0`) {
			t.Errorf("textfile:\n%s", grepLines(tf, "replacement"))
		}
	})

	t.Run("a running job: drained, replacement deferred until the node is idle", func(t *testing.T) {
		job := strings.TrimSpace(h.must("/usr/bin/sbatch", "--parsable", "-w", hostNode, "-o", "/dev/null", "--wrap", "exec /bin/sleep 600"))
		defer h.must("/usr/bin/scontrol", "update", "nodename="+hostNode, "state=resume")
		h.waitState(t, hostNode, func(st string) bool { return strings.HasPrefix(st, "ALLOCATED") || strings.HasPrefix(st, "MIXED") })
		r := h.nodeCheck(t, env, nodeconf.BinaryPath, "--mode", string(nodeconf.ModeBoot), "--config", nodeconf.ConfigPath)
		deferred := "replacement deferred until the node's jobs end; a later run requests it"
		if r.code != 1 || !strings.Contains(r.stdout, deferred) {
			t.Errorf("boot unit with a job running: %s", r)
		}
		n := h.node(hostNode)
		if !n.drained() || n.reason != "dlami: xid" || !strings.Contains(n.state, "ALLOCATED") && !strings.Contains(n.state, "MIXED") {
			t.Errorf("Slurm: state %s, reason %q; want DRAINING (a job and DRAIN) with \"dlami: xid\"", n.state, n.reason)
		}
		if in, _ := aws.AutoScalingInstance(pipeRegion, pipeInstance); len(in.HealthCalls) != 0 {
			t.Errorf("SetInstanceHealth sent while a job runs: %+v", in.HealthCalls)
		}
		if rep := h.fullReport(t); rep.Replacement == nil || rep.Replacement.Status != report.ReplacementDeferred || !strings.Contains(rep.Replacement.Message, deferred) {
			t.Errorf("replacement: %+v", rep.Replacement)
		}
		if tf := h.readFile(nodeconf.DefaultTextfile); !strings.Contains(tf, `dlami_node_check_replacement_requested{engine="asg",state="deferred"} 0`) {
			t.Errorf("textfile:\n%s", grepLines(tf, "replacement"))
		}
		// The job ends; once Slurm shows the node DRAINED (idle, nothing completing), the next
		// run sends the request.
		h.must("/usr/bin/scancel", job)
		h.waitState(t, hostNode, func(st string) bool { return st == "IDLE+DRAIN" })
		r = h.nodeCheck(t, env, nodeconf.BinaryPath, "--mode", string(nodeconf.ModeBoot), "--config", nodeconf.ConfigPath)
		if in, _ := aws.AutoScalingInstance(pipeRegion, pipeInstance); len(in.HealthCalls) != 1 || in.HealthCalls[0].HealthStatus != "Unhealthy" {
			t.Errorf("after the job: SetInstanceHealth %+v\n%s", in.HealthCalls, r)
		}
		if rep := h.fullReport(t); rep.Replacement == nil || !rep.Replacement.Requested || rep.Replacement.Status != report.ReplacementRequested {
			t.Errorf("replacement after the job: %+v", rep.Replacement)
		}
		aws.PutAutoScalingGroup(pipeRegion, pipeGroup, pipeInstance)
	})

	t.Run("upload refused: still isolated, failure reported", func(t *testing.T) {
		aws.SetFault(awsfake.OpPutObject, "", awsfake.Fault{AccessDenied: true})
		defer aws.SetFault(awsfake.OpPutObject, "", awsfake.Fault{})
		h.knob("gpu-count", "7") // a new failure (gpu, xid): a new bundle
		defer h.knob("gpu-count", "")
		keys := len(aws.ObjectKeys(pipeBucket))
		// As slurmd runs the HealthCheckProgram, with the fake's endpoint added.
		r := h.nodeCheck(t, append(env, "SLURMD_NODENAME="+hostNode), "--mode", string(nodeconf.ModeSlurm), "--config", nodeconf.ConfigPath)
		if r.code != 0 || !strings.Contains(r.stderr, "evidence: could not upload the evidence bundle: s3:PutObject") {
			t.Errorf("exit %d (want 0: drained), notes:\n%s", r.code, r)
		}
		// 7 of 8 GPUs also fail gpu-memory and nvlink, which the reason names in between.
		if n := h.node(hostNode); !n.drained() || !strings.HasPrefix(n.reason, "dlami: gpu,") || !strings.HasSuffix(n.reason, ",xid") {
			t.Errorf("Slurm: state %s, reason %q; want drained with \"dlami: gpu,...,xid\"", n.state, n.reason)
		}
		rep := h.fullReport(t)
		if e := rep.Evidence; e == nil || e.Path == "" || e.Uploaded != "" || !strings.Contains(strings.Join(e.Problems, "\n"), "AccessDenied") {
			t.Errorf("evidence: %+v", e)
		}
		if n := len(aws.ObjectKeys(pipeBucket)); n != keys {
			t.Errorf("objects: %d, want %d", n, keys)
		}
		if tf := h.readFile(nodeconf.DefaultTextfile); !strings.Contains(tf, `dlami_node_check_evidence_ok{step="upload"} 0`) || !strings.Contains(tf, `dlami_node_check_evidence_ok{step="write"} 1`) {
			t.Errorf("textfile:\n%s", grepLines(tf, "evidence"))
		}
		if r := h.nodeCheck(t, env, "--mode", string(nodeconf.ModeReport), "--config", nodeconf.ConfigPath); r.code != 1 {
			t.Errorf("report mode: %s", r)
		}
	})
}

// waitState waits (bounded) until Slurm shows node in a state ok accepts.
func (h *host) waitState(t *testing.T, node string, ok func(state string) bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		st := h.node(node).state
		if ok(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Slurm node %s stayed %s", node, st)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// startAWS serves the fake AWS on the host's loopback and the IMDSv2 stand-in on
// 169.254.169.254:80, both inside the host's network namespace (their sockets are made there;
// this process serves them), until the test ends. It returns the AWS endpoint.
func (h *host) startAWS(t *testing.T) (*awsfake.Server, *imdsfake.Server, string) {
	t.Helper()
	h.daemonsNoChroot(t, "/usr/sbin/ip", "addr", "add", imdsAddr+"/32", "dev", "lo")
	aws := awsfake.New()
	aws.CreateBucket(pipeRegion, pipeBucket)
	aws.PutAutoScalingGroup(pipeRegion, pipeGroup, pipeInstance)
	md := imdsfake.New(imdsfake.Instance{InstanceID: pipeInstance, InstanceType: "p6-b200.48xlarge", AvailabilityZone: pipeRegion + "a",
		Region: pipeRegion, ImageID: "ami-0golden0000000017", AccountID: awsfake.DefaultAccount, Role: "gpu-node",
		AccessKeyID: "ASIAPIPELINEROLE0001", SecretAccessKey: "fakePipelineRoleSecret000000000000000000"})
	awsL := h.listen(t, "127.0.0.1:0")
	mdL := h.listen(t, imdsAddr+":80")
	serve := func(l net.Listener, handler http.Handler) {
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	serve(awsL, aws)
	serve(mdL, md)
	return aws, md, "http://" + awsL.Addr().String()
}

// listen makes a TCP listener inside the host's network namespace: a thread of this process
// enters the namespace (setns), makes the socket, which stays in that namespace, and goes back.
// A thread that cannot go back is never reused (it ends with its goroutine, locked).
func (h *host) listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	type res struct {
		l   net.Listener
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- res{nil, err}
			return
		}
		defer self.Close()
		target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", h.pid))
		if err != nil {
			ch <- res{nil, err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- res{nil, fmt.Errorf("setns into the host's network namespace: %w", err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- res{l, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listening on %s in the host's namespace: %v", addr, r.err)
	}
	return r.l
}

// daemonsNoChroot runs argv in the host's namespaces (not chrooted) and fails the test unless
// it exits 0.
func (h *host) daemonsNoChroot(t *testing.T, argv ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := h.exec(ctx, false, nil, "", argv...)
	if err != nil || r.code != 0 {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, r)
	}
}

// nodeCheck runs the installed binary on the host (chrooted) with exactly env, as slurmd or
// systemd would; argv may start with the binary's path or with its first flag.
func (h *host) nodeCheck(t *testing.T, env []string, argv ...string) result {
	t.Helper()
	if !strings.HasPrefix(argv[0], "/") {
		argv = append([]string{nodeconf.BinaryPath}, argv...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := h.exec(ctx, true, env, "", argv...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, r)
	}
	return r
}

// kernelLog logs lines into the host's kernel log, as the simulation's kernel does (dmesg's
// ring buffer and journald's copy).
func (h *host) kernelLog(t *testing.T, lines ...string) {
	t.Helper()
	args := []string{"/bin/bash", "-c", `. /usr/lib/dlami-sim/sim.sh && kmsg_append "$@"`, "kmsg_append"}
	h.must(append(args, lines...)...)
}

// fullReport reads the node check's last report whole.
func (h *host) fullReport(t *testing.T) report.Report {
	t.Helper()
	var r report.Report
	if err := json.Unmarshal([]byte(h.readFile(filepath.Join(nodeconf.DefaultOutDir, report.JSONFile))), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// drainTime is when the node's reason was set, as scontrol shows it ("[root@2026-12-01T...]").
func (h *host) drainTime(t *testing.T, node string) time.Time {
	t.Helper()
	out := h.must("/usr/bin/scontrol", "-o", "show", "node", node)
	i := strings.Index(out, " [root@")
	if i < 0 {
		t.Fatalf("no reason time in %s", out)
	}
	at, _, _ := strings.Cut(out[i+len(" [root@"):], "]")
	// slurmctld prints the host's local time: read its offset there.
	offset := strings.TrimSpace(h.must("/bin/date", "+%z"))
	ts, err := time.Parse("2006-01-02T15:04:05-0700", at+offset)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func bundleMembers(t *testing.T, data []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(strings.NewReader(string(data)))
	if err != nil {
		t.Fatalf("not a gzipped bundle: %v", err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		hd, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if strings.HasSuffix(hd.Name, ".gz") {
			// The bug report: read it through, so its content counts.
			if zr, err := gzip.NewReader(strings.NewReader(string(b))); err == nil {
				if plain, err := io.ReadAll(zr); err == nil {
					b = plain
				}
			}
		}
		out[hd.Name] = string(b)
	}
}

func manifestOf(t *testing.T, m map[string]string) evidence.Manifest {
	t.Helper()
	var man evidence.Manifest
	if err := json.Unmarshal([]byte(m[evidence.ManifestName]), &man); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	return man
}

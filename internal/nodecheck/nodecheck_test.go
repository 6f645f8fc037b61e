package nodecheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// fakeNode is a node as the probe sees it, answering by section name: the healthy p6-b200
// host sections (the probe's own fixture), a dpkg database and kernels for the guard, and the
// job units' memlock. Programs (scontrol, the NCCL script) are recorded and answered by hook.
type fakeNode struct {
	mu       sync.Mutex
	t        *testing.T
	host     map[string]section
	running  string
	pkgs     map[string]pkg
	units    map[string]string // unit -> LimitMEMLOCK ("" = not installed)
	docker   string            // daemon.json, "" = absent
	hangOn   string            // a section whose command never ends (until ctx does)
	commands [][]string
	// shells are the probe commands' shells by section name, as last asked.
	shells map[string]string
	// scontrol answers scontrol calls.
	scontrol func(argv []string) (string, int)
	ncclOut  string
	hostname string
	// jobs are the scripts the run ran, by file name; dcgmOut is what the DCGM script prints.
	jobs    []string
	dcgmOut string
	// tools answer other programs by absolute path (the evidence's nvidia-smi -q, bug
	// report, dcgmi); a program not here exits 127.
	tools map[string]func(argv []string) (string, int, error)
	// slurm is the fleet tests' stateful controller (withTools sets it up); nil elsewhere.
	slurm *slurmCtl
	// ctxTools are tools that see the run's bound (a tool that hangs until it is stopped).
	ctxTools map[string]func(ctx context.Context, argv []string) (string, int, error)
}

type section struct {
	out  string
	code int
}

type pkg struct {
	version string
	held    bool
}

func newNode(t *testing.T) *fakeNode {
	n := &fakeNode{
		t: t, host: loadSections(t, "../probe/testdata/host/p6-b200-healthy.sections"), running: "7.0.0-1014-aws",
		pkgs: map[string]pkg{
			"linux-image-7.0.0-1014-aws":   {"7.0.0-1014.14", true},
			"linux-modules-7.0.0-1014-aws": {"7.0.0-1014.14", true},
			"linux-aws":                    {"7.0.0.1014.14", true},
			"nvidia-dkms-open":             {"595.91.07-0ubuntu1", true},
			"nvidia-fabricmanager":         {"595.91.07-1", false},
			"libnvidia-compute":            {"595.91.07-0ubuntu1", false},
			"efa":                          {"3.3.0-1.amzn1", true},
		},
		units:    map[string]string{"slurmd.service": "infinity"},
		hostname: "ip-10-1-42-17.ec2.internal",
		scontrol: idleSlurmNode,
	}
	nccl, err := os.ReadFile("../parse/nccltests/testdata/synthetic-p6b200-1node-ok.txt")
	if err != nil {
		t.Fatal(err)
	}
	n.ncclOut = string(nccl)
	return n
}

func loadSections(t *testing.T, path string) map[string]section {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]section{}
	var name string
	var cur section
	var body []string
	flush := func() {
		if name != "" {
			cur.out = strings.Join(body, "\n")
			out[name] = cur
		}
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "=== "); ok {
			flush()
			f := strings.Fields(rest)
			name, body, cur = f[0], nil, section{}
			if len(f) > 1 {
				cur.code, _ = strconv.Atoi(strings.TrimPrefix(f[1], "exit="))
			}
			continue
		}
		body = append(body, line)
	}
	flush()
	return out
}

// bom is the bill of materials the node was baked with: the packages as newNode has them.
func (n *fakeNode) bom() []byte {
	doc := bom.BOM{
		BuildName: "golden", PluginVersion: "0.1.0", InstanceType: "p6-b200.48xlarge",
		Kernel: "7.0.0-1014-aws", NextBootKernel: "7.0.0-1014-aws", Guarded: map[string]bom.Package{},
		GuardPolicy: &settings.GuardPolicy{}, Checks: &settings.Checks{Expect: settings.Expectations{Kernel: "7.0.0-1014-aws", NvidiaDriver: "595.91.07"}},
	}
	for name, p := range n.pkgs {
		doc.Guarded[name] = bom.Package{Version: p.version, Held: p.held}
	}
	b, err := doc.Encode()
	if err != nil {
		n.t.Fatal(err)
	}
	return b
}

func (n *fakeNode) answer(name string) section {
	switch {
	case name == "guard.uname":
		return section{out: n.running}
	case name == "guard.grubenv" || name == "guard.grubcfg" || name == "guard.dkms":
		return section{out: "@dlami-guard absent"}
	case name == "guard.vmlinuz":
		return section{out: "/boot/vmlinuz-" + n.running}
	case name == "guard.dpkg":
		names := make([]string, 0, len(n.pkgs))
		for p := range n.pkgs {
			names = append(names, p)
		}
		sort.Strings(names)
		var b strings.Builder
		for _, p := range names {
			flag := "ii "
			if n.pkgs[p].held {
				flag = "hi "
			}
			fmt.Fprintf(&b, "%s\t%s\t%s\tamd64\n", flag, p, n.pkgs[p].version)
		}
		return section{out: b.String()}
	case strings.HasPrefix(name, "guard.modinfo."):
		m := strings.TrimPrefix(name, "guard.modinfo.")
		switch m {
		case "efa":
			return section{out: "3.3.0g"}
		case "nvidia":
			return section{out: "595.91.07"}
		}
		return section{out: "modinfo: ERROR: Module " + m + " not found.", code: 1}
	case name == "node.unit_memlock":
		var b strings.Builder
		for _, u := range []string{"slurmd.service", "containerd.service", "docker.service"} {
			if lim, ok := n.units[u]; ok {
				fmt.Fprintf(&b, "Id=%s\nLoadState=loaded\nLimitMEMLOCK=%s\n\n", u, lim)
			} else {
				fmt.Fprintf(&b, "Id=%s\nLoadState=not-found\nLimitMEMLOCK=8388608\n\n", u)
			}
		}
		return section{out: b.String()}
	case name == "node.docker_daemon_json":
		if n.docker == "" {
			return section{out: "@@absent"}
		}
		return section{out: "@@present\n" + n.docker}
	case name == "node.containerd_runtime_spec":
		return section{out: "@@absent"}
	}
	if s, ok := n.host[name]; ok {
		return s
	}
	if name == "site.list" {
		return section{}
	}
	return section{out: "sh: command not found", code: 127}
}

// Query implements probe.Runner.
func (n *fakeNode) Query(ctx context.Context, cmds []bundle.Command) (map[string]bundle.Section, error) {
	out := map[string]bundle.Section{}
	for _, c := range cmds {
		if c.Name == n.hangOn {
			<-ctx.Done()
			return nil, fmt.Errorf("the command bundle did not finish in time: %w", ctx.Err())
		}
		n.mu.Lock()
		s := n.answer(c.Name)
		if n.shells == nil {
			n.shells = map[string]string{}
		}
		n.shells[c.Name] = c.Shell
		n.mu.Unlock()
		out[c.Name] = bundle.Section{Name: c.Name, Output: strings.TrimRight(s.out, "\n"), ExitCode: s.code, TimedOut: bundle.TimedOut(s.code)}
	}
	return out, nil
}

func (n *fakeNode) command(ctx context.Context, argv []string, _ []string) (string, int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.commands = append(n.commands, argv)
	if argv[0] == nodeconf.DefaultScontrol {
		out, code := n.scontrol(argv)
		return out, code, nil
	}
	if h := n.ctxTools[argv[0]]; h != nil {
		return h(ctx, argv)
	}
	if h := n.tools[argv[0]]; h != nil {
		return h(argv)
	}
	return "", 127, nil
}

// Run implements host.Runner: the NCCL test prints ncclOut; jobs are recorded by script name.
func (n *fakeNode) Run(ctx context.Context, j host.Job) (int, error) {
	n.mu.Lock()
	n.jobs = append(n.jobs, path.Base(j.Script))
	out := ""
	switch path.Base(j.Script) {
	case "nccl.sh":
		out = n.ncclOut
	case "dcgm.sh":
		out = n.dcgmOut
	}
	n.mu.Unlock()
	if j.Output != nil {
		io.WriteString(j.Output, out)
	}
	return 0, ctx.Err()
}

func (n *fakeNode) Kill(context.Context, host.Job) error    { return nil }
func (n *fakeNode) MakeDir(context.Context, string) error   { return nil }
func (n *fakeNode) RemoveAll(context.Context, string) error { return nil }
func (n *fakeNode) Hold(context.Context, []string) error {
	return errors.New("a node check holds nothing")
}
func (n *fakeNode) BootID(context.Context) (string, error)          { return "boot-1", nil }
func (n *fakeNode) Reboot(context.Context) error                    { return errors.New("a node check reboots nothing") }
func (n *fakeNode) Reconnect(context.Context) error                 { return nil }
func (n *fakeNode) Upload(context.Context, string, io.Reader) error { return nil }
func (n *fakeNode) Install(context.Context, []byte, string, fs.FileMode) error {
	return errors.New("a node check installs nothing")
}
func (n *fakeNode) ReadFile(context.Context, string) ([]byte, error) { return nil, fs.ErrNotExist }
func (n *fakeNode) MakeTempDir(_ context.Context, parent, prefix string) (string, error) {
	return parent + "/" + prefix + ".test", nil
}

func (n *fakeNode) env(bomData []byte) Env {
	return Env{
		Host: n, Command: n.command, Now: time.Now,
		ReadFile: func(path string) ([]byte, error) {
			if path == bom.DefaultPath && bomData != nil {
				return bomData, nil
			}
			return nil, fs.ErrNotExist
		},
		Hostname: func() (string, error) { return n.hostname, nil },
	}
}

func (n *fakeNode) scontrolCalls() [][]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out [][]string
	for _, c := range n.commands {
		if c[0] == nodeconf.DefaultScontrol {
			out = append(out, c)
		}
	}
	return out
}

func options(t *testing.T, mode nodeconf.Mode, action nodeconf.Action) Options {
	dir := t.TempDir()
	return Options{
		Mode: mode, Version: "0.1.0-test",
		Config: nodeconf.Config{
			Action: action, BOMPath: bom.DefaultPath, OutDir: filepath.Join(dir, "out"),
			Textfile: filepath.Join(dir, "textfile", "dlami_node_check.prom"), Timeout: time.Minute,
			CheckTimeout: 10 * time.Second, Scontrol: nodeconf.DefaultScontrol,
			Evidence: nodeconf.Evidence{Dir: filepath.Join(dir, "evidence")},
		}.Resolved(),
	}
}

// dropGPU makes nvidia-smi list 7 of the 8 GPUs on the PCI bus.
func (n *fakeNode) dropGPU() {
	s := n.host["host.nvidia_smi"]
	lines := strings.Split(strings.TrimRight(s.out, "\n"), "\n")
	s.out = strings.Join(lines[:len(lines)-1], "\n")
	n.host["host.nvidia_smi"] = s
}

// dropEFA makes the node one whose launch attached no EFA interface: no EFA function on the
// PCI bus, no rdmap device, no EFA counters, and fi_info finding no EFA provider (what the
// real fi_info prints then: fi_getinfo -61).
func (n *fakeNode) dropEFA() {
	keep := func(name string, drop func(line string) bool) {
		s := n.host[name]
		var lines []string
		for _, l := range strings.Split(s.out, "\n") {
			if !drop(l) {
				lines = append(lines, l)
			}
		}
		s.out = strings.Join(lines, "\n")
		n.host[name] = s
	}
	keep("host.pci", func(l string) bool { return strings.Contains(l, " 0x1d0f 0xefa") })
	keep("host.infiniband", func(l string) bool { return strings.HasPrefix(l, "rdmap") })
	keep("host.rdma_statistic", func(l string) bool { return strings.Contains(l, "rdmap") })
	n.host["host.fi_info"] = section{out: "fi_getinfo: -61 (No data available)", code: 1}
}

func status(t *testing.T, o Outcome, id string) result.Status {
	t.Helper()
	c, ok := result.Find(o.Report.Checks, id)
	if !ok {
		t.Fatalf("no check %s in %v", id, o.Report.FailedChecks)
	}
	return c.Status
}

func TestHealthyBoot(t *testing.T) {
	n := newNode(t)
	o := options(t, nodeconf.ModeBoot, nodeconf.ActionBlock)
	out := Run(context.Background(), n.env(n.bom()), o)
	if out.Exit != 0 || out.Failed() {
		t.Fatalf("healthy node: exit %d, failed %v: %s", out.Exit, out.Report.FailedChecks, out.Line)
	}
	if !strings.HasPrefix(out.Line, "dlami-node-check: PASS") || strings.Contains(out.Line, "\n") || !strings.Contains(out.Line, "image build golden") {
		t.Errorf("line %q", out.Line)
	}
	for _, id := range checks.IDs(checks.PhaseFirstBoot, checks.PhaseHost) {
		if st := status(t, out, id); st.Failing() {
			t.Errorf("%s = %s", id, st)
		}
	}
	for _, id := range checks.IDs(checks.PhaseLoad) {
		if st := status(t, out, id); st != result.Skip {
			t.Errorf("%s = %s, want skip (NCCL is off at boot by default)", id, st)
		}
	}
	if status(t, out, result.JobMemlock) != result.Pass {
		t.Errorf("job-memlock should pass: slurmd has LimitMEMLOCK=infinity")
	}
	var rep report.Report
	data, err := os.ReadFile(filepath.Join(o.OutDir, report.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil || rep.Result != "pass" || rep.BuildName != "golden" {
		t.Errorf("report on disk: %v, result %q build %q", err, rep.Result, rep.BuildName)
	}
	if _, err := os.Stat(filepath.Join(o.OutDir, report.MarkdownFile)); err != nil {
		t.Error(err)
	}
	prom, err := os.ReadFile(o.Textfile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`dlami_node_check{check="gpu",status="pass"} 1`,
		`dlami_node_check{check="nccl-busbw",status="skip"} 1`,
		`dlami_node_check_info{build="golden",plugin_version="0.1.0-test",result="pass"} 1`,
		"# TYPE dlami_node_check gauge",
	} {
		if !strings.Contains(string(prom), want) {
			t.Errorf("textfile lacks %q:\n%s", want, prom)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(o.Textfile), ".*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left beside the textfile: %v", left)
	}
	if len(n.scontrolCalls()) != 0 {
		t.Errorf("a healthy boot called scontrol: %v", n.scontrolCalls())
	}
}

func TestGPUMissingBlock(t *testing.T) {
	n := newNode(t)
	n.dropGPU()
	out := Run(context.Background(), n.env(n.bom()), options(t, nodeconf.ModeBoot, nodeconf.ActionBlock))
	if out.Exit != 1 || status(t, out, result.GPU) != result.Fail {
		t.Fatalf("exit %d, gpu %s", out.Exit, status(t, out, result.GPU))
	}
	if !strings.HasPrefix(out.Line, "dlami-node-check: FAIL gpu") {
		t.Errorf("line %q does not name gpu first", out.Line)
	}
	if len(n.scontrolCalls()) != 0 {
		t.Errorf("block drained: %v", n.scontrolCalls())
	}
}

// A fleet node is launched by its fleet's own launch template, which can attach EFA: on an
// EFA-capable type (p6-b200) a node without EFA fails efa-devices, naming the launch template's
// EFA network interfaces and how a fleet without EFA says so; nothing says the devices are
// proven elsewhere. With expect.efa_count = -1 in the bake (a fleet that runs without EFA) the
// node passes with efa-devices warning.
func TestFleetNodeWithoutEFA(t *testing.T) {
	n := newNode(t)
	n.dropEFA()
	out := Run(context.Background(), n.env(n.bom()), options(t, nodeconf.ModeBoot, nodeconf.ActionBlock))
	c, _ := result.Find(out.Report.Checks, result.EFADevices)
	if out.Exit != 1 || c.Status != result.Fail {
		t.Fatalf("exit %d, efa-devices %s %q: %s", out.Exit, c.Status, c.Message, out.Line)
	}
	for _, want := range []string{"launch template", "InterfaceType efa", "expect.efa_count = -1", `skip_checks = ["efa-devices"]`} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("efa-devices %q lacks %q", c.Message, want)
		}
	}
	for _, c := range out.Report.Checks {
		if strings.Contains(c.Message, "post-processor") {
			t.Errorf("%s points at the post-processor on a fleet node: %q", c.ID, c.Message)
		}
	}
	if !strings.Contains(out.Line, "FAIL") || !strings.Contains(out.Line, result.EFADevices) {
		t.Errorf("line %q does not fail efa-devices", out.Line)
	}

	// A fleet that runs without EFA says so in the bake's expect block.
	n = newNode(t)
	n.dropEFA()
	var doc bom.BOM
	doc, err := bom.Decode(n.bom())
	if err != nil {
		t.Fatal(err)
	}
	doc.Checks.Expect.EFACount = -1
	data, err := doc.Encode()
	if err != nil {
		t.Fatal(err)
	}
	out = Run(context.Background(), n.env(data), options(t, nodeconf.ModeBoot, nodeconf.ActionBlock))
	if c, _ := result.Find(out.Report.Checks, result.EFADevices); out.Exit != 0 || c.Status != result.Warn {
		t.Errorf("expect.efa_count = -1: exit %d, efa-devices %s %q, failed %v", out.Exit, c.Status, c.Message, out.Report.FailedChecks)
	}
}

func TestGPUMissingDrain(t *testing.T) {
	n := newNode(t)
	n.dropGPU()
	out := Run(context.Background(), n.env(n.bom()), options(t, nodeconf.ModeBoot, nodeconf.ActionDrain))
	if out.Exit != 1 {
		t.Errorf("exit %d, want 1 (the unit fails; with action drain nothing requires it)", out.Exit)
	}
	calls := n.scontrolCalls()
	want := []string{nodeconf.DefaultScontrol, "update", "nodename=ip-10-1-42-17", "state=drain", "reason=dlami: gpu"}
	if len(calls) != 2 || strings.Join(calls[1], "|") != strings.Join(want, "|") {
		t.Fatalf("scontrol calls %q, want %q", calls, want)
	}
	if !strings.Contains(strings.Join(out.Notes, "\n"), `drained Slurm node ip-10-1-42-17`) {
		t.Errorf("notes %q", out.Notes)
	}
}

func TestDrainFailureIsReported(t *testing.T) {
	n := newNode(t)
	n.dropGPU()
	n.scontrol = func(argv []string) (string, int) {
		if argv[1] == "-o" {
			return idleSlurmNode(argv)
		}
		return "slurm_update error: Unable to contact slurm controller", 1
	}
	out := Run(context.Background(), n.env(n.bom()), options(t, nodeconf.ModeBoot, nodeconf.ActionDrain))
	if out.Exit != 1 || !strings.Contains(strings.Join(out.Notes, "\n"), "could not drain the node in Slurm: /usr/bin/scontrol exited 1: slurm_update error") {
		t.Errorf("exit %d notes %q", out.Exit, out.Notes)
	}
}

func TestReportModeNeverActs(t *testing.T) {
	n := newNode(t)
	n.dropGPU()
	out := Run(context.Background(), n.env(n.bom()), options(t, nodeconf.ModeReport, nodeconf.ActionDrain))
	if out.Exit != 1 || len(n.scontrolCalls()) != 0 {
		t.Errorf("report mode: exit %d, scontrol %v", out.Exit, n.scontrolCalls())
	}
}

func TestPackageDrift(t *testing.T) {
	n := newNode(t)
	baked := n.bom()
	// apt-get -y upgrade after boot: Fabric Manager moves (it depends on nothing of the driver).
	n.pkgs["nvidia-fabricmanager"] = pkg{"595.99.01-1", false}
	out := Run(context.Background(), n.env(baked), options(t, nodeconf.ModeReport, nodeconf.ActionBlock))
	c, _ := result.Find(out.Report.Checks, result.FirstBootPackages)
	if c.Status != result.Fail || !strings.Contains(c.Message+c.Evidence, "nvidia-fabricmanager: 595.91.07-1 → 595.99.01-1") {
		t.Fatalf("first-boot-packages %s: %s / %s", c.Status, c.Message, c.Evidence)
	}
	if strings.Contains(c.Message, "at first boot") {
		t.Errorf("message still speaks of the first boot: %s", c.Message)
	}
	if status(t, out, result.FirstBootKernel) != result.Pass {
		t.Errorf("kernel check: %s", status(t, out, result.FirstBootKernel))
	}
}

func TestKernelDrift(t *testing.T) {
	n := newNode(t)
	baked := n.bom()
	n.running = "7.0.0-1015-aws"
	out := Run(context.Background(), n.env(baked), options(t, nodeconf.ModeReport, nodeconf.ActionBlock))
	if status(t, out, result.FirstBootKernel) != result.Fail {
		t.Errorf("running another kernel passed")
	}
}

func TestNoBOMFailsClosed(t *testing.T) {
	n := newNode(t)
	out := Run(context.Background(), n.env(nil), options(t, nodeconf.ModeBoot, nodeconf.ActionBlock))
	if out.Exit != 1 || status(t, out, "stage:bill-of-materials") != result.Fail || status(t, out, result.FirstBootPackages) != result.Fail {
		t.Errorf("no BOM: exit %d, failed %v", out.Exit, out.Report.FailedChecks)
	}
}

func TestCorruptBOMFailsClosed(t *testing.T) {
	n := newNode(t)
	out := Run(context.Background(), n.env([]byte(`{"schema_version": 3`)), options(t, nodeconf.ModeBoot, nodeconf.ActionBlock))
	c, _ := result.Find(out.Report.Checks, "stage:bill-of-materials")
	if out.Exit != 1 || c.Status != result.Fail || !strings.Contains(c.Message, bom.DefaultPath) {
		t.Errorf("corrupt BOM: exit %d, %+v", out.Exit, c)
	}
}

func TestHangFailsWithinTheBound(t *testing.T) {
	n := newNode(t)
	n.hangOn = "host.nvidia_smi"
	o := options(t, nodeconf.ModeBoot, nodeconf.ActionBlock)
	o.Timeout = 300 * time.Millisecond
	start := time.Now()
	out := Run(context.Background(), n.env(n.bom()), o)
	took := time.Since(start)
	if took > 5*time.Second {
		t.Errorf("a hung tool held the check for %s (timeout %s)", took, o.Timeout)
	}
	if out.Exit != 1 || status(t, out, result.GPU) != result.Fail || status(t, out, result.JobMemlock) != result.Fail {
		t.Fatalf("exit %d, failed %v", out.Exit, out.Report.FailedChecks)
	}
	c, _ := result.Find(out.Report.Checks, result.GPU)
	if !strings.Contains(c.Message, "did not finish within its timeout (--timeout 300ms)") {
		t.Errorf("gpu message %q", c.Message)
	}
	// The reports are still written when the bound ran out.
	if _, err := os.Stat(filepath.Join(o.OutDir, report.JSONFile)); err != nil {
		t.Error(err)
	}
}

func TestHangInDrainModeStillDrains(t *testing.T) {
	n := newNode(t)
	n.hangOn = "host.nvidia_smi"
	o := options(t, nodeconf.ModeBoot, nodeconf.ActionDrain)
	o.Timeout = 200 * time.Millisecond
	Run(context.Background(), n.env(n.bom()), o)
	calls := n.scontrolCalls()
	if len(calls) != 2 || !strings.Contains(calls[1][4], "gpu") {
		t.Errorf("scontrol calls after a timeout: %q", calls)
	}
}

func TestNPD(t *testing.T) {
	n := newNode(t)
	ok := Run(context.Background(), n.env(n.bom()), options(t, nodeconf.ModeNPD, nodeconf.ActionBlock))
	if ok.Exit != nodeconf.NPDOK || len(ok.Line) > nodeconf.NPDMaxMessage || strings.Contains(ok.Line, "\n") {
		t.Errorf("healthy: exit %d line %q", ok.Exit, ok.Line)
	}
	n.dropGPU()
	n.pkgs["nvidia-fabricmanager"] = pkg{"595.99.01-1", false}
	bad := Run(context.Background(), n.env(newNode(t).bom()), options(t, nodeconf.ModeNPD, nodeconf.ActionDrain))
	if bad.Exit != nodeconf.NPDProblem || len(bad.Line) > nodeconf.NPDMaxMessage || !strings.Contains(bad.Line, "gpu") || strings.Contains(bad.Line, "\n") {
		t.Errorf("problem: exit %d line %q", bad.Exit, bad.Line)
	}
	if len(n.scontrolCalls()) != 0 {
		t.Errorf("npd mode drained")
	}
}

func TestSlurmMode(t *testing.T) {
	t.Run("fail drains and exits 0", func(t *testing.T) {
		n := newNode(t)
		n.dropGPU()
		out := Run(context.Background(), n.env(n.bom()), options(t, nodeconf.ModeSlurm, nodeconf.ActionReport))
		if out.Exit != 0 || len(n.scontrolCalls()) != 2 || n.scontrolCalls()[1][3] != "state=drain" {
			t.Errorf("exit %d calls %q", out.Exit, n.scontrolCalls())
		}
	})
	t.Run("fail without a drain exits 1", func(t *testing.T) {
		n := newNode(t)
		n.dropGPU()
		n.scontrol = func([]string) (string, int) { return "no controller", 1 }
		if out := Run(context.Background(), n.env(n.bom()), options(t, nodeconf.ModeSlurm, nodeconf.ActionReport)); out.Exit != 1 {
			t.Errorf("exit %d", out.Exit)
		}
	})
	t.Run("pass resumes what it drained", func(t *testing.T) {
		n := newNode(t)
		n.scontrol = func(argv []string) (string, int) {
			if argv[1] == "-o" {
				return "NodeName=ip-10-1-42-17 Arch=x86_64 CoresPerSocket=48 State=IDLE+DRAIN ThreadsPerCore=2 Reason=dlami-node-check: gpu [root@2026-10-05T12:00:00]", 0
			}
			return "", 0
		}
		out := Run(context.Background(), n.env(n.bom()), options(t, nodeconf.ModeSlurm, nodeconf.ActionReport))
		calls := n.scontrolCalls()
		if out.Exit != 0 || len(calls) != 2 || strings.Join(calls[1], " ") != nodeconf.DefaultScontrol+" update nodename=ip-10-1-42-17 state=resume" {
			t.Errorf("exit %d calls %q", out.Exit, calls)
		}
	})
	t.Run("pass leaves an administrator's drain", func(t *testing.T) {
		n := newNode(t)
		n.scontrol = func(argv []string) (string, int) {
			return "NodeName=ip-10-1-42-17 State=IDLE+DRAIN Reason=maintenance window [admin@2026-10-05T12:00:00]", 0
		}
		Run(context.Background(), n.env(n.bom()), options(t, nodeconf.ModeSlurm, nodeconf.ActionReport))
		if calls := n.scontrolCalls(); len(calls) != 1 {
			t.Errorf("calls %q: an administrator's drain was resumed", calls)
		}
	})
}

func TestJobMemlock(t *testing.T) {
	cases := []struct {
		name   string
		units  map[string]string
		docker string
		want   result.Status
		msg    string
	}{
		{"slurmd limited", map[string]string{"slurmd.service": "8388608"}, "", result.Fail, "slurmd.service has LimitMEMLOCK 8192 KiB"},
		{"no job unit", map[string]string{}, "", result.Warn, "not judged"},
		{"docker default limited", map[string]string{"docker.service": "infinity"}, `{"default-ulimits": {"memlock": {"Name": "memlock", "Soft": 65536, "Hard": 65536}}}`, result.Fail, "docker's default for containers"},
		{"docker default unlimited", map[string]string{"docker.service": "infinity", "containerd.service": "infinity"}, `{"default-ulimits": {"memlock": {"Name": "memlock", "Soft": -1, "Hard": -1}}}`, result.Pass, ""},
		{"daemon.json unreadable", map[string]string{"docker.service": "infinity"}, `{"default-ulimits": `, result.Fail, "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := newNode(t)
			n.units, n.docker = c.units, c.docker
			out := Run(context.Background(), n.env(n.bom()), options(t, nodeconf.ModeReport, nodeconf.ActionBlock))
			got, _ := result.Find(out.Report.Checks, result.JobMemlock)
			if got.Status != c.want || !strings.Contains(got.Message, c.msg) {
				t.Errorf("job-memlock %s %q, want %s containing %q", got.Status, got.Message, c.want, c.msg)
			}
		})
	}
}

func TestNCCLOnDemand(t *testing.T) {
	n := newNode(t)
	o := options(t, nodeconf.ModeReport, nodeconf.ActionBlock)
	o.NCCL = true
	out := Run(context.Background(), n.env(n.bom()), o)
	for _, id := range []string{result.NCCLCorrectness, result.NCCLBusBW, result.NCCLTransport} {
		if st := status(t, out, id); st != result.Pass {
			t.Errorf("%s = %s", id, st)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !slices.Contains(n.jobs, "nccl.sh") {
		t.Errorf("the NCCL script was not run (jobs %q)", n.jobs)
	}
}

func TestValidate(t *testing.T) {
	o := options(t, "bogus", "explode")
	o.Textfile = "/var/lib/x.txt"
	err := o.Validate()
	for _, want := range []string{`--mode "bogus"`, `--action "explode"`, `--textfile "/var/lib/x.txt"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}
	if err := options(t, nodeconf.ModeBoot, nodeconf.ActionBlock).Validate(); err != nil {
		t.Error(err)
	}
}

func TestLabelEscaping(t *testing.T) {
	if got := label("a\"b\\c\nd"); got != `"a\"b\\c\nd"` {
		t.Errorf("label = %s", got)
	}
}

var _ = errors.New

// The node check runs as root, so it judges the memlock of the login user it is told (the
// bake's SSH user, from its config or --login-user), and warns, never passes, without one.
func TestNodeMemlockOfTheLoginUser(t *testing.T) {
	n := newNode(t)
	o := options(t, nodeconf.ModeReport, nodeconf.ActionReport)
	out := Run(context.Background(), n.env(n.bom()), o)
	c, _ := result.Find(out.Report.Checks, result.Memlock)
	if c.Status != result.Warn || !strings.Contains(c.Message, "--login-user") {
		t.Errorf("no login user: memlock %s: %s", c.Status, c.Message)
	}

	o.LoginUser = "ubuntu"
	out = Run(context.Background(), n.env(n.bom()), o)
	if st := status(t, out, result.Memlock); st != result.Pass {
		t.Errorf("login user ubuntu, 01_efa.conf: memlock %s", st)
	}
	if sh := n.shells["host.login_user"]; !strings.Contains(sh, "user='ubuntu'") {
		t.Errorf("the probe does not ask for ubuntu: %s", sh)
	}

	s := n.host["host.limits_files"]
	s.out += "\n==> /etc/security/limits.d/99-site.conf\n| ubuntu hard memlock 64"
	n.host["host.limits_files"] = s
	out = Run(context.Background(), n.env(n.bom()), o)
	c, _ = result.Find(out.Report.Checks, result.Memlock)
	if c.Status != result.Fail || !strings.Contains(c.Actual, "64 KiB for a new login of ubuntu") || out.Exit != 1 {
		t.Errorf("a limits file caps ubuntu at 64 KiB: memlock %s %q, exit %d", c.Status, c.Actual, out.Exit)
	}
}

// The function phase at boot is opt-in: off, DCGM's check is reported skipped naming the
// setting that turns it on; with --dcgm-level 1 the diagnostics run at that level, with the
// bake's settings otherwise, and are judged like a bake's.
func TestFunctionTestsOnDemand(t *testing.T) {
	n := newNode(t)
	doc, err := os.ReadFile("../parse/dcgmdiag/testdata/derived-dcgm4-r3-8xGPU-diagnostic-test-issue215.json")
	if err != nil {
		t.Fatal(err)
	}
	n.dcgmOut = string(doc) + "\n@@DLAMI-DCGM EXIT 0\n@@DLAMI-DCGM STDERR\n"
	off := Run(context.Background(), n.env(n.bom()), options(t, nodeconf.ModeReport, nodeconf.ActionBlock))
	if c, _ := result.Find(off.Report.Checks, result.DCGM); c.Status != result.Skip || !strings.Contains(c.Message, "--dcgm-level") {
		t.Errorf("dcgm off at boot: %s %q", c.Status, c.Message)
	}
	o := options(t, nodeconf.ModeReport, nodeconf.ActionBlock)
	o.DCGMLevel = 1
	on := Run(context.Background(), n.env(n.bom()), o)
	if c, _ := result.Find(on.Report.Checks, result.DCGM); c.Status != result.Pass || !strings.Contains(c.Expected, "dcgmi diag -r 1") {
		t.Errorf("dcgm at level 1: %s %q %q", c.Status, c.Expected, c.Message)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !slices.Contains(n.jobs, "dcgm.sh") {
		t.Errorf("the DCGM script was not run (jobs %q)", n.jobs)
	}
	if on.Exit != 0 {
		t.Errorf("exit %d: %v", on.Exit, on.Report.FailedChecks)
	}
}

// TestNPDLineStartsWithFailedIDs: node-problem-detector keeps max_output_length (80) bytes of
// the line as the condition's message, so the failed ids come first, before any prose.
func TestNPDLineStartsWithFailedIDs(t *testing.T) {
	n := newNode(t)
	baked := n.bom()
	n.dropGPU()
	n.pkgs["nvidia-fabricmanager"] = pkg{"595.99.01-1", false}
	out := Run(context.Background(), n.env(baked), options(t, nodeconf.ModeNPD, nodeconf.ActionBlock))
	want := strings.Join(out.Report.FailedChecks, ",")
	if !strings.HasPrefix(out.Line, want) || len(out.Line) > nodeconf.NPDMaxMessage {
		t.Errorf("NPD line %q, want it to start with %q", out.Line, want)
	}
}

// node_check.skip_checks and warn_checks (--skip-checks, --warn-checks) reach the node's
// verdict: a skipped check is reported skipped, naming the setting, never passed; a check
// that only warns does not fail the node, and says why.
func TestSkipAndWarnChecksReachTheNode(t *testing.T) {
	n := newNode(t)
	n.dropGPU()
	o := options(t, nodeconf.ModeBoot, nodeconf.ActionBlock)
	o.SkipChecks = []string{result.NvidiaDriver}
	o.WarnChecks = []string{result.GPU, result.GPUMemory, result.NVLink}
	out := Run(context.Background(), n.env(n.bom()), o)
	if c, _ := result.Find(out.Report.Checks, result.NvidiaDriver); c.Status != result.Skip || !strings.Contains(c.Message, "skip") {
		t.Errorf("nvidia-driver %s %q: want skipped, naming the setting that skipped it", c.Status, c.Message)
	}
	if c, _ := result.Find(out.Report.Checks, result.GPU); c.Status != result.Warn || !strings.Contains(c.Message, "warn") {
		t.Errorf("gpu %s %q on 7 of 8 GPUs: want a warning, naming the setting", c.Status, c.Message)
	}
	if out.Exit != 0 {
		t.Errorf("exit %d (%s): the only failures are the ones warn_checks names", out.Exit, out.Line)
	}
}

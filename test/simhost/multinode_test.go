package simhost_test

// The multi-node NCCL test of issue 26 through the simulated mpirun, orted and all_reduce_perf,
// outside any host: every node is a prefix tree of its own (newHost) and a stand-in rsh agent
// runs the remote daemon's command line in the node's tree, as ssh runs it on the node's host
// (test/simfleet's TestMultiNodeAllReduceOverSSH runs the same over real sshd). Each run's
// output goes through the plugin's parser, so the per-host facts the check judges are the ones
// the stand-ins print.

import (
	"bytes"
	"context"
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

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nccltests"
)

// mpiNode is one node of a run: the address the hostfile names it by, its host name and its
// prefix tree.
type mpiNode struct {
	addr, name string
	h          *host
}

func newMPINode(t *testing.T, addr, product string, knobs map[string]string) mpiNode {
	t.Helper()
	return mpiNode{addr: addr, name: "ip-" + strings.ReplaceAll(addr, ".", "-"), h: newHost(t, product, knobs)}
}

// allCards is the efa-cards knob of a launch that attached n EFA devices.
func allCards(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return strings.Join(s, ",")
}

type mpiRun struct {
	out      string // stdout and stderr, as the plugin reads them (2>&1)
	code     int
	agentLog string // one line per remote daemon start: the agent's arguments
	stalled  bool   // still running at the deadline; then killed as timeout(1) kills it (SIGTERM)
}

// runMPI runs the plugin's multi-node command on nodes[0] with the hostfile of every node (node
// 0 first) and waits up to wait. The rsh agent stands in for /usr/bin/ssh: it logs its
// arguments, then runs the command line in the tree of the host it names, or fails as ssh does
// for a host that is not in nodes.
func runMPI(t *testing.T, nodes []mpiNode, hostfileAddrs []string, wait time.Duration) mpiRun {
	t.Helper()
	return runMPIWith(t, nodes, hostfileAddrs, wait, 8)
}

// runMPIWith is runMPI with perNode ranks on each node and extra -x NAME=VALUE variables.
func runMPIWith(t *testing.T, nodes []mpiNode, hostfileAddrs []string, wait time.Duration, perNode int, extraEnv ...string) mpiRun {
	t.Helper()
	dir := nodes[0].h.dir
	tmp := t.TempDir()
	var agent strings.Builder
	agent.WriteString("#!/bin/bash\nprintf '%s\\n' \"$*\" >>\"$0.log\"\nhost=${*: -2:1} cmd=${*: -1}\ncase $host in\n")
	for _, n := range nodes[1:] {
		fmt.Fprintf(&agent, "%s) exec env DLAMI_SIM_PREFIX=%s HOSTNAME=%s bash -c \"$cmd\" ;;\n", n.addr, n.h.prefix, n.name)
	}
	agent.WriteString("*) echo \"ssh: connect to host $host port 22: Connection refused\" >&2; exit 255 ;;\nesac\n")
	agentPath := filepath.Join(tmp, "ssh")
	if err := os.WriteFile(agentPath, []byte(agent.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	var hf strings.Builder
	for _, a := range hostfileAddrs {
		fmt.Fprintf(&hf, "%s slots=8\n", a)
	}
	if err := os.WriteFile(filepath.Join(tmp, "hostfile"), []byte(hf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// The plugin's command (issue 26), with this checkout's paths for the stand-ins.
	prefix := filepath.Join(dir, "root/opt/amazon/openmpi")
	args := []string{filepath.Join(prefix, "bin/mpirun"), "--prefix", prefix, "-n", strconv.Itoa(perNode * len(hostfileAddrs)), "-N", strconv.Itoa(perNode), "--hostfile", filepath.Join(tmp, "hostfile"),
		"--bind-to", "none", "--tag-output", "--mca", "plm_rsh_agent", agentPath,
		"--mca", "plm_rsh_args", "-i " + tmp + "/id_ed25519 -o IdentitiesOnly=yes -o BatchMode=yes -o UserKnownHostsFile=" + tmp + "/known_hosts -o StrictHostKeyChecking=yes -o ConnectTimeout=20",
		"-x", "LD_LIBRARY_PATH=/usr/local/cuda-13.2/lib:/usr/local/cuda-13.2/lib64:/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib",
		"-x", "NCCL_DEBUG=INFO", "-x", "FI_PROVIDER=efa", "-x", "NCCL_TESTS_SPLIT_MASK=0x0"}
	for _, e := range extraEnv {
		args = append(args, "-x", e)
	}
	args = append(args, filepath.Join(dir, "root/usr/lib/dlami-sim/all_reduce_perf"), "-b", "8", "-e", "16G", "-f", "2", "-g", "1", "-c", "1", "-n", "20")
	cmd := exec.Command("bash", args...)
	// Open MPI's documented alternative to --allow-run-as-root, for a root test runner: the
	// command line stays the plugin's.
	cmd.Env = append(os.Environ(), "DLAMI_SIM_PREFIX="+nodes[0].h.prefix, "HOSTNAME="+nodes[0].name,
		"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	// A file, not a pipe: a stalled rank keeps mpirun's stderr open after mpirun is gone.
	outFile, err := os.Create(filepath.Join(tmp, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd.Stdout, cmd.Stderr = outFile, outFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killRanks(t, nodes) })
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r := mpiRun{}
	select {
	case <-done:
	case <-time.After(wait):
		r.stalled = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("mpirun did not end on SIGTERM")
		}
	}
	b, err := os.ReadFile(outFile.Name())
	if err != nil {
		t.Fatal(err)
	}
	r.out, r.code = string(b), cmd.ProcessState.ExitCode()
	b, _ = os.ReadFile(agentPath + ".log")
	r.agentLog = string(b)
	return r
}

// killRanks kills what a run left behind on its nodes: the processes whose environment names
// one of the nodes' trees (a stalled rank ignores SIGTERM).
func killRanks(t *testing.T, nodes []mpiNode) {
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range procs {
		env, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, n := range nodes {
			if bytes.Contains(env, []byte("\x00DLAMI_SIM_PREFIX="+n.h.prefix+"\x00")) || bytes.HasPrefix(env, []byte("DLAMI_SIM_PREFIX="+n.h.prefix+"\x00")) {
				if pid, err := strconv.Atoi(strings.Split(f, "/")[2]); err == nil && pid != os.Getpid() {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
}

func parseRun(t *testing.T, r mpiRun) nccltests.Result {
	t.Helper()
	res, err := nccltests.ParseString(r.out)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func hostByName(t *testing.T, res nccltests.Result, name string) nccltests.HostNet {
	t.Helper()
	for _, h := range res.Hosts {
		if h.Name == name {
			return h
		}
	}
	t.Fatalf("no host %s in %+v", name, res.Hosts)
	return nccltests.HostNet{}
}

func rankRange(from, n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = from + i
	}
	return r
}

func largestBusBW(t *testing.T, res nccltests.Result) float64 {
	t.Helper()
	if res.Largest == nil || res.Largest.OutOfPlace.BusBW == nil {
		t.Fatalf("no largest row: %+v", res.Largest)
	}
	if res.Largest.SizeBytes != 16<<30 {
		t.Errorf("largest size %d, want -e 16G", res.Largest.SizeBytes)
	}
	return *res.Largest.OutOfPlace.BusBW
}

// A healthy 2 × p5.48xlarge run: one header, the device lines of all 16 ranks with each
// node's host name, each node's NCCL lines naming it, OFI over EFA with 32 NICs and GPUDirect
// RDMA on both, the bus bandwidth of the type (480 GB/s), every line behind its rank's
// --tag-output prefix; the daemon of the second node started through the agent with the
// plugin's rsh arguments, split as Open MPI splits them, and the --prefix command line.
func TestMultiNodeHealthy(t *testing.T) {
	knobs := map[string]string{"efa-cards": allCards(32)}
	nodes := []mpiNode{newMPINode(t, "10.1.0.5", "p5.48xlarge", knobs), newMPINode(t, "10.1.0.6", "p5.48xlarge", knobs)}
	r := runMPI(t, nodes, []string{"10.1.0.5", "10.1.0.6"}, 30*time.Second)
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	res := parseRun(t, r)
	if res.NRanks != 16 || res.Devices != 16 || !res.Concluded || res.OutOfBounds == nil || *res.OutOfBounds != 0 || len(res.Errors) != 0 {
		t.Errorf("nranks %d, devices %d, concluded %v, oob %v, errors %q", res.NRanks, res.Devices, res.Concluded, res.OutOfBounds, res.Errors)
	}
	if len(res.Hosts) != 2 {
		t.Fatalf("hosts %+v", res.Hosts)
	}
	for i, n := range nodes {
		h := hostByName(t, res, n.name)
		if !slices.Equal(h.Ranks, rankRange(8*i, 8)) || !h.OFIPlugin || h.Socket || !slices.Equal(h.Networks, []string{"Libfabric"}) ||
			h.NICs == nil || *h.NICs != 32 || !h.NetPaths || !h.GDRDMA || h.NoGDRDMALine != "" {
			t.Errorf("%s: %+v", n.name, h)
		}
	}
	if bw := largestBusBW(t, res); bw < 470 || bw > 495 {
		t.Errorf("busbw at 16 GiB %.2f, want the 2 × p5 figure (~480)", bw)
	}
	for _, want := range []string{
		"[1,0]<stdout>:# Collective test starting: all_reduce_perf",
		"[1,0]<stdout>:#  Rank  8 Group  0 Pid ",
		" on ip-10-1-0-6 device  0 [0000:51:00] NVIDIA H100 80GB HBM3\n",
		"[1,0]<stdout>:NCCL version 2.27.7+cuda13.0\n",
		"[1,8]<stdout>:ip-10-1-0-6:",
		"[0] NCCL INFO Bootstrap: Using eth0:10.1.0.6<0>\n",
		"NCCL INFO ncclCommInitRankConfig comm 0x55d0c0a1b2c0 rank 15 nranks 16 cudaDev 7 nvmlDev 7 busId 87000 commId 0x9f1c27e4b1e0a6d3 - Init COMPLETE\n",
		"[7] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/Libfabric/28/GDRDMA\n",
		"[0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [receive] via NET/Libfabric/0/GDRDMA\n",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(r.out), "\n") {
		if !regexp.MustCompile(`^\[1,\d+\]<stdout>:`).MatchString(line) {
			t.Errorf("a line without its rank's tag: %q", line)
			break
		}
	}
	// Only the second node's daemon goes through the agent: the first is this host.
	lines := strings.Split(strings.TrimSpace(r.agentLog), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "-i ") || !strings.Contains(lines[0], " -o StrictHostKeyChecking=yes -o ConnectTimeout=20 10.1.0.6 PATH=") ||
		!strings.Contains(lines[0], "/bin/orted -mca ess \"env\" -mca ess_base_jobid ") {
		t.Errorf("agent calls:\n%s", r.agentLog)
	}
}

// A second node launched without EFA: its own lines show aws-ofi-nccl finding no provider and
// NCCL on sockets, naming it; the first node's stay on EFA; the run's bus bandwidth is the
// sockets' few GB/s.
func TestMultiNodeOneNodeWithoutEFA(t *testing.T) {
	nodes := []mpiNode{
		newMPINode(t, "10.1.0.5", "p5.48xlarge", map[string]string{"efa-cards": allCards(32)}),
		newMPINode(t, "10.1.0.6", "p5.48xlarge", map[string]string{"efa-cards": "none"}),
	}
	r := runMPI(t, nodes, []string{"10.1.0.5", "10.1.0.6"}, 30*time.Second)
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	res := parseRun(t, r)
	a, b := hostByName(t, res, "ip-10-1-0-5"), hostByName(t, res, "ip-10-1-0-6")
	if a.Socket || !a.GDRDMA || a.NICs == nil || *a.NICs != 32 {
		t.Errorf("the node with EFA: %+v", a)
	}
	if !b.Socket || !strings.Contains(b.SocketLine, "NET/Socket : Using [0]eth0:10.1.0.6<0>") || !slices.Equal(b.Networks, []string{"Socket"}) ||
		b.NICs != nil || b.GDRDMA || !strings.Contains(b.NoGDRDMALine, "via NET/Socket/0") || !slices.Equal(b.Ranks, rankRange(8, 8)) {
		t.Errorf("the node without EFA: %+v", b)
	}
	if bw := largestBusBW(t, res); bw > 4 {
		t.Errorf("busbw %.2f over sockets, want a few GB/s", bw)
	}
}

// Without GPUDirect RDMA on the second node (knob gdrdma off) its network connections have no
// /GDRDMA, after aws-ofi-nccl's line saying it disabled GDR; the other node's keep it; the bus
// bandwidth halves. A node with half its EFA devices attached reports that many NICs and
// halves it too.
func TestMultiNodeNoGDRAndFewerNICs(t *testing.T) {
	full := map[string]string{"efa-cards": allCards(32)}
	nodes := []mpiNode{newMPINode(t, "10.1.0.5", "p5.48xlarge", full),
		newMPINode(t, "10.1.0.6", "p5.48xlarge", map[string]string{"efa-cards": allCards(32), "gdrdma": "off"})}
	r := runMPI(t, nodes, []string{"10.1.0.5", "10.1.0.6"}, 30*time.Second)
	res := parseRun(t, r)
	a, b := hostByName(t, res, "ip-10-1-0-5"), hostByName(t, res, "ip-10-1-0-6")
	if !a.GDRDMA || a.NoGDRDMALine != "" {
		t.Errorf("the node with GDR: %+v", a)
	}
	if b.GDRDMA || !strings.Contains(b.NoGDRDMALine, "via NET/Libfabric/") || b.Socket || !b.OFIPlugin {
		t.Errorf("the node without GDR: %+v", b)
	}
	if !strings.Contains(r.out, "ip-10-1-0-6:") || !strings.Contains(r.out, "NCCL INFO NET/OFI Could not disable CUDA API usage for HMEM, disabling GDR") {
		t.Errorf("no GDR line")
	}
	if bw := largestBusBW(t, res); bw < 230 || bw > 250 {
		t.Errorf("busbw %.2f with one node without GDR, want half of 480", bw)
	}

	nodes = []mpiNode{newMPINode(t, "10.1.0.5", "p5.48xlarge", full), newMPINode(t, "10.1.0.6", "p5.48xlarge", map[string]string{"efa-cards": allCards(16)})}
	res = parseRun(t, runMPI(t, nodes, []string{"10.1.0.5", "10.1.0.6"}, 30*time.Second))
	if b := hostByName(t, res, "ip-10-1-0-6"); b.NICs == nil || *b.NICs != 16 || !b.GDRDMA {
		t.Errorf("16 of 32 EFA attached: %+v", b)
	}
	if bw := largestBusBW(t, res); bw < 230 || bw > 250 {
		t.Errorf("busbw %.2f with 16 of 32 EFA devices on one node, want half of 480", bw)
	}
}

// An Xid while the test runs on the second node (its nccl-dmesg knob) reaches that node's
// kernel log only.
func TestMultiNodeXidOnOneNode(t *testing.T) {
	xid := "NVRM: Xid (PCI:0000:75:00): 79, pid=4242, name=all_reduce_perf, GPU has fallen off the bus."
	nodes := []mpiNode{newMPINode(t, "10.1.0.5", "p5.48xlarge", nil), newMPINode(t, "10.1.0.6", "p5.48xlarge", map[string]string{"nccl-dmesg": xid})}
	if r := runMPI(t, nodes, []string{"10.1.0.5", "10.1.0.6"}, 30*time.Second); r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	for i, n := range nodes {
		b, _ := os.ReadFile(filepath.Join(n.h.prefix, "run/dlami-sim/kmsg"))
		if got := strings.Contains(string(b), xid); got != (i == 1) {
			t.Errorf("%s's kernel log has the Xid: %v\n%s", n.name, got, b)
		}
	}
}

// With EFA traffic blocked on one node (its security group lacks the self rules) every node
// prints its init lines, then the run stalls without a word: no table. SIGTERM ends mpirun, not
// the stalled ranks: they stay on every node, named all_reduce_perf, until SIGKILL.
func TestMultiNodeBlockedTrafficStalls(t *testing.T) {
	nodes := []mpiNode{newMPINode(t, "10.1.0.5", "p5.48xlarge", nil), newMPINode(t, "10.1.0.6", "p5.48xlarge", map[string]string{"efa-traffic": "blocked"})}
	r := runMPI(t, nodes, []string{"10.1.0.5", "10.1.0.6"}, 2*time.Second)
	if !r.stalled || r.code != 128+15 {
		t.Fatalf("stalled %v, exit %d:\n%s", r.stalled, r.code, r.out)
	}
	res := parseRun(t, r)
	if res.NRanks != 16 || len(res.Hosts) != 2 || len(res.Rows) != 0 || res.OutOfBounds != nil || res.Concluded {
		t.Errorf("a stalled run: nranks %d, hosts %d, rows %d, trailer %v, concluded %v", res.NRanks, len(res.Hosts), len(res.Rows), res.OutOfBounds, res.Concluded)
	}
	for _, h := range res.Hosts {
		if len(h.Ranks) != 8 {
			t.Errorf("%s completed init on ranks %v, want its 8", h.Name, h.Ranks)
		}
	}
	if strings.Contains(strings.ToLower(r.out), "security group") {
		t.Errorf("the stall explains itself; real EFA stalls without a word")
	}
	// Each node's process: the first pid of its device lines.
	pids := regexp.MustCompile(`#  Rank +(?:0|8) Group +0 Pid +(\d+) on`).FindAllStringSubmatch(r.out, -1)
	if len(pids) != 2 {
		t.Fatalf("device lines: %q", pids)
	}
	for _, m := range pids {
		pid, _ := strconv.Atoi(m[1])
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(cmdline), "all_reduce_perf") {
			t.Errorf("stalled rank %d: cmdline %q, %v", pid, cmdline, err)
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		time.Sleep(200 * time.Millisecond)
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("stalled rank %d ended on SIGTERM", pid)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		for syscall.Kill(pid, 0) == nil && ctx.Err() == nil {
			// A killed orphan is reaped by init (or the test's subreaper) shortly.
			if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(st), ") Z ") {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(st), ") Z ") {
			t.Errorf("stalled rank %d survived SIGKILL: %s", pid, st)
		}
	}
}

// Failures in Open MPI's words: a node whose daemon cannot be reached (ssh fails), and a node
// whose program exits non-zero (out-of-bounds values on the node that prints the table).
func TestMultiNodeFailures(t *testing.T) {
	nodes := []mpiNode{newMPINode(t, "10.1.0.5", "p5.48xlarge", nil)}
	r := runMPI(t, nodes, []string{"10.1.0.5", "10.1.0.9"}, 30*time.Second)
	if r.code == 0 || !strings.Contains(r.out, "ssh: connect to host 10.1.0.9 port 22: Connection refused\n") ||
		!strings.Contains(r.out, "ORTE was unable to reliably start one or more daemons.\nThis usually is caused by:\n") || strings.Contains(r.out, "NCCL INFO") {
		t.Errorf("unreachable second node: exit %d:\n%s", r.code, r.out)
	}

	nodes = []mpiNode{newMPINode(t, "10.1.0.5", "p5.48xlarge", map[string]string{"nccl-oob": "3"}), newMPINode(t, "10.1.0.6", "p5.48xlarge", nil)}
	r = runMPI(t, nodes, []string{"10.1.0.5", "10.1.0.6"}, 30*time.Second)
	if r.code != 1 || !regexp.MustCompile(`mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: \[\[\d+,1\],0\]
  Exit code:    1
`).MatchString(r.out) {
		t.Errorf("out-of-bounds values: exit %d:\n%s", r.code, r.out)
	}
	if res := parseRun(t, r); res.FailedTrailers != 1 || len(res.Errors) == 0 {
		t.Errorf("parsed: failed trailers %d, errors %q", res.FailedTrailers, res.Errors)
	}
}

// Hostfiles and host lists the stand-in refuses with the reason, before anything starts: a
// name that could reach a remote shell or ssh's options, and more ranks than the hosts hold.
func TestMultiNodeRefusesBadHosts(t *testing.T) {
	h := newHost(t, "p5.48xlarge", nil)
	mpirun := "root/opt/amazon/openmpi/bin/mpirun"
	env := []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "2", "-H", "a,-oProxyCommand=x", "true"}, "host '-oProxyCommand=x' is not a host name"},
		{[]string{"-n", "2", "-H", "a,b;reboot", "true"}, "host 'b;reboot' is not a host name"},
		{[]string{"-n", "16", "-N", "8", "-H", "a", "true"}, "There are not enough slots available in the system to satisfy the 16"},
		{[]string{"-n", "2", "--hostfile", "/nonexistent", "true"}, "Open RTE was unable to open the hostfile:"},
		{[]string{"-n", "2", "-H", "a,b", "-x", "1BAD=x", "true"}, "'1BAD' is not an environment variable name"},
	} {
		_, errs, code := h.runErr(env, mpirun, tc.args...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("mpirun %q: exit %d, %q; want %q", tc.args, code, errs, tc.want)
		}
	}
	// Every rank on this host (its own address, or localhost): the single-host run, as before.
	out := h.run(append(env, "HOSTNAME=ip-10-1-0-5"), mpirun, "-n", "8", "-N", "8", "-H", "10.1.0.5", "--tag-output", "bash", "-c", "echo $OMPI_COMM_WORLD_SIZE")
	if out != "8\n" {
		t.Errorf("one local host: %q", out)
	}
}

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

const testHostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHyWZbRJMl6y2lvb8mB6A6Y9bKpbc0Iyq0X4CR7dO5Nc root@node\n"

// multiNodeLog is what the multi-node script prints on 2 × p5.48xlarge: both hosts over EFA with
// GPUDirect RDMA, 32 nics each, busbw at 2 GiB.
func multiNodeLog(busbw string) string {
	var b strings.Builder
	b.WriteString("@@DLAMI-NCCL BINARY /usr/local/cuda-13.2/efa/test-cuda-13.2/all_reduce_perf\n@@DLAMI-NCCL RANKS 8\n@@DLAMI-NCCL NODES 2\n")
	for n, h := range []string{"ip-10-0-1-5", "ip-10-0-1-6"} {
		for r := n * 8; r < n*8+8; r++ {
			for _, l := range []string{"NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)", "Using network Libfabric",
				fmt.Sprintf("Channel 00/0 : %d[%d] -> %d[%d] [send] via NET/Libfabric/%d/GDRDMA", r, r%8, (r+8)%16, r%8, r%8),
				fmt.Sprintf("ncclCommInitRankConfig comm 0x55 rank %d nranks 16 cudaDev %d nvmlDev %d busId 53000 commId 0x9f - Init COMPLETE", r, r%8, r%8)} {
				fmt.Fprintf(&b, "[1,%d]<stdout>:%s:%d:%d [%d] NCCL INFO %s\n", r, h, 100+r, 100+r, r%8, l)
			}
		}
	}
	b.WriteString("[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong \n")
	fmt.Fprintf(&b, "[1,0]<stdout>:  2147483648     536870912     float     sum      -1   9197.5  233.49  %s      0   9195.2  233.54  %s      0\n", busbw, busbw)
	b.WriteString("[1,0]<stdout>:# Out of bounds values : 0 OK\n[1,0]<stdout>:# Avg bus bandwidth    : 52.9753\n")
	return b.String()
}

// twoFakeNodes are two fake hosts that answer the multi-node test's jobs; calls records them
// as "node:job".
func twoFakeNodes(t *testing.T, test func(ctx context.Context, w io.Writer) (int, error)) ([]*fakeHost, *[]string) {
	var calls []string
	var callsMu sync.Mutex
	var hosts []*fakeHost
	for i := range 2 {
		h := newFakeHost(t)
		h.files["/proc/sys/kernel/hostname"] = []byte(fmt.Sprintf("ip-10-0-1-%d\n", 5+i))
		h.files["/etc/ssh/ssh_host_ed25519_key.pub"] = []byte(testHostKey)
		record := func(job string) {
			callsMu.Lock()
			defer callsMu.Unlock()
			calls = append(calls, fmt.Sprintf("%d:%s", i+1, job))
		}
		h.jobs = map[string]func(ctx context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error){
			"multinode-key-add.sh": func(_ context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error) {
				record("key-add")
				if !strings.Contains(string(h.files[j.Script]), "dlami-multinode-") {
					t.Errorf("key script without the tag")
				}
				io.WriteString(w, "@@DLAMI-MNKEY KEYS 1\n")
				return 0, nil
			},
			"multinode-key-remove.sh": func(_ context.Context, _ *fakeHost, _ host.Job, w io.Writer) (int, error) {
				record("key-remove")
				io.WriteString(w, "@@DLAMI-MNKEY KEYS 0\n")
				return 0, nil
			},
			"multinode-stop.sh": func(_ context.Context, _ *fakeHost, _ host.Job, w io.Writer) (int, error) {
				record("stop")
				io.WriteString(w, "@@DLAMI-MNSTOP LEFT 0\n")
				return 0, nil
			},
			"nccl-multinode.sh": func(ctx context.Context, _ *fakeHost, _ host.Job, w io.Writer) (int, error) {
				record("test")
				return test(ctx, w)
			},
			// A GB200 pair's IMEX domain (check imex-domain): the node list written, nvidia-imex
			// restarted and, from then on, a healthy domain of both nodes.
			"imex-nodes.sh": func(_ context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error) {
				record("imex-nodes")
				if !j.AsRoot || !strings.Contains(string(h.files[j.Script]), "addresses='10.0.1.5 10.0.1.6'") {
					t.Errorf("the IMEX node list job: as root %v, without both nodes' addresses", j.AsRoot)
				}
				h.hostOut["host.imex_active"] = fakeSection{out: "active"}
				h.hostOut["host.imex_ctl"] = fakeSection{out: imexPairView("UP", "READY", "CONNECTED")}
				io.WriteString(w, "@@DLAMI-IMEXNODES RESTART 0\n@@DLAMI-IMEXNODES ACTIVE active\n")
				return 0, nil
			},
		}
		hosts = append(hosts, h)
	}
	return hosts, &calls
}

func multiNodeOptions(t *testing.T, hosts []*fakeHost, timeout time.Duration) MultiNodeOptions {
	var nodes []Node
	for i, h := range hosts {
		nodes = append(nodes, Node{Host: h, InstanceID: fmt.Sprintf("i-0node%d", i+1), PrivateIP: fmt.Sprintf("10.0.1.%d", 5+i), InstanceType: "p5.48xlarge", EFA: 32})
	}
	return MultiNodeOptions{Common: Common{BuildName: "unit", ReportDir: t.TempDir(), CheckTimeout: time.Minute,
		Checks: settings.Checks{MultiNode: settings.MultiNode{Nodes: 2, Timeout: timeout}},
		Launch: checks.Launch{Known: true, EFA: 32, SecurityGroups: []string{"sg-0efa"}}}, Nodes: nodes,
		Launch: &report.Launch{InstanceType: "p5.48xlarge"}}
}

func readMultiNodeReport(t *testing.T, dir string) report.Report {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "dlami-report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMultiNodePasses(t *testing.T) {
	hosts, calls := twoFakeNodes(t, func(_ context.Context, w io.Writer) (int, error) {
		io.WriteString(w, multiNodeLog("437.79"))
		return 0, nil
	})
	o := multiNodeOptions(t, hosts, 0)
	// Each node's own NCCL test (its first-boot verification) goes into the report for its
	// plot: two nodes, two curves beside the test across them.
	for i := range o.Nodes {
		o.Nodes[i].NCCL = &result.NCCLFigures{Points: []result.NCCLPoint{{SizeBytes: 8}, {SizeBytes: 16}}}
	}
	ui := &recordingUI{}
	if err := MultiNode(context.Background(), ui, o); err != nil {
		t.Fatalf("%v\n%s", err, ui)
	}
	r := readMultiNodeReport(t, o.ReportDir)
	if r.Launch == nil || len(r.Launch.Nodes) != 2 || r.Launch.Nodes[1].NCCL == nil || len(r.Launch.Nodes[1].NCCL.Points) != 2 || r.NCCL == nil || len(r.NCCL.Points) == 0 {
		t.Errorf("the nodes' own NCCL figures or the test's points are missing: %+v", r.Launch)
	}
	page, err := os.ReadFile(filepath.Join(o.ReportDir, report.HTMLFile))
	if err != nil || strings.Count(string(page), `<g class="curve"`) != 3 {
		t.Errorf("the HTML report does not draw the test across the nodes and each node's own (%v)", err)
	}
	c := r.Checks[0]
	if r.Result != report.ResultPass || c.ID != result.NCCLMultiNode || c.Status != result.Pass || !strings.Contains(c.Actual, "busbw 437.79 GB/s at 2 GiB") {
		t.Errorf("report %s: %+v", r.Result, r.Checks)
	}
	if len(r.Launch.Nodes) != 2 || r.Launch.Nodes[1].HostName != "ip-10-0-1-6" || r.Launch.Nodes[1].PrivateIP != "10.0.1.6" || r.Launch.Nodes[0].EFA != 32 {
		t.Errorf("launch nodes %+v", r.Launch.Nodes)
	}
	// The key is on the first node with the nodes' host keys, added on both and removed from
	// both; the leftovers are stopped on both.
	got := strings.Join(*calls, " ")
	for _, want := range []string{"1:key-add", "2:key-add", "1:test", "1:stop", "2:stop", "1:key-remove", "2:key-remove"} {
		if !strings.Contains(got, want) {
			t.Errorf("calls %q lack %s", got, want)
		}
	}
	if strings.Contains(got, "2:test") {
		t.Errorf("the test ran on node 2: %s", got)
	}
	// Every staging folder is gone, the key with the first node's.
	for i, h := range hosts {
		for p := range h.files {
			if strings.Contains(p, "dlami-multinode") {
				t.Errorf("node %d: %s left", i+1, p)
			}
		}
	}
}

// A stalled collective fails within its bound, naming the security group, and the ranks are
// stopped on every node.
func TestMultiNodeStallFails(t *testing.T) {
	hosts, calls := twoFakeNodes(t, func(ctx context.Context, w io.Writer) (int, error) {
		io.WriteString(w, "@@DLAMI-NCCL RANKS 8\n@@DLAMI-NCCL NODES 2\n")
		return 124, nil // what timeout(1) answers when it stopped mpirun
	})
	o := multiNodeOptions(t, hosts, 30*time.Second)
	ui := &recordingUI{}
	err := MultiNode(context.Background(), ui, o)
	if err == nil || !Judged(err) {
		t.Fatalf("err %v, want a verdict", err)
	}
	c := readMultiNodeReport(t, o.ReportDir).Checks[0]
	if c.Status != result.Fail || !strings.Contains(c.Message, "stalled") || !strings.Contains(c.Message, "sg-0efa") {
		t.Errorf("%s: %s", c.Status, c.Message)
	}
	if got := strings.Join(*calls, " "); !strings.Contains(got, "1:stop") || !strings.Contains(got, "2:stop") {
		t.Errorf("calls %s", got)
	}
}

// An Xid logged on the second node while the test ran fails the check naming that node.
func TestMultiNodeXidOnSecondNode(t *testing.T) {
	var second *fakeHost
	hosts, _ := twoFakeNodes(t, func(_ context.Context, w io.Writer) (int, error) {
		second.mu.Lock()
		second.logKernel("[ 9000.000001] NVRM: Xid (PCI:0000:62:00): 79, pid=4242, name=all_reduce_perf, GPU has fallen off the bus.")
		second.mu.Unlock()
		io.WriteString(w, multiNodeLog("437.79"))
		return 0, nil
	})
	second = hosts[1]
	o := multiNodeOptions(t, hosts, 0)
	if err := MultiNode(context.Background(), &recordingUI{}, o); err == nil {
		t.Fatal("passed with an Xid on node 2")
	}
	c := readMultiNodeReport(t, o.ReportDir).Checks[0]
	if c.Status != result.Fail || !strings.Contains(c.Message, "node 2 (i-0node2, 10.0.1.6)") || !strings.Contains(c.Message, "Xid 79") {
		t.Errorf("%s: %s", c.Status, c.Message)
	}
}

// A node whose key could not be installed: the test could not run (error), and the key is
// still removed where it went.
func TestMultiNodeKeyFails(t *testing.T) {
	hosts, calls := twoFakeNodes(t, func(_ context.Context, w io.Writer) (int, error) {
		t.Error("the test ran without the key on every node")
		return 0, nil
	})
	hosts[1].jobs["multinode-key-add.sh"] = func(_ context.Context, _ *fakeHost, _ host.Job, w io.Writer) (int, error) {
		io.WriteString(w, "@@DLAMI-MNKEY ERROR cannot append to /home/ubuntu/.ssh/authorized_keys\n")
		return 1, nil
	}
	o := multiNodeOptions(t, hosts, 0)
	if err := MultiNode(context.Background(), &recordingUI{}, o); err == nil {
		t.Fatal("passed without running")
	}
	c := readMultiNodeReport(t, o.ReportDir).Checks[0]
	if c.Status != result.Error || !strings.Contains(c.Message, "node 2 (i-0node2)") || !strings.Contains(c.Message, "cannot append") {
		t.Errorf("%s: %s", c.Status, c.Message)
	}
	if got := strings.Join(*calls, " "); !strings.Contains(got, "1:key-remove") {
		t.Errorf("the first node's key was not removed: %s", got)
	}
}

// Not run: the check says why, and the report does not pass.
func TestMultiNodeNotRun(t *testing.T) {
	hosts, calls := twoFakeNodes(t, nil)
	o := multiNodeOptions(t, hosts, 0)
	o.NotRun = "node 2 (i-0node2) failed its first-boot verification: gpu"
	_ = MultiNode(context.Background(), &recordingUI{}, o)
	r := readMultiNodeReport(t, o.ReportDir)
	if c := r.Checks[0]; c.Status != result.Skip || !strings.Contains(c.Message, "node 2 (i-0node2) failed") || r.Result == report.ResultPass {
		t.Errorf("%s %s: %s", r.Result, c.Status, c.Message)
	}
	if len(*calls) != 0 {
		t.Errorf("calls %q", *calls)
	}
}

// The caller learns the test's status: a pass, or a skip when skip_checks names it (the test
// across nodes then proves nothing, and nobody may say it passed).
func TestMultiNodeOutcome(t *testing.T) {
	for _, tc := range []struct {
		name string
		skip []string
		want result.Status
	}{
		{"passed", nil, result.Pass},
		{"skipped", []string{result.NCCLMultiNode}, result.Skip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hosts, _ := twoFakeNodes(t, func(_ context.Context, w io.Writer) (int, error) {
				io.WriteString(w, multiNodeLog("437.79"))
				return 0, nil
			})
			o := multiNodeOptions(t, hosts, 0)
			o.Checks.Skip = tc.skip
			var got result.Status
			o.Outcome = &got
			if err := MultiNode(context.Background(), &recordingUI{}, o); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("outcome %q, want %q", got, tc.want)
			}
		})
	}
}

// The first node's staging folder holds the test's private key and the script with every
// multi_node.env value: a failed removal is said, not swallowed.
func TestMultiNodeSaysAStagingFolderLeft(t *testing.T) {
	hosts, _ := twoFakeNodes(t, func(_ context.Context, w io.Writer) (int, error) {
		io.WriteString(w, multiNodeLog("437.79"))
		return 0, nil
	})
	hosts[0].removeErr = errors.New("rm: cannot remove: Read-only file system")
	o := multiNodeOptions(t, hosts, 0)
	ui := &recordingUI{}
	if err := MultiNode(context.Background(), ui, o); err != nil {
		t.Fatalf("%v\n%s", err, ui)
	}
	said := ui.String()
	if !strings.Contains(said, "ERROR dlami: the staging folder") || !strings.Contains(said, "Read-only file system") || !strings.Contains(said, "private key") {
		t.Errorf("the folder left on node 1 is not said:\n%s", said)
	}
}

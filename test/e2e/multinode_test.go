package e2e

// Issue 26, two nodes over the fabric: the real Packer and amazon-ebs bake on p5.48xlarge, and
// the dlami post-processor verifies the AMI on 2 × p5.48xlarge from one RunInstances of the
// fake EC2: each node's first boot on its own, then the NCCL all-reduce across them, started
// by the image's mpirun on the first node over real SSH (a temporary key, the nodes' host keys)
// to the second simulated host. The faults are the ones a fleet meets: a capacity refusal for
// the fleet, a node without EFA, a security group change that stalls EFA traffic, an Xid on one
// node. One bake, one post-processor sequence per scenario (ebs/multinode.pkr.hcl).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// multiNodeReport is what the tests read of a multi-node report.
type multiNodeReport struct {
	phaseReport
	Launch *struct {
		InstanceType   string   `json:"instance_type"`
		PlacementGroup string   `json:"placement_group"`
		SecurityGroups []string `json:"security_groups"`
		Refused        []struct {
			InstanceType string `json:"instance_type"`
			Code         string `json:"code"`
		} `json:"refused"`
		Nodes []struct {
			InstanceID     string  `json:"instance_id"`
			PrivateIP      string  `json:"private_ip"`
			InstanceType   string  `json:"instance_type"`
			PlacementGroup string  `json:"placement_group"`
			EFA            int     `json:"efa"`
			HostName       string  `json:"host_name"`
			TestSeconds    float64 `json:"test_seconds"`
			// NCCL is the node's own NCCL test of its first boot, for the HTML report's plot.
			NCCL *struct {
				Points []struct {
					SizeBytes int64 `json:"size_bytes"`
				} `json:"points"`
			} `json:"nccl"`
		} `json:"nodes"`
	} `json:"launch"`
}

func readMultiNodeReport(t *testing.T, dir string) multiNodeReport {
	t.Helper()
	return readReportAs[multiNodeReport](t, dir)
}

// scenarioInstances are the instances of one scenario, in launch order.
func scenarioInstances(s awsfake.StateDump, scenario string) []awsfake.Instance {
	var out []awsfake.Instance
	for _, in := range s.Regions[ebsRegion].Instances {
		if in.Tags["dlami:scenario"] == scenario {
			out = append(out, in)
		}
	}
	return out
}

// controlQuiet is the fake's control API for the watcher goroutine: errors are returned.
func (f *fakeAWS) controlQuiet(method, path string) ([]byte, error) {
	req, err := http.NewRequest(method, f.endpoint+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode/100 != 2 {
		err = fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	return b, err
}

func (f *fakeAWS) stateQuiet() (awsfake.StateDump, error) {
	var s awsfake.StateDump
	b, err := f.controlQuiet(http.MethodGet, "/_fake/state")
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	return s, err
}

// allRunning reports whether n instances of the scenario run.
func allRunning(ins []awsfake.Instance, n int) bool {
	if len(ins) != n {
		return false
	}
	for _, in := range ins {
		if in.State != "running" {
			return false
		}
	}
	return true
}

func TestMultiNode(t *testing.T) {
	e := ebsPrereqs(t)
	ebsDir, err := filepath.Abs("ebs")
	if err != nil {
		t.Fatal(err)
	}
	fake := e.startFake(t, "multinode-fake", true)
	api := fake.ec2Client()

	// The faults, each at its moment, from a watcher of the fake's state:
	//   - once the bake's instance runs, the next RunInstances (the no-efa scenario's) meets a
	//     capacity refusal, and the one after it (its fallback) launches node 2 without EFA;
	//   - once the stall scenario's nodes run, their temporary group loses its inbound rule
	//     from itself;
	//   - once the xid scenario's nodes run, node 2 logs an Xid during its next NCCL run (the
	//     scenario runs no 1-node NCCL test: the first is the test across nodes).
	var (
		mu                  sync.Mutex
		faultSet, xidSet    bool
		stallGroup, xidNode string
		watchErrs           []error
		stop                = make(chan struct{})
		wg                  sync.WaitGroup
		revoked             bool
	)
	fail := func(err error) { mu.Lock(); watchErrs = append(watchErrs, err); mu.Unlock() }
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !(faultSet && revoked && xidSet) {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			s, err := fake.stateQuiet()
			if err != nil {
				continue
			}
			if !faultSet {
				for _, in := range s.Regions[ebsRegion].Instances {
					if in.Tags["dlami:scenario"] == "" && in.State == "running" {
						if _, err := fake.controlQuiet(http.MethodPost, "/_fake/fault?spec="+url.QueryEscape("RunInstances@"+ebsRegion+"=capacity:1,efa-dropped:2")); err != nil {
							fail(err)
						}
						faultSet = true
					}
				}
			}
			if ins := scenarioInstances(s, "stall"); !revoked && allRunning(ins, 2) && len(ins[0].SecurityGroupIDs) == 1 {
				g := ins[0].SecurityGroupIDs[0]
				_, err := api.RevokeSecurityGroupIngress(context.Background(), &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(g),
					IpPermissions: []types.IpPermission{{IpProtocol: aws.String("-1"), UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String(g)}}}}})
				if err != nil {
					fail(fmt.Errorf("revoking %s's rule from itself: %w", g, err))
				}
				mu.Lock()
				stallGroup, revoked = g, true
				mu.Unlock()
			}
			if ins := scenarioInstances(s, "xid"); !xidSet && allRunning(ins, 2) {
				knob := filepath.Join(fake.stateRoot, "instances", ins[1].ID, "merged", "etc", "dlami-sim", "nccl-dmesg")
				if err := os.WriteFile(knob, []byte("NVRM: Xid (PCI:0000:97:00): 79, pid=4242, name=all_reduce_perf, GPU has fallen off the bus.\n"), 0o644); err != nil {
					fail(fmt.Errorf("the xid knob of %s: %w", ins[1].ID, err))
				}
				mu.Lock()
				xidNode, xidSet = ins[1].ID, true
				mu.Unlock()
			}
		}
	}()

	out := outDir(t, "multinode")
	r := e.build(t, ebsDir, out, fake.packerEnv(e), nil,
		"-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "multinode.pkr.hcl")
	close(stop)
	wg.Wait()
	t.Logf("p5 bake and four 2-node verifications: %s", r.took.Round(time.Second))
	for name, d := range sequenceDurations(r.log) {
		t.Logf("  %s", name+": "+d.Round(100*time.Millisecond).String())
	}
	for _, err := range watchErrs {
		t.Error(err)
	}
	if r.code == 0 {
		t.Errorf("the build passed although three verifications must fail:\n%s", tail(filepath.Join(out, "packer.out"), 40))
	}
	s := fake.state(t)
	// Every instance, the placement groups, the groups, the Elastic IPs: gone.
	assertCleanedUp(t, s, ebsRegion)
	assertNoInstanceState(t, fake)

	t.Run("no-efa-after-a-capacity-refusal", func(t *testing.T) {
		if !faultSet {
			t.Fatal("the faults were never installed")
		}
		ins := scenarioInstances(s, "no-efa")
		if len(ins) != 2 || ins[0].InstanceType != "p5e.48xlarge" || ins[1].InstanceType != "p5e.48xlarge" {
			t.Fatalf("instances %d: want 2 × p5e.48xlarge after p5.48xlarge was refused", len(ins))
		}
		if len(ins[0].EFACards) != 32 || len(ins[1].EFACards) != 0 {
			t.Errorf("EFA cards %d and %d: want 32 and none", len(ins[0].EFACards), len(ins[1].EFACards))
		}
		rep := readMultiNodeReport(t, filepath.Join(out, "no-efa", ebsRegion, "multi-node"))
		st, msg := rep.check("nccl-multinode")
		want := "node 2 (" + ins[1].ID
		if st != "fail" || !strings.Contains(msg, want) || !strings.Contains(msg, "fell back to sockets") || !strings.Contains(msg, "its launch attached no EFA interface") {
			t.Errorf("nccl-multinode = %s %q: want a failure naming %s and its socket fallback", st, msg, ins[1].ID)
		}
		if strings.Contains(msg, "node 1 (") {
			t.Errorf("node 1 (%s) blamed too: %s", ins[0].ID, msg)
		}
		if l := rep.Launch; l == nil || len(l.Refused) != 1 || l.Refused[0].InstanceType != "p5.48xlarge" || l.Refused[0].Code != "InsufficientInstanceCapacity" {
			t.Errorf("launch %+v: want the p5.48xlarge refusal recorded", rep.Launch)
		}
		// Node 2's own first boot passed: its EFA checks warn, naming what its launch gave it.
		node2 := readPhaseReport(t, filepath.Join(out, "no-efa", ebsRegion, ins[1].ID))
		if st, msg := node2.check("efa-devices"); st != "warn" || !strings.Contains(msg, "attached no EFA interface") {
			t.Errorf("node 2 efa-devices = %s %q", st, msg)
		}
		if node2.Result == "fail" {
			t.Errorf("node 2's first boot failed: %v", node2.FailedChecks)
		}
	})

	t.Run("healthy", func(t *testing.T) {
		ins := scenarioInstances(s, "healthy")
		if len(ins) != 2 {
			t.Fatalf("%d instances", len(ins))
		}
		rep := readMultiNodeReport(t, filepath.Join(out, "healthy", ebsRegion, "multi-node"))
		if st, msg := rep.check("nccl-multinode"); st != "pass" || rep.Result != "pass" {
			t.Errorf("nccl-multinode = %s %q (report %s)", st, msg, rep.Result)
		}
		l := rep.Launch
		if l == nil || len(l.Nodes) != 2 || l.PlacementGroup == "" {
			t.Fatalf("launch %+v: want both nodes in a placement group", l)
		}
		for i, n := range l.Nodes {
			if n.InstanceID != ins[i].ID || n.PrivateIP == "" || n.EFA != 32 || n.HostName != "ip-"+strings.ReplaceAll(n.PrivateIP, ".", "-") ||
				n.PlacementGroup != l.PlacementGroup || n.InstanceType != "p5.48xlarge" || n.TestSeconds <= 0 {
				t.Errorf("node %d %+v (instance %s)", i+1, n, ins[i].ID)
			}
			// Each node ran its own NCCL test at first boot: its figures, a point per message
			// size, are in the multi-node report for the HTML report's curve of that node.
			if n.NCCL == nil || len(n.NCCL.Points) == 0 {
				t.Errorf("node %d: the multi-node report lacks its own NCCL figures", i+1)
			}
		}
		// The HTML report beside it draws the test across the nodes and one curve per node.
		page, err := os.ReadFile(filepath.Join(out, "healthy", ebsRegion, "multi-node", "dlami-report.html"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`data-name="this run"`, `data-name="node 1 (` + ins[0].ID + `)"`, `data-name="node 2 (` + ins[1].ID + `)"`} {
			if !strings.Contains(string(page), want) {
				t.Errorf("the multi-node HTML report lacks the curve %s", want)
			}
		}
		for _, in := range ins {
			node := readPhaseReport(t, filepath.Join(out, "healthy", ebsRegion, in.ID))
			if node.Result != "pass" {
				t.Errorf("node %s: %s, failed %v", in.ID, node.Result, node.FailedChecks)
			}
			for _, id := range []string{"efa-devices", "efa-traffic", "gpudirect-rdma", "nccl-correctness"} {
				if st, msg := node.check(id); st != "pass" {
					t.Errorf("node %s %s = %s %q", in.ID, id, st, msg)
				}
			}
		}
		if !strings.Contains(r.ui, "dlami:verified_nodes = 2") {
			t.Errorf("Packer's output does not say the AMI was tagged with its node count:\n%s", grepLines(r.ui, "tagged"))
		}
		if !slices.ContainsFunc(strings.Split(r.ui, "\n"), func(l string) bool { return strings.Contains(l, "running the NCCL all-reduce across 2 nodes") }) {
			t.Error("Packer's output does not announce the test across nodes")
		}
	})

	t.Run("stall-names-the-group", func(t *testing.T) {
		if !revoked || stallGroup == "" {
			t.Fatal("the stall scenario's rule was not revoked")
		}
		rep := readMultiNodeReport(t, filepath.Join(out, "stall", ebsRegion, "multi-node"))
		st, msg := rep.check("nccl-multinode")
		for _, want := range []string{"stalled", "timeout (15 s", stallGroup, "stopped on all 2 nodes (none left)"} {
			if st != "fail" || !strings.Contains(msg, want) {
				t.Errorf("nccl-multinode = %s %q: want a failure saying %q", st, msg, want)
			}
		}
	})

	t.Run("xid-on-the-second-node", func(t *testing.T) {
		if !xidSet {
			t.Fatal("the Xid knob was never written")
		}
		rep := readMultiNodeReport(t, filepath.Join(out, "xid", ebsRegion, "multi-node"))
		st, msg := rep.check("nccl-multinode")
		if st != "fail" || !strings.Contains(msg, "node 2 ("+xidNode) || !strings.Contains(msg, "Xid 79") || strings.Contains(msg, "node 1 (") {
			t.Errorf("nccl-multinode = %s %q: want a failure naming node 2 (%s) and Xid 79 only", st, msg, xidNode)
		}
	})

	// The test's key never stays: no node kept it (they are terminated; the check is the
	// report's, which says the key was removed or the UI says it may not have been).
	if strings.Contains(r.ui, "the multi-node test's key may still be in authorized_keys") {
		t.Errorf("a node kept the test's key:\n%s", grepLines(r.ui, "authorized_keys"))
	}
}

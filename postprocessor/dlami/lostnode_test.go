package dlami

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/amitags"
	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// nodesRun is a post-processor run with nodes = N whose check across nodes is across: it is
// given the launch and returns the check's error, as checkNodes would.
func nodesRun(t *testing.T, ami, snap string, nodes int, onFailure string, across func(p *PostProcessor, f fakeEC2, in *launch.Instance, say func(string)) error) (fakeEC2, string, error) {
	t.Helper()
	f, p := launchable(t, ami, snap, map[string]interface{}{"nodes": nodes, "on_failure": onFailure})
	p.poll = matrixPoll
	p.checkBoot = func(ctx context.Context, _ packersdk.Ui, in *launch.Instance, _ target, _ string, say func(string)) error {
		return across(p, f, in, say)
	}
	out := &syncBuffer{}
	ui := &packersdk.BasicUi{Reader: new(bytes.Buffer), Writer: out, ErrorWriter: out}
	_, _, _, err := p.PostProcess(context.Background(), ui, ebsArtifact("us-east-1:"+ami))
	return f, out.String(), err
}

// A node lost during the test across nodes (EC2 retired its host, its Capacity Block ended,
// its SSH connection dropped) fails the test, and that failure is no verdict on the AMI: the
// run fails as "could not be verified" and on_failure leaves the AMI alone. The same failure
// with every node running and connected is a verdict, and on_failure applies.
func TestALostNodeIsNoVerdict(t *testing.T) {
	judged := &engine.DriftError{Stage: "the multi-node test", Failed: []string{result.NCCLMultiNode}}
	for i, tc := range []struct {
		name      string
		nodes     int
		terminate int  // the node EC2 terminates during the test, from 1; 0 none
		dropped   bool // node 2's connection dropped
		verdict   bool
	}{
		{"node 2 terminated", 2, 2, false, false},
		{"node 5 of 8 terminated", 8, 5, false, false},
		{"node 2's SSH dropped", 2, 0, true, false},
		{"every node running and connected", 3, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ami, snap := fmt.Sprintf("ami-0000000000000c%03d", i), fmt.Sprintf("snap-000000000000000c%02d", i)
			f, said, err := nodesRun(t, ami, snap, tc.nodes, OnFailureDeregister, func(p *PostProcessor, f fakeEC2, in *launch.Instance, say func(string)) error {
				nodes := in.Nodes()
				if len(nodes) != tc.nodes {
					t.Fatalf("%d nodes launched", len(nodes))
				}
				if tc.terminate > 0 {
					api, _ := f.client(context.Background(), "us-east-1")
					if _, err := api.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{nodes[tc.terminate-1].ID}}); err != nil {
						t.Fatal(err)
					}
				}
				var dropped []int
				if tc.dropped {
					w := &watchedHost{Host: disconnecting{}}
					if _, err := w.Run(context.Background(), host.Job{Name: "nccl"}); err == nil || !w.dropped.Load() {
						t.Fatalf("the watched host did not see the dropped connection: %v", err)
					}
					dropped = append(dropped, 1)
				}
				return acrossVerdict(context.Background(), in, judged, dropped, say)
			})
			img, registered := f.image("us-east-1", ami)
			if tc.verdict {
				if err == nil || !strings.Contains(err.Error(), "did not boot healthy") || registered {
					t.Errorf("a failure with every node there: err %v, registered %v: want the verdict and on_failure", err, registered)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "could not be verified") || !strings.Contains(err.Error(), "lost during the test across nodes") {
				t.Errorf("err %v: want could not be verified, naming the lost node", err)
			}
			if !registered || img.Tags[amitags.Verified] != "" {
				t.Errorf("a lost node judged the AMI: registered %v, tags %v\n%s", registered, img.Tags, said)
			}
		})
	}
}

// disconnecting is a host whose commands never return their exit status.
type disconnecting struct{ host.Host }

func (disconnecting) Run(context.Context, host.Job) (int, error) {
	return -1, fmt.Errorf("running nccl: %w", host.ErrDisconnected)
}

// A test across nodes that was skipped (skip_checks) or only warned (warn_checks) proved
// nothing: the AMI is tagged verified by its nodes' first boots, without dlami:verified_nodes,
// and nobody says it passed the NCCL test across them.
func TestSkippedTestAcrossNodesIsNotTagged(t *testing.T) {
	for i, status := range []result.Status{result.Skip, result.Warn, result.Pass} {
		t.Run(string(status), func(t *testing.T) {
			ami, snap := fmt.Sprintf("ami-0000000000000b%03d", i), fmt.Sprintf("snap-000000000000000b%02d", i)
			var calls atomic.Int32
			f, said, err := nodesRun(t, ami, snap, 2, OnFailureTag, func(p *PostProcessor, _ fakeEC2, _ *launch.Instance, _ func(string)) error {
				calls.Add(1)
				s := status
				p.across = &s
				return nil
			})
			if err != nil || calls.Load() != 1 {
				t.Fatalf("err %v, %d checks", err, calls.Load())
			}
			img, _ := f.image("us-east-1", ami)
			passed := strings.Contains(said, "passed the NCCL test across them")
			if status == result.Pass {
				if img.Tags[amitags.VerifiedNodes] != "2" || !passed {
					t.Errorf("passed: tags %v\n%s", img.Tags, said)
				}
				return
			}
			if img.Tags[amitags.Verified] != "true" || img.Tags[amitags.VerifiedNodes] != "" || passed {
				t.Errorf("%s: tags %v, said passed %v\n%s", status, img.Tags, passed, said)
			}
			if !strings.Contains(said, "the NCCL test across them is "+string(status)) {
				t.Errorf("%s: the UI does not say the test's status:\n%s", status, said)
			}
		})
	}
}

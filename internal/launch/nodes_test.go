package launch

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// Two nodes come from one RunInstances (MinCount = MaxCount = 2) into one placement group,
// each with every EFA interface of the type and its own Elastic IP found by its node tag; the
// cleanup terminates both and releases both addresses.
func TestLaunchOfTwoNodes(t *testing.T) {
	f := newFake(t)
	s := efaSpec("p5.48xlarge")
	s.Count, s.TemporaryPlacementGroup, s.ElasticIP = 2, true, ElasticIPWhenSeveralInterfaces
	in, err := Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	if n := f.srv.CallCount(awsfake.OpRunInstances, region); n != 1 {
		t.Errorf("%d RunInstances calls, want one for both nodes", n)
	}
	nodes := in.Nodes()
	if len(nodes) != 2 || nodes[0] != in || nodes[0].ID == nodes[1].ID || nodes[1].ID == "" {
		t.Fatalf("nodes %+v", nodes)
	}
	rs := f.state(region)
	if len(rs.Instances) != 2 || len(rs.ElasticIPs) != 2 {
		t.Fatalf("%d instances, %d Elastic IPs", len(rs.Instances), len(rs.ElasticIPs))
	}
	for i, n := range nodes {
		if n.DescribedEFA != 32 || n.PrivateIP == "" || n.ElasticIP == "" || n.PlacementGroup() != in.PlacementGroup() || in.PlacementGroup() == "" {
			t.Errorf("node %d: %+v", i+1, n)
		}
		if addr, _ := n.Address(""); addr != n.ElasticIP {
			t.Errorf("node %d address %q, want its Elastic IP %s", i+1, addr, n.ElasticIP)
		}
	}
	tags := []string{rs.ElasticIPs[0].Tags[NodeTag], rs.ElasticIPs[1].Tags[NodeTag]}
	slices.Sort(tags)
	if !slices.Equal(tags, []string{"1", "2"}) {
		t.Errorf("Elastic IP node tags %q", tags)
	}
	if err := Cleanup(context.Background(), in, discard); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, f)
}

// A capacity refusal for the whole fleet falls through to the next candidate; EC2 never hands
// over part of it.
func TestTwoNodesFallThroughOnCapacity(t *testing.T) {
	f := newFake(t)
	f.srv.SetFault(awsfake.OpRunInstances, region, awsfake.Fault{InsufficientCapacity: 1})
	s := efaSpec("p5.48xlarge")
	s.Count = 2
	s.Fallbacks = []Placement{{InstanceType: "p5e.48xlarge"}}
	in, err := Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Refused) != 1 || in.Placement.InstanceType != "p5e.48xlarge" || len(in.Nodes()) != 2 {
		t.Errorf("refused %+v, placement %s, %d nodes", in.Refused, in.Placement, len(in.Nodes()))
	}
	for _, n := range in.Nodes() {
		if n.Placement.InstanceType != "p5e.48xlarge" {
			t.Errorf("node %s on %s", n.ID, n.Placement)
		}
	}
	if err := Cleanup(context.Background(), in, discard); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, f)
}

// The leak of a launch of several names every instance.
func TestCleanupNamesEveryNodeLeft(t *testing.T) {
	f := newFake(t)
	s := spec(region)
	s.Count = 2
	in, err := Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.SetFault(awsfake.OpTerminateInstances, region, awsfake.Fault{AccessDenied: true})
	err = Cleanup(context.Background(), in, discard)
	ids := NotTerminated(err)
	if len(ids) != 2 || !strings.Contains(err.Error(), in.Nodes()[1].ID) {
		t.Errorf("left %q: %v", ids, err)
	}
	f.srv.ClearFaults()
	if err := Cleanup(context.Background(), in, discard); err != nil {
		t.Fatal(err)
	}
}

package launch

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// retryingClient is the fake's client with the SDK's standard retries (3 attempts), as the
// post-processor's is: a capacity refusal must still fall through at once.
func (f fakeEC2) retryingClient(region string) *ec2.Client {
	return ec2.NewFromConfig(aws.Config{
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider("AKIAFAKELAUNCHTEST00", "secret", ""),
		BaseEndpoint: aws.String(f.url),
	})
}

// countingEC2 counts the RunInstances requests that reach the client and keeps them.
type countingEC2 struct {
	EC2API
	runs []*ec2.RunInstancesInput
}

func (c *countingEC2) RunInstances(ctx context.Context, in *ec2.RunInstancesInput, o ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	c.runs = append(c.runs, in)
	return c.EC2API.RunInstances(ctx, in, o...)
}

// InsufficientInstanceCapacity on the first instance type falls through to the next one at
// once (the SDK does not spend its retries on it), and the instance says which it got.
func TestLaunchFallsThroughOnCapacity(t *testing.T) {
	f := newFake(t)
	f.srv.SetFault("RunInstances", region, awsfake.Fault{InsufficientCapacity: 1})
	api := &countingEC2{EC2API: f.retryingClient(region)}
	s := spec(region)
	s.Fallbacks = []Placement{{InstanceType: "p5e.48xlarge"}, {InstanceType: "p5en.48xlarge"}}
	var said []string
	in, err := Launch(context.Background(), api, s, func(m string) { said = append(said, m) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := Cleanup(context.Background(), in, discard); err != nil {
			t.Error(err)
		}
	}()
	if in.Placement.InstanceType != "p5e.48xlarge" {
		t.Errorf("launched %v, want the second candidate p5e.48xlarge", in.Placement)
	}
	if len(in.Refused) != 1 || in.Refused[0].InstanceType != "p5.48xlarge" || in.Refused[0].Code != "InsufficientInstanceCapacity" ||
		!strings.Contains(in.Refused[0].Message, "do not have sufficient p5.48xlarge capacity") {
		t.Errorf("refused %+v", in.Refused)
	}
	if len(api.runs) != 2 || api.runs[0].InstanceType != "p5.48xlarge" || api.runs[1].InstanceType != "p5e.48xlarge" {
		t.Errorf("RunInstances requests %d, want p5 then p5e", len(api.runs))
	}
	if aws.ToString(api.runs[0].ClientToken) == aws.ToString(api.runs[1].ClientToken) {
		t.Error("both candidates used one client token: EC2 would answer the second with the first's refusal or IdempotentParameterMismatch")
	}
	rs := f.state(region)
	if len(rs.Instances) != 1 || rs.Instances[0].InstanceType != "p5e.48xlarge" || rs.Instances[0].Tags[LaunchTag] == "" {
		t.Fatalf("instances %+v", rs.Instances)
	}
	if !strings.Contains(strings.Join(said, "\n"), "no capacity for p5.48xlarge (InsufficientInstanceCapacity); trying p5e.48xlarge") {
		t.Errorf("the UI does not say which type was refused:\n%s", strings.Join(said, "\n"))
	}
}

// When every candidate is refused the launch fails naming each, and leaves nothing behind.
func TestLaunchNoCandidateHasCapacity(t *testing.T) {
	f := newFake(t)
	f.srv.SetFault("RunInstances", region, awsfake.Fault{InsufficientCapacity: 2})
	s := spec(region)
	s.Fallbacks = []Placement{{InstanceType: "p6-b200.48xlarge"}}
	_, err := Launch(context.Background(), f.client(region), s, discard)
	var ce *CapacityError
	if !errors.As(err, &ce) || len(ce.Refused) != 2 || !IsCapacity(err) {
		t.Fatalf("err %v: want a CapacityError with both refusals", err)
	}
	for _, want := range []string{"p5.48xlarge: InsufficientInstanceCapacity", "p6-b200.48xlarge: InsufficientInstanceCapacity", "instance_types"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	rs := f.state(region)
	if len(rs.Instances) != 0 || len(rs.KeyPairs) != 0 {
		t.Errorf("left behind: instances %+v key pairs %+v", rs.Instances, rs.KeyPairs)
	}
	for _, g := range rs.SecurityGroups {
		if g.Name != "default" {
			t.Errorf("security group left: %+v", g)
		}
	}
}

// An error that is not about capacity ends the launch: the next candidate is not tried.
func TestLaunchOtherErrorsDoNotFallThrough(t *testing.T) {
	f := newFake(t)
	f.srv.SetFault("RunInstances", region, awsfake.Fault{AccessDenied: true})
	api := &countingEC2{EC2API: f.client(region)}
	s := spec(region)
	s.Fallbacks = []Placement{{InstanceType: "p5e.48xlarge"}}
	_, err := Launch(context.Background(), api, s, discard)
	if err == nil || IsCapacity(err) || len(api.runs) != 1 {
		t.Fatalf("err %v after %d RunInstances: want the UnauthorizedOperation of the first and no second try", err, len(api.runs))
	}
	if len(f.state(region).Instances) != 0 {
		t.Error("an instance was launched")
	}
}

// A 500 is tried again on the same candidate with the same client token (one instance), not
// taken for a capacity refusal.
func TestLaunchRetriesAServerErrorOnTheSameCandidate(t *testing.T) {
	f := newFake(t)
	f.srv.SetFault("RunInstances", region, awsfake.Fault{ServerError: 2})
	api := &countingEC2{EC2API: f.client(region)}
	s := spec(region)
	s.Fallbacks = []Placement{{InstanceType: "p5e.48xlarge"}}
	in, err := Launch(context.Background(), api, s, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer Cleanup(context.Background(), in, discard)
	if in.Placement.InstanceType != "p5.48xlarge" || len(in.Refused) != 0 || len(api.runs) != 3 {
		t.Errorf("launched %v after %d RunInstances (refused %v): want the first candidate on the third try", in.Placement, len(api.runs), in.Refused)
	}
	for _, r := range api.runs {
		if aws.ToString(r.ClientToken) != aws.ToString(api.runs[0].ClientToken) || r.InstanceType != api.runs[0].InstanceType {
			t.Errorf("a retry changed the request: %s %s", r.InstanceType, aws.ToString(r.ClientToken))
		}
	}
	if n := len(f.state(region).Instances); n != 1 {
		t.Errorf("%d instances, want one", n)
	}
}

// A Capacity Block launch sends InstanceMarketOptions.MarketType = capacity-block with the
// reservation as its target.
func TestLaunchCapacityBlock(t *testing.T) {
	f := newFake(t)
	api := &countingEC2{EC2API: f.client(region)}
	s := spec(region)
	s.CapacityReservationID, s.MarketType = "cr-0123456789abcdef0", MarketCapacityBlock
	in, err := Launch(context.Background(), api, s, discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := Cleanup(context.Background(), in, discard); err != nil {
		t.Error(err)
	}
	r := api.runs[0]
	if r.InstanceMarketOptions == nil || r.InstanceMarketOptions.MarketType != types.MarketTypeCapacityBlock ||
		r.CapacityReservationSpecification == nil || aws.ToString(r.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId) != "cr-0123456789abcdef0" {
		t.Errorf("RunInstances market %+v reservation %+v", r.InstanceMarketOptions, r.CapacityReservationSpecification)
	}
	// An on-demand launch sends no market options.
	api.runs = nil
	in, err = Launch(context.Background(), api, spec(region), discard)
	if err != nil {
		t.Fatal(err)
	}
	_ = Cleanup(context.Background(), in, discard)
	if api.runs[0].InstanceMarketOptions != nil {
		t.Errorf("on-demand launch sent market options %+v", api.runs[0].InstanceMarketOptions)
	}
}

// The temporary security group lives in one VPC: candidates that mix named and default
// subnets, or name subnets EC2 does not know, are refused before anything is launched.
func TestLaunchSubnetCandidates(t *testing.T) {
	f := newFake(t)
	sub := f.state(region).Subnet.ID
	s := spec(region)
	s.SubnetID = sub
	s.Fallbacks = []Placement{{InstanceType: "p5.48xlarge"}}
	if _, err := Launch(context.Background(), f.client(region), s, discard); err == nil || !strings.Contains(err.Error(), "subnet_ids") {
		t.Errorf("mixed subnets: %v", err)
	}
	s.Fallbacks = []Placement{{InstanceType: "p5.48xlarge", SubnetID: "subnet-0fffffffffffffff0"}}
	if _, err := Launch(context.Background(), f.client(region), s, discard); err == nil || !strings.Contains(err.Error(), "subnet_ids") {
		t.Errorf("unknown subnet: %v", err)
	}
	if rs := f.state(region); len(rs.Instances) != 0 || len(rs.KeyPairs) != 0 {
		t.Errorf("left behind: %+v %+v", rs.Instances, rs.KeyPairs)
	}
	// The same subnet twice (two types in one zone) is one VPC.
	f.srv.SetFault("RunInstances", region, awsfake.Fault{InsufficientCapacity: 1})
	s.Fallbacks = []Placement{{InstanceType: "p5e.48xlarge", SubnetID: sub}}
	in, err := Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer Cleanup(context.Background(), in, discard)
	if in.Placement != (Placement{"p5e.48xlarge", sub}) || in.Placement.String() != "p5e.48xlarge in "+sub {
		t.Errorf("placement %v", in.Placement)
	}
}

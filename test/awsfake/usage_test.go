package awsfake

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// testClock is a clock a test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newMeteredEnv is a fake whose clock the test moves by hand and whose
// instances leave pending at the first poll, so metered times are exact.
func newMeteredEnv(t *testing.T) (*ec2Env, *testClock) {
	e := newEC2Env(t, nil)
	clock := &testClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	e.fake.SetNow(clock.Now)
	e.fake.SetTransitionPolls(0)
	return e, clock
}

// Instances are metered by type from running until stopped or terminated;
// a running one up to now. Pending time does not count.
func TestInstanceSecondsByType(t *testing.T) {
	e, clock := newMeteredEnv(t)
	c := e.client("us-east-1")
	gpu := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{InstanceType: "p5.48xlarge"}).InstanceId)
	cpu := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{InstanceType: "t3.micro"}).InstanceId)

	clock.Advance(30 * time.Second) // pending: not metered
	if got := polls(t, c, gpu, 1)[0] + "/" + polls(t, c, cpu, 1)[0]; got != "running/running" {
		t.Fatalf("states %s, want both running", got)
	}
	clock.Advance(100 * time.Second)
	if _, err := c.StopInstances(context.Background(), &ec2.StopInstancesInput{InstanceIds: []string{cpu}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(20 * time.Second) // stopping still counts
	if got := polls(t, c, cpu, 1)[0]; got != "stopped" {
		t.Fatalf("t3.micro %s, want stopped", got)
	}
	clock.Advance(50 * time.Second) // stopped: no longer metered
	if _, err := c.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{gpu}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	if got := polls(t, c, gpu, 1)[0]; got != "terminated" {
		t.Fatalf("p5.48xlarge %s, want terminated", got)
	}
	clock.Advance(time.Hour) // both done: the figures stay

	want := map[string]float64{"p5.48xlarge": 100 + 20 + 50 + 10, "t3.micro": 100 + 20}
	u := e.fake.Usage("")
	if len(u.InstanceSeconds) != len(want) || u.GPUInstanceSeconds != want["p5.48xlarge"] {
		t.Errorf("usage %+v, want %v with %v GPU seconds", u, want, want["p5.48xlarge"])
	}
	for typ, secs := range want {
		if math.Abs(u.InstanceSeconds[typ]-secs) > 1e-9 {
			t.Errorf("%s: %v s, want %v", typ, u.InstanceSeconds[typ], secs)
		}
	}

	// A running instance counts up to now, and the state API reports it all.
	running := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{InstanceType: "g6e.xlarge"}).InstanceId)
	polls(t, c, running, 1)
	clock.Advance(42 * time.Second)
	resp, err := http.Get(e.url + "/_fake/state?region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		InstanceSeconds    map[string]float64 `json:"instance_seconds"`
		GPUInstanceSeconds float64            `json:"gpu_instance_seconds"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.InstanceSeconds["g6e.xlarge"] != 42 || st.InstanceSeconds["t3.micro"] != 120 || st.GPUInstanceSeconds != 180+42 {
		t.Errorf("GET /_fake/state: %+v, want g6e.xlarge 42 s, t3.micro 120 s, 222 GPU seconds", st)
	}
	// Each instance's own figure, to tell a bake's instance from its verification's.
	perInstance := map[string]float64{}
	for _, in := range e.fake.State("us-east-1", false).Regions["us-east-1"].Instances {
		perInstance[in.ID] = in.RunningSeconds
	}
	if perInstance[gpu] != 180 || perInstance[cpu] != 120 || perInstance[running] != 42 {
		t.Errorf("running_seconds %v, want %s 180, %s 120, %s 42", perInstance, gpu, cpu, running)
	}
	if other := e.fake.Usage("us-west-2"); len(other.InstanceSeconds) != 0 || other.GPUInstanceSeconds != 0 {
		t.Errorf("us-west-2 usage %+v, want none", other)
	}
}

func TestIsGPUInstanceType(t *testing.T) {
	for typ, want := range map[string]bool{
		"p5.48xlarge": true, "p6-b200.48xlarge": true, "p4d.24xlarge": true, "g6e.xlarge": true, "gr6.4xlarge": true,
		"G5.XLARGE": true, "t3.micro": false, "m7i.large": false, "c6gn.16xlarge": false, "inf2.xlarge": false, "": false,
	} {
		if got := IsGPUInstanceType(typ); got != want {
			t.Errorf("IsGPUInstanceType(%q) = %v, want %v", typ, got, want)
		}
	}
}

// The same instances read twice give the same figures to the last bit: a
// test that asserts a phase spent no GPU time subtracts two readings and
// compares with zero (TestTwoPhase saw -3.6e-15 when float seconds were
// summed in the map's random order).
func TestUsageReadingsAreExact(t *testing.T) {
	e, clock := newMeteredEnv(t)
	c := e.client("us-east-1")
	var ids []string
	for i := range 12 {
		id := aws.ToString(e.run(t, c, &ec2.RunInstancesInput{InstanceType: "p5.48xlarge"}).InstanceId)
		polls(t, c, id, 1)
		ids = append(ids, id)
		clock.Advance(time.Duration(i+1)*1234567891 + 7) // odd, fractional seconds
	}
	if _, err := c.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: ids}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		polls(t, c, id, 1)
	}
	first := e.fake.Usage("")
	if first.GPUInstanceSeconds <= 0 {
		t.Fatalf("usage %+v: the GPU instances were not metered", first)
	}
	for range 50 {
		again := e.fake.Usage("")
		if d := again.GPUInstanceSeconds - first.GPUInstanceSeconds; d != 0 {
			t.Fatalf("two readings of the same stopped instances differ by %g GPU seconds", d)
		}
		if again.InstanceSeconds["p5.48xlarge"] != first.InstanceSeconds["p5.48xlarge"] {
			t.Fatalf("instance_seconds[p5.48xlarge] %v, then %v", first.InstanceSeconds["p5.48xlarge"], again.InstanceSeconds["p5.48xlarge"])
		}
	}
}

package launch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// clock is a settable clock for the fake.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newClock(f fakeEC2) *clock {
	c := &clock{now: time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)}
	f.srv.SetNow(c.Now)
	return c
}

func TestParseTransitionTime(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   time.Time
		ok     bool
	}{
		{"User initiated (2018-06-26 07:19:42 GMT)", time.Date(2018, 6, 26, 7, 19, 42, 0, time.UTC), true},
		{"Server.InternalError (2026-12-01 20:00:00 GMT)", time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC), true},
		{"User initiated (2026-12-01 20:00:00 GMT) (2026-12-01 21:30:05 GMT)", time.Date(2026, 12, 1, 21, 30, 5, 0, time.UTC), true},
		{"", time.Time{}, false},
		{"User initiated", time.Time{}, false},
		{"User initiated (2026-12-01T20:00:00Z)", time.Time{}, false},
		{"User initiated (2026-13-45 20:00:00 GMT)", time.Time{}, false},
	} {
		got, ok := ParseTransitionTime(tc.reason)
		if ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("ParseTransitionTime(%q) = %s, %v; want %s, %v", tc.reason, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseTransitionTime(f *testing.F) {
	f.Add("User initiated (2018-06-26 07:19:42 GMT)")
	f.Add("(0000-00-00 00:00:00 GMT)")
	f.Add("")
	f.Fuzz(func(t *testing.T, reason string) {
		got, ok := ParseTransitionTime(reason)
		if !ok {
			if !got.IsZero() {
				t.Errorf("%q: not ok but %s", reason, got)
			}
			return
		}
		if got.Location() != time.UTC || !strings.Contains(reason, got.Format(time.DateTime)+" GMT)") {
			t.Errorf("%q: read %s, which it does not say", reason, got)
		}
	})
}

// A launch reads each node's launch time from EC2, and its cleanup the time of the
// termination EC2 gives: the instance's time is exactly what the fake's clock ran between.
func TestLaunchAndCleanupRecordInstanceTimes(t *testing.T) {
	f := newFake(t)
	c := newClock(f)
	start := c.Now()
	s := spec(region)
	s.Count = 2
	in, err := Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range in.Nodes() {
		if !n.LaunchTime.Equal(start) || !n.Terminated.IsZero() || !n.Lifetime().Running() {
			t.Errorf("%s: launched %s, terminated %s before the cleanup", n.ID, n.LaunchTime, n.Terminated)
		}
	}
	c.advance(9*time.Minute + 3*time.Second)
	if err := Cleanup(context.Background(), in, discard); err != nil {
		t.Fatal(err)
	}
	for _, n := range in.Nodes() {
		l := n.Lifetime()
		if l.Running() || l.Duration(time.Time{}) != 9*time.Minute+3*time.Second || l.InstanceType != "p5.48xlarge" || l.InstanceID != n.ID {
			t.Errorf("%s: lifetime %+v (%s)", n.ID, l, l.Duration(time.Time{}))
		}
	}
}

// InstanceLifetime reads a terminated instance's times from EC2, says a running one still
// runs, and gives no time for an instance EC2 does not know.
func TestInstanceLifetime(t *testing.T) {
	f := newFake(t)
	c := newClock(f)
	api := f.client(region)
	start := c.Now()
	in, err := Launch(context.Background(), api, spec(region), discard)
	if err != nil {
		t.Fatal(err)
	}
	c.advance(41*time.Minute + 12*time.Second)
	running, err := InstanceLifetime(context.Background(), api, in.ID, quick)
	if err != nil || !running.Running() || !running.Launched.Equal(start) || running.State != "running" || running.InstanceType != "p5.48xlarge" {
		t.Fatalf("running: %+v, %v", running, err)
	}
	if d := running.Duration(c.Now()); d != 41*time.Minute+12*time.Second {
		t.Errorf("running for %s until now", d)
	}
	if err := Cleanup(context.Background(), in, discard); err != nil {
		t.Fatal(err)
	}
	c.advance(time.Hour)
	ended, err := InstanceLifetime(context.Background(), api, in.ID, quick)
	if err != nil || ended.Running() || ended.State != "terminated" || ended.Duration(time.Time{}) != 41*time.Minute+12*time.Second {
		t.Fatalf("terminated: %+v, %v", ended, err)
	}
	_, err = InstanceLifetime(context.Background(), api, "i-0123456789abcdef0", quick)
	if !errors.Is(err, ErrUnknownLifetime) {
		t.Errorf("unknown instance: %v", err)
	}
	f.srv.SetFault(awsfake.OpDescribeInstances, region, awsfake.Fault{AccessDenied: true})
	if _, err := InstanceLifetime(context.Background(), api, in.ID, quick); err == nil || !strings.Contains(err.Error(), "UnauthorizedOperation") {
		t.Errorf("denied: %v", err)
	}
}

// SourceInstance reads the instance an AMI was made from (CreateImage), and none for an AMI
// that was not made from one.
func TestSourceInstance(t *testing.T) {
	f := newFake(t)
	api := f.client(region)
	in, err := Launch(context.Background(), api, spec(region), discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Cleanup(context.Background(), in, discard) })
	out, err := api.CreateImage(context.Background(), &ec2.CreateImageInput{InstanceId: aws.String(in.ID), Name: aws.String("golden")})
	if err != nil {
		t.Fatal(err)
	}
	id, created, err := SourceInstance(context.Background(), api, aws.ToString(out.ImageId), quick)
	if err != nil || id != in.ID || created.IsZero() {
		t.Errorf("made from %q at %s: %v", id, created, err)
	}
	id, _, err = SourceInstance(context.Background(), api, seedAMI(region), quick)
	if err != nil || id != "" {
		t.Errorf("the seeded DLAMI: made from %q: %v", id, err)
	}
}

// lines collects what a launch says.
type lines struct {
	mu  sync.Mutex
	got []string
}

func (l *lines) say(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, s)
}

func (l *lines) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.got {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}

// An instance that stays pending says what it waits for, with EC2's state and the launch's
// bound, at the patience's pace.
func TestWaitingToRunSaysSo(t *testing.T) {
	f := newFake(t)
	f.srv.SetFault(awsfake.OpRunInstances, region, awsfake.Fault{StuckPending: 1})
	s := spec(region)
	s.ProgressEvery = 10 * time.Millisecond
	var l lines
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := Launch(ctx, f.client(region), s, l.say); err == nil {
		t.Fatal("a launch that never runs succeeded")
	}
	if n := l.count("to run (EC2 says: pending): "); n == 0 || l.count(" of at most ") == 0 {
		t.Errorf("%d progress lines: %q", n, l.got)
	}
	assertNothingLeft(t, f)
}

// A removal the cleanup waits on says what it waits for.
func TestSlowCleanupSaysWhatItWaitsFor(t *testing.T) {
	f := newFake(t)
	s := spec(region)
	s.ProgressEvery = 10 * time.Millisecond
	in, err := Launch(context.Background(), f.client(region), s, discard)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.SetFault(awsfake.OpTerminateInstances, region, awsfake.Fault{Latency: 150 * time.Millisecond})
	var l lines
	if err := Cleanup(context.Background(), in, l.say); err != nil {
		t.Fatal(err)
	}
	if l.count("still waiting for the cleanup to terminate "+in.ID+": ") == 0 {
		t.Errorf("no progress line: %q", l.got)
	}
}

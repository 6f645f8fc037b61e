package dlamiresolve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// logRecorder keeps what the resolver logs, for assertions.
type logRecorder struct {
	t     testing.TB
	mu    sync.Mutex
	lines []string
}

func (l *logRecorder) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.t.Log(line)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

func (l *logRecorder) find(substr string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			return line
		}
	}
	return ""
}

// fastRetries keeps backoffs to a few milliseconds so that tests exercise
// many retries quickly; the budgets are the production ones.
func fastRetries(e *env) {
	e.opts.Retry = awsaccess.RetryPolicy{BaseDelay: time.Millisecond, MaxBackoff: 4 * time.Millisecond}
}

func TestThrottling(t *testing.T) {
	const r = "us-east-1"
	latest := seedID(r, "x86_64", baseTitle, "Ubuntu 24.04", latestBuild)

	t.Run("six throttles in a row on GetParameter are absorbed and logged", func(t *testing.T) {
		e := newEnv(t, r)
		fastRetries(e)
		e.fake.SetFault(awsfake.OpGetParameter, r, awsfake.Fault{Throttle: 6})
		res := e.resolver(t)
		logs := &logRecorder{t: t}
		res.Logf = logs.logf
		got, err := res.Resolve(context.Background(), r, Query{})
		if err != nil {
			t.Fatalf("Resolve: %v", err)
		}
		if got.Image.ID != latest {
			t.Errorf("resolved %s, want %s", got.Image.ID, latest)
		}
		if n := e.fake.CallCount(awsfake.OpGetParameter, r); n != 7 {
			t.Errorf("GetParameter calls = %d, want 7 (6 throttled + 1)", n)
		}
		if line := logs.find("[INFO] dlami: ssm GetParameter us-east-1: 6 throttled retries, "); line == "" {
			t.Errorf("no retry log line; got %q", logs.lines)
		}
	})

	t.Run("six RequestLimitExceeded on DescribeImages are absorbed", func(t *testing.T) {
		e := newEnv(t, r)
		fastRetries(e)
		e.fake.SetFault(awsfake.OpDescribeImages, r, awsfake.Fault{Throttle: 6})
		if _, err := e.resolver(t).Resolve(context.Background(), r, Query{}); err != nil {
			t.Fatalf("Resolve: %v", err)
		}
		if n := e.fake.CallCount(awsfake.OpDescribeImages, r); n != 7 {
			t.Errorf("DescribeImages calls = %d, want 7", n)
		}
	})

	t.Run("a permanent throttle fails at the call deadline with the actionable message", func(t *testing.T) {
		e := newEnv(t, r)
		fastRetries(e)
		e.fake.SetFault(awsfake.OpGetParameter, r, awsfake.Fault{Throttle: 1_000_000})
		res := e.resolver(t)
		res.CallTimeout = 400 * time.Millisecond
		start := time.Now()
		_, err := res.Resolve(context.Background(), r, Query{})
		took := time.Since(start)
		if err == nil {
			t.Fatal("Resolve succeeded under a permanent throttle")
		}
		t.Logf("error after %s: %v", took, err)
		for _, want := range []string{
			"us-east-1: ssm:GetParameter was still throttled by AWS (ThrottlingException: Rate exceeded) at the per-call timeout of 400ms",
			" throttled retries, ", "SSM request rate limit in us-east-1 is exhausted",
			"raise timeout (and execute_timeout)", "spread the CI matrix", "pin build",
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q", want)
			}
		}
		var te *ThrottledError
		if !errors.As(err, &te) || te.Stats.ThrottleRetries < 10 || te.Limit != "timeout" {
			t.Fatalf("want a ThrottledError with many retries against timeout, got %#v", te)
		}
		// It kept retrying until it had no room left before the deadline for another attempt
		// (the retryer keeps twice its slowest attempt in reserve, so how early that is depends
		// on the machine's load: the retryer's own verdict is asserted, not a wall-clock floor),
		// and no longer than the deadline.
		if !te.Stats.ThrottledAtDeadline {
			t.Errorf("the retryer stopped before the deadline left no room: %#v", te.Stats)
		}
		if took > 400*time.Millisecond+2*time.Second {
			t.Errorf("failed after %s, want no later than about the 400ms deadline", took)
		}
		if n := e.fake.CallCount(awsfake.OpGetParameter, r); n != te.Stats.Attempts {
			t.Errorf("fake saw %d GetParameter calls, the retryer counted %d attempts", n, te.Stats.Attempts)
		}
		if e.fake.CallCount(awsfake.OpDescribeImages, r) != 0 {
			t.Errorf("DescribeImages was called after GetParameter failed")
		}
	})

	t.Run("execute_timeout bounds throttle retries when it ends first", func(t *testing.T) {
		e := newEnv(t, r)
		fastRetries(e)
		e.fake.SetFault(awsfake.OpGetParameter, r, awsfake.Fault{Throttle: 1_000_000})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := e.resolver(t).Resolve(ctx, r, Query{})
		var te *ThrottledError
		if !errors.As(err, &te) || te.Limit != "execute_timeout" || !strings.Contains(err.Error(), "at the execute_timeout deadline of the whole lookup") {
			t.Fatalf("want a ThrottledError bounded by execute_timeout, got %v", err)
		}
	})

	t.Run("throttles do not spend the max_retries budget of 5xx", func(t *testing.T) {
		e := newEnv(t, r)
		fastRetries(e)
		e.opts.Retry.MaxRetries = 2
		e.fake.SetFault(awsfake.OpGetParameter, r, awsfake.Fault{Throttle: 5, ServerError: 100})
		_, err := e.resolver(t).Resolve(context.Background(), r, Query{})
		if err == nil || !strings.Contains(err.Error(), "ssm:GetParameter failed on all 8 attempts") ||
			!strings.Contains(err.Error(), "(after 5 throttled retries, 2 other retries, ") {
			t.Fatalf("err = %v", err)
		}
		if n := e.fake.CallCount(awsfake.OpGetParameter, r); n != 8 {
			t.Errorf("GetParameter calls = %d, want 8 (5 throttled, 3 server errors)", n)
		}
	})
}

// Errors that retrying cannot change are sent once: the fake counts them.
func TestNeverRetried(t *testing.T) {
	const r = "eu-west-1"
	tests := []struct {
		name  string
		setup func(f *awsfake.Server)
		call  func(t *testing.T, res *Resolver, cl Clients) error
		op    string
		want  string
	}{
		{
			name:  "access denied",
			setup: func(f *awsfake.Server) { f.SetFault(awsfake.OpGetParameter, "", awsfake.Fault{AccessDenied: true}) },
			call: func(t *testing.T, res *Resolver, _ Clients) error {
				_, err := res.Resolve(context.Background(), r, Query{})
				return err
			},
			op: awsfake.OpGetParameter, want: "access denied for ssm:GetParameter",
		},
		{
			name:  "parameter not found",
			setup: func(f *awsfake.Server) { f.DeleteParameter(r, paramOf("x86_64", "ubuntu-24.04")) },
			call: func(t *testing.T, res *Resolver, _ Clients) error {
				_, err := res.Resolve(context.Background(), r, Query{})
				return err
			},
			op: awsfake.OpGetParameter, want: "not found",
		},
		{
			name: "validation error",
			call: func(t *testing.T, res *Resolver, cl Clients) error {
				// An empty name passes the SDK's own checks and is refused by SSM.
				_, err := res.getParameter(context.Background(), r, cl.SSM, "", "x86_64")
				return err
			},
			op: awsfake.OpGetParameter, want: "ValidationException",
		},
		{
			name:  "EC2 unauthorized",
			setup: func(f *awsfake.Server) { f.SetFault(awsfake.OpDescribeImages, "", awsfake.Fault{AccessDenied: true}) },
			call: func(t *testing.T, res *Resolver, _ Clients) error {
				_, err := res.Resolve(context.Background(), r, Query{Build: latestBuild})
				return err
			},
			op: awsfake.OpDescribeImages, want: "UnauthorizedOperation",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, r)
			fastRetries(e)
			if tc.setup != nil {
				tc.setup(e.fake)
			}
			res := e.resolver(t)
			cl, err := res.Clients(r)
			if err != nil {
				t.Fatal(err)
			}
			err = tc.call(t, res, cl)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if n := e.fake.CallCount(tc.op, r); n != 1 {
				t.Errorf("%s was sent %d times, want once (never retried)", tc.op, n)
			}
			if strings.Contains(err.Error(), "retries") {
				t.Errorf("error claims retries: %v", err)
			}
		})
	}
}

func TestSixteenRegionsWithThrottlesResolve(t *testing.T) {
	regions := awsfake.SeedRegions
	if len(regions) != 16 {
		t.Fatalf("the fake seeds %d regions, this test wants 16", len(regions))
	}
	e := newEnv(t, regions...)
	fastRetries(e)
	for i, region := range regions {
		// Every region is throttled, some harder, as a CI matrix would be.
		e.fake.SetFault(awsfake.OpGetParameter, region, awsfake.Fault{Throttle: 6})
		e.fake.SetFault(awsfake.OpDescribeImages, region, awsfake.Fault{Throttle: i % 4})
	}
	res := e.resolver(t)
	logs := &logRecorder{t: t}
	res.Logf = logs.logf
	got, err := res.ResolveAll(context.Background(), regions, Query{Golden: &GoldenQuery{NamePrefix: "ml-golden-"}})
	if err != nil {
		t.Fatalf("ResolveAll: %v", err)
	}
	if len(got) != 16 {
		t.Fatalf("resolved %d regions, want 16", len(got))
	}
	for _, region := range regions {
		if want := seedID(region, "x86_64", baseTitle, "Ubuntu 24.04", latestBuild); got[region].Image.ID != want {
			t.Errorf("%s: %s, want %s", region, got[region].Image.ID, want)
		}
		if n := e.fake.CallCount(awsfake.OpGetParameter, region); n != 7 {
			t.Errorf("%s: GetParameter calls = %d, want 7", region, n)
		}
		if logs.find("ssm GetParameter "+region+": 6 throttled retries") == "" {
			t.Errorf("%s: no retry log line", region)
		}
	}
}

// BenchmarkSixThrottlesAbsorbed resolves the default DLAMI through six
// ThrottlingExceptions in a row on GetParameter, with backoffs of at most
// 2 ms: what the throttle handling costs beyond the waits themselves.
func BenchmarkSixThrottlesAbsorbed(b *testing.B) {
	const r = "us-east-1"
	e := newEnv(b, r)
	e.opts.Retry = awsaccess.RetryPolicy{BaseDelay: time.Millisecond / 4, MaxBackoff: 2 * time.Millisecond}
	res := e.resolver(b)
	res.Logf = func(string, ...any) {}
	ctx := context.Background()
	for b.Loop() {
		e.fake.SetFault(awsfake.OpGetParameter, r, awsfake.Fault{Throttle: 6})
		if _, err := res.Resolve(ctx, r, Query{}); err != nil {
			b.Fatal(err)
		}
	}
	calls := e.fake.CallCount(awsfake.OpGetParameter, r)
	if calls != 7*b.N {
		b.Fatalf("GetParameter calls = %d for %d resolves, want 7 each", calls, b.N)
	}
	b.ReportMetric(float64(calls)/float64(b.N), "GetParameter-calls/op")
}

// The retryer the resolver gives one call must not leak into the next:
// a call after a throttled one starts with a fresh budget.
func TestRetryerIsPerCall(t *testing.T) {
	const r = "us-east-1"
	e := newEnv(t, r)
	fastRetries(e)
	res := e.resolver(t)
	cl, err := res.Clients(r)
	if err != nil {
		t.Fatal(err)
	}
	name := paramOf("x86_64", "ubuntu-24.04")
	for i := range 3 {
		e.fake.SetFault(awsfake.OpGetParameter, r, awsfake.Fault{Throttle: 3})
		call, cancel := res.startCall(context.Background(), r, "ssm", "GetParameter")
		_, err := cl.SSM.GetParameter(call.ctx, &ssm.GetParameterInput{Name: aws.String(name)}, call.ssmRetryer)
		cancel()
		st := res.finish(call)
		if err != nil || st.ThrottleRetries != 3 || st.Attempts != 4 {
			t.Fatalf("call %d: err %v stats %+v, want 3 throttled retries in 4 attempts", i, err, st)
		}
	}
}

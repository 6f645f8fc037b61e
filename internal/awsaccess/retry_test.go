package awsaccess

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func constRand(v float64) func() float64 { return func() float64 { return v } }

func TestBackoff(t *testing.T) {
	tests := []struct {
		name   string
		policy RetryPolicy
		n      int
		want   time.Duration
	}{
		{"first retry is half the base at 0.5", RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxBackoff: time.Second, Rand: constRand(0.5)}, 1, 50 * time.Millisecond},
		{"doubles", RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxBackoff: time.Second, Rand: constRand(0.5)}, 3, 200 * time.Millisecond},
		{"capped at MaxBackoff", RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxBackoff: time.Second, Rand: constRand(0.5)}, 5, 500 * time.Millisecond},
		{"huge n stays capped", RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxBackoff: time.Second, Rand: constRand(0.5)}, 1000, 500 * time.Millisecond},
		{"n below 1 is the first retry", RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxBackoff: time.Second, Rand: constRand(0.5)}, 0, 50 * time.Millisecond},
		{"zero jitter waits zero", RetryPolicy{BaseDelay: 100 * time.Millisecond, Rand: constRand(0)}, 4, 0},
		{"defaults: 250ms base", RetryPolicy{Rand: constRand(0.5)}, 1, 125 * time.Millisecond},
		{"defaults: 20s cap", RetryPolicy{Rand: constRand(0.5)}, 30, 10 * time.Second},
		{"out-of-range source falls back to the middle", RetryPolicy{BaseDelay: time.Second, MaxBackoff: time.Minute, Rand: constRand(1)}, 1, 500 * time.Millisecond},
		{"negative source falls back to the middle", RetryPolicy{BaseDelay: time.Second, MaxBackoff: time.Minute, Rand: constRand(-3)}, 1, 500 * time.Millisecond},
		{"NaN source falls back to the middle", RetryPolicy{BaseDelay: time.Second, MaxBackoff: time.Minute, Rand: constRand(math.NaN())}, 1, 500 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.policy.Backoff(tc.n); got != tc.want {
				t.Errorf("Backoff(%d) = %s, want %s", tc.n, got, tc.want)
			}
		})
	}
}

// Sixteen regions throttled at the same moment must not come back at the
// same moment: with the default source their waits differ and stay below
// the ceiling.
func TestBackoffJitterSpreadsRetries(t *testing.T) {
	const retry = 3 // ceiling 1s with the defaults
	ceiling := DefaultBaseDelay << (retry - 1)
	seen := map[time.Duration]bool{}
	for range 16 {
		d := RetryPolicy{}.Backoff(retry)
		if d < 0 || d >= ceiling {
			t.Fatalf("Backoff(%d) = %s, want within [0, %s)", retry, d, ceiling)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Errorf("16 retries all wait %v: no jitter", seen)
	}
}

func apiErr(code string) error { return &smithy.GenericAPIError{Code: code, Message: "m"} }

func httpErr(status int) error {
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: http.Header{}}},
		Err:      errors.New("status " + http.StatusText(status)),
	}}
}

func TestRetryClassification(t *testing.T) {
	tests := []struct {
		name              string
		err               error
		throttle, retryIt bool
	}{
		{"SSM ThrottlingException", apiErr("ThrottlingException"), true, true},
		{"STS Throttling", apiErr("Throttling"), true, true},
		{"EC2 RequestLimitExceeded", apiErr("RequestLimitExceeded"), true, true},
		{"TooManyRequestsException", apiErr("TooManyRequestsException"), true, true},
		{"HTTP 429 without a code", httpErr(http.StatusTooManyRequests), true, true},
		{"HTTP 500", httpErr(http.StatusInternalServerError), false, true},
		{"HTTP 503", httpErr(http.StatusServiceUnavailable), false, true},
		{"AccessDeniedException", apiErr("AccessDeniedException"), false, false},
		{"UnauthorizedOperation", apiErr("UnauthorizedOperation"), false, false},
		{"ParameterNotFound", apiErr("ParameterNotFound"), false, false},
		{"ValidationException", apiErr("ValidationException"), false, false},
		{"HTTP 400", httpErr(http.StatusBadRequest), false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsThrottle(tc.err); got != tc.throttle {
				t.Errorf("IsThrottle = %v, want %v", got, tc.throttle)
			}
			if got := NewCallRetryer(RetryPolicy{}).IsErrorRetryable(tc.err); got != tc.retryIt {
				t.Errorf("IsErrorRetryable = %v, want %v", got, tc.retryIt)
			}
		})
	}
}

// fakeClock is a test clock the retryer's backoffs advance by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// drive plays the SDK's retry loop against r: every attempt fails with
// next(attempt), each granted backoff advances the clock. It returns the
// error GetRetryToken stopped with.
func drive(t *testing.T, ctx context.Context, r *CallRetryer, clock *fakeClock, next func(attempt int) error) error {
	t.Helper()
	for attempt := 1; attempt < 100_000; attempt++ {
		if _, err := r.GetAttemptToken(ctx); err != nil {
			t.Fatalf("GetAttemptToken: %v", err)
		}
		opErr := next(attempt)
		if !r.IsErrorRetryable(opErr) {
			return opErr
		}
		if _, err := r.GetRetryToken(ctx, opErr); err != nil {
			return err
		}
		d, err := r.RetryDelay(attempt, opErr)
		if err != nil {
			t.Fatalf("RetryDelay: %v", err)
		}
		clock.t = clock.t.Add(d)
	}
	t.Fatal("the retryer never stopped")
	return nil
}

func TestCallRetryerBudgets(t *testing.T) {
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	throttle, five00 := apiErr("ThrottlingException"), httpErr(http.StatusInternalServerError)
	tests := []struct {
		name         string
		policy       RetryPolicy
		deadline     time.Duration // 0: no deadline
		fail         func(attempt int) error
		wantStop     func(err error) bool
		wantThrottle func(n int) bool
		wantOther    int
		atDeadline   bool
	}{
		{
			name:   "throttles retry until the deadline, the last backoff shortened to fit",
			policy: RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxBackoff: time.Second, Rand: constRand(0.9)},
			// 0.09+0.18+0.36+0.72+0.9+0.9+… : 13 backoffs end at 9.45s, the 14th
			// is cut to 0.54s to leave 10ms for its attempt, then no room is left.
			deadline:     10 * time.Second,
			fail:         func(int) error { return throttle },
			wantStop:     func(err error) bool { return errors.Is(err, errThrottleDeadline) },
			wantThrottle: func(n int) bool { return n == 14 },
			atDeadline:   true,
		},
		{
			name:         "throttles are not held to max_retries",
			policy:       RetryPolicy{MaxRetries: 1, BaseDelay: time.Millisecond, MaxBackoff: time.Millisecond, Rand: constRand(0.5)},
			deadline:     time.Second,
			fail:         func(int) error { return throttle },
			wantStop:     func(err error) bool { return errors.Is(err, errThrottleDeadline) },
			wantThrottle: func(n int) bool { return n > 1000 },
			atDeadline:   true,
		},
		{
			name:         "without a deadline throttles still end",
			policy:       RetryPolicy{BaseDelay: time.Millisecond, Rand: constRand(0.5)},
			fail:         func(int) error { return throttle },
			wantStop:     func(err error) bool { return errors.Is(err, errThrottleDeadline) },
			wantThrottle: func(n int) bool { return n == throttleRetriesWithoutDeadline },
			atDeadline:   true,
		},
		{
			name:         "5xx gets the standard budget",
			policy:       RetryPolicy{MaxRetries: 2, Rand: constRand(0.5)},
			deadline:     time.Hour,
			fail:         func(int) error { return five00 },
			wantStop:     func(err error) bool { var m *retry.MaxAttemptsError; return errors.As(err, &m) && m.Attempt == 3 },
			wantThrottle: func(n int) bool { return n == 0 },
			wantOther:    2,
		},
		{
			name:     "throttles do not use up the 5xx budget",
			policy:   RetryPolicy{MaxRetries: 2, BaseDelay: time.Millisecond, Rand: constRand(0.5)},
			deadline: time.Hour,
			fail: func(a int) error {
				if a <= 6 {
					return throttle
				}
				return five00
			},
			wantStop:     func(err error) bool { var m *retry.MaxAttemptsError; return errors.As(err, &m) && m.Attempt == 9 },
			wantThrottle: func(n int) bool { return n == 6 },
			wantOther:    2,
		},
		{
			name:         "access denied is never retried",
			policy:       RetryPolicy{},
			deadline:     time.Hour,
			fail:         func(int) error { return apiErr("AccessDeniedException") },
			wantStop:     func(err error) bool { return APICode(err) == "AccessDeniedException" },
			wantThrottle: func(n int) bool { return n == 0 },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: start}
			tc.policy.Now = clock.now
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, start.Add(tc.deadline))
				defer cancel()
			}
			r := NewCallRetryer(tc.policy)
			err := drive(t, ctx, r, clock, tc.fail)
			st := r.Stats()
			if !tc.wantStop(err) {
				t.Errorf("stopped with %v", err)
			}
			if !tc.wantThrottle(st.ThrottleRetries) || st.OtherRetries != tc.wantOther || st.ThrottledAtDeadline != tc.atDeadline {
				t.Errorf("stats = %+v, want other=%d atDeadline=%v", st, tc.wantOther, tc.atDeadline)
			}
			if st.Attempts != st.Retries()+1 {
				t.Errorf("attempts %d, retries %d: want one more attempt than retries", st.Attempts, st.Retries())
			}
			if tc.deadline > 0 && clock.t.After(start.Add(tc.deadline)) {
				t.Errorf("backoffs ran to %s, past the deadline %s", clock.t.Sub(start), tc.deadline)
			}
			if tc.atDeadline && tc.deadline > 0 && clock.t.Before(start.Add(tc.deadline-2*minAttemptReserve)) {
				t.Errorf("gave up at %s, well before the deadline %s", clock.t.Sub(start), tc.deadline)
			}
			if st.Elapsed != clock.t.Sub(start) {
				t.Errorf("Elapsed = %s, want %s (the injected clock)", st.Elapsed, clock.t.Sub(start))
			}
		})
	}
}

func TestRetryStatsString(t *testing.T) {
	tests := []struct {
		st   RetryStats
		want string
	}{
		{RetryStats{ThrottleRetries: 6, Elapsed: 2345 * time.Millisecond}, "6 throttled retries, 2.3s"},
		{RetryStats{ThrottleRetries: 1, Elapsed: 40 * time.Millisecond}, "1 throttled retry, 0s"},
		{RetryStats{ThrottleRetries: 2, OtherRetries: 1, Elapsed: time.Second}, "2 throttled retries, 1 other retry, 1s"},
	}
	for _, tc := range tests {
		if got := tc.st.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.st, got, tc.want)
		}
	}
}

// FuzzBackoff: whatever the retry number, settings and jitter source, a
// backoff is never negative and never longer than its cap.
func FuzzBackoff(f *testing.F) {
	f.Add(1, int64(250*time.Millisecond), int64(20*time.Second), 0.5)
	f.Add(64, int64(time.Hour), int64(time.Millisecond), 0.999)
	f.Add(-5, int64(-1), int64(0), math.Inf(1))
	f.Fuzz(func(t *testing.T, n int, base, maxBackoff int64, jitter float64) {
		p := RetryPolicy{BaseDelay: time.Duration(base), MaxBackoff: time.Duration(maxBackoff), Rand: constRand(jitter)}
		limit := time.Duration(maxBackoff)
		if limit <= 0 {
			limit = DefaultMaxBackoff
		}
		if d := p.Backoff(n); d < 0 || d > limit {
			t.Fatalf("Backoff(%d) with base %d, cap %d, jitter %v = %s: outside [0, %s]", n, base, maxBackoff, jitter, d, limit)
		}
	})
}

package awsaccess

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// RetryPolicy says how one SSM or EC2 call is retried.
//
// Throttling is the account's request rate limit speaking: SSM's public
// parameters are rate-limited per account, and a CI matrix of many regions
// and instance types reaches that limit together. Waiting is what fixes it,
// so a throttled call is retried, with jittered exponential backoff, until
// the call's deadline (the data source's `timeout`, itself bounded by
// `execute_timeout`) instead of after a fixed number of attempts. Other
// retryable errors (5xx, connection resets) get MaxRetries, the SDK's
// standard budget. Errors that cannot change by retrying (access denied,
// a missing parameter, validation) are never retried.
type RetryPolicy struct {
	// MaxRetries bounds the retries of retryable errors other than
	// throttling; 0 means DefaultMaxRetries.
	MaxRetries int
	// BaseDelay is the ceiling of the first backoff; it doubles with every
	// retry of the same kind up to MaxBackoff. 0 means DefaultBaseDelay.
	BaseDelay time.Duration
	// MaxBackoff caps one backoff; 0 means DefaultMaxBackoff.
	MaxBackoff time.Duration
	// Rand returns a number in [0, 1) that picks each backoff between zero
	// and its ceiling ("full jitter"), so that regions and CI jobs that were
	// throttled together do not retry together. nil means math/rand/v2.
	Rand func() float64
	// Now is the clock for deadlines and elapsed times; nil means time.Now.
	// It must be the clock the calls' context deadlines are set on, so
	// only tests that drive the retryer themselves replace it.
	Now func() time.Time
}

// The SDK's standard retryer makes 3 attempts and caps a backoff at 20 s.
const (
	DefaultMaxRetries = 2
	DefaultBaseDelay  = 250 * time.Millisecond
	DefaultMaxBackoff = 20 * time.Second
	// throttleRetriesWithoutDeadline bounds throttle retries of a call that
	// has no deadline (the resolver always sets one; this keeps the
	// retryer finite whoever uses it).
	throttleRetriesWithoutDeadline = 30
	// minAttemptReserve is the least time kept free before the deadline
	// for the attempt after a backoff; twice the slowest attempt so far
	// is kept when that is more.
	minAttemptReserve = 10 * time.Millisecond
)

func (p RetryPolicy) maxRetries() int {
	if p.MaxRetries > 0 {
		return p.MaxRetries
	}
	return DefaultMaxRetries
}

// Time is the policy's clock now: Now, else time.Now.
func (p RetryPolicy) Time() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Backoff is the wait before the nth retry (n ≥ 1) of one kind of error:
// a uniform pick between zero and min(MaxBackoff, BaseDelay·2ⁿ⁻¹).
func (p RetryPolicy) Backoff(n int) time.Duration {
	base, maxBackoff := p.BaseDelay, p.MaxBackoff
	if base <= 0 {
		base = DefaultBaseDelay
	}
	if maxBackoff <= 0 {
		maxBackoff = DefaultMaxBackoff
	}
	ceiling := maxBackoff
	if n < 1 {
		n = 1
	}
	// Doubling stops before it can overflow: 2^40 times any base is past
	// any sensible cap.
	if n <= 40 {
		if c := base << (n - 1); c > 0 && c < maxBackoff {
			ceiling = c
		}
	}
	r := rand.Float64
	if p.Rand != nil {
		r = p.Rand
	}
	f := r()
	if f < 0 || f >= 1 || f != f {
		// A broken source must not turn into a negative or endless wait.
		f = 0.5
	}
	return time.Duration(f * float64(ceiling))
}

// IsThrottle reports whether err is AWS refusing a call because of the
// request rate: one of the throttling error codes, or HTTP 429.
func IsThrottle(err error) bool {
	switch APICode(err) {
	case "ThrottlingException", "Throttling", "RequestLimitExceeded", "TooManyRequestsException":
		return true
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusTooManyRequests
}

// RetryStats is what the retries of one call amounted to.
type RetryStats struct {
	Attempts        int           // requests sent
	ThrottleRetries int           // retries after a throttling error
	OtherRetries    int           // retries after another retryable error
	Elapsed         time.Duration // from the first attempt to the end of the call
	// LastThrottle is the last throttling error seen, nil if none.
	LastThrottle error
	// ThrottledAtDeadline is set when the call stopped retrying a throttle
	// because no time was left before its deadline for another attempt.
	ThrottledAtDeadline bool
}

// Retries is the number of retries of either kind.
func (s RetryStats) Retries() int { return s.ThrottleRetries + s.OtherRetries }

// String is the form the log and the error messages use, e.g.
// "6 throttled retries, 2.3s".
func (s RetryStats) String() string {
	msg := plural(s.ThrottleRetries, "throttled retry", "throttled retries")
	if s.OtherRetries > 0 {
		msg += ", " + plural(s.OtherRetries, "other retry", "other retries")
	}
	return fmt.Sprintf("%s, %s", msg, s.Elapsed.Round(100*time.Millisecond))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// errThrottleDeadline stops the SDK's retry loop: a throttled call has no
// time left before its deadline for another backoff and attempt.
var errThrottleDeadline = errors.New("still throttled with no time left before the call's deadline for another attempt")

// CallRetryer is the aws.RetryerV2 of one call, which applies a RetryPolicy. It is made per
// call (NewCallRetryer, passed in the call's options) because its budget is per call: MaxAttempts cannot say
// "unlimited for throttles, MaxRetries+1 for the rest", so it reports no
// limit and GetRetryToken enforces both budgets. The SDK calls it from one
// goroutine, one attempt after the other.
type CallRetryer struct {
	policy   RetryPolicy
	standard *retry.Standard // classifies the retryable errors that are not throttles
	start    time.Time
	pending  time.Duration // the backoff GetRetryToken chose, returned by RetryDelay
	// attemptStart and slowest time the attempts, to keep room for one
	// more before the deadline.
	attemptStart time.Time
	slowest      time.Duration
	stats        RetryStats
}

// NewCallRetryer returns the retryer of one call, started now.
func NewCallRetryer(p RetryPolicy) *CallRetryer {
	return &CallRetryer{policy: p, standard: retry.NewStandard(), start: p.Time()}
}

var _ aws.RetryerV2 = (*CallRetryer)(nil)

func (r *CallRetryer) IsErrorRetryable(err error) bool {
	return IsThrottle(err) || r.standard.IsErrorRetryable(err)
}

// MaxAttempts is 0, which the SDK reads as no limit: GetRetryToken applies
// the two budgets.
func (r *CallRetryer) MaxAttempts() int { return 0 }

// GetRetryToken grants a retry, or refuses it with the reason. Throttles
// are retried until the deadline: a backoff that would run past the time
// the next attempt needs is shortened to fit, and only when no time is
// left for an attempt does the call stop.
func (r *CallRetryer) GetRetryToken(ctx context.Context, opErr error) (func(error) error, error) {
	now := r.policy.Time()
	if took := now.Sub(r.attemptStart); !r.attemptStart.IsZero() && took > r.slowest {
		r.slowest = took
	}
	if IsThrottle(opErr) {
		r.stats.LastThrottle = opErr
		next := r.stats.ThrottleRetries + 1
		d := r.policy.Backoff(next)
		deadline, ok := ctx.Deadline()
		if !ok && next > throttleRetriesWithoutDeadline {
			r.stats.ThrottledAtDeadline = true
			return nil, errThrottleDeadline
		}
		if ok {
			room := deadline.Sub(now) - max(2*r.slowest, minAttemptReserve)
			if room <= 0 {
				r.stats.ThrottledAtDeadline = true
				return nil, errThrottleDeadline
			}
			d = min(d, room)
		}
		r.stats.ThrottleRetries = next
		r.pending = d
		return nopRelease, nil
	}
	if r.stats.OtherRetries >= r.policy.maxRetries() {
		return nil, &retry.MaxAttemptsError{Attempt: r.stats.Attempts, Err: opErr}
	}
	r.stats.OtherRetries++
	r.pending = r.policy.Backoff(r.stats.OtherRetries)
	return nopRelease, nil
}

func (r *CallRetryer) RetryDelay(int, error) (time.Duration, error) { return r.pending, nil }

func (r *CallRetryer) GetInitialToken() func(error) error { return nopRelease }

// GetAttemptToken counts attempts; no client-side rate limit applies (the
// SDK's retry quota is per client and would stop throttle retries early).
func (r *CallRetryer) GetAttemptToken(context.Context) (func(error) error, error) {
	r.stats.Attempts++
	r.attemptStart = r.policy.Time()
	return nopRelease, nil
}

func nopRelease(error) error { return nil }

// Stats returns the call's statistics so far.
func (r *CallRetryer) Stats() RetryStats {
	s := r.stats
	s.Elapsed = r.policy.Time().Sub(r.start)
	return s
}

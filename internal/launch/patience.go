package launch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
	"github.com/dlami-bake/packer-plugin-dlami/internal/pause"
	"github.com/dlami-bake/packer-plugin-dlami/internal/progress"
)

const (
	// CleanupTimeout is how long a cleanup keeps retrying, detached from the cancellation of
	// the run that launched: termination takes a minute or two, and EC2 refuses to delete the
	// security group until the instance's network interface is gone. It is also the deadline
	// of one tagging or one deregistration of an AMI, and of each step of a launch.
	CleanupTimeout = 10 * time.Minute
	// CallTimeout bounds each EC2 call, so that one call that never answers cannot use up an
	// operation's time (awsaccess.HTTPTimeout bounds each HTTP attempt inside it).
	CallTimeout = time.Minute
	// DefaultPoll is the first backoff between retries, and how often an instance's state is
	// read.
	DefaultPoll = 5 * time.Second
)

// Patience is how the calls of a launch, of its cleanup and of what carries out a verdict
// (tagging, deregistration) are retried: each operation (one step of a launch, one resource's
// deletion, one image's tagging or deregistration) retries throttled, failed and unanswered
// calls with jittered exponential backoff until its own deadline, each call bounded. EC2
// answers a burst of calls with RequestLimitExceeded, and an answer can be lost after EC2
// acted: every operation here is written so that trying it again is safe.
type Patience struct {
	// Poll is the first backoff (it doubles up to 6×Poll) and how often an instance's state
	// is read; 0 means DefaultPoll.
	Poll time.Duration
	// Timeout bounds one operation (a whole cleanup, a tagging, a deregistration, a step of a
	// launch); 0 means CleanupTimeout.
	Timeout time.Duration
	// CallTimeout bounds one call; 0 means CallTimeout.
	CallTimeout time.Duration
	// ProgressEvery is how often a long wait (an instance to run, a removal the cleanup keeps
	// retrying) says what it waits for; 0 means progress.DefaultEvery.
	ProgressEvery time.Duration
}

// pace is how often the waits report.
func (p Patience) pace() progress.Pace { return progress.Pace{Every: p.ProgressEvery} }

func (p Patience) poll() time.Duration        { return cmp.Or(p.Poll, DefaultPoll) }
func (p Patience) timeout() time.Duration     { return cmp.Or(p.Timeout, CleanupTimeout) }
func (p Patience) callTimeout() time.Duration { return cmp.Or(p.CallTimeout, CallTimeout) }

// retry calls f, each call bounded by the call timeout, until it succeeds, final says its error
// cannot change by trying again, or ctx ends; it waits a jittered backoff between calls. It
// returns f's last error, saying how often it tried when the deadline ended it.
func (p Patience) retry(ctx context.Context, final func(error) bool, f func(context.Context) error) error {
	return p.retryCalls(ctx, final, func(ctx context.Context) error { return p.call(ctx, f) })
}

// retryCalls is retry for an f that makes several calls and bounds each itself (p.call), so
// that a call that hangs does not leave the next one (a read-back, a lookup) without time.
func (p Patience) retryCalls(ctx context.Context, final func(error) bool, f func(context.Context) error) error {
	backoff := awsaccess.RetryPolicy{BaseDelay: p.poll(), MaxBackoff: 6 * p.poll()}
	var answered error // the last error that was not the deadline cutting a call short
	for n := 1; ; n++ {
		err := f(ctx)
		if err == nil {
			return nil
		}
		if final != nil && final(err) {
			return err
		}
		if ctx.Err() == nil || answered == nil {
			answered = err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (still failing at the deadline after %d tries)", answered, n)
		}
		if perr := pause.Sleep(ctx, max(backoff.Backoff(n), p.poll()/4)); perr != nil {
			return fmt.Errorf("%w (still failing at the deadline after %d tries)", answered, n)
		}
	}
}

// call makes one call bounded by the call timeout.
func (p Patience) call(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, p.callTimeout())
	defer cancel()
	return f(ctx)
}

// denied is the final error of every retried operation: a missing IAM permission does not
// grant itself by waiting, and the deadline is better spent on the next resource.
func denied(err error) bool { return awsaccess.IsAccessDenied(err) }

// transient reports whether a launch call's error may pass by trying again: throttling, a 5xx,
// a connection that dropped (the answer may be lost after EC2 acted), a call that did not
// answer within its bound. A capacity refusal is not (the next candidate is the retry), nor is
// anything EC2 refused on its merits.
func transient(err error) bool {
	switch {
	case err == nil, IsCapacity(err):
		return false
	case awsaccess.IsThrottle(err):
		return true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, errNotYet):
		// The call's own bound (the caller's deadline is checked apart), or EC2 not caught up.
		return true
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
		return true
	}
	return retry.RetryableConnectionError{}.IsErrorRetryable(err) == aws.TrueTernary
}

// lasting is the final-error test of a launch step: whatever is not transient.
func lasting(err error) bool { return !transient(err) }

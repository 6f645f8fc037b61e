package dlamiresolve

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
)

// ParameterNotFoundError says a parameter is missing and what exists instead.
type ParameterNotFoundError struct {
	Region    string
	Name      string
	Searched  string   // path listed for alternatives
	Available []string // ami_type values found under Searched, sorted
	Nearest   string   // closest ami_type to the one asked for, "" if none
	ListErr   error    // why listing failed, if it did
}

func (e *ParameterNotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: SSM parameter %s not found", e.Region, e.Name)
	switch {
	case e.ListErr != nil:
		fmt.Fprintf(&b, " (listing %s for alternatives failed too: %v)", e.Searched, e.ListErr)
	case len(e.Available) == 0:
		fmt.Fprintf(&b, "; no DLAMI parameters exist under %s in this region", e.Searched)
	default:
		if e.Nearest != "" {
			fmt.Fprintf(&b, "; nearest DLAMI under %s: %q (%s/%s/latest/ami-id)", e.Searched, e.Nearest, e.Searched, e.Nearest)
		}
		const show = 25
		list := e.Available
		more := ""
		if len(list) > show {
			more = fmt.Sprintf(" and %d more", len(list)-show)
			list = list[:show]
		}
		fmt.Fprintf(&b, "; available: %s%s", strings.Join(list, ", "), more)
	}
	return b.String()
}

// RegionError is the failure of one region in a multi-region resolve.
type RegionError struct {
	Region string
	Err    error
}

// RegionsError lists every region that failed.
type RegionsError struct {
	Total  int
	Failed []RegionError
}

func (e *RegionsError) Error() string {
	regions := make([]string, len(e.Failed))
	for i, f := range e.Failed {
		regions[i] = f.Region
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d regions failed (%s):", len(e.Failed), e.Total, strings.Join(regions, ", "))
	for _, f := range e.Failed {
		fmt.Fprintf(&b, "\n  - %v", f.Err)
	}
	return b.String()
}

// Unwrap exposes every region's error to errors.Is/As.
func (e *RegionsError) Unwrap() []error {
	out := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		out[i] = f.Err
	}
	return out
}

func sortRegionErrors(errs []RegionError, order []string) {
	pos := map[string]int{}
	for i, r := range order {
		pos[r] = i
	}
	sort.SliceStable(errs, func(a, b int) bool { return pos[errs[a].Region] < pos[errs[b].Region] })
}

// callError turns an SDK error from one call into an error that names the
// region, the IAM action and what to do; when the call was retried, the
// message says how often.
func (r *Resolver) callError(err error, call *awsCall, st awsaccess.RetryStats, action, resource string) error {
	e := r.describeCallError(err, call, st, action, resource)
	if st.Retries() > 0 && !errors.As(e, new(*ThrottledError)) {
		return &awsaccess.RetriedError{Err: e, Stats: st}
	}
	return e
}

func (r *Resolver) describeCallError(err error, call *awsCall, st awsaccess.RetryStats, action, resource string) error {
	region, timeout := call.region, r.callTimeout()
	if isCreds, assume := awsaccess.CredentialsFailure(err); assume {
		role := r.AssumeRoleARN
		if role == "" {
			role = "the assume_role.role_arn"
		}
		if awsaccess.IsAccessDenied(err) {
			return &awsaccess.AccessDeniedError{Region: region, Action: "sts:AssumeRole", Resource: role, Err: err}
		}
		return fmt.Errorf("%s: assuming role %s before %s failed: %w", region, role, action, err)
	} else if isCreds {
		return fmt.Errorf("%s: no usable AWS credentials for %s: set access_key and secret_key, profile (and shared_credentials_file), or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run where an instance role is available: %w", region, action, err)
	}
	if awsaccess.IsAccessDenied(err) {
		return &awsaccess.AccessDeniedError{Region: region, Action: action, Resource: resource, Err: err}
	}
	// A call that was throttled and then ran out of time, however the
	// SDK's loop ended (no room for another backoff, or the deadline cut a
	// backoff or an attempt short), failed because of the rate limit.
	if st.LastThrottle != nil && (st.ThrottledAtDeadline || awsaccess.IsThrottle(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.As(err, new(*aws.RequestCanceledError))) {
		cause := err
		if st.ThrottledAtDeadline {
			// The SDK joined the throttle with the retryer's reason to stop,
			// which the message already says in words.
			cause = st.LastThrottle
		}
		return &ThrottledError{Region: region, Action: action, Limit: call.limit, Timeout: timeout, Stats: st, Err: cause}
	}
	var maxErr *retry.MaxAttemptsError
	if errors.As(err, &maxErr) {
		return fmt.Errorf("%s: %s failed on all %d attempts (retried with backoff; raise max_retries or try later): %w",
			region, action, maxErr.Attempt, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		if call.limit == "execute_timeout" {
			return fmt.Errorf("%s: %s did not answer before the execute_timeout deadline of the whole lookup (raise execute_timeout, or check the endpoint and network): %w",
				region, action, err)
		}
		return fmt.Errorf("%s: %s did not answer within %s (raise timeout, or check the endpoint and network): %w",
			region, action, timeout, err)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %s cancelled: %w", region, action, err)
	}
	var de *smithy.DeserializationError
	if errors.As(err, &de) {
		return fmt.Errorf("%s: %s returned a response that could not be parsed (a proxy or wrong endpoint?): %w", region, action, err)
	}
	return fmt.Errorf("%s: %s: %w", region, action, err)
}

// ThrottledError is a call that AWS kept throttling until its deadline.
type ThrottledError struct {
	Region, Action string
	// Limit is the setting whose deadline ended the retries: "timeout" or
	// "execute_timeout"; Timeout is the per-call timeout.
	Limit   string
	Timeout time.Duration
	Stats   awsaccess.RetryStats
	Err     error
}

func (e *ThrottledError) Error() string {
	deadline := fmt.Sprintf("the per-call timeout of %s", e.Timeout)
	if e.Limit == "execute_timeout" {
		deadline = "the execute_timeout deadline of the whole lookup"
	}
	service, fixes := "EC2", "raise timeout (and execute_timeout), or spread the CI matrix (fewer regions and instance types at a time, or staggered start times)"
	if strings.HasPrefix(e.Action, "ssm:") {
		service = "SSM"
		fixes = "raise timeout (and execute_timeout), spread the CI matrix (fewer regions and instance types at a time, or staggered start times), or pin build (a pinned build is found with ec2:DescribeImages, without SSM)"
	}
	return fmt.Sprintf("%s: %s was still throttled by AWS (%s) at %s (%s). The account's %s request rate limit in %s is exhausted (every job and region of a CI matrix shares it): %s: %v",
		e.Region, e.Action, awsaccess.APIMessage(e.Stats.LastThrottle), deadline, e.Stats, service, e.Region, fixes, e.Err)
}

func (e *ThrottledError) Unwrap() error { return e.Err }

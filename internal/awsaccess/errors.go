package awsaccess

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/smithy-go"
)

// AccessDeniedError says which IAM permission is missing, on what.
type AccessDeniedError struct {
	Region   string
	Action   string // e.g. "ssm:GetParameter"
	Resource string // ARN, or "*" for actions without resource-level permissions
	Err      error
}

func (e *AccessDeniedError) Error() string {
	return fmt.Sprintf("%s: access denied for %s: allow action %q on resource %q for the identity Packer runs as (AWS said: %v)",
		e.Region, e.Action, e.Action, e.Resource, APIMessage(e.Err))
}

func (e *AccessDeniedError) Unwrap() error { return e.Err }

// APICode is the AWS error code of err ("RequestLimitExceeded"), or "" when err is not an
// answer from AWS (a network error, a cancelled context).
func APICode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// APIMessage is "code: message" of an AWS error, else err's text.
func APIMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if m := ae.ErrorMessage(); m != "" {
			return ae.ErrorCode() + ": " + m
		}
		return ae.ErrorCode()
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// IsAccessDenied reports whether err is AWS refusing the call for want of a permission.
func IsAccessDenied(err error) bool {
	switch APICode(err) {
	case "AccessDeniedException", "AccessDenied", "UnauthorizedOperation":
		return true
	}
	return false
}

// CredentialsFailure reports whether err came from getting credentials rather than from the
// call itself, and whether an sts:AssumeRole was it.
func CredentialsFailure(err error) (isCreds, assumeRole bool) {
	if !strings.Contains(err.Error(), "get credentials") {
		return false, false
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		var op *smithy.OperationError
		if errors.As(e, &op) && op.Service() == "STS" && op.Operation() == "AssumeRole" {
			return true, true
		}
	}
	return true, false
}

// RetriedError adds the retry count to the failure of a retried call.
type RetriedError struct {
	Err   error
	Stats RetryStats
}

func (e *RetriedError) Error() string { return fmt.Sprintf("%v (after %s)", e.Err, e.Stats) }

func (e *RetriedError) Unwrap() error { return e.Err }

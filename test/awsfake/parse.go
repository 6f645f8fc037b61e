package awsfake

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// CredentialScope is the part of a SigV4 Authorization header that says who
// signed the request and for which region and service.
type CredentialScope struct {
	AccessKeyID string
	Date        string
	Region      string
	Service     string
}

// ParseCredentialScope extracts the credential scope from a SigV4
// Authorization header such as
//
//	AWS4-HMAC-SHA256 Credential=AKID/20261130/us-east-1/ssm/aws4_request, SignedHeaders=..., Signature=...
//
// The fake routes by the signed region, exactly as AWS does: an SDK client
// configured for eu-west-1 signs for eu-west-1 even when its endpoint is local.
func ParseCredentialScope(header string) (CredentialScope, error) {
	const algo = "AWS4-HMAC-SHA256"
	rest, ok := strings.CutPrefix(strings.TrimSpace(header), algo)
	if !ok {
		return CredentialScope{}, errors.New("authorization: not an AWS4-HMAC-SHA256 signature")
	}
	for _, part := range strings.Split(rest, ",") {
		part = strings.TrimSpace(part)
		v, ok := strings.CutPrefix(part, "Credential=")
		if !ok {
			continue
		}
		f := strings.Split(v, "/")
		if len(f) != 5 || f[4] != "aws4_request" {
			return CredentialScope{}, fmt.Errorf("authorization: credential %q is not AKID/date/region/service/aws4_request", v)
		}
		for i, name := range []string{"access key", "date", "region", "service"} {
			if f[i] == "" {
				return CredentialScope{}, fmt.Errorf("authorization: empty %s in credential scope", name)
			}
		}
		return CredentialScope{AccessKeyID: f[0], Date: f[1], Region: f[2], Service: f[3]}, nil
	}
	return CredentialScope{}, errors.New("authorization: no Credential= element")
}

// Fault describes how the fake misbehaves for one operation. Counters are
// consumed one per request, so "Throttle: 2" fails twice and then answers.
type Fault struct {
	// Throttle answers the next N calls with the service's throttling error
	// (ThrottlingException for SSM, RequestLimitExceeded for EC2).
	Throttle int
	// ServerError answers the next N calls with HTTP 500.
	ServerError int
	// AccessDenied answers every call with the service's authorization error.
	AccessDenied bool
	// Malformed answers every call with HTTP 200 and a truncated body.
	Malformed bool
	// Latency is added before every answer (faults included).
	Latency time.Duration
	// InsufficientCapacity answers the next N RunInstances calls with EC2's
	// InsufficientInstanceCapacity error.
	InsufficientCapacity int
	// StuckPending makes the instances of the next N RunInstances calls
	// stay pending forever (their hosts are never booted).
	StuckPending int
}

// ParseFault parses a fault spec of the form
//
//	OP[@REGION]=KIND[:ARG][,KIND[:ARG]...]
//
// where OP is one of the operations the fake serves (OpNames) or "*", and
// KIND is throttle:N, 500:N, latency:DURATION, denied, malformed, or, for
// RunInstances only, capacity:N (InsufficientInstanceCapacity) and
// stuck-pending:N. Examples: "DescribeImages@us-west-2=throttle:2,latency:50ms",
// "RunInstances=capacity:1".
func ParseFault(spec string) (op, region string, f Fault, err error) {
	lhs, rhs, ok := strings.Cut(spec, "=")
	if !ok {
		return "", "", Fault{}, fmt.Errorf("fault %q: want OP[@REGION]=KIND[:ARG],...", spec)
	}
	op, region, _ = strings.Cut(strings.TrimSpace(lhs), "@")
	if !isKnownOp(op) {
		return "", "", Fault{}, fmt.Errorf("fault %q: unknown operation %q (want one of %s)", spec, op, strings.Join(OpNames(), ", "))
	}
	if strings.Contains(lhs, "@") && region == "" {
		return "", "", Fault{}, fmt.Errorf("fault %q: empty region after @", spec)
	}
	if strings.TrimSpace(rhs) == "" {
		return "", "", Fault{}, fmt.Errorf("fault %q: no fault kinds after =", spec)
	}
	for _, item := range strings.Split(rhs, ",") {
		kind, arg, hasArg := strings.Cut(strings.TrimSpace(item), ":")
		count := func() (int, error) {
			if !hasArg {
				return 1, nil
			}
			n, err := strconv.Atoi(arg)
			if err != nil || n < 0 || n > 1_000_000 {
				return 0, fmt.Errorf("fault %q: %s count %q is not a number between 0 and 1000000", spec, kind, arg)
			}
			return n, nil
		}
		switch kind {
		case "throttle":
			if f.Throttle, err = count(); err != nil {
				return "", "", Fault{}, err
			}
		case "500":
			if f.ServerError, err = count(); err != nil {
				return "", "", Fault{}, err
			}
		case "latency":
			d, perr := time.ParseDuration(arg)
			if !hasArg || perr != nil || d < 0 || d > time.Hour {
				return "", "", Fault{}, fmt.Errorf("fault %q: latency wants a duration such as latency:50ms", spec)
			}
			f.Latency = d
		case "denied":
			f.AccessDenied = true
		case "malformed":
			f.Malformed = true
		case "capacity", "stuck-pending":
			if op != OpRunInstances {
				return "", "", Fault{}, fmt.Errorf("fault %q: %s applies to RunInstances only (write RunInstances=%s:N)", spec, kind, kind)
			}
			n, cerr := count()
			if cerr != nil {
				return "", "", Fault{}, cerr
			}
			if kind == "capacity" {
				f.InsufficientCapacity = n
			} else {
				f.StuckPending = n
			}
		default:
			return "", "", Fault{}, fmt.Errorf("fault %q: unknown kind %q (want throttle:N, 500:N, latency:D, denied, malformed, capacity:N, stuck-pending:N)", spec, kind)
		}
	}
	return op, region, f, nil
}

// Operation names the fake serves.
const (
	OpGetParameter        = "GetParameter"
	OpGetParametersByPath = "GetParametersByPath"
	OpDescribeImages      = "DescribeImages"
	OpAssumeRole          = "AssumeRole"
	OpGetCallerIdentity   = "GetCallerIdentity"

	OpRunInstances                  = "RunInstances"
	OpDescribeInstances             = "DescribeInstances"
	OpStopInstances                 = "StopInstances"
	OpTerminateInstances            = "TerminateInstances"
	OpCreateKeyPair                 = "CreateKeyPair"
	OpDeleteKeyPair                 = "DeleteKeyPair"
	OpDescribeKeyPairs              = "DescribeKeyPairs"
	OpCreateSecurityGroup           = "CreateSecurityGroup"
	OpAuthorizeSecurityGroupIngress = "AuthorizeSecurityGroupIngress"
	OpDescribeSecurityGroups        = "DescribeSecurityGroups"
	OpDeleteSecurityGroup           = "DeleteSecurityGroup"
	OpDescribeVpcs                  = "DescribeVpcs"
	OpDescribeSubnets               = "DescribeSubnets"
	OpDescribeRegions               = "DescribeRegions"
	OpDescribeInstanceTypeOfferings = "DescribeInstanceTypeOfferings"
	OpCreateTags                    = "CreateTags"
	OpDescribeTags                  = "DescribeTags"
	OpCreateImage                   = "CreateImage"
	OpCopyImage                     = "CopyImage"
	OpDeregisterImage               = "DeregisterImage"
	OpModifyImageAttribute          = "ModifyImageAttribute"
	OpEnableImageDeprecation        = "EnableImageDeprecation"
	OpDescribeSnapshots             = "DescribeSnapshots"
	OpDeleteSnapshot                = "DeleteSnapshot"
	OpModifySnapshotAttribute       = "ModifySnapshotAttribute"
	OpDescribeVolumes               = "DescribeVolumes"
	OpDeleteVolume                  = "DeleteVolume"

	// OpAny matches every operation in fault injection.
	OpAny = "*"
)

// ec2Ops lists the EC2 actions the fake answers, in the README's order.
func ec2Ops() []string {
	return []string{
		OpDescribeImages, OpDescribeRegions, OpDescribeVpcs, OpDescribeSubnets,
		OpDescribeInstanceTypeOfferings, OpCreateKeyPair, OpDescribeKeyPairs, OpDeleteKeyPair,
		OpCreateSecurityGroup, OpAuthorizeSecurityGroupIngress, OpDescribeSecurityGroups, OpDeleteSecurityGroup,
		OpRunInstances, OpDescribeInstances, OpStopInstances,
		OpTerminateInstances, OpCreateTags, OpDescribeTags, OpCreateImage, OpCopyImage,
		OpDeregisterImage, OpModifyImageAttribute, OpEnableImageDeprecation, OpDescribeSnapshots,
		OpDeleteSnapshot, OpModifySnapshotAttribute, OpDescribeVolumes, OpDeleteVolume,
	}
}

// OpNames lists every operation a fault may name, OpAny last.
func OpNames() []string {
	out := []string{OpGetParameter, OpGetParametersByPath, OpAssumeRole, OpGetCallerIdentity}
	out = append(out, ec2Ops()...)
	return append(out, OpAny)
}

func isKnownOp(op string) bool { return contains(OpNames(), op) }

// matchWildcard implements the EC2 filter glob: '*' matches any run of
// characters, '?' exactly one, and everything else literally (case-sensitive).
func matchWildcard(pattern, s string) bool {
	// Iterative glob with backtracking to the last '*': linear in practice and
	// free of the exponential blow-up of a naive recursive matcher.
	p, i := []rune(pattern), []rune(s)
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(i) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == i[si]) && p[pi] != '*':
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

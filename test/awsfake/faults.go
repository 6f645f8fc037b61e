package awsfake

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

type faultKey struct{ op, region string }

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

// SetFault installs a fault for an operation (or OpAny) in one region, or in
// every region when region is "". A region-specific fault shadows the
// all-regions one. Setting the zero Fault clears it.
func (s *Server) SetFault(op, region string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f == (Fault{}) {
		delete(s.faults, faultKey{op, region})
		return
	}
	c := f
	s.faults[faultKey{op, region}] = &c
}

// ClearFaults removes every installed fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = map[faultKey]*Fault{}
}

// pickFault returns the action to take for this request and consumes one
// unit of any counted fault. It runs under s.mu.
func (s *Server) pickFault(op, region string) (action string, latency time.Duration) {
	for _, k := range []faultKey{{op, region}, {op, ""}, {OpAny, region}, {OpAny, ""}} {
		f := s.faults[k]
		if f == nil {
			continue
		}
		latency = f.Latency
		switch {
		case f.Throttle > 0:
			f.Throttle--
			return "throttle", latency
		case f.ServerError > 0:
			f.ServerError--
			return "500", latency
		case f.AccessDenied:
			return "denied", latency
		case f.Malformed:
			return "malformed", latency
		}
		return "", latency
	}
	return "", 0
}

// takeRunFault consumes one unit of a RunInstances-only fault counter
// (InsufficientCapacity or StuckPending) for region, the region-specific
// fault first. RunInstances consumes them itself because their answers need
// the request (the instance type) or shape the launch. It runs under s.mu.
func (s *Server) takeRunFault(region string, counter func(*Fault) *int) bool {
	for _, k := range []faultKey{{OpRunInstances, region}, {OpRunInstances, ""}} {
		if f := s.faults[k]; f != nil && *counter(f) > 0 {
			*counter(f)--
			return true
		}
	}
	return false
}

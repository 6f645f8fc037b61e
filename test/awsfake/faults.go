package awsfake

import (
	"errors"
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
	// LoseAnswer serves the next N calls (the fake acts: a key pair is made,
	// a tag set, an image deregistered) and then drops the connection
	// without an answer, as a connection reset after the request went out
	// does. The SDK sees a connection error and retries the same request,
	// which then meets what the first one did.
	LoseAnswer int
	// EFADropped, when N > 0, makes the next RunInstances launch its N-th instance (launch
	// index N-1) without its EFA interfaces: only the ENA ones are attached and its host shows
	// no EFA device, as if EC2 had not attached them. A fault of the simulation (EC2 attaches
	// one launch's interfaces to each of its instances): it exercises the checks that judge
	// each node of a launch of several by what it got.
	EFADropped int
	// PartialAnswer makes the next N RunInstances answers name only the launch's first
	// instance, though every one of them runs: an answer that lists fewer instances than the
	// launch made (EC2 documents MinCount = MaxCount as all or nothing; nobody documents that
	// its answer can never be cut short, so the cleanup must not count on it).
	PartialAnswer int
	// Hang leaves the next N calls unanswered, without acting, until the
	// client gives up (its context ends and it closes the connection) or
	// the fake closes: a call that never answers.
	Hang int
}

// ParseFault parses a fault spec of the form
//
//	OP[@REGION]=KIND[:ARG][,KIND[:ARG]...]
//
// where OP is one of the operations the fake serves (OpNames) or "*", and
// KIND a FaultAction: throttle:N, 500:N, lose-answer:N, hang:N,
// latency:DURATION, denied, malformed, or, for RunInstances only, capacity:N (InsufficientInstanceCapacity) and
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
		action, err := ParseFaultAction(kind)
		if err != nil {
			return "", "", Fault{}, fmt.Errorf("fault %q: %w", spec, err)
		}
		if err := action.apply(&f, op, arg, hasArg); err != nil {
			return "", "", Fault{}, fmt.Errorf("fault %q: %w", spec, err)
		}
	}
	return op, region, f, nil
}

// FaultAction is one KIND of a fault spec: how the fake misbehaves. The
// control API (POST /_fake/fault?spec=...) and --fault take them by these
// names; the fake answers a request with the action pickFault chooses.
type FaultAction string

const (
	FaultThrottle     FaultAction = "throttle"       // throttle:N, the service's throttling error
	FaultServerError  FaultAction = "500"            // 500:N, HTTP 500
	FaultLatency      FaultAction = "latency"        // latency:DURATION before every answer
	FaultDenied       FaultAction = "denied"         // the service's authorization error, every call
	FaultMalformed    FaultAction = "malformed"      // HTTP 200 with a truncated body, every call
	FaultCapacity     FaultAction = "capacity"       // capacity:N, RunInstances only: InsufficientInstanceCapacity
	FaultStuckPending FaultAction = "stuck-pending"  // stuck-pending:N, RunInstances only: instances never leave pending
	FaultLoseAnswer   FaultAction = "lose-answer"    // lose-answer:N, act, then drop the connection without an answer
	FaultHang         FaultAction = "hang"           // hang:N, never answer (nor act) until the client gives up
	FaultEFADropped   FaultAction = "efa-dropped"    // efa-dropped:N, RunInstances only: the next launch's N-th instance gets no EFA interface
	FaultPartial      FaultAction = "partial-answer" // partial-answer:N, RunInstances only: the answer names the first instance only

	// faultNone is pickFault's answer when the request is served normally.
	faultNone FaultAction = ""
)

// FaultActions lists every action a fault spec may name, with its argument.
func FaultActions() []string {
	return []string{"throttle:N", "500:N", "lose-answer:N", "hang:N", "latency:D", "denied", "malformed", "capacity:N", "stuck-pending:N", "efa-dropped:N", "partial-answer:N"}
}

// ParseFaultAction checks that kind names a fault action.
func ParseFaultAction(kind string) (FaultAction, error) {
	switch a := FaultAction(kind); a {
	case FaultThrottle, FaultServerError, FaultLoseAnswer, FaultHang, FaultLatency, FaultDenied, FaultMalformed, FaultCapacity, FaultStuckPending, FaultEFADropped, FaultPartial:
		return a, nil
	}
	return faultNone, fmt.Errorf("unknown kind %q (want %s)", kind, strings.Join(FaultActions(), ", "))
}

// apply sets the action (with its argument) in f, for a fault on op.
func (a FaultAction) apply(f *Fault, op, arg string, hasArg bool) error {
	count := func() (int, error) {
		if !hasArg {
			return 1, nil
		}
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 || n > 1_000_000 {
			return 0, fmt.Errorf("%s count %q is not a number between 0 and 1000000", a, arg)
		}
		return n, nil
	}
	var err error
	switch a {
	case FaultThrottle:
		f.Throttle, err = count()
	case FaultServerError:
		f.ServerError, err = count()
	case FaultLoseAnswer:
		f.LoseAnswer, err = count()
	case FaultHang:
		f.Hang, err = count()
	case FaultLatency:
		d, perr := time.ParseDuration(arg)
		if !hasArg || perr != nil || d < 0 || d > time.Hour {
			return errors.New("latency wants a duration such as latency:50ms")
		}
		f.Latency = d
	case FaultDenied:
		f.AccessDenied = true
	case FaultMalformed:
		f.Malformed = true
	case FaultEFADropped:
		if op != OpRunInstances {
			return fmt.Errorf("%s applies to RunInstances only (write RunInstances=%s:N)", a, a)
		}
		f.EFADropped, err = count()
	case FaultCapacity, FaultStuckPending, FaultPartial:
		if op != OpRunInstances {
			return fmt.Errorf("%s applies to RunInstances only (write RunInstances=%s:N)", a, a)
		}
		counter := &f.InsufficientCapacity
		switch a {
		case FaultStuckPending:
			counter = &f.StuckPending
		case FaultPartial:
			counter = &f.PartialAnswer
		}
		*counter, err = count()
	}
	return err
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
func (s *Server) pickFault(op, region string) (action FaultAction, latency time.Duration) {
	for _, k := range []faultKey{{op, region}, {op, ""}, {OpAny, region}, {OpAny, ""}} {
		f := s.faults[k]
		if f == nil {
			continue
		}
		latency = f.Latency
		switch {
		case f.Throttle > 0:
			f.Throttle--
			return FaultThrottle, latency
		case f.ServerError > 0:
			f.ServerError--
			return FaultServerError, latency
		case f.Hang > 0:
			f.Hang--
			return FaultHang, latency
		case f.LoseAnswer > 0:
			f.LoseAnswer--
			return FaultLoseAnswer, latency
		case f.AccessDenied:
			return FaultDenied, latency
		case f.Malformed:
			return FaultMalformed, latency
		}
		return faultNone, latency
	}
	return faultNone, 0
}

// takeEFADrop returns the instance number an efa-dropped fault names for this launch (0 for
// none) and clears it. It runs under s.mu.
func (s *Server) takeEFADrop(region string) int {
	for _, k := range []faultKey{{OpRunInstances, region}, {OpRunInstances, ""}} {
		if f := s.faults[k]; f != nil && f.EFADropped > 0 {
			n := f.EFADropped
			f.EFADropped = 0
			return n
		}
	}
	return 0
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

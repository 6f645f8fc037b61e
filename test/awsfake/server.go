// Package awsfake is a local stand-in for the parts of AWS that the dlami
// data source and the amazon-ebs builder talk to: SSM Parameter Store (JSON
// 1.1 over X-Amz-Target), a stateful EC2 (query API with XML answers: images,
// instances, key pairs, security groups, snapshots, volumes, the default
// network) and STS (AssumeRole, GetCallerIdentity). It speaks the real wire
// protocols, so the real aws-sdk-go-v2 clients serialise, sign, retry and
// parse against it, and it injects faults per operation and region. The
// hosts behind instances come from a Machines backend (see machines.go);
// without one, instances exist only as EC2 state. A control API under
// /_fake/ (control.go) publishes DLAMI builds, deprecates images, lists the
// state and installs faults.
//
// Each EC2 resource lives in one file that holds its state, the parsing of its
// calls' input, its handlers and its XML (images.go, instances.go, keypairs.go,
// securitygroups.go, snapshots.go, volumes.go, tags.go, vpcs_subnets.go,
// regions.go); ec2.go routes an action to its parser and handler, describe.go
// holds the filtering and paging every Describe* shares.
package awsfake

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultAccount is the account id the fake treats as the caller ("self").
const DefaultAccount = "123456789012"

// DLAMIOwner is the AWS account that publishes the Deep Learning AMIs in the
// commercial partition; public describe-images output shows it as the owner
// with alias "amazon".
const DLAMIOwner = "898082745236"

// Call records one request the fake answered, for assertions in tests.
type Call struct {
	Op          string
	Region      string
	AccessKeyID string
	// Status is the HTTP status of the answer; 0 when none was sent (lose-answer, hang).
	Status int
}

// Server is the fake endpoint. The zero value is not usable; call New.
type Server struct {
	mu      sync.Mutex
	account string
	regions map[string]*regionData
	faults  map[faultKey]*Fault
	calls   []Call
	// served: every "service:Action" answered, for IAM policy checks (ActionsServed).
	served  map[string]bool
	assumed []AssumeRoleCall
	observe func(Call)
	now     func() time.Time
	logw    io.Writer

	// EC2 state shared by all regions.
	idSeq           uint64
	instanceSeq     uint64
	addresses       map[string]string // loopback address -> instance id
	elasticIPs      map[string]string // Elastic IP (loopback, 127.1.x.y) -> allocation id
	forwards        map[string]*forward
	sshPort         int // the hosts' sshd port, where Elastic IPs forward to (22)
	addrBusy        func(addr string) bool
	machines        Machines
	transitionPolls int
	// newTypes: AddInstanceType's, beside the fact sheet's instanceTypes; written before serving.
	newTypes map[string]*InstanceTypeInfo
	// addressListingLag: SetAddressListingLag.
	addressListingLag int
	// capacityBlockOnlyCode and capacityBlockOnlyMessage: SetCapacityBlockOnlyRefusal.
	capacityBlockOnlyCode, capacityBlockOnlyMessage string
	bgCtx                                           context.Context
	bgCancel                                        context.CancelFunc
	bgWG                                            sync.WaitGroup
	closed                                          bool
	// fleet is S3's and Auto Scaling's state (s3.go, autoscaling.go).
	fleet fleetState
}

// DefaultTransitionPolls is how many DescribeInstances/DescribeImages/
// DescribeSnapshots answers show a transitional state (pending, stopping,
// shutting-down) after the work behind it is done, before the next state.
const DefaultTransitionPolls = 1

// New returns an empty fake whose caller account is DefaultAccount.
func New() *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		account:         DefaultAccount,
		regions:         map[string]*regionData{},
		faults:          map[faultKey]*Fault{},
		now:             time.Now,
		addresses:       map[string]string{},
		elasticIPs:      map[string]string{},
		forwards:        map[string]*forward{},
		sshPort:         22,
		addrBusy:        sshListening,
		transitionPolls: DefaultTransitionPolls,
		bgCtx:           ctx,
		bgCancel:        cancel,
	}
}

// SetMachines installs the backend that boots the hosts behind instances.
// Call it before serving; nil means instances exist only as EC2 state.
func (s *Server) SetMachines(m Machines) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.machines = m
}

// SetTransitionPolls sets how many Describe answers show a transitional
// state after its work is done (0: the next answer already shows the next
// state). Negative values count as 0.
func (s *Server) SetTransitionPolls(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transitionPolls = max(n, 0)
}

// SetAddressListingLag makes every address allocated from now on absent from the next n
// DescribeAddresses listings (a describe by filters or of every address; one naming its
// allocation id finds it): EC2's describes are eventually consistent, and nobody documents for
// how long a fresh Elastic IP may go unlisted. 0, the default, lists it at once.
func (s *Server) SetAddressListingLag(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addressListingLag = max(n, 0)
}

// SetLog sends the fake's own diagnostics (failed machine calls) to w.
func (s *Server) SetLog(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logw = w
}

func (s *Server) logf(format string, args ...any) {
	s.mu.Lock()
	w := s.logw
	s.mu.Unlock()
	if w != nil {
		fmt.Fprintf(w, "awsfake: "+format+"\n", args...)
	}
}

// Close stops the background machine calls, terminates every instance that
// is not terminated yet and closes the Machines backend. The HTTP server
// should be shut down first. Close is safe to call more than once.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	m := s.machines
	for ip := range s.forwards {
		s.stopForward(ip)
	}
	s.mu.Unlock()
	s.bgCancel()
	waited := make(chan struct{})
	go func() { s.bgWG.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		return fmt.Errorf("closing the fake: machine calls still running: %w", ctx.Err())
	}
	s.mu.Lock()
	for _, rd := range s.regions {
		for _, r := range rd.instances {
			if r.State != StateTerminated {
				s.finishTerminate(rd, r)
				r.StateTransitionReason = "the fake AWS endpoint shut down"
			}
		}
	}
	s.mu.Unlock()
	if m == nil {
		return nil
	}
	if err := m.Close(ctx); err != nil {
		return fmt.Errorf("closing the machines: %w", err)
	}
	return nil
}

// SetAccount sets the account id the fake answers as "self".
func (s *Server) SetAccount(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.account = id
}

// SetNow fixes the clock used to decide whether an image is deprecated.
func (s *Server) SetNow(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

func (s *Server) region(r string) *regionData {
	rd := s.regions[r]
	if rd == nil {
		rd = newRegionData(r, s.account)
		s.regions[r] = rd
	}
	return rd
}

// Calls returns every request answered so far, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallCount counts answered requests for op ("" or OpAny for all) in region
// ("" for all).
func (s *Server) CallCount(op, region string) int {
	n := 0
	for _, c := range s.Calls() {
		if (op == "" || op == OpAny || c.Op == op) && (region == "" || c.Region == region) {
			n++
		}
	}
	return n
}

// Regions lists the regions holding data, sorted.
func (s *Server) Regions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.regions))
	for r := range s.regions {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Start serves the fake on a loopback httptest server; close it when done.
func (s *Server) Start() *httptest.Server { return httptest.NewServer(s) }

const (
	maxBody  = 1 << 20
	maxCalls = 100_000
)

// ServeHTTP answers SSM, EC2 and STS requests, and the control API under
// /_fake/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, controlPrefix) {
		s.serveControl(w, r)
		return
	}
	if isS3(r) {
		// REST-XML, any method, bodies up to an object's size: s3.go reads its own.
		req, scope, err := s.s3Request(r)
		if err != nil {
			s.refuse(w, req, scope, err)
			return
		}
		s.answer(w, r, req, scope)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		http.Error(w, "request body unreadable or over 1 MiB", http.StatusRequestEntityTooLarge)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "the fake AWS endpoint answers POST only", http.StatusMethodNotAllowed)
		return
	}
	scope, err := ParseCredentialScope(r.Header.Get("Authorization"))
	var req request
	if target := r.Header.Get("X-Amz-Target"); strings.HasPrefix(target, "AWSPriceListService.") {
		req, err = s.pricingRequest(target, body, scope, err)
	} else if target != "" {
		req, err = s.ssmRequest(target, body, scope, err)
	} else {
		req, err = s.queryRequest(body, scope, err)
	}
	if err != nil {
		s.refuse(w, req, scope, err)
		return
	}
	s.answer(w, r, req, scope)
}

// refuse answers a request that could not be read: with the service's own error when it is
// one (recorded), else 400.
func (s *Server) refuse(w http.ResponseWriter, req request, scope CredentialScope, err error) {
	var we *wireError
	if errors.As(err, &we) {
		s.record(req.op, scope, we.status)
		we.write(w)
		return
	}
	http.Error(w, err.Error(), http.StatusBadRequest)
}

// answer answers a decoded request: the fault installed for it, or its handler's answer.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, req request, scope CredentialScope) {
	s.mu.Lock()
	action, latency := s.pickFault(req.op, scope.Region)
	s.mu.Unlock()
	if latency > 0 {
		if !sleepCtx(r.Context(), latency) {
			return
		}
	}
	var resp response
	switch action {
	case FaultHang:
		// Neither act nor answer: the client's deadline, or the fake's Close, ends it.
		select {
		case <-r.Context().Done():
		case <-s.bgCtx.Done():
		}
		s.record(req.op, scope, 0)
		panic(http.ErrAbortHandler)
	case FaultThrottle:
		resp = req.proto.throttle()
	case FaultServerError:
		resp = req.proto.serverError()
	case FaultDenied:
		resp = req.proto.denied(s.account, req.op, req.resource)
	case FaultMalformed:
		resp = req.proto.malformed()
	default:
		resp = req.handle()
	}
	if action == FaultLoseAnswer {
		// Acted, but the answer never reaches the client: the server closes the connection
		// without writing a response (net/http's documented way to abort a handler).
		s.record(req.op, scope, 0)
		panic(http.ErrAbortHandler)
	}
	s.record(req.op, scope, resp.status)
	delay := answerDelay
	if len(resp.body) > largeAnswer {
		delay = largeAnswerDelay
	}
	if !sleepCtx(r.Context(), delay) {
		return
	}
	resp.write(w)
}

// An answer larger than the client's 4 KiB read buffer, sent the instant the request body
// arrived, races aws-sdk-go-v2: smithy-go closes the request body when the response headers
// are in, its closed body's WriteTo answers io.EOF, and net/http's write loop, still doing its
// final read of the body, treats that as a write error and closes the connection under the
// response ("use of closed network connection", seen here on DescribeInstances of a 33-interface
// p5.48xlarge). EC2 itself takes tens of milliseconds; a few milliseconds before a large answer
// let the client finish writing first. A small answer meets the same race (net/http's final
// read of the request body still to come when the headers arrive: seen on a t3.micro
// RunInstances answer); it waits a little too.
const (
	largeAnswer      = 4 << 10
	largeAnswerDelay = 5 * time.Millisecond
	answerDelay      = 2 * time.Millisecond
)

func (s *Server) record(op string, scope CredentialScope, status int) {
	c := Call{Op: op, Region: scope.Region, AccessKeyID: scope.AccessKeyID, Status: status}
	s.mu.Lock()
	if a := iamAction(op); a != "" {
		if s.served == nil {
			s.served = map[string]bool{}
		}
		s.served[a] = true
	}
	if len(s.calls) >= maxCalls {
		// A long-running demo server keeps the newest half.
		s.calls = append(s.calls[:0], s.calls[maxCalls/2:]...)
	}
	s.calls = append(s.calls, c)
	observe := s.observe
	s.mu.Unlock()
	if observe != nil {
		observe(c)
	}
}

// iamAction is the IAM action name of op, "service:Action" (ssm:GetParameter,
// ec2:RunInstances, sts:AssumeRole), or "" for an action the fake does not know.
func iamAction(op string) string {
	switch {
	case op == OpGetParameter || op == OpGetParametersByPath:
		return "ssm:" + op
	case op == OpAssumeRole || op == OpGetCallerIdentity:
		return "sts:" + op
	case op == OpGetProducts:
		return "pricing:" + op
	case op != OpAny && contains(ec2Ops(), op):
		return "ec2:" + op
	case op == OpHeadBucket:
		// S3 authorizes HeadBucket with s3:ListBucket and HeadObject with s3:GetObject.
		return "s3:ListBucket"
	case op == OpHeadObject:
		return "s3:GetObject"
	case contains(s3Ops(), op):
		return "s3:" + op
	case contains(autoscalingOps(), op):
		return "autoscaling:" + op
	}
	return ""
}

// ActionsServed lists, sorted, every AWS action the fake has answered (whatever the answer,
// an injected fault included: the caller needed the permission to make the call), as IAM
// names "service:Action". Tests compare it with the IAM policies the docs give.
func (s *Server) ActionsServed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.served)
}

// Observe registers fn to be called after every answered request.
func (s *Server) Observe(fn func(Call)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observe = fn
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// request is a decoded call, ready to be answered.
type request struct {
	op       string
	resource string // ARN or "*" named in AccessDenied messages
	proto    protocol
	handle   func() response
}

// response is a status, content type, headers (S3's ETag, ...) and body.
type response struct {
	status      int
	contentType string
	body        string
	header      http.Header
}

func (r response) write(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	if r.contentType != "" {
		w.Header().Set("Content-Type", r.contentType)
	}
	w.Header().Set("X-Amzn-Requestid", requestID())
	w.WriteHeader(r.status)
	_, _ = io.WriteString(w, r.body)
}

// wireError is an error that must reach the client in the service's format.
type wireError struct{ response }

func (e *wireError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

// protocol renders the error shapes of one service.
type protocol interface {
	throttle() response
	serverError() response
	denied(account, op, resource string) response
	malformed() response
}

// requestID returns a random UUID-shaped request id, as AWS sends.
func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func partition(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "aws-cn"
	case strings.HasPrefix(region, "us-gov-"):
		return "aws-us-gov"
	}
	return "aws"
}

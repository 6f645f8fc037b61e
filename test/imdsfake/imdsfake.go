// Package imdsfake is a small stand-in for the EC2 instance metadata service, IMDSv2 only, for
// the node check's tests: a session token from PUT /latest/api/token (with
// X-aws-ec2-metadata-token-ttl-seconds, 1 to 21600; a request carrying X-Forwarded-For is
// refused, as IMDS refuses one), then GETs that carry the token in X-aws-ec2-metadata-token
// (401 without it or with a wrong one): the instance identity document, the meta-data paths
// for the instance id, type, zone, region and AMI, and the instance role's credentials. Source:
// https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html and
// .../instance-identity-documents.html, .../iam-roles-for-amazon-ec2.html.
package imdsfake

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Instance is what the stand-in says of the instance it runs on.
type Instance struct {
	InstanceID, InstanceType, AvailabilityZone, Region, ImageID, AccountID string
	// Role is the instance profile's role; "" answers 404 for credentials (no role).
	Role string
	// AccessKeyID and SecretAccessKey are the role's credentials the stand-in hands out.
	AccessKeyID, SecretAccessKey string
}

// Server is the stand-in; it is an http.Handler.
type Server struct {
	mu     sync.Mutex
	inst   Instance
	tokens map[string]time.Time
	calls  []string
	// down answers every request with 503 (an IMDS that does not work).
	down bool
}

// New returns a stand-in for inst.
func New(inst Instance) *Server {
	return &Server{inst: inst, tokens: map[string]time.Time{}}
}

// SetDown makes every answer a 503 (true) or serves again (false).
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Calls returns "METHOD path status" of every request, oldest first.
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

const (
	tokenPath     = "/latest/api/token"
	ttlHeader     = "X-Aws-Ec2-Metadata-Token-Ttl-Seconds"
	tokenHeader   = "X-Aws-Ec2-Metadata-Token"
	credsPrefix   = "/latest/meta-data/iam/security-credentials/"
	identityPath  = "/latest/dynamic/instance-identity/document"
	maxTokenTTL   = 21600
	credsLifetime = 6 * time.Hour
)

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status := s.serve(w, r)
	s.mu.Lock()
	s.calls = append(s.calls, fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, status))
	s.mu.Unlock()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) int {
	fail := func(code int) int {
		http.Error(w, http.StatusText(code), code)
		return code
	}
	s.mu.Lock()
	down, inst := s.down, s.inst
	s.mu.Unlock()
	if down {
		return fail(http.StatusServiceUnavailable)
	}
	if r.URL.Path == tokenPath {
		if r.Method != http.MethodPut {
			return fail(http.StatusMethodNotAllowed)
		}
		if r.Header.Get("X-Forwarded-For") != "" {
			return fail(http.StatusForbidden)
		}
		ttl, err := strconv.Atoi(r.Header.Get(ttlHeader))
		if err != nil || ttl < 1 || ttl > maxTokenTTL {
			return fail(http.StatusBadRequest)
		}
		var b [24]byte
		_, _ = rand.Read(b[:])
		tok := hex.EncodeToString(b[:])
		s.mu.Lock()
		s.tokens[tok] = time.Now().Add(time.Duration(ttl) * time.Second)
		s.mu.Unlock()
		w.Header().Set(ttlHeader, strconv.Itoa(ttl))
		_, _ = w.Write([]byte(tok))
		return http.StatusOK
	}
	if r.Method != http.MethodGet {
		return fail(http.StatusMethodNotAllowed)
	}
	s.mu.Lock()
	exp, ok := s.tokens[r.Header.Get(tokenHeader)]
	s.mu.Unlock()
	if !ok || time.Now().After(exp) {
		return fail(http.StatusUnauthorized)
	}
	text := func(v string) int {
		if v == "" {
			return fail(http.StatusNotFound)
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(v))
		return http.StatusOK
	}
	switch p := r.URL.Path; {
	case p == identityPath:
		doc := map[string]any{
			"accountId": inst.AccountID, "architecture": "x86_64", "availabilityZone": inst.AvailabilityZone,
			"imageId": inst.ImageID, "instanceId": inst.InstanceID, "instanceType": inst.InstanceType,
			"pendingTime": "2026-12-01T10:00:00Z", "privateIp": "10.1.42.17", "region": inst.Region, "version": "2017-09-30",
		}
		w.Header().Set("Content-Type", "text/plain")
		_ = json.NewEncoder(w).Encode(doc)
		return http.StatusOK
	case p == "/latest/meta-data/instance-id":
		return text(inst.InstanceID)
	case p == "/latest/meta-data/instance-type":
		return text(inst.InstanceType)
	case p == "/latest/meta-data/placement/availability-zone":
		return text(inst.AvailabilityZone)
	case p == "/latest/meta-data/placement/region":
		return text(inst.Region)
	case p == "/latest/meta-data/ami-id":
		return text(inst.ImageID)
	case p == credsPrefix:
		return text(inst.Role)
	case strings.HasPrefix(p, credsPrefix):
		if inst.Role == "" || strings.TrimPrefix(p, credsPrefix) != inst.Role {
			return fail(http.StatusNotFound)
		}
		now := time.Now().UTC()
		w.Header().Set("Content-Type", "text/plain")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"Code": "Success", "LastUpdated": now.Format(time.RFC3339), "Type": "AWS-HMAC",
			"AccessKeyId": inst.AccessKeyID, "SecretAccessKey": inst.SecretAccessKey, "Token": "FakeInstanceRoleToken/" + inst.Role,
			"Expiration": now.Add(credsLifetime).Format(time.RFC3339),
		})
		return http.StatusOK
	}
	return fail(http.StatusNotFound)
}

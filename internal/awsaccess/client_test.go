package awsaccess

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
	"github.com/dlami-bake/packer-plugin-dlami/test/awstest"
)

type env struct {
	fake *awsfake.Server
	url  string
	opts Options
}

func newEnv(t testing.TB, regions ...string) *env {
	t.Helper()
	fake, url := awstest.Fake(t, time.Time{}, regions...)
	return &env{fake: fake, url: url, opts: Options{
		AccessKey: "AKIAFAKESTATIC000001", SecretKey: "fake-secret", Region: "us-east-1",
		SSMEndpoint: url, EC2Endpoint: url, STSEndpoint: url,
		Retry: RetryPolicy{MaxBackoff: 2 * time.Millisecond}, SkipMetadataAPICheck: true,
	}}
}

// fastRetries keeps backoffs to a few milliseconds so that tests exercise
// many retries quickly; the budgets are the production ones.
func fastRetries(e *env) {
	e.opts.Retry = RetryPolicy{BaseDelay: time.Millisecond, MaxBackoff: 4 * time.Millisecond}
}

// useCredentials loads the configuration and makes a call that needs the credentials (the
// credential check), as the first call of any run does.
func (e *env) useCredentials(t *testing.T, region string) {
	t.Helper()
	cfg, err := LoadConfig(context.Background(), e.opts)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if _, err := ValidateCredentials(context.Background(), cfg, e.opts, region, 5*time.Second); err != nil {
		t.Fatalf("ValidateCredentials: %v", err)
	}
}

// stsRecorder is an HTTP client that keeps the form of every STS request
// it sends, so a test can see each AssumeRole argument on the wire (the
// fake records only the role, session name and external id).
type stsRecorder struct {
	mu    sync.Mutex
	forms []url.Values
	hosts []string
}

func (r *stsRecorder) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if form, err := url.ParseQuery(string(body)); err == nil && form.Get("Version") == "2011-06-15" {
			r.mu.Lock()
			r.forms = append(r.forms, form)
			r.hosts = append(r.hosts, req.URL.Host)
			r.mu.Unlock()
		}
	}
	return http.DefaultClient.Do(req)
}

func (r *stsRecorder) action(name string) (forms []url.Values, hosts []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, f := range r.forms {
		if f.Get("Action") == name {
			forms = append(forms, f)
			hosts = append(hosts, r.hosts[i])
		}
	}
	return forms, hosts
}

func TestAssumeRoleSendsEveryArgument(t *testing.T) {
	const r = "us-east-1"
	e := newEnv(t, r)
	rec := &stsRecorder{}
	e.opts.HTTPClient = rec
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ssm:GetParameter","Resource":"*"}]}`
	e.opts.AssumeRole = &AssumeRole{
		RoleARN: "arn:aws:iam::123456789012:role/packer-bake", SessionName: "packer-ci", ExternalID: "ext-42",
		Duration: 2 * time.Hour, Policy: policy,
		PolicyARNs:        []string{"arn:aws:iam::aws:policy/ReadOnlyAccess", "arn:aws:iam::123456789012:policy/dlami"},
		Tags:              map[string]string{"team": "ml-infra", "pipeline": "rebake"},
		TransitiveTagKeys: []string{"team"},
	}
	e.useCredentials(t, r)
	forms, _ := rec.action("AssumeRole")
	if len(forms) != 1 {
		t.Fatalf("AssumeRole requests = %d, want 1", len(forms))
	}
	want := map[string]string{
		"RoleArn": e.opts.AssumeRole.RoleARN, "RoleSessionName": "packer-ci", "ExternalId": "ext-42",
		"DurationSeconds": "7200", "Policy": policy,
		"PolicyArns.member.1.arn": "arn:aws:iam::aws:policy/ReadOnlyAccess",
		"PolicyArns.member.2.arn": "arn:aws:iam::123456789012:policy/dlami",
		// Tags are sent sorted by key.
		"Tags.member.1.Key": "pipeline", "Tags.member.1.Value": "rebake",
		"Tags.member.2.Key": "team", "Tags.member.2.Value": "ml-infra",
		"TransitiveTagKeys.member.1": "team",
	}
	for k, v := range want {
		if got := forms[0].Get(k); got != v {
			t.Errorf("AssumeRole %s = %q, want %q", k, got, v)
		}
	}
	if forms[0].Has("SerialNumber") || forms[0].Has("TokenCode") {
		t.Errorf("MFA sent without mfa_code: %v", forms[0])
	}
}

// writeProfiles writes a shared config whose "mfa-role" profile assumes a
// role with MFA from the static keys of "base", as an MFA-protected
// amazon-plugin setup does.
func writeProfiles(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(cfg, []byte(`[profile mfa-role]
role_arn = arn:aws:iam::123456789012:role/packer-mfa
source_profile = base
mfa_serial = arn:aws:iam::123456789012:mfa/ci-user
role_session_name = packer-mfa
region = us-east-1
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(creds, []byte("[base]\naws_access_key_id = AKIAFAKEBASE00000001\naws_secret_access_key = fake-base-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", cfg)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
}

func TestProfileRoleWithMFA(t *testing.T) {
	const r = "us-east-1"
	t.Run("mfa_code answers the profile's MFA prompt, at sts_endpoint", func(t *testing.T) {
		e := newEnv(t, r)
		writeProfiles(t)
		rec := &stsRecorder{}
		e.opts.AccessKey, e.opts.SecretKey = "", ""
		e.opts.Profile, e.opts.MFACode, e.opts.HTTPClient = "mfa-role", "123456", rec
		e.useCredentials(t, r)
		forms, hosts := rec.action("AssumeRole")
		if len(forms) != 1 {
			t.Fatalf("AssumeRole requests = %d, want 1", len(forms))
		}
		for k, v := range map[string]string{
			"RoleArn": "arn:aws:iam::123456789012:role/packer-mfa", "SerialNumber": "arn:aws:iam::123456789012:mfa/ci-user", "TokenCode": "123456",
		} {
			if got := forms[0].Get(k); got != v {
				t.Errorf("AssumeRole %s = %q, want %q", k, got, v)
			}
		}
		if u, _ := url.Parse(e.url); hosts[0] != u.Host {
			t.Errorf("AssumeRole went to %s, want sts_endpoint %s", hosts[0], u.Host)
		}
		if calls := e.fake.AssumeRoleCalls(); len(calls) != 1 {
			t.Errorf("fake AssumeRole calls = %+v", calls)
		}
	})
	t.Run("without mfa_code the error says to set it", func(t *testing.T) {
		e := newEnv(t, r)
		writeProfiles(t)
		e.opts.AccessKey, e.opts.SecretKey, e.opts.Profile = "", "", "mfa-role"
		_, err := LoadConfig(context.Background(), e.opts)
		if err == nil || !strings.Contains(err.Error(), "set mfa_code") {
			t.Fatalf("err = %v, want one asking for mfa_code", err)
		}
	})
}

func TestValidateCredentials(t *testing.T) {
	const r = "eu-west-1"
	tests := []struct {
		name     string
		setup    func(e *env)
		wantARN  string
		wantErr  []string
		wantRole bool // the error is an AccessDeniedError for sts:AssumeRole
	}{
		{
			name:    "static keys",
			wantARN: "arn:aws:iam::" + awsfake.DefaultAccount + ":user/" + awsfake.FakeUserName,
		},
		{
			name: "assumed role",
			setup: func(e *env) {
				e.opts.AssumeRole = &AssumeRole{RoleARN: "arn:aws:iam::123456789012:role/packer-bake", SessionName: "ci"}
			},
			wantARN: "arn:aws:sts::" + awsfake.DefaultAccount + ":assumed-role/packer-bake/ci",
		},
		{
			name:    "STS refuses",
			setup:   func(e *env) { e.fake.SetFault(awsfake.OpGetCallerIdentity, "", awsfake.Fault{AccessDenied: true}) },
			wantErr: []string{"eu-west-1: validating AWS credentials (skip_credential_validation = false) with sts:GetCallerIdentity failed", "skip_credential_validation = true"},
		},
		{
			name: "role cannot be assumed",
			setup: func(e *env) {
				e.opts.AssumeRole = &AssumeRole{RoleARN: "arn:aws:iam::123456789012:role/packer-bake"}
				e.fake.SetFault(awsfake.OpAssumeRole, "", awsfake.Fault{AccessDenied: true})
			},
			wantErr:  []string{`access denied for sts:AssumeRole: allow action "sts:AssumeRole" on resource "arn:aws:iam::123456789012:role/packer-bake"`},
			wantRole: true,
		},
		{
			name:    "no credentials at all",
			setup:   func(e *env) { e.opts.AccessKey, e.opts.SecretKey = "", "" },
			wantErr: []string{"validating AWS credentials (skip_credential_validation = false): no usable AWS credentials"},
		},
		{
			name: "throttled, then answered",
			setup: func(e *env) {
				e.fake.SetFault(awsfake.OpGetCallerIdentity, "", awsfake.Fault{Throttle: 4})
			},
			wantARN: "arn:aws:iam::" + awsfake.DefaultAccount + ":user/" + awsfake.FakeUserName,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, r)
			fastRetries(e)
			if tc.setup != nil {
				tc.setup(e)
			}
			cfg, err := LoadConfig(context.Background(), e.opts)
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			id, err := ValidateCredentials(context.Background(), cfg, e.opts, r, time.Second)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("validated as %+v, want an error", id)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				var ad *AccessDeniedError
				if errors.As(err, &ad) != tc.wantRole {
					t.Errorf("AccessDeniedError = %v, want %v", ad, tc.wantRole)
				}
				return
			}
			if err != nil {
				t.Fatalf("ValidateCredentials: %v", err)
			}
			if id.ARN != tc.wantARN || id.Account != awsfake.DefaultAccount {
				t.Errorf("identity = %+v, want %s", id, tc.wantARN)
			}
			if n := e.fake.CallCount(awsfake.OpGetCallerIdentity, r); n < 1 {
				t.Errorf("GetCallerIdentity was not sent in %s", r)
			}
		})
	}
}

func TestSTSEndpointFromTheEnvironment(t *testing.T) {
	const r = "us-east-1"
	e := newEnv(t, r)
	t.Setenv("AWS_ENDPOINT_URL_STS", e.url)
	e.opts.STSEndpoint = ""
	cfg, err := LoadConfig(context.Background(), e.opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ValidateCredentials(context.Background(), cfg, e.opts, r, time.Second); err != nil {
		t.Fatalf("ValidateCredentials: %v", err)
	}
	if e.fake.CallCount(awsfake.OpGetCallerIdentity, r) != 1 {
		t.Errorf("calls = %+v", e.fake.Calls())
	}
}

func TestLoadConfigRejects(t *testing.T) {
	awstest.IsolateEnv(t)
	for _, o := range []Options{{AccessKey: "AKIA"}, {SecretKey: "s"}, {Retry: RetryPolicy{MaxRetries: -1}}} {
		if _, err := LoadConfig(context.Background(), o); err == nil {
			t.Errorf("LoadConfig(%+v) succeeded", o)
		}
	}
}

// The SDK's own HTTP client waits forever for an endpoint that accepts a request and never
// answers; the one LoadConfig installs gives up after HTTPTimeout, and a test client is kept.
func TestHTTPClientIsBounded(t *testing.T) {
	awstest.IsolateEnv(t)
	cfg, err := LoadConfig(context.Background(), Options{Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient)
	if !ok || bc.GetTimeout() != HTTPTimeout || HTTPTimeout <= 0 {
		t.Fatalf("HTTP client %T with timeout %v, want a BuildableClient bounded by %s", cfg.HTTPClient, bc.GetTimeout(), HTTPTimeout)
	}
	rec := &stsRecorder{}
	cfg, err = LoadConfig(context.Background(), Options{Region: "us-east-1", HTTPClient: rec})
	if err != nil || cfg.HTTPClient != rec {
		t.Errorf("HTTPClient option not used: %T %v", cfg.HTTPClient, err)
	}
}

// Connect checks the credentials once, in the session's region, unless told not to, and
// refuses to go on without a region.
func TestConnect(t *testing.T) {
	const r = "eu-west-1"
	e := newEnv(t, r)
	c := &AccessConfig{AccessKey: e.opts.AccessKey, SecretKey: e.opts.SecretKey, STSEndpoint: e.url, CustomEndpointEC2: e.url, SkipMetadataAPICheck: true}
	s, err := c.Connect(context.Background(), r, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s.Region() != r || s.Identity.Account != awsfake.DefaultAccount || e.fake.CallCount(awsfake.OpGetCallerIdentity, r) != 1 {
		t.Errorf("session %+v, calls %+v", s.Identity, e.fake.Calls())
	}
	if _, err := s.EC2(r).DescribeImages(context.Background(), nil); err != nil {
		t.Errorf("the session's EC2 client does not reach custom_endpoint_ec2: %v", err)
	}
	c.SkipCredentialValidation = true
	if _, err := c.Connect(context.Background(), r, time.Second); err != nil || e.fake.CallCount(awsfake.OpGetCallerIdentity, "") != 1 {
		t.Errorf("skip_credential_validation: err %v, GetCallerIdentity sent %d times", err, e.fake.CallCount(awsfake.OpGetCallerIdentity, ""))
	}
	if _, err := c.Connect(context.Background(), "", time.Second); err == nil || !strings.Contains(err.Error(), "no region") {
		t.Errorf("no region: %v", err)
	}
}

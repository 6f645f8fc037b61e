//go:generate packer-sdc mapstructure-to-hcl2 -type AccessConfig,AssumeRoleConfig
//go:generate packer-sdc struct-markdown

// Package awsaccess is the plugin's one way to AWS. It owns the access block the data source
// and the post-processor share, with the amazon plugin's names, so that a user's `amazon-ebs`
// access settings paste in unchanged (access.go: it validates the settings and calls nothing);
// the SDK configuration, the HTTP client and its timeout, the credential check and the service
// clients built from it (client.go); how calls are retried (retry.go); and how AWS errors are
// classified (errors.go). The resolver, the data source, the launcher and the post-processor
// reach AWS through it.
package awsaccess

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/packer-plugin-sdk/hcl2helper"
)

// AccessConfig is how to reach AWS, as in the amazon plugin.
type AccessConfig struct {
	// AWS access key; with secret_key. Default: the SDK credential chain.
	AccessKey string `mapstructure:"access_key"`
	// AWS secret key.
	SecretKey string `mapstructure:"secret_key"`
	// AWS session token for temporary static credentials.
	Token string `mapstructure:"token"`
	// Named profile from the shared config/credentials files.
	Profile string `mapstructure:"profile"`
	// Path of the shared credentials file (default ~/.aws/credentials).
	SharedCredentialsFile string `mapstructure:"shared_credentials_file"`
	// Role to assume before calling AWS (the amazon plugin's block; see below).
	AssumeRole AssumeRoleConfig `mapstructure:"assume_role"`
	// The current 6-digit MFA (TOTP) code, for a `profile` whose shared
	// config assumes a role with `mfa_serial` set, as in the amazon plugin.
	// Pass it as a variable (`-var mfa_code=123456`): it changes every 30 s.
	MFACode string `mapstructure:"mfa_code"`
	// Retries of a failed call for errors other than throttling (5xx,
	// connection resets), with jittered exponential backoff; 0 keeps the
	// SDK default of 2 retries. Throttling is retried until the call's
	// deadline instead, and access denied, missing parameters and
	// validation errors are never retried.
	MaxRetries int `mapstructure:"max_retries"`
	// Do not use the EC2 instance metadata service for credentials or region.
	SkipMetadataAPICheck bool `mapstructure:"skip_metadata_api_check"`
	// Skip checking the credentials with sts:GetCallerIdentity before the
	// first call. Default false: bad or expired credentials then fail first,
	// with a message saying so. Set true only for AWS-compatible endpoints
	// without STS.
	SkipCredentialValidation bool `mapstructure:"skip_credential_validation"`
	// Accept region names that do not look like AWS regions (local endpoints).
	SkipRegionValidation bool `mapstructure:"skip_region_validation"`
	// EC2 endpoint URL (the amazon plugin's name). Default: the SDK's,
	// which honours AWS_ENDPOINT_URL_EC2.
	CustomEndpointEC2 string `mapstructure:"custom_endpoint_ec2"`
	// SSM endpoint URL. Default: the SDK's, which honours AWS_ENDPOINT_URL_SSM.
	// The amazon plugin has no SSM endpoint setting.
	SSMEndpoint string `mapstructure:"ssm_endpoint"`
	// STS endpoint URL, for assume_role, a profile's role and the credential
	// check. Default: the SDK's (regional STS), which honours
	// AWS_ENDPOINT_URL_STS. The amazon plugin has no STS endpoint setting.
	STSEndpoint string `mapstructure:"sts_endpoint"`
	// Deprecated: use `custom_endpoint_ec2`. Still works, with a warning.
	EC2Endpoint string `mapstructure:"ec2_endpoint"`
}

// AssumeRoleConfig is the `assume_role` block, with the amazon plugin's
// names. Every argument is passed to the STS AssumeRole call.
type AssumeRoleConfig struct {
	// ARN of the role to assume.
	RoleARN string `mapstructure:"role_arn"`
	// Session duration in seconds, 900 to 43200 (the role's maximum session
	// duration applies); default 900.
	DurationSeconds int `mapstructure:"duration_seconds"`
	// External id the role's trust policy requires.
	ExternalID string `mapstructure:"external_id"`
	// IAM policy JSON further restricting the session's permissions.
	Policy string `mapstructure:"policy"`
	// ARNs of IAM managed policies further restricting the session's permissions.
	PolicyARNs []string `mapstructure:"policy_arns"`
	// Session name; default set by the SDK.
	SessionName string `mapstructure:"session_name"`
	// Session tags.
	Tags map[string]string `mapstructure:"tags"`
	// Keys of `tags` to pass on to sessions chained from this one.
	TransitiveTagKeys []string `mapstructure:"transitive_tag_keys"`
	// Deprecated: use `duration_seconds`. A duration such as "1h"; still
	// works, with a warning.
	Duration time.Duration `mapstructure:"duration"`
}

// Unknown reports whether Packer passed a value it cannot know yet (packer validate without
// -evaluate-datasources); such fields are not validated.
func Unknown(s string) bool {
	return s == "<unknown>" || s == hcl2helper.UnknownVariableValue
}

var (
	mfaCodeRE = regexp.MustCompile(`^\d{6}$`)
	regionRE  = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d+$`)
)

// STS AssumeRole accepts session durations from 15 minutes to 12 hours.
const (
	minAssumeRoleSeconds = 900
	maxAssumeRoleSeconds = 43200
)

// Prepare folds the deprecated names into the amazon plugin's and validates the block. It
// returns the problems (each naming its setting) and the deprecation warnings, in a fixed
// order.
func (c *AccessConfig) Prepare() (errs []error, deprecations []string) {
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	deprecated := func(alias, name string) {
		deprecations = append(deprecations, fmt.Sprintf("%s is deprecated: rename it to %s (the amazon plugin's name); it still works for now", alias, name))
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		add("access_key and secret_key must be set together (or neither, to use the default credential chain)")
	}
	// An alias alone still works; an alias and its replacement set to different values is an
	// error naming both, because guessing which one the user meant could point elsewhere.
	if c.EC2Endpoint != "" {
		deprecated("ec2_endpoint", "custom_endpoint_ec2")
		switch {
		case c.CustomEndpointEC2 == "":
			c.CustomEndpointEC2 = c.EC2Endpoint
		case Unknown(c.CustomEndpointEC2) || Unknown(c.EC2Endpoint):
		case c.CustomEndpointEC2 != c.EC2Endpoint:
			add("ec2_endpoint = %q and custom_endpoint_ec2 = %q disagree: ec2_endpoint is the deprecated name of custom_endpoint_ec2; keep custom_endpoint_ec2 only", c.EC2Endpoint, c.CustomEndpointEC2)
		}
	}
	if ar := &c.AssumeRole; ar.Duration != 0 {
		deprecated("assume_role.duration", "assume_role.duration_seconds")
		seconds := int(ar.Duration / time.Second)
		switch {
		case ar.Duration%time.Second != 0:
			add("assume_role.duration = %s: STS takes whole seconds; use duration_seconds", ar.Duration)
		case ar.DurationSeconds == 0:
			ar.DurationSeconds = seconds
		case ar.DurationSeconds != seconds:
			add("assume_role.duration = %s and assume_role.duration_seconds = %d disagree: duration is the deprecated name of duration_seconds; keep duration_seconds only", ar.Duration, ar.DurationSeconds)
		}
	}
	errs = append(errs, c.AssumeRole.validate()...)
	if c.MFACode != "" && !Unknown(c.MFACode) && !mfaCodeRE.MatchString(c.MFACode) {
		add("mfa_code: must be the 6-digit code your MFA device shows now (pass it with -var, it changes every 30 s)")
	}
	if c.MaxRetries < 0 {
		add("max_retries = %d: must be 0 (SDK default) or more", c.MaxRetries)
	}
	for _, e := range []struct{ field, v string }{{"custom_endpoint_ec2", c.CustomEndpointEC2}, {"ssm_endpoint", c.SSMEndpoint}, {"sts_endpoint", c.STSEndpoint}} {
		if e.v == "" || Unknown(e.v) {
			continue
		}
		if u, err := url.Parse(e.v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("%s %q: must be an http(s) URL such as https://ec2.us-east-1.amazonaws.com", e.field, e.v)
		}
	}
	return errs, deprecations
}

// validate rejects an assume_role block STS would refuse, so that packer validate reports it
// instead of the first AWS call.
func (ar AssumeRoleConfig) validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if ar.RoleARN == "" {
		if ar.SessionName != "" || ar.ExternalID != "" || ar.DurationSeconds != 0 || ar.Policy != "" ||
			len(ar.PolicyARNs) > 0 || len(ar.Tags) > 0 || len(ar.TransitiveTagKeys) > 0 {
			add("assume_role: role_arn is required when any other assume_role argument is set")
		}
		return errs
	}
	if !Unknown(ar.RoleARN) && !strings.HasPrefix(ar.RoleARN, "arn:") {
		add("assume_role.role_arn %q: must be a role ARN (arn:aws:iam::<account>:role/<name>)", ar.RoleARN)
	}
	if s := ar.DurationSeconds; s != 0 && (s < minAssumeRoleSeconds || s > maxAssumeRoleSeconds) {
		field := "assume_role.duration_seconds"
		if ar.Duration != 0 {
			field = "assume_role.duration"
		}
		add("%s = %d seconds: STS accepts %d to %d (15 minutes to 12 hours, within the role's maximum session duration)", field, s, minAssumeRoleSeconds, maxAssumeRoleSeconds)
	}
	if ar.Policy != "" && !Unknown(ar.Policy) && !json.Valid([]byte(ar.Policy)) {
		add("assume_role.policy: not valid JSON; pass an IAM policy document, e.g. with jsonencode({...})")
	}
	for i, arn := range ar.PolicyARNs {
		if !Unknown(arn) && !strings.HasPrefix(arn, "arn:") {
			add("assume_role.policy_arns[%d] %q: must be a managed policy ARN (arn:aws:iam::aws:policy/<name>)", i, arn)
		}
	}
	if _, ok := ar.Tags[""]; ok {
		add("assume_role.tags: empty tag key")
	}
	for i, k := range ar.TransitiveTagKeys {
		if _, ok := ar.Tags[k]; !ok && !Unknown(k) {
			add("assume_role.transitive_tag_keys[%d] %q: not a key of assume_role.tags; STS passes on only session tags that are set", i, k)
		}
	}
	return errs
}

// CheckRegion reports a region name that does not look like an AWS region, naming field.
func (c *AccessConfig) CheckRegion(field, region string) error {
	if Unknown(region) || c.SkipRegionValidation || regionRE.MatchString(region) {
		return nil
	}
	return fmt.Errorf("%s %q: not an AWS region name like \"us-east-1\" (set skip_region_validation = true for unusual endpoints)", field, region)
}

// Secrets are the values that must never reach a log (packersdk.LogSecretFilter).
func (c *AccessConfig) Secrets() []string {
	return []string{c.AccessKey, c.SecretKey, c.Token, c.MFACode}
}

// Options turns the block into the SDK access options; region is the default region.
func (c *AccessConfig) Options(region string) Options {
	o := Options{
		AccessKey: c.AccessKey, SecretKey: c.SecretKey, Token: c.Token,
		Profile: c.Profile, SharedCredentialsFile: c.SharedCredentialsFile, MFACode: c.MFACode,
		Retry: RetryPolicy{MaxRetries: c.MaxRetries}, SkipMetadataAPICheck: c.SkipMetadataAPICheck,
		SSMEndpoint: c.SSMEndpoint, EC2Endpoint: c.CustomEndpointEC2, STSEndpoint: c.STSEndpoint,
		Region: region,
	}
	if ar := c.AssumeRole; ar.RoleARN != "" {
		o.AssumeRole = &AssumeRole{
			RoleARN: ar.RoleARN, SessionName: ar.SessionName, ExternalID: ar.ExternalID,
			Duration: time.Duration(ar.DurationSeconds) * time.Second,
			Policy:   ar.Policy, PolicyARNs: ar.PolicyARNs, Tags: ar.Tags, TransitiveTagKeys: ar.TransitiveTagKeys,
		}
	}
	return o
}

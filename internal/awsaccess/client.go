package awsaccess

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"
)

// Options are the access settings the SDK configuration is built from, named after the
// amazon plugin's; AccessConfig.Options makes them from the HCL block.
type Options struct {
	AccessKey, SecretKey, Token string
	Profile                     string
	SharedCredentialsFile       string
	AssumeRole                  *AssumeRole
	// MFACode answers the MFA prompt of a profile whose shared config
	// assumes a role with mfa_serial set (the amazon plugin's mfa_code).
	MFACode string
	// Retry is how calls are retried. The resolver's SSM and EC2 calls get
	// it per call (NewCallRetryer: throttles until the deadline); every
	// other call, the STS calls of role assumption included, uses the SDK's
	// standard retryer with its MaxRetries and MaxBackoff.
	Retry RetryPolicy
	// SkipMetadataAPICheck keeps the credential chain off the EC2 instance
	// metadata service.
	SkipMetadataAPICheck bool
	// Endpoint overrides. Empty leaves the SDK's resolution, which honours
	// AWS_ENDPOINT_URL_SSM / AWS_ENDPOINT_URL_EC2 / AWS_ENDPOINT_URL_STS and
	// AWS_ENDPOINT_URL; a value set here wins over those.
	SSMEndpoint, EC2Endpoint, STSEndpoint string
	// Region is the default region (for STS and when none is asked for);
	// empty uses AWS_REGION or the profile's region.
	Region string
	// HTTPClient replaces the SDK's HTTP client (tests); nil means the SDK's
	// client bounded by HTTPTimeout.
	HTTPClient aws.HTTPClient
}

// AssumeRole is the role to assume before calling SSM and EC2; every field
// goes into the STS AssumeRole request.
type AssumeRole struct {
	RoleARN, SessionName, ExternalID string
	// Duration of the session; 0 keeps the SDK's 15 minutes.
	Duration time.Duration
	// Policy is an inline session policy (JSON); PolicyARNs are managed ones.
	Policy     string
	PolicyARNs []string
	// Tags are session tags; TransitiveTagKeys pass on to chained sessions.
	Tags              map[string]string
	TransitiveTagKeys []string
}

// options applies the role's settings to the SDK's AssumeRole provider.
func (ar AssumeRole) options(ao *stscreds.AssumeRoleOptions) {
	if ar.SessionName != "" {
		ao.RoleSessionName = ar.SessionName
	}
	if ar.ExternalID != "" {
		ao.ExternalID = aws.String(ar.ExternalID)
	}
	if ar.Duration > 0 {
		ao.Duration = ar.Duration
	}
	if ar.Policy != "" {
		ao.Policy = aws.String(ar.Policy)
	}
	for _, arn := range ar.PolicyARNs {
		ao.PolicyARNs = append(ao.PolicyARNs, ststypes.PolicyDescriptorType{Arn: aws.String(arn)})
	}
	// Sorted so the request is the same from run to run.
	for _, k := range slices.Sorted(maps.Keys(ar.Tags)) {
		ao.Tags = append(ao.Tags, ststypes.Tag{Key: aws.String(k), Value: aws.String(ar.Tags[k])})
	}
	ao.TransitiveTagKeys = append([]string(nil), ar.TransitiveTagKeys...)
}

// HTTPTimeout bounds one HTTP request to AWS, from sending it to reading the whole answer.
// The SDK's own client has no such limit: an endpoint (a proxy, a custom_endpoint_ec2, a
// half-open connection) that accepts a request and never answers would block that call, and
// with it a cleanup that must terminate an instance, until the process is killed. EC2, SSM and
// STS answer the calls this plugin makes in well under a second, and even a page of 1000
// images in a few; a minute is long enough for a slow network and short enough that the
// retryer, not the user, gets to try again.
const HTTPTimeout = 60 * time.Second

// DefaultCallTimeout is the deadline of one AWS operation, retries included, when its caller
// sets none (the data source's `timeout`).
const DefaultCallTimeout = 30 * time.Second

// LoadConfig builds the shared AWS configuration: default credential
// chain, profile, shared credentials file, static keys, retries and an
// optional assumed role. It does not call AWS unless a role is assumed, and
// even then only when credentials are first used.
func LoadConfig(ctx context.Context, o Options) (aws.Config, error) {
	if (o.AccessKey == "") != (o.SecretKey == "") {
		return aws.Config{}, errors.New("access_key and secret_key must be set together")
	}
	if o.Retry.MaxRetries < 0 {
		return aws.Config{}, fmt.Errorf("max_retries = %d: must be 0 (SDK default) or more", o.Retry.MaxRetries)
	}
	var opts []func(*config.LoadOptions) error
	opts = append(opts, config.WithAppID("packer-plugin-dlami"))
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	if o.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(o.Profile))
	}
	if o.SharedCredentialsFile != "" {
		opts = append(opts, config.WithSharedCredentialsFiles([]string{o.SharedCredentialsFile}))
	}
	if o.AccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.AccessKey, o.SecretKey, o.Token)))
	}
	if o.SkipMetadataAPICheck {
		opts = append(opts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	var httpClient aws.HTTPClient = awshttp.NewBuildableClient().WithTimeout(HTTPTimeout)
	if o.HTTPClient != nil {
		httpClient = o.HTTPClient
	}
	opts = append(opts, config.WithHTTPClient(httpClient))
	// These apply only to a role the profile's shared config assumes: the
	// amazon plugin answers its MFA prompt with mfa_code, and sts_endpoint
	// must reach that AssumeRole call too.
	if o.MFACode != "" || o.STSEndpoint != "" {
		code, endpoint := o.MFACode, o.STSEndpoint
		opts = append(opts, config.WithAssumeRoleCredentialOptions(func(ao *stscreds.AssumeRoleOptions) {
			if code != "" {
				ao.TokenProvider = func() (string, error) { return code, nil }
			}
			if endpoint != "" && ao.Client != nil {
				ao.Client = stsAtEndpoint{client: ao.Client, endpoint: endpoint}
			}
		}))
	}
	if o.Retry.MaxRetries > 0 || o.Retry.MaxBackoff > 0 {
		maxRetries, maxBackoff := o.Retry.MaxRetries, o.Retry.MaxBackoff
		opts = append(opts, config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				if maxRetries > 0 {
					so.MaxAttempts = maxRetries + 1
				}
				if maxBackoff > 0 {
					so.MaxBackoff = maxBackoff
					so.Backoff = retry.NewExponentialJitterBackoff(maxBackoff)
				}
			})
		}))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		var mfa config.AssumeRoleTokenProviderNotSetError
		if errors.As(err, &mfa) {
			return aws.Config{}, fmt.Errorf("loading AWS configuration: the profile assumes a role with MFA (mfa_serial): set mfa_code to the code your MFA device shows now (pass it with -var): %w", err)
		}
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if o.AssumeRole != nil && o.AssumeRole.RoleARN != "" {
		ar := *o.AssumeRole
		prov := stscreds.NewAssumeRoleProvider(newSTSClient(cfg, o), ar.RoleARN, ar.options)
		// One cache for every region: the role is assumed once, not per region.
		cfg.Credentials = aws.NewCredentialsCache(prov)
	}
	return cfg, nil
}

func newSTSClient(cfg aws.Config, o Options) *sts.Client {
	return sts.NewFromConfig(cfg, func(so *sts.Options) {
		if o.STSEndpoint != "" {
			so.BaseEndpoint = aws.String(o.STSEndpoint)
		}
	})
}

// stsAtEndpoint sends the AssumeRole calls of the SDK's shared-config role
// provider to sts_endpoint; the SDK builds that client itself and offers
// no other hook for its endpoint.
type stsAtEndpoint struct {
	client   stscreds.AssumeRoleAPIClient
	endpoint string
}

func (s stsAtEndpoint) AssumeRole(ctx context.Context, in *sts.AssumeRoleInput, optFns ...func(*sts.Options)) (*sts.AssumeRoleOutput, error) {
	optFns = append(optFns, func(so *sts.Options) { so.BaseEndpoint = aws.String(s.endpoint) })
	return s.client.AssumeRole(ctx, in, optFns...)
}

// CallerIdentity is who the credentials belong to.
type CallerIdentity struct {
	Account, ARN string
}

// ValidateCredentials asks STS GetCallerIdentity who the credentials are,
// as the amazon plugin does unless skip_credential_validation is set, so
// that bad, expired or unassumable credentials fail once, up front, with a
// message about credentials rather than as N regions of failed lookups.
// GetCallerIdentity needs no IAM permission.
func ValidateCredentials(ctx context.Context, cfg aws.Config, o Options, region string, timeout time.Duration) (CallerIdentity, error) {
	if region != "" {
		cfg = cfg.Copy()
		cfg.Region = region
	}
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rt := NewCallRetryer(o.Retry)
	out, err := newSTSClient(cfg, o).GetCallerIdentity(cctx, &sts.GetCallerIdentityInput{}, func(so *sts.Options) { so.Retryer = rt })
	if err != nil {
		err = credentialValidationError(err, cfg.Region, o, timeout)
		if st := rt.Stats(); st.Retries() > 0 {
			err = &RetriedError{Err: err, Stats: st}
		}
		return CallerIdentity{}, err
	}
	id := CallerIdentity{Account: aws.ToString(out.Account), ARN: aws.ToString(out.Arn)}
	if id.Account == "" || id.ARN == "" {
		return CallerIdentity{}, fmt.Errorf("%s: sts:GetCallerIdentity answered without an account or ARN (is sts_endpoint an STS endpoint?); fix sts_endpoint, or set skip_credential_validation = true for endpoints without STS", cfg.Region)
	}
	return id, nil
}

const skipValidationHint = "set skip_credential_validation = true only for AWS-compatible endpoints without STS"

func credentialValidationError(err error, region string, o Options, timeout time.Duration) error {
	if isCreds, assume := CredentialsFailure(err); assume {
		role := "the assume_role.role_arn"
		if o.AssumeRole != nil {
			role = o.AssumeRole.RoleARN
		}
		if IsAccessDenied(err) {
			return &AccessDeniedError{Region: region, Action: "sts:AssumeRole", Resource: role, Err: err}
		}
		return fmt.Errorf("%s: validating AWS credentials (skip_credential_validation = false): assuming role %s failed: %w", region, role, err)
	} else if isCreds {
		return fmt.Errorf("%s: validating AWS credentials (skip_credential_validation = false): no usable AWS credentials: set access_key and secret_key, profile (and shared_credentials_file), or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run where an instance role is available: %w", region, err)
	}
	switch code := APICode(err); code {
	case "InvalidClientTokenId", "SignatureDoesNotMatch", "UnrecognizedClientException", "AuthFailure", "IncompleteSignature":
		return fmt.Errorf("%s: validating AWS credentials (skip_credential_validation = false): STS rejected them (%s): check access_key/secret_key/token, profile or the AWS_* environment: %w", region, code, err)
	case "ExpiredToken", "ExpiredTokenException", "RequestExpired":
		return fmt.Errorf("%s: validating AWS credentials (skip_credential_validation = false): they have expired (%s): refresh them (aws sso login, a new session token): %w", region, code, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: validating AWS credentials (skip_credential_validation = false): sts:GetCallerIdentity did not answer within %s: check sts_endpoint and the network, or %s: %w", region, timeout, skipValidationHint, err)
	}
	return fmt.Errorf("%s: validating AWS credentials (skip_credential_validation = false) with sts:GetCallerIdentity failed: check the credentials and sts_endpoint, or %s: %w", region, skipValidationHint, err)
}

// NewSSMClient returns an SSM client for region with the endpoint override of o.
func NewSSMClient(cfg aws.Config, o Options, region string) *ssm.Client {
	return ssm.NewFromConfig(inRegion(cfg, region), func(so *ssm.Options) {
		if o.SSMEndpoint != "" {
			so.BaseEndpoint = aws.String(o.SSMEndpoint)
		}
	})
}

// NewEC2Client returns a full EC2 client for region with the endpoint override of o: the
// resolver describes images with it, the post-processor launches, tags and deregisters.
func NewEC2Client(cfg aws.Config, o Options, region string) *ec2.Client {
	return ec2.NewFromConfig(inRegion(cfg, region), func(eo *ec2.Options) {
		if o.EC2Endpoint != "" {
			eo.BaseEndpoint = aws.String(o.EC2Endpoint)
		}
	})
}

func inRegion(cfg aws.Config, region string) aws.Config {
	rc := cfg.Copy()
	if region != "" {
		rc.Region = region
	}
	return rc
}

// Session is one access block turned into an SDK configuration, its credentials checked
// unless skip_credential_validation is set. It makes the service clients.
type Session struct {
	Config  aws.Config
	Options Options
	// Identity is who the credentials belong to; empty when they were not checked.
	Identity CallerIdentity
}

// SSM returns an SSM client for region.
func (s *Session) SSM(region string) *ssm.Client { return NewSSMClient(s.Config, s.Options, region) }

// EC2 returns an EC2 client for region.
func (s *Session) EC2(region string) *ec2.Client { return NewEC2Client(s.Config, s.Options, region) }

// Region is the session's default region: the one asked for, else the SDK's (AWS_REGION, the
// profile's).
func (s *Session) Region() string { return s.Config.Region }

// Connect loads the configuration of the block for region (empty: the SDK's default region)
// and, unless skip_credential_validation is set, checks the credentials there with
// sts:GetCallerIdentity, bounded by timeout (0: DefaultCallTimeout).
func (c *AccessConfig) Connect(ctx context.Context, region string, timeout time.Duration) (*Session, error) {
	o := c.Options(region)
	cfg, err := LoadConfig(ctx, o)
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" {
		return nil, errors.New("no region: set region (or regions), or AWS_REGION / AWS_DEFAULT_REGION, or a region in the AWS profile")
	}
	s := &Session{Config: cfg, Options: o}
	if !c.SkipCredentialValidation {
		if s.Identity, err = ValidateCredentials(ctx, cfg, o, cfg.Region, timeout); err != nil {
			return nil, err
		}
	}
	return s, nil
}

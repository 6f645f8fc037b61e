package dlamiresolve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// AWSOptions are the access settings, named after the amazon plugin's.
type AWSOptions struct {
	AccessKey, SecretKey, Token string
	Profile                     string
	SharedCredentialsFile       string
	AssumeRole                  *AssumeRole
	// MaxRetries is how many times a failed call is retried; 0 keeps the
	// SDK default (2 retries, 3 attempts).
	MaxRetries int
	// RetryMaxBackoff caps the wait between retries; 0 keeps the SDK's 20s.
	RetryMaxBackoff time.Duration
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
	// HTTPClient replaces the SDK's HTTP client (tests).
	HTTPClient aws.HTTPClient
}

// AssumeRole is the role to assume before calling SSM and EC2.
type AssumeRole struct {
	RoleARN, SessionName, ExternalID string
	Duration                         time.Duration
}

// LoadAWSConfig builds the shared AWS configuration: default credential
// chain, profile, shared credentials file, static keys, retries and an
// optional assumed role. It does not call AWS unless a role is assumed, and
// even then only when credentials are first used.
func LoadAWSConfig(ctx context.Context, o AWSOptions) (aws.Config, error) {
	if (o.AccessKey == "") != (o.SecretKey == "") {
		return aws.Config{}, errors.New("access_key and secret_key must be set together")
	}
	if o.MaxRetries < 0 {
		return aws.Config{}, fmt.Errorf("max_retries = %d: must be 0 (SDK default) or more", o.MaxRetries)
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
	if o.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(o.HTTPClient))
	}
	if o.MaxRetries > 0 || o.RetryMaxBackoff > 0 {
		maxRetries, maxBackoff := o.MaxRetries, o.RetryMaxBackoff
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
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if o.AssumeRole != nil && o.AssumeRole.RoleARN != "" {
		ar := *o.AssumeRole
		stsClient := sts.NewFromConfig(cfg, func(so *sts.Options) {
			if o.STSEndpoint != "" {
				so.BaseEndpoint = aws.String(o.STSEndpoint)
			}
		})
		prov := stscreds.NewAssumeRoleProvider(stsClient, ar.RoleARN, func(ao *stscreds.AssumeRoleOptions) {
			if ar.SessionName != "" {
				ao.RoleSessionName = ar.SessionName
			}
			if ar.ExternalID != "" {
				ao.ExternalID = aws.String(ar.ExternalID)
			}
			if ar.Duration > 0 {
				ao.Duration = ar.Duration
			}
		})
		// One cache for every region: the role is assumed once, not per region.
		cfg.Credentials = aws.NewCredentialsCache(prov)
	}
	return cfg, nil
}

// NewClientFactory returns a ClientFactory that makes SSM and EC2 clients
// for any region from cfg, with the endpoint overrides of o wired into both.
// Clients are made once per region and reused.
func NewClientFactory(cfg aws.Config, o AWSOptions) ClientFactory {
	var (
		mu    sync.Mutex
		cache = map[string]Clients{}
	)
	return func(region string) (Clients, error) {
		if region == "" {
			return Clients{}, errors.New("empty region")
		}
		mu.Lock()
		defer mu.Unlock()
		if c, ok := cache[region]; ok {
			return c, nil
		}
		rc := cfg.Copy()
		rc.Region = region
		s := ssm.NewFromConfig(rc, func(so *ssm.Options) {
			if o.SSMEndpoint != "" {
				so.BaseEndpoint = aws.String(o.SSMEndpoint)
			}
		})
		e := ec2.NewFromConfig(rc, func(eo *ec2.Options) {
			if o.EC2Endpoint != "" {
				eo.BaseEndpoint = aws.String(o.EC2Endpoint)
			}
		})
		c := Clients{SSM: s, EC2: e}
		cache[region] = c
		return c, nil
	}
}

// Package nodeaws is what dlami-node-check asks of AWS from the node it runs on, with the
// instance's own credentials (its role, through IMDSv2): the instance's identity, the upload
// of an evidence bundle to S3, and the request that its Auto Scaling group replace it. Every
// call is bounded; the SDK's default credential chain and endpoint settings
// (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3, ...) apply.
package nodeaws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/dlami-bake/packer-plugin-dlami/internal/evidence"
)

// DefaultIMDSEndpoint is the instance metadata service's IPv4 address.
const DefaultIMDSEndpoint = "http://169.254.169.254"

// Bounds of the calls.
const (
	// IMDSTimeout bounds the identity: IMDS answers in milliseconds on an instance, and off
	// one nothing answers at all.
	IMDSTimeout = 3 * time.Second
	// CallTimeout bounds one AWS API call, its retries included.
	CallTimeout = 20 * time.Second
	// maxAttempts is how often a throttled or failed call is tried.
	maxAttempts = 3
)

// Options configure the client.
type Options struct {
	// IMDSEndpoint is the instance metadata service; "" is DefaultIMDSEndpoint. Only tests
	// set it (a stand-in on loopback): the command has no flag for it.
	IMDSEndpoint string
	// HTTPClient replaces the SDK's (tests); nil is the SDK's.
	HTTPClient *http.Client
}

// Client reaches IMDSv2 and, with the instance role, S3 and Auto Scaling.
type Client struct {
	opt  Options
	imds *imds.Client
}

// New returns a client; nothing is called yet.
func New(o Options) *Client {
	if o.IMDSEndpoint == "" {
		o.IMDSEndpoint = DefaultIMDSEndpoint
	}
	io := imds.Options{
		Endpoint: o.IMDSEndpoint, ClientEnableState: imds.ClientEnabled,
		Retryer: retry.AddWithMaxAttempts(retry.NewStandard(), 2),
	}
	if o.HTTPClient != nil {
		io.HTTPClient = o.HTTPClient
	}
	return &Client{opt: o, imds: imds.New(io)}
}

// Identity reads the instance identity document through IMDSv2 (a token PUT, then the
// document GET), within IMDSTimeout.
func (c *Client) Identity(ctx context.Context) (evidence.Identity, error) {
	ctx, cancel := context.WithTimeout(ctx, IMDSTimeout)
	defer cancel()
	out, err := c.imds.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		return evidence.Identity{}, fmt.Errorf("IMDSv2 at %s (instance identity document): %w", c.opt.IMDSEndpoint, err)
	}
	d := out.InstanceIdentityDocument
	id := evidence.Identity{InstanceID: d.InstanceID, InstanceType: d.InstanceType, AvailabilityZone: d.AvailabilityZone,
		Region: d.Region, ImageID: d.ImageID, AccountID: d.AccountID}
	if id.InstanceID == "" || id.Region == "" {
		return id, fmt.Errorf("IMDSv2 at %s: the instance identity document names no instance id or region", c.opt.IMDSEndpoint)
	}
	return id, nil
}

// config is the SDK configuration for region: the default credential chain, whose last link
// is the instance role read through this client's IMDS, and bounded retries.
func (c *Client) config(ctx context.Context, region string) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(region),
		config.WithRetryer(func() aws.Retryer { return retry.AddWithMaxAttempts(retry.NewStandard(), maxAttempts) }),
		config.WithEC2RoleCredentialOptions(func(o *ec2rolecreds.Options) { o.Client = c.imds }),
	}
	if c.opt.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(c.opt.HTTPClient))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("AWS configuration: %w", err)
	}
	return cfg, nil
}

// Upload puts the file at path to s3://bucket/key in region, with metadata (x-amz-meta-*).
func (c *Client) Upload(ctx context.Context, region, bucket, key, path string, metadata map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	cfg, err := c.config(ctx, region)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	cl := s3.NewFromConfig(cfg)
	_, err = cl.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: f, ContentLength: aws.Int64(fi.Size()),
		ContentType: aws.String("application/gzip"), Metadata: metadata,
	})
	if err != nil {
		return fmt.Errorf("s3:PutObject s3://%s/%s: %w", bucket, key, short(err))
	}
	return nil
}

// ASGOutcome is what the replacement request found and did.
type ASGOutcome struct {
	// Group is the instance's Auto Scaling group ("" when it is in none).
	Group string
	// Requested is true when SetInstanceHealth Unhealthy was accepted.
	Requested bool
	// WouldRequest is true when the instance is InService and not yet unhealthy in Group, so
	// that SetInstanceHealth would be sent, but send was false (a drill): nothing was sent.
	WouldRequest bool
	// Message says what was done, or why nothing was.
	Message string
}

// MarkUnhealthy asks the Auto Scaling group of instanceID to replace it: DescribeAutoScaling
// Instances finds the group; an InService instance that is not already unhealthy is set
// Unhealthy with SetInstanceHealth, ShouldRespectGracePeriod false (a node that fails its
// check at its first boot is inside the grace period and must still be replaced). An instance
// in no group, or not in service, is left alone, and the outcome says so.
//
// With send false (a drill) everything up to that decision runs (the group is found, so the
// role's permission to describe it and the instance's membership are proven) and
// SetInstanceHealth is not sent: WouldRequest says it would have been.
func (c *Client) MarkUnhealthy(ctx context.Context, region, instanceID string, send bool) (ASGOutcome, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	cfg, err := c.config(ctx, region)
	if err != nil {
		return ASGOutcome{}, err
	}
	cl := autoscaling.NewFromConfig(cfg)
	desc, err := cl.DescribeAutoScalingInstances(ctx, &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{instanceID}})
	if err != nil {
		return ASGOutcome{}, fmt.Errorf("autoscaling:DescribeAutoScalingInstances %s: %w", instanceID, short(err))
	}
	if len(desc.AutoScalingInstances) == 0 {
		return ASGOutcome{Message: fmt.Sprintf("instance %s is in no Auto Scaling group (DescribeAutoScalingInstances lists none): nothing to hand the node to; node_check.replace = \"asg\" applies to nodes launched by a group", instanceID)}, nil
	}
	d := desc.AutoScalingInstances[0]
	o := ASGOutcome{Group: aws.ToString(d.AutoScalingGroupName)}
	state, health := aws.ToString(d.LifecycleState), aws.ToString(d.HealthStatus)
	switch {
	case state != "InService":
		o.Message = fmt.Sprintf("instance %s of Auto Scaling group %s is %s, not InService: left to the group", instanceID, o.Group, state)
		return o, nil
	case strings.EqualFold(health, "Unhealthy"):
		o.Message = fmt.Sprintf("instance %s is already marked Unhealthy in Auto Scaling group %s: the group replaces it", instanceID, o.Group)
		return o, nil
	case !send:
		o.WouldRequest = true
		o.Message = fmt.Sprintf("would mark instance %s Unhealthy in Auto Scaling group %s (it is InService and %s); not sent", instanceID, o.Group, health)
		return o, nil
	}
	_, err = cl.SetInstanceHealth(ctx, &autoscaling.SetInstanceHealthInput{
		InstanceId: aws.String(instanceID), HealthStatus: aws.String("Unhealthy"), ShouldRespectGracePeriod: aws.Bool(false),
	})
	if err != nil {
		return o, fmt.Errorf("autoscaling:SetInstanceHealth %s Unhealthy in group %s: %w", instanceID, o.Group, short(err))
	}
	o.Requested = true
	o.Message = fmt.Sprintf("marked instance %s Unhealthy in Auto Scaling group %s (SetInstanceHealth, grace period not respected): the group terminates and replaces it", instanceID, o.Group)
	return o, nil
}

// short is an SDK error as one line: the service's code and message when it answered one.
func short(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return fmt.Errorf("%s: %s", ae.ErrorCode(), ae.ErrorMessage())
	}
	return err
}

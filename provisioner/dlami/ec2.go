//go:generate packer-sdc struct-markdown

package dlami

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
	"github.com/dlami-bake/packer-plugin-dlami/internal/instancetype"
)

// EC2Config is the `ec2` block: how the provisioner reads EC2's description of the build
// instance's type (ec2:DescribeInstanceTypes), which judges the GPU count, per-GPU memory,
// architecture and local NVMe of any GPU type, a type without a built-in profile included.
// The access settings are the amazon plugin's names (paste the builder's). Without the
// permission, or without AWS access, the bake says so in the instance-type check and judges
// from the type's profile, else the PCI inventory.
type EC2Config struct {
	awsaccess.AccessConfig `mapstructure:",squash"`
	// Region to call. Defaults to the builder's (amazon-ebs's BuildRegion), then AWS_REGION /
	// the profile's region. Without any region, DescribeInstanceTypes is not read (and the
	// instance-type check says so).
	Region string `mapstructure:"region"`
	// Do not read DescribeInstanceTypes. Defaults to false.
	Skip bool `mapstructure:"skip"`
	// Deadline of the call, retries included. Defaults to 30s.
	Timeout time.Duration `mapstructure:"timeout"`
}

func (e *EC2Config) prepare() []error {
	if e.Timeout == 0 {
		e.Timeout = 30 * time.Second
	}
	errs, _ := e.AccessConfig.Prepare()
	for i, err := range errs {
		errs[i] = fmt.Errorf("ec2: %w", err)
	}
	return errs
}

// describer returns the bake's DescribeFunc for the build region named by Packer's generated
// data (amazon-ebs's BuildRegion), or nil when skipped.
func (e EC2Config) describer(generated map[string]interface{}) engine.DescribeFunc {
	if e.Skip {
		return nil
	}
	region := strings.TrimSpace(e.Region)
	if region == "" {
		region, _ = generated["BuildRegion"].(string)
	}
	access := e.AccessConfig
	// The one call says itself when the credentials are bad; an sts:GetCallerIdentity first
	// would only add a call (and an endpoint) that can fail.
	access.SkipCredentialValidation = true
	if region == "" {
		region = cmp.Or(os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"))
	}
	if region == "" && e.Profile == "" {
		// No builder region, no ec2.region, no environment: nothing to call (and no reason to
		// wait on the SDK's credential chain to find out).
		return func(context.Context, string) (instancetype.Description, error) {
			return instancetype.Description{}, errors.New("DescribeInstanceTypes not read: no region (the builder gave no BuildRegion; set ec2.region)")
		}
	}
	return func(ctx context.Context, typ string) (instancetype.Description, error) {
		sess, err := access.Connect(ctx, region, e.Timeout)
		if err != nil {
			if awsaccess.IsAccessDenied(err) {
				return instancetype.Description{}, fmt.Errorf("%w: %v", instancetype.ErrDenied, err)
			}
			return instancetype.Description{}, fmt.Errorf("no AWS access for DescribeInstanceTypes (set the ec2 block, or the builder's region through BuildRegion): %w", err)
		}
		if sess.Region() == "" {
			return instancetype.Description{}, errors.New("no region for DescribeInstanceTypes: set ec2.region")
		}
		return instancetype.Describe(ctx, sess.EC2(sess.Region()), typ, e.Timeout)
	}
}

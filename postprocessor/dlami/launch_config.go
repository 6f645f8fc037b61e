//go:generate packer-sdc mapstructure-to-hcl2 -type MetadataOptions
//go:generate packer-sdc struct-markdown

package dlami

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"

	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
)

// MetadataOptions is the verification instance's instance metadata service (IMDS), the
// `metadata_options` block of amazon-ebs. Unlike amazon-ebs, which leaves IMDS to the
// account's defaults, the verification instance requires IMDSv2 (`http_tokens = "required"`)
// unless this block says otherwise: it is what security teams require of a fleet, and an image
// whose first boot only works with IMDSv1 must fail here, not on the fleet.
type MetadataOptions struct {
	// `enabled` (default) or `disabled`. Disabled, nothing on the instance can read its
	// metadata: nodeadm, cloud-init's EC2 data source and the AWS CLI's instance credentials
	// need it.
	HTTPEndpoint string `mapstructure:"http_endpoint"`
	// `required` (default: IMDSv2 only, session tokens) or `optional` (IMDSv1 too).
	HTTPTokens string `mapstructure:"http_tokens"`
	// How many network hops a metadata token answer may take, 1 to 64. Unset sends none (EC2's
	// default, 1, or the account's instance metadata defaults); containers that reach IMDS
	// through a bridge need 2.
	HTTPPutResponseHopLimit int32 `mapstructure:"http_put_response_hop_limit"`
	// `enabled` or `disabled`: whether the instance's tags are readable from IMDS. Unset sends
	// none (EC2's default, disabled).
	InstanceMetadataTags string `mapstructure:"instance_metadata_tags"`
}

// Defaults of the metadata_options block.
const (
	defaultHTTPEndpoint = "enabled"
	defaultHTTPTokens   = "required"
	// maxUserData is EC2's limit on user data, before base64.
	maxUserData = 16 << 10
)

// prepareLaunch validates and completes the launch settings a real account needs: the
// metadata options, the user data and the temporary security group's source CIDRs.
func (c *Config) prepareLaunch() []error {
	var errs []error
	m := &c.MetadataOptions
	if m.HTTPEndpoint == "" {
		m.HTTPEndpoint = defaultHTTPEndpoint
	}
	if m.HTTPTokens == "" {
		m.HTTPTokens = defaultHTTPTokens
	}
	for _, f := range []struct {
		name, v string
		want    []string
	}{
		{"http_endpoint", m.HTTPEndpoint, []string{"enabled", "disabled"}},
		{"http_tokens", m.HTTPTokens, []string{"required", "optional"}},
		{"instance_metadata_tags", m.InstanceMetadataTags, []string{"", "enabled", "disabled"}},
	} {
		if !slices.Contains(f.want, f.v) {
			errs = append(errs, fmt.Errorf("metadata_options { %s = %q }: use %q or %q", f.name, f.v, f.want[len(f.want)-2], f.want[len(f.want)-1]))
		}
	}
	if n := m.HTTPPutResponseHopLimit; n != 0 && (n < 1 || n > 64) {
		errs = append(errs, fmt.Errorf("metadata_options { http_put_response_hop_limit = %d }: use 1 to 64 (2 lets containers behind a bridge reach IMDS), or leave it unset", n))
	}

	switch {
	case c.UserData != "" && c.UserDataFile != "":
		errs = append(errs, errors.New("user_data and user_data_file: set one (user_data_file reads the same content from a file)"))
	case c.UserDataFile != "":
		b, err := os.ReadFile(c.UserDataFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("user_data_file %s: %w (the path is relative to the directory packer runs in)", c.UserDataFile, err))
			break
		}
		c.userData = b
	case c.UserData != "":
		c.userData = []byte(c.UserData)
	}
	if len(c.userData) > maxUserData {
		name := "user_data"
		if c.UserDataFile != "" {
			name = "user_data_file " + c.UserDataFile
		}
		errs = append(errs, fmt.Errorf("%s: %d bytes, EC2 takes at most %d bytes of user data (compress it with gzip, which cloud-init reads, or fetch the rest from S3)", name, len(c.userData), maxUserData))
	}

	if c.SSHCIDR != "" && len(c.SSHCIDRs) > 0 {
		errs = append(errs, errors.New("temporary_security_group_source_cidr and temporary_security_group_source_cidrs: set one (the plural lists every source)"))
	}
	check := func(name, v string) {
		p, err := netip.ParsePrefix(v)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s %q: not a CIDR block such as 203.0.113.0/24: %v", name, v, err))
		case !p.Addr().Is4():
			errs = append(errs, fmt.Errorf("%s %q: the temporary security group admits IPv4 sources only; for IPv6 set security_group_ids to a group of your own", name, v))
		case p.Masked() != p:
			errs = append(errs, fmt.Errorf("%s %q: host bits are set; use %s", name, v, p.Masked()))
		}
	}
	if c.SSHCIDR != "" {
		check("temporary_security_group_source_cidr", c.SSHCIDR)
	}
	seen := map[string]bool{}
	for i, v := range c.SSHCIDRs {
		name := fmt.Sprintf("temporary_security_group_source_cidrs[%d]", i)
		if seen[v] {
			errs = append(errs, fmt.Errorf("%s %q is listed twice", name, v))
		}
		seen[v] = true
		check(name, v)
	}
	if len(c.SecurityGroupIDs) > 0 && (c.SSHCIDR != "" || len(c.SSHCIDRs) > 0) {
		errs = append(errs, errors.New("security_group_ids with temporary_security_group_source_cidr(s): the source CIDRs are for the temporary security group, which is not made when security_group_ids is set; remove one"))
	}
	return errs
}

// launchSettings are the launch.Spec fields prepareLaunch resolved.
func (c *Config) launchSettings(s *launch.Spec) {
	m := c.MetadataOptions
	s.Metadata = &launch.Metadata{HTTPEndpoint: m.HTTPEndpoint, HTTPTokens: m.HTTPTokens, HTTPPutResponseHopLimit: m.HTTPPutResponseHopLimit, InstanceMetadataTags: m.InstanceMetadataTags}
	s.UserData = c.userData
	s.SSHCIDRs = c.SSHCIDRs
}

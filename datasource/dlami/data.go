//go:generate packer-sdc mapstructure-to-hcl2 -type Config,DatasourceOutput,GoldenConfig
//go:generate packer-sdc struct-markdown

// Package dlami is the `dlami` data source: it resolves the AWS Deep
// Learning Base OSS DLAMI for an architecture and OS (through the SSM
// parameter AWS publishes, or a pinned build), verifies the image before
// anything is baked on it, and optionally finds the newest golden AMI
// already baked from it so CI can tell whether a rebake is due.
package dlami

import (
	"context"
	"fmt"
	"log"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/packer-plugin-sdk/hcl2helper"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hashicorp/packer-plugin-sdk/template/config"
	"github.com/zclconf/go-cty/cty"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
	"github.com/dlami-bake/packer-plugin-dlami/internal/dlamiresolve"
	"github.com/dlami-bake/packer-plugin-dlami/internal/instancetype"
)

// Config is the data source configuration.
type Config struct {
	// What to resolve.

	// CPU architecture: `x86_64` (default) or `arm64`.
	Architecture string `mapstructure:"architecture"`
	// Operating system: `ubuntu-24.04` (default), `ubuntu-22.04` or `amazon-linux-2023`.
	OS string `mapstructure:"os"`
	// DLAMI family, the <ami_type> of the parameter path without the OS:
	// `base-oss-nvidia-driver-gpu` (default). The parameter read is
	// `/aws/service/deeplearning/ami/<architecture>/<flavor>-<os>/latest/ami-id`.
	Flavor string `mapstructure:"flavor"`
	// Full SSM parameter name to read instead of the one built from
	// architecture, flavor and os. Cannot be combined with os, flavor or build.
	ParameterName string `mapstructure:"parameter_name"`
	// Pin a build (`YYYYMMDD`, the date at the end of the AMI name) for
	// reproducible bakes. The image is then found by name with
	// ec2:DescribeImages among the trusted owners instead of through SSM.
	Build string `mapstructure:"build"`

	// Where.

	// Region to resolve in; the outputs without a region in their name are
	// for this region. Defaults to the first of `regions`, then AWS_REGION /
	// AWS_DEFAULT_REGION / the profile's region.
	Region string `mapstructure:"region"`
	// More regions to resolve in, concurrently; see the `amis` output.
	Regions []string `mapstructure:"regions"`

	// Trust.

	// Trusted image owners: account ids, `amazon` (the DLAMI publisher,
	// account 898082745236 in the aws partition), `self` or
	// `aws-marketplace`. Default `["amazon"]`.
	Owners []string `mapstructure:"owners"`
	// Accept an image past its deprecation time (with a warning). Default false.
	AllowDeprecated bool `mapstructure:"allow_deprecated"`

	// Rebake lookup: the newest AMI already baked from this family.
	Golden *GoldenConfig `mapstructure:"golden"`

	// The instance type the image will be baked (or verified) on, as the builder's
	// `instance_type`. When set, the lookup reads it with ec2:DescribeInstanceTypes and fails
	// before anything launches when the type cannot run the resolved image: its
	// SupportedArchitectures lack the image's architecture (an arm64 DLAMI on an x86_64 type),
	// or its GPU is a fraction of one (g6f, gr6f: the Base OSS DLAMI cannot drive a vGPU). A
	// denied DescribeInstanceTypes is a warning (the `warnings` output), not a failure.
	InstanceType string `mapstructure:"instance_type"`

	// AWS access, with the amazon plugin's names: an `amazon-ebs` access
	// block pasted here works unchanged.
	awsaccess.AccessConfig `mapstructure:",squash"`

	// Deadline of each AWS call, retries included. Default "30s". A
	// throttled call is retried with jittered backoff until this deadline.
	Timeout time.Duration `mapstructure:"timeout"`
	// Deadline of the whole lookup, all regions. Default "5m".
	ExecuteTimeout time.Duration `mapstructure:"execute_timeout"`
}

// GoldenConfig is the `golden` block: how to find AMIs already baked from
// this family. At least one of name_prefix and tags is required.
type GoldenConfig struct {
	// Owners of golden AMIs. Default `["self"]`.
	Owners []string `mapstructure:"owners"`
	// Golden AMI names start with this.
	NamePrefix string `mapstructure:"name_prefix"`
	// Tags golden AMIs carry; values may use EC2 filter wildcards (* and ?).
	Tags map[string]string `mapstructure:"tags"`
	// Tag on the golden AMI holding the DLAMI id it was baked from.
	// Default "dlami:source_ami".
	SourceAMITag string `mapstructure:"source_ami_tag"`
	// Also count AMIs the `dlami` post-processor did not verify (no `dlami:verified` tag, or
	// `dlami:verified = false`) as golden. Default false: only AMIs tagged
	// `dlami:verified = true` are, so an AMI whose first boot failed or was never checked does
	// not make the rebake decision think the fleet is current.
	IncludeUnverified bool `mapstructure:"include_unverified"`
}

// DatasourceOutput is what `data.dlami.<name>` exposes.
type DatasourceOutput struct {
	// AMI id in `region`.
	AMIID string `mapstructure:"ami_id"`
	// AMI name, e.g. "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20261002".
	Name string `mapstructure:"name"`
	// AMI description.
	Description string `mapstructure:"description"`
	// Build date stamp at the end of the name (YYYYMMDD).
	Build string `mapstructure:"build"`
	// Creation time (ISO 8601).
	CreationDate string `mapstructure:"creation_date"`
	// Deprecation time (ISO 8601); "" when none is set.
	DeprecationTime string `mapstructure:"deprecation_time"`
	// Owner account id.
	OwnerID string `mapstructure:"owner_id"`
	// Image architecture.
	Architecture string `mapstructure:"architecture"`
	// Root device name, e.g. /dev/sda1 (Ubuntu) or /dev/xvda (Amazon Linux).
	RootDeviceName string `mapstructure:"root_device_name"`
	// SSM parameter read; "" when build was pinned.
	ParameterName string `mapstructure:"parameter_name"`
	// Version of that parameter.
	ParameterVersion int `mapstructure:"parameter_version"`
	// When that parameter last changed (RFC 3339).
	ParameterLastModified string `mapstructure:"parameter_last_modified"`
	// Region of the single-valued outputs.
	Region string `mapstructure:"region"`
	// AMI id per resolved region.
	AMIs map[string]string `mapstructure:"amis"`
	// Warnings: a deprecated image accepted by allow_deprecated, deprecated
	// argument names in the configuration.
	Warnings []string `mapstructure:"warnings"`
	// Newest golden AMI in `region`; "" when none was found or no golden block is set.
	GoldenAMIID string `mapstructure:"golden_ami_id"`
	// Its name.
	GoldenName string `mapstructure:"golden_name"`
	// The DLAMI id recorded in its source_ami_tag.
	GoldenSourceAMI string `mapstructure:"golden_source_ami"`
	// Golden AMI id per resolved region ("" where none).
	GoldenAMIs map[string]string `mapstructure:"golden_amis"`
	// True when any resolved region has no golden AMI or one baked from
	// another DLAMI than the one resolved now. Without a golden block it
	// is true (nothing is known to be current).
	RebakeNeeded bool `mapstructure:"rebake_needed"`
	// Regions that need a rebake, sorted.
	RebakeRegions []string `mapstructure:"rebake_regions"`
}

// Datasource implements packer.Datasource.
type Datasource struct {
	config Config
	// deprecations are the warnings about deprecated argument names found
	// by Configure; Execute adds them to the warnings output.
	deprecations []string
	// logf receives warnings; nil means log.Printf (tests capture them).
	logf func(format string, args ...any)
}

func (d *Datasource) warnf(format string, args ...any) {
	if d.logf != nil {
		d.logf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// ConfigSpec returns the HCL spec of Config.
func (d *Datasource) ConfigSpec() hcldec.ObjectSpec { return d.config.FlatMapstructure().HCL2Spec() }

// OutputSpec returns the HCL spec of DatasourceOutput.
func (d *Datasource) OutputSpec() hcldec.ObjectSpec {
	return (&DatasourceOutput{}).FlatMapstructure().HCL2Spec()
}

// unknown reports whether Packer passed a value it cannot know yet (packer
// validate without -evaluate-datasources); such fields are not validated.
func unknown(s string) bool { return awsaccess.Unknown(s) }

var (
	flavorRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)
	accountR = regexp.MustCompile(`^\d{12}$`)
)

var ownerAliases = map[string]bool{"amazon": true, "self": true, "aws-marketplace": true}

// Configure decodes and validates the configuration. It does no network I/O.
func (d *Datasource) Configure(raws ...interface{}) error {
	d.deprecations = nil
	if err := config.Decode(&d.config, nil, raws...); err != nil {
		return fmt.Errorf("dlami: %w", err)
	}
	c := &d.config
	packersdk.LogSecretFilter.Set(c.Secrets()...)
	var errs *packersdk.MultiError
	add := func(format string, args ...any) { errs = packersdk.MultiErrorAppend(errs, fmt.Errorf(format, args...)) }

	if c.ParameterName != "" && !unknown(c.ParameterName) {
		if !strings.HasPrefix(c.ParameterName, "/") {
			add("parameter_name %q: must be a full SSM parameter name starting with /", c.ParameterName)
		}
		for field, v := range map[string]string{"os": c.OS, "flavor": c.Flavor, "build": c.Build} {
			if v != "" {
				add("parameter_name and %s are both set: parameter_name replaces the path built from architecture, flavor and os; set one", field)
			}
		}
		if arch, _, ok := dlamiresolve.SplitParameterPath(c.ParameterName); ok && !unknown(c.Architecture) {
			if c.Architecture == "" {
				c.Architecture = arch
			} else if c.Architecture != arch {
				add("architecture = %q but parameter_name is under %s; drop architecture or fix the path", c.Architecture, arch)
			}
		}
	}
	if c.Architecture == "" {
		c.Architecture = dlamiresolve.DefaultArchitecture
	}
	if c.OS == "" && c.ParameterName == "" {
		c.OS = dlamiresolve.DefaultOS
	}
	if c.Flavor == "" && c.ParameterName == "" {
		c.Flavor = dlamiresolve.DefaultFlavor
	}
	if !unknown(c.Architecture) && !slices.Contains(dlamiresolve.Architectures, c.Architecture) {
		hint := ""
		switch c.Architecture {
		case "amd64", "x86-64", "x64":
			hint = ` (did you mean "x86_64"?)`
		case "aarch64", "arm":
			hint = ` (did you mean "arm64"?)`
		}
		add("architecture %q: must be one of %s%s", c.Architecture, strings.Join(dlamiresolve.Architectures, ", "), hint)
	}
	if c.OS != "" && !unknown(c.OS) && !slices.Contains(dlamiresolve.OperatingSystems, c.OS) {
		add("os %q: must be one of %s (or use parameter_name for other DLAMIs)", c.OS, strings.Join(dlamiresolve.OperatingSystems, ", "))
	}
	if c.Flavor != "" && !unknown(c.Flavor) && !flavorRE.MatchString(c.Flavor) {
		add("flavor %q: must be a lower-case DLAMI type such as %q (no slashes or spaces)", c.Flavor, dlamiresolve.DefaultFlavor)
	}
	if c.Build != "" && !unknown(c.Build) {
		if _, err := time.Parse("20060102", c.Build); err != nil || !dlamiresolve.ValidBuild(c.Build) {
			add("build %q: must be the YYYYMMDD date at the end of the AMI name, e.g. \"20261002\"", c.Build)
		}
	}

	checkRegion := func(field, r string) {
		if err := c.CheckRegion(field, r); err != nil {
			add("%s", err)
		}
	}
	if c.Region != "" {
		checkRegion("region", c.Region)
	}
	for i, r := range c.Regions {
		if r == "" {
			add("regions[%d]: empty region name", i)
			continue
		}
		checkRegion(fmt.Sprintf("regions[%d]", i), r)
	}

	checkOwners := func(field string, owners []string) {
		for i, o := range owners {
			if unknown(o) || accountR.MatchString(o) || ownerAliases[o] {
				continue
			}
			add("%s[%d] %q: must be a 12-digit account id or one of amazon, self, aws-marketplace", field, i, o)
		}
	}
	checkOwners("owners", c.Owners)

	if g := c.Golden; g != nil {
		checkOwners("golden.owners", g.Owners)
		if g.NamePrefix == "" && len(g.Tags) == 0 {
			add("golden: set name_prefix or tags (or both); otherwise every AMI the owners have would count as golden")
		}
		if _, ok := g.Tags[""]; ok {
			add("golden.tags: empty tag key")
		}
	}

	accessErrs, deprecations := c.AccessConfig.Prepare()
	for _, e := range accessErrs {
		add("%s", e)
	}
	for _, w := range deprecations {
		d.warnf("[WARN] dlami: %s", w)
		d.deprecations = append(d.deprecations, w)
	}
	if c.Timeout < 0 {
		add("timeout %s: must be positive", c.Timeout)
	}
	if c.Timeout == 0 {
		c.Timeout = awsaccess.DefaultCallTimeout
	}
	if c.ExecuteTimeout < 0 {
		add("execute_timeout %s: must be positive", c.ExecuteTimeout)
	}
	if c.ExecuteTimeout == 0 {
		c.ExecuteTimeout = 5 * time.Minute
	}
	if errs != nil && len(errs.Errors) > 0 {
		sort.Slice(errs.Errors, func(i, j int) bool { return errs.Errors[i].Error() < errs.Errors[j].Error() })
		return fmt.Errorf("dlami: invalid configuration: %w", errs)
	}
	return nil
}

func (c *Config) primaryRegion() string {
	if c.Region != "" {
		return c.Region
	}
	if len(c.Regions) > 0 {
		return c.Regions[0]
	}
	return ""
}

func (c *Config) query() dlamiresolve.Query {
	q := dlamiresolve.Query{
		Architecture: c.Architecture, OS: c.OS, Flavor: c.Flavor,
		ParameterName: c.ParameterName, Build: c.Build,
		Owners: c.Owners, AllowDeprecated: c.AllowDeprecated,
	}
	if g := c.Golden; g != nil {
		q.Golden = &dlamiresolve.GoldenQuery{Owners: g.Owners, NamePrefix: g.NamePrefix, Tags: g.Tags, SourceAMITag: g.SourceAMITag, IncludeUnverified: g.IncludeUnverified}
	}
	return q
}

// Execute resolves and verifies the DLAMI in every requested region.
func (d *Datasource) Execute() (cty.Value, error) {
	out, err := d.resolve()
	if err != nil {
		return cty.NullVal(cty.EmptyObject), err
	}
	return hcl2helper.HCL2ValueFromConfig(out, d.OutputSpec()), nil
}

func (d *Datasource) resolve() (*DatasourceOutput, error) {
	c := &d.config
	ctx, cancel := context.WithTimeout(context.Background(), c.ExecuteTimeout)
	defer cancel()
	sess, err := c.Connect(ctx, c.primaryRegion(), c.Timeout)
	if err != nil {
		return nil, fmt.Errorf("dlami: %w", err)
	}
	primary := sess.Region()
	if id := sess.Identity; id.ARN != "" {
		log.Printf("[INFO] dlami: AWS credentials valid: %s (account %s)", id.ARN, id.Account)
	}
	r := &dlamiresolve.Resolver{
		Clients: dlamiresolve.NewClientFactory(sess), CallTimeout: c.Timeout,
		AssumeRoleARN: c.AssumeRole.RoleARN, Retry: sess.Options.Retry,
	}
	regions := append([]string{primary}, c.Regions...)
	results, err := r.ResolveAll(ctx, regions, c.query())
	if err != nil {
		return nil, fmt.Errorf("dlami: %w", err)
	}
	res := results[primary]
	img := res.Image
	out := &DatasourceOutput{
		AMIID: img.ID, Name: img.Name, Description: img.Description, Build: img.Build,
		CreationDate: img.CreationDate, DeprecationTime: img.DeprecationTime, OwnerID: img.OwnerID,
		Architecture: img.Architecture, RootDeviceName: img.RootDeviceName,
		ParameterName: res.ParameterName, ParameterVersion: int(res.ParameterVersion),
		ParameterLastModified: res.ParameterLastModified, Region: primary,
		AMIs: map[string]string{}, Warnings: append([]string{}, d.deprecations...), GoldenAMIs: map[string]string{}, RebakeRegions: []string{},
	}
	for _, region := range slices.Sorted(maps.Keys(results)) {
		rr := results[region]
		out.AMIs[region] = rr.Image.ID
		out.Warnings = append(out.Warnings, rr.Warnings...)
		if rr.Golden == nil || rr.Golden.RebakeNeeded {
			out.RebakeRegions = append(out.RebakeRegions, region)
		}
		if rr.Golden != nil {
			out.GoldenAMIs[region] = rr.Golden.AMIID
		}
	}
	if g := res.Golden; g != nil {
		out.GoldenAMIID, out.GoldenName, out.GoldenSourceAMI = g.AMIID, g.Name, g.SourceAMI
	}
	out.RebakeNeeded = len(out.RebakeRegions) > 0
	if warning, err := c.checkInstanceType(ctx, sess.EC2(primary), img.ID, img.Architecture); err != nil {
		return nil, fmt.Errorf("dlami: %w", err)
	} else if warning != "" {
		d.warnf("[WARN] dlami: %s", warning)
		out.Warnings = append(out.Warnings, warning)
	}
	log.Printf("[INFO] dlami: %s in %s is %s (%s); rebake_needed=%v", describe(c), primary, img.ID, img.Name, out.RebakeNeeded)
	return out, nil
}

// checkInstanceType refuses an instance_type that cannot run the resolved image (see
// Config.InstanceType). A denied or failed DescribeInstanceTypes returns a warning instead:
// the bake's own architecture check still runs on the host.
func (c *Config) checkInstanceType(ctx context.Context, api instancetype.API, amiID, amiArch string) (warning string, err error) {
	typ := strings.TrimSpace(c.InstanceType)
	if typ == "" || unknown(typ) {
		return "", nil
	}
	d, err := instancetype.Describe(ctx, api, typ, c.Timeout)
	if err != nil {
		return fmt.Sprintf("instance_type %q not checked against the image: %v", typ, err), nil
	}
	if err := d.Refuse("instance_type"); err != nil {
		return "", err
	}
	return "", instancetype.JudgeArchitecture(typ, instancetype.FromEC2(d.Architectures),
		instancetype.ArchWitness{Arch: amiArch, What: "the DLAMI " + amiID, Setting: "architecture"})
}

func describe(c *Config) string {
	switch {
	case c.ParameterName != "":
		return c.ParameterName
	case c.Build != "":
		return fmt.Sprintf("%s/%s build %s", c.Architecture, dlamiresolve.AMIType(c.Flavor, c.OS), c.Build)
	}
	return dlamiresolve.ParameterPath(c.Architecture, c.Flavor, c.OS)
}

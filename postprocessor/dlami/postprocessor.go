// Package dlami is the `dlami` post-processor: it launches an instance from the AMI an
// amazon-ebs build registered, checks its first boot against the bill of materials the
// provisioner baked into it (kernel, guarded packages and holds, the host suite, optionally the
// NCCL test), tags the AMI verified or keeps it out of circulation, and always terminates the
// instance and deletes its temporaries.
package dlami

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2/hcldec"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hashicorp/packer-plugin-sdk/template/config"

	"github.com/dlami-bake/packer-plugin-dlami/internal/amitags"
	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/progress"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/secretfilter"
)

// AmazonEBSBuilderID is the builder id of amazon-ebs artifacts.
const AmazonEBSBuilderID = "mitchellh.amazonebs"

// PostProcessor implements packersdk.PostProcessor.
type PostProcessor struct {
	config Config
	// ec2For returns the EC2 client of a region; replaced in tests.
	ec2For func(ctx context.Context, region string) (launch.EC2API, error)
	// poll, cleanupTimeout and callTimeout replace launch's defaults in tests.
	poll, cleanupTimeout, callTimeout time.Duration
	// checkBoot judges a launched instance's first boot; nil means check. Replaced in tests.
	checkBoot func(ctx context.Context, ui packersdk.Ui, in *launch.Instance, t target, typ string, say func(string)) error
	// pricingFor returns the Price List API client (price_lookup); replaced in tests.
	pricingFor func(ctx context.Context) (PricingAPI, error)
	// progressEvery replaces the pace of the progress lines (progress.DefaultEvery) in tests.
	progressEvery time.Duration
	// across is the status of the test across nodes of the launch being verified, set by its
	// check (checkNodes) when the test was judged; nil when it was not.
	across *result.Status
}

// patience is how the calls that carry out a verdict are retried.
func (p *PostProcessor) patience() launch.Patience {
	return launch.Patience{Poll: p.poll, Timeout: p.cleanupTimeout, CallTimeout: p.callTimeout, ProgressEvery: p.progressEvery}
}

// waiting says, at the progress pace until stop is called, what the post-processor waits for
// and for how long.
func (p *PostProcessor) waiting(say func(string), what func() string, limit time.Duration) (stop func()) {
	return progress.Pace{Every: p.progressEvery}.Waiting(say, what, limit)
}

// ConfigSpec implements packersdk.PostProcessor.
func (p *PostProcessor) ConfigSpec() hcldec.ObjectSpec { return p.config.FlatMapstructure().HCL2Spec() }

// Configure implements packersdk.PostProcessor. It does no network I/O.
func (p *PostProcessor) Configure(raws ...interface{}) error {
	err := config.Decode(&p.config, &config.DecodeOpts{PluginType: "dlami", Interpolate: true, InterpolateContext: &p.config.ctx,
		DecodeHooks: append(slices.Clone(config.DefaultDecodeHookFuncs), wholeNumbers)}, raws...)
	if err != nil {
		return err
	}
	packersdk.LogSecretFilter.Set(secretfilter.New(p.config.Secrets()...).Secrets()...)
	errs, warnings := p.config.prepare()
	for _, w := range warnings {
		fmt.Fprintln(os.Stderr, "dlami: warning: "+w)
	}
	return errors.Join(errs...)
}

// wholeNumbers refuses a number with a fraction for a whole-number setting (nodes = 1.5),
// which the decoder would otherwise cut to its whole part; the decoder names the setting.
func wholeNumbers(from, to reflect.Type, data interface{}) (interface{}, error) {
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	default:
		return data, nil
	}
	var f float64
	switch v := data.(type) {
	case float64:
		f = v
	case float32:
		f = float64(v)
	default:
		return data, nil
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%g is not a whole number", f)
	}
	return data, nil
}

// target is one AMI copy to verify.
type target struct{ region, ami string }

// amis parses an amazon-ebs artifact id: "us-east-1:ami-0a,us-west-2:ami-0b".
func amis(a packersdk.Artifact) (map[string]string, error) {
	if a.BuilderId() != AmazonEBSBuilderID {
		return nil, fmt.Errorf("the artifact is from builder %q, not amazon-ebs (%s): the dlami post-processor verifies AMIs", a.BuilderId(), AmazonEBSBuilderID)
	}
	out := map[string]string{}
	for _, part := range strings.Split(a.Id(), ",") {
		region, ami, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || !strings.HasPrefix(ami, "ami-") || region == "" {
			return nil, fmt.Errorf("the artifact id %q is not a list of region:ami-id pairs", a.Id())
		}
		out[region] = ami
	}
	return out, nil
}

// targets picks the copies to verify: `regions`, else `region`, else the only one.
func (c *Config) targets(all map[string]string) ([]target, error) {
	want := c.Regions
	if len(want) == 0 && c.Region != "" {
		want = []string{c.Region}
	}
	if len(want) == 0 {
		want = slices.Sorted(maps.Keys(all))
		if len(want) != 1 {
			return nil, fmt.Errorf("the AMI exists in %s: set region (the build's own region) or regions to say which copies to verify", strings.Join(want, ", "))
		}
	}
	var out []target
	for _, r := range want {
		ami, ok := all[r]
		if !ok {
			return nil, fmt.Errorf("regions: the AMI has no copy in %s (it exists in %d region(s); add %s to the builder's ami_regions)", r, len(all), r)
		}
		out = append(out, target{r, ami})
	}
	return out, nil
}

// instanceType is the setting (the first of instance_types), else the bill of materials'
// record.
func (c *Config) instanceType() (string, error) {
	if len(c.InstanceTypes) > 0 {
		return c.InstanceTypes[0], nil
	}
	if c.InstanceType != "" {
		return c.InstanceType, nil
	}
	data, err := os.ReadFile(c.BOMFile)
	if err != nil {
		return "", fmt.Errorf("instance_type is not set and the bill of materials to read it from is unreadable (bom_file %s: %v): set instance_type, or point bom_file at the dlami provisioner's %s", c.BOMFile, err, BOMFileName)
	}
	b, err := bom.Decode(data)
	if err != nil {
		return "", fmt.Errorf("bom_file %s: %w", c.BOMFile, err)
	}
	if b.InstanceType == "" {
		return "", fmt.Errorf("bom_file %s records no instance type: set instance_type", c.BOMFile)
	}
	return b.InstanceType, nil
}

// PostProcess implements packersdk.PostProcessor. The AMI's fate follows the verdict on the
// first boot of the copies it launches, whatever fails afterwards:
//
//   - every copy booted healthy: each is tagged dlami:verified = true (and every ami_regions
//     copy with the copies it was verified in), and PostProcess succeeds, so Packer keeps the
//     AMI. Tagging is retried to its deadline; a tag it still cannot set, or a temporary the
//     cleanup could not remove, is reported with the command that fixes it, never turned into
//     a failure (Packer would deregister the healthy AMI).
//   - a copy was judged wrong: on_failure applies to every copy (tag dlami:verified = false,
//     or deregister, which tags first so that a copy it cannot deregister is marked) and
//     PostProcess fails.
//   - a copy could not be judged (credentials, capacity, SSH, a cancellation): nothing is
//     tagged or deregistered, and PostProcess fails.
//
// No copy is tagged verified before the whole verdict is known: a run that fails (and whose
// AMI Packer then deregisters) never leaves dlami:verified = true behind. Whatever could not be
// removed is named last, with its command.
func (p *PostProcessor) PostProcess(ctx context.Context, ui packersdk.Ui, a packersdk.Artifact) (packersdk.Artifact, bool, bool, error) {
	// Every line it sends and its error pass through the secrets first: Packer does not
	// filter a plugin's UI, and prints its error as it is.
	secrets := secretfilter.New(p.config.Secrets()...)
	out, keep, force, err := p.postProcess(ctx, secrets.UI(ui), a)
	return out, keep, force, secrets.Error(err)
}

// postProcess is PostProcess, its UI and its error not filtered yet.
func (p *PostProcessor) postProcess(ctx context.Context, ui packersdk.Ui, a packersdk.Artifact) (packersdk.Artifact, bool, bool, error) {
	c := &p.config
	all, err := amis(a)
	if err != nil {
		return a, true, false, fmt.Errorf("dlami: %w", err)
	}
	targets, err := c.targets(all)
	if err != nil {
		return a, true, false, fmt.Errorf("dlami: %w", err)
	}
	typ, err := c.instanceType()
	if err != nil {
		return a, true, false, fmt.Errorf("dlami: %w", err)
	}
	// Before any GPU instance starts: a bake that deferred its validation needs this
	// post-processor to complete it.
	if err := c.checkDeferredBOM(); err != nil {
		return a, true, false, fmt.Errorf("dlami: %w", err)
	}
	ec2For := p.ec2For
	if ec2For == nil {
		ec2For = c.ec2Client
	}
	// One client per region for the whole run: verifying and on_failure use the same one, and
	// the credentials are checked once.
	ec2For = perRegion(ec2For)
	run := &run{id: cmp.Or(os.Getenv("PACKER_RUN_UUID"), "dlami-"+strconv.FormatInt(time.Now().UnixNano(), 36))}
	// Whatever happens, what the run could not remove or tag is what the user reads last,
	// after the instance time the run took.
	defer run.reportLeftovers(ui)
	var cost *report.Cost
	defer func() { p.reportCost(ui, cost) }()
	// verified: copies whose first boot passed, with the type it ran on; failed: copies whose
	// first boot was judged and found wrong; unverified: copies that could not be judged.
	// on_failure applies to failed ones only: nothing is known against an image nobody could
	// check.
	var verified []verdict
	var failed, unverified []string
	var cancelled error
	for _, t := range targets {
		ui.Say(fmt.Sprintf("dlami: verifying the first boot of %s in %s on %s", t.ami, t.region, c.candidateList(typ)))
		ranOn, across, err := p.verify(ctx, ui, ec2For, run, t, typ)
		switch {
		case err == nil:
			verified = append(verified, verdict{t, ranOn, across})
		case ctx.Err() != nil:
			// Before Judged: a check cut short by the cancellation is no verdict.
			cancelled = fmt.Errorf("cancelled while verifying %s in %s: %w", t.ami, t.region, err)
		case engine.Judged(err):
			failed = append(failed, fmt.Sprintf("%s (%s): %v", t.ami, t.region, err))
		default:
			unverified = append(unverified, fmt.Sprintf("%s (%s): %v", t.ami, t.region, err))
		}
		if cancelled != nil {
			break
		}
	}
	reckoned := p.reckon(ctx, ec2For, run, all)
	cost = &reckoned
	if len(failed) == 0 && len(unverified) == 0 && cancelled == nil {
		// Every launched copy booted healthy: tag them, and the copies nobody launched carry
		// that result. Nothing here fails the build.
		p.tagVerified(ctx, ui, ec2For, run, all, verified, costTags(reckoned))
		return a, true, false, nil
	}
	var problems []string
	if len(failed) > 0 {
		// Carried out even after a cancellation (that came while verifying a later copy): the
		// verdict on this one is given.
		if err := p.onFailure(ctx, ui, ec2For, run, all); err != nil {
			failed = append(failed, err.Error())
		}
		problems = append(problems, "the AMI did not boot healthy: "+strings.Join(failed, "; "))
	}
	if cancelled != nil {
		problems = append(problems, cancelled.Error())
	}
	if len(unverified) > 0 {
		problems = append(problems, "the first boot could not be verified (on_failure was not applied): "+strings.Join(unverified, "; "))
	}
	if len(run.cleanupErrs) > 0 {
		problems = append(problems, "cleaning up the verification instances failed: "+strings.Join(run.cleanupErrs, "; "))
	}
	if len(verified) > 0 {
		var names []string
		for _, v := range verified {
			names = append(names, v.ami+" ("+v.region+")")
		}
		ui.Error("dlami: " + strings.Join(names, ", ") + " booted healthy but is not tagged " + amitags.Verified + " = true: the run failed as a whole")
	}
	// Packer destroys a build's artifact (deregisters the AMI and deletes its snapshots in
	// every region) when a post-processor fails, unless another post-processor sequence kept
	// it; say so, so nobody looks for the AMI afterwards or mistakes that cleanup for ours.
	ui.Error("dlami: Packer now deregisters the AMI as it does after any failed post-processor, unless another post-processor sequence (a manifest, say) keeps it")
	return a, true, false, fmt.Errorf("dlami: %s", strings.Join(problems, "; "))
}

// verdict is a copy whose first boot passed, the instance type it ran on and, when the test
// across nodes ran and passed, how many nodes it ran on.
type verdict struct {
	target
	instanceType string
	nodes        int
}

// perRegion remembers the client f made for each region; errors are not remembered.
func perRegion(f func(context.Context, string) (launch.EC2API, error)) func(context.Context, string) (launch.EC2API, error) {
	clients := map[string]launch.EC2API{}
	return func(ctx context.Context, region string) (launch.EC2API, error) {
		if api, ok := clients[region]; ok {
			return api, nil
		}
		api, err := f(ctx, region)
		if err == nil {
			clients[region] = api
		}
		return api, err
	}
}

func (c *Config) ec2Client(ctx context.Context, region string) (launch.EC2API, error) {
	sess, err := c.Connect(ctx, region, time.Minute)
	if err != nil {
		return nil, err
	}
	return sess.EC2(region), nil
}

// candidateList names the instance types to try, for the UI.
func (c *Config) candidateList(typ string) string {
	if len(c.InstanceTypes) > 1 {
		return strings.Join(c.InstanceTypes, ", then ")
	}
	return typ
}

// checkDeferredBOM refuses, before anything is launched, the bill of materials of a bake that
// deferred its validation unless complete_validation = true. A bom_file that cannot be read
// is no answer: the instance's own bill of materials is checked again after the launch.
func (c *Config) checkDeferredBOM() error {
	if c.CompleteValidation {
		return nil
	}
	data, err := os.ReadFile(c.BOMFile)
	if err != nil {
		return nil
	}
	b, err := bom.Decode(data)
	if err != nil || b.Deferred == nil {
		return nil
	}
	return fmt.Errorf("bom_file %s: %w", c.BOMFile, engine.ErrDeferredNotCompleted)
}

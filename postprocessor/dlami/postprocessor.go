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
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/hcl/v2/hcldec"
	sdkssh "github.com/hashicorp/packer-plugin-sdk/communicator/ssh"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hashicorp/packer-plugin-sdk/pathing"
	sshcomm "github.com/hashicorp/packer-plugin-sdk/sdk-internals/communicator/ssh"
	"github.com/hashicorp/packer-plugin-sdk/template/config"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/dlami-bake/packer-plugin-dlami/internal/amitags"
	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/pause"
	"github.com/dlami-bake/packer-plugin-dlami/internal/progress"
	"github.com/dlami-bake/packer-plugin-dlami/internal/remote"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/secretfilter"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/version"
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
	err := config.Decode(&p.config, &config.DecodeOpts{PluginType: "dlami", Interpolate: true, InterpolateContext: &p.config.ctx}, raws...)
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
		ranOn, err := p.verify(ctx, ui, ec2For, run, t, typ)
		switch {
		case err == nil:
			verified = append(verified, verdict{t, ranOn, c.Nodes})
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

// run is one PostProcess: its id (the Packer run UUID, which tags what it launches), what its
// cleanups could not remove, and what carrying out its verdict could not do.
type run struct {
	id          string
	cleanupErrs []string
	// leaks: region -> what no cleanup, and no deregistration, could remove.
	leaks map[string][]launch.Leak
	// untagged: AMIs the verdict should have tagged and could not, with the tags.
	untagged []untagged
	// ran: every verification instance, with its time as EC2 gave it.
	ran []ranNode
}

// untagged is an AMI the run could not tag as its verdict says.
type untagged struct {
	region, ami string
	tags        map[string]string
	err         error
}

// cleanedUp records the outcome of one cleanup in region.
func (r *run) cleanedUp(region string, err error) {
	if err == nil {
		return
	}
	r.cleanupErrs = append(r.cleanupErrs, fmt.Sprintf("%s: %v", region, err))
	r.leaked(region, launch.Leaks(err))
}

// leaked records what is left in region.
func (r *run) leaked(region string, leaks []launch.Leak) {
	if len(leaks) == 0 {
		return
	}
	if r.leaks == nil {
		r.leaks = map[string][]launch.Leak{}
	}
	r.leaks[region] = append(r.leaks[region], leaks...)
}

// reportLeftovers prints, last, each tag the run could not set and each thing it could not
// remove, with the command that does it; instances still running, which cost the most, come
// last of all.
func (r *run) reportLeftovers(ui packersdk.Ui) {
	for _, u := range r.untagged {
		ui.Error(fmt.Sprintf("dlami: NOT TAGGED: %s in %s is not tagged %s (%v): %s",
			u.ami, u.region, describeTags(u.tags), u.err, createTagsCommand(u.region, u.ami, u.tags)))
	}
	regions := slices.Sorted(maps.Keys(r.leaks))
	for _, region := range regions {
		for _, l := range r.leaks[region] {
			switch l.Kind {
			case launch.KindInstance:
			case launch.KindImage:
				ui.Error(fmt.Sprintf("dlami: NOT DEREGISTERED: %s in %s failed its first boot and is still registered (%v): %s",
					strings.Join(l.IDs, ", "), region, l.Err, l.Command(region)))
			default:
				ui.Error(fmt.Sprintf("dlami: LEFT BEHIND: %s in %s (%v): %s", l.What(), region, l.Err, l.Command(region)))
			}
		}
	}
	for _, region := range regions {
		for _, l := range r.leaks[region] {
			if l.Kind != launch.KindInstance {
				continue
			}
			what := strings.Join(l.IDs, " ")
			if what == "" {
				what = l.What()
			}
			ui.Error(fmt.Sprintf("dlami: STILL RUNNING: %s in %s (the cleanup could not confirm it terminated; it is billed until it is): %s",
				what, region, l.Command(region)))
		}
	}
}

// describeTags is "k = v, k2 = v2", sorted.
func describeTags(tags map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		parts = append(parts, k+" = "+tags[k])
	}
	return strings.Join(parts, ", ")
}

// createTagsCommand is the AWS CLI command that sets tags on ami, each Key=…,Value=… a single
// shell word.
func createTagsCommand(region, ami string, tags map[string]string) string {
	var words []string
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		words = append(words, shellWord("Key="+k+",Value="+tags[k]))
	}
	return fmt.Sprintf("aws ec2 create-tags --region %s --resources %s --tags %s", region, ami, strings.Join(words, " "))
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("=,:._/-+@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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

// verify launches one instance from t.ami, checks it and cleans up; it returns the instance
// type the check ran on. The cleanup's outcome goes to run. It tags nothing: the AMI's fate
// waits for the verdict on every copy.
func (p *PostProcessor) verify(ctx context.Context, ui packersdk.Ui, ec2For func(context.Context, string) (launch.EC2API, error), run *run, t target, typ string) (string, error) {
	c := &p.config
	api, err := ec2For(ctx, t.region)
	if err != nil {
		return "", err
	}
	say := func(s string) { ui.Say("dlami: " + t.region + ": " + s) }
	tags := map[string]string{"Name": "dlami-verify " + t.ami, "dlami:verify": t.ami}
	maps.Copy(tags, c.RunTags)
	cands := c.candidates(typ)
	spec := launch.Spec{
		ImageID: t.ami, InstanceType: cands[0].InstanceType, Count: c.Nodes, SubnetID: cands[0].SubnetID, SecurityGroupIDs: c.SecurityGroupIDs,
		Fallbacks: cands[1:], MarketType: c.MarketType,
		AssociatePublicIPAddress: c.AssociatePublicIPAddress, IAMInstanceProfile: c.IAMInstanceProfile,
		CapacityReservationPreference: c.CapacityReservationPreference, CapacityReservationID: c.CapacityReservationID,
		CapacityReservationGroupARN: c.CapacityReservationGroupARN, SSHCIDR: c.SSHCIDR, Tags: tags, RunID: run.id,
		Poll: p.poll, CleanupTimeout: p.cleanupTimeout, CallTimeout: p.callTimeout, ProgressEvery: p.progressEvery,
	}
	c.launchSettings(&spec)
	if c.Nodes > 1 {
		spec.RequireEFA = fmt.Sprintf("nodes = %d", c.Nodes)
	}
	lctx, lcancel := context.WithTimeout(ctx, c.SSHTimeout)
	in, err := launch.Launch(lctx, api, spec, say)
	lcancel()
	if err != nil {
		// Launch cleaned up itself; only what it could not remove is left to report.
		run.leaked(t.region, launch.Leaks(err))
		return "", err
	}
	typ = in.Placement.InstanceType
	if in.Layout.EFA == 0 && c.efa != 0 {
		say(fmt.Sprintf("%s takes no EFA interface (%s): the EFA checks judge none", typ, c.efaSetting()))
	}
	if len(in.Nodes()) == 1 && in.DescribedEFA < in.Layout.EFA {
		ui.Error(fmt.Sprintf("dlami: %s: EC2 describes %d EFA interfaces on %s, the launch asked for %d (%s): the checks judge against what the launch asked for, so the EFA devices the host lacks fail",
			t.region, in.DescribedEFA, in.ID, in.Layout.EFA, c.efaSetting()))
	}
	if len(in.Refused) > 0 {
		var refused []string
		for _, r := range in.Refused {
			refused = append(refused, fmt.Sprintf("%s: %s", r.Placement, r.Code))
		}
		say(fmt.Sprintf("verifying on %s (no capacity for %s)", in.Placement, strings.Join(refused, "; ")))
	}
	check := p.checkBoot
	switch {
	case check != nil:
	case len(in.Nodes()) > 1:
		check = p.checkNodes
	default:
		check = p.check
	}
	err = check(ctx, ui, in, t, typ, say)
	// Always terminate and delete the temporaries, before anything else (success, failure,
	// timeout and Ctrl-C): the instance costs money every second it runs. What it cannot
	// remove is reported, last, with its command; it does not change the verdict.
	cerr := launch.Cleanup(ctx, in, say)
	if cerr != nil {
		ui.Error("dlami: " + t.region + ": " + cerr.Error())
	}
	run.cleanedUp(t.region, cerr)
	for _, n := range in.Nodes() {
		run.ran = append(run.ran, ranNode{t.region, n.Lifetime()})
	}
	if err != nil {
		return "", err
	}
	if n := len(in.Nodes()); n > 1 {
		say(fmt.Sprintf("%s booted healthy on %d × %s and passed the NCCL test across them", t.ami, n, typ))
	} else {
		say(fmt.Sprintf("%s booted healthy on %s", t.ami, typ))
	}
	return typ, nil
}

// verifiedTags are the tags of an AMI whose first boot verified on instance type typ ("" on a
// copy that was not launched itself), across nodes instances when more than one.
func verifiedTags(typ string, nodes int) map[string]string {
	tags := map[string]string{
		amitags.Verified: "true", amitags.VerifiedAt: time.Now().UTC().Format(time.RFC3339),
		amitags.VerifiedBy: "packer-plugin-dlami " + version.PluginVersion.FormattedVersion(),
	}
	if typ != "" {
		tags[amitags.VerifiedInstanceType] = typ
	}
	if nodes > 1 {
		tags[amitags.VerifiedNodes] = strconv.Itoa(nodes)
	}
	return tags
}

// tagVerified tags each verified copy dlami:verified = true with the instance type it ran on,
// and each copy of the artifact that was not launched itself (an ami_regions copy: the same
// image, copied after the bake) with the same result, naming the verified copies in
// dlami:verified_in, so that a pipeline that only takes verified AMIs takes the copies too. It
// runs only when every launched copy booted healthy, detached from cancellation (the verdict
// is given), and retries each tagging to its deadline. A tagging that still fails is recorded
// for the final report with its command; the verdict stands.
//
// The instance time of the bake (costTags) is tagged on each copy once its verdict tags are
// set, in a tagging of its own: a copy whose tags are full, or any failure of it, leaves the
// verdict as it is and is only said.
func (p *PostProcessor) tagVerified(ctx context.Context, ui packersdk.Ui, ec2For func(context.Context, string) (launch.EC2API, error), run *run, all map[string]string, verified []verdict, cost map[string]string) {
	ctx = context.WithoutCancel(ctx)
	launched := map[string]bool{}
	var in []string
	for _, v := range verified {
		launched[v.region] = true
		in = append(in, v.region+"/"+v.ami)
	}
	tag := func(region, ami string, tags map[string]string) error {
		api, err := ec2For(ctx, region)
		if err == nil {
			err = p.tagImage(ctx, ui, region, api, ami, tags)
		}
		if err != nil {
			run.untagged = append(run.untagged, untagged{region, ami, tags, err})
			return err
		}
		if len(cost) == 0 {
			return nil
		}
		if err := p.tagImage(ctx, ui, region, api, ami, cost); err != nil {
			ui.Error(fmt.Sprintf("dlami: %s: %s is verified, but its instance time tags (%s) are not set: %v", region, ami, describeTags(cost), err))
		}
		return nil
	}
	for _, v := range verified {
		if tag(v.region, v.ami, amitags.WithVersions(verifiedTags(v.instanceType, v.nodes), p.config.BOMFile)) == nil {
			nodes := ""
			if v.nodes > 1 {
				nodes = fmt.Sprintf(", %s = %d", amitags.VerifiedNodes, v.nodes)
			}
			ui.Say(fmt.Sprintf("dlami: %s: tagged %s %s = true, %s = %s%s", v.region, v.ami, amitags.Verified, amitags.VerifiedInstanceType, v.instanceType, nodes))
		}
	}
	for _, r := range slices.Sorted(maps.Keys(all)) {
		if launched[r] {
			continue
		}
		tags := amitags.WithVersions(verifiedTags("", 0), p.config.BOMFile)
		tags[amitags.VerifiedIn] = strings.Join(in, ",")
		if tag(r, all[r], tags) == nil {
			ui.Say(fmt.Sprintf("dlami: %s: tagged the copy %s %s = true (%s = %s)", r, all[r], amitags.Verified, amitags.VerifiedIn, strings.Join(in, ",")))
		}
	}
}

// tagImage tags ami in region, retried to the patience's deadline, saying at the progress pace
// while it takes long.
func (p *PostProcessor) tagImage(ctx context.Context, ui packersdk.Ui, region string, api launch.EC2API, ami string, tags map[string]string) error {
	stop := p.waiting(regionSay(ui, region), progress.Fixed("the tags on "+ami), cmp.Or(p.cleanupTimeout, launch.CleanupTimeout))
	defer stop()
	return launch.TagImage(ctx, api, ami, tags, p.patience())
}

// regionSay is ui.Say with the "dlami: <region>: " prefix.
func regionSay(ui packersdk.Ui, region string) func(string) {
	return func(s string) { ui.Say("dlami: " + region + ": " + s) }
}

// check connects to the launched instance and judges its first boot.
func (p *PostProcessor) check(ctx context.Context, ui packersdk.Ui, in *launch.Instance, t target, typ string, say func(string)) error {
	h, b, err := p.connect(ctx, in, say)
	if err != nil {
		return err
	}
	o := p.config.singleNodeOptions(in, t, typ, b)
	o.ProgressEvery = p.progressEvery
	return engine.Verify(ctx, h, ui, o)
}

// singleNodeOptions is what a single-node verification is judged with: its launch's request,
// not EC2's description. The verification exists to prove the EFA devices the bake could not
// have; judged by what EC2 describes, an instance EC2 gave fewer EFA interfaces than asked
// would only warn, skip the EFA traffic and GPUDirect RDMA tests, and leave the AMI tagged
// verified with EFA never proven. So efa-devices demands what was asked for (naming what EC2
// describes and what the host shows) and the EFA tests run. (A launch of several nodes keeps
// verifyOptions: there each node is judged by what it got, and the test across nodes names
// the node without EFA.)
func (c *Config) singleNodeOptions(in *launch.Instance, t target, typ string, b bom.BOM) engine.VerifyOptions {
	o := c.verifyOptions(in, t, typ, b)
	o.Checks = verifySettings(c, b, in.Layout.EFA)
	o.Common.Launch.EFA = in.Layout.EFA
	return o
}

// connect opens SSH to a launched instance and reads the bill of materials the image carries.
func (p *PostProcessor) connect(ctx context.Context, in *launch.Instance, say func(string)) (host.Host, bom.BOM, error) {
	c := &p.config
	addr, err := in.Address(c.sshInterface())
	if err != nil {
		return nil, bom.BOM{}, err
	}
	connect, err := c.connector(addr)
	if err != nil {
		return nil, bom.BOM{}, err
	}
	comm, err := dialSSH(ctx, connect, c.SSHUsername, in.Signer, c.SSHTimeout, say, progress.Pace{Every: p.progressEvery})
	if err != nil {
		return nil, bom.BOM{}, err
	}
	h := remote.SSH{C: comm}
	data, err := h.ReadFile(ctx, c.ManifestPath)
	if err != nil {
		return nil, bom.BOM{}, fmt.Errorf("reading the bill of materials %s from the instance (was the image baked by the dlami provisioner? manifest_path): %w", c.ManifestPath, err)
	}
	b, err := bom.Decode(data)
	if err != nil {
		return nil, bom.BOM{}, fmt.Errorf("%s on the instance: %w", c.ManifestPath, err)
	}
	return h, b, nil
}

// verifyOptions is what the engine judges the first boot of in with.
func (c *Config) verifyOptions(in *launch.Instance, t target, typ string, b bom.BOM) engine.VerifyOptions {
	return engine.VerifyOptions{
		Common: engine.Common{
			BuildName: c.PackerBuildName, PluginVersion: version.PluginVersion.FormattedVersion(),
			ReportDir: filepath.Join(c.ReportDir, t.region), InstanceType: typ,
			Policy: c.policy(), CheckTimeout: c.CheckTimeout, RemoteFolder: settings.RemoteFolder(""),
			Checks: verifySettings(c, b, in.DescribedEFA), Secrets: c.Secrets(),
			// What this launch attached: the judges demand exactly that many EFA devices, and
			// name the groups EFA traffic depends on.
			// EC2's description of the instance, not the request: a node of a launch of several
			// is judged by what it got (singleNodeOptions judges a single node by the request).
			Launch: checks.Launch{Known: true, EFA: in.DescribedEFA, Setting: c.efaSetting(), SecurityGroups: in.SecurityGroups,
				Described: true, DescribedEFA: in.DescribedEFA},
		},
		BOM: b, SettleTimeout: c.SettleTimeout, CompleteValidation: c.CompleteValidation, Launch: launchReport(in, c),
	}
}

// launchReport is what the report says about the launch.
func launchReport(in *launch.Instance, c *Config) *report.Launch {
	l := &report.Launch{InstanceType: in.Placement.InstanceType, SubnetID: cmp.Or(in.SubnetID, in.Placement.SubnetID), InstanceID: in.ID, MarketType: c.MarketType, CapacityReservationID: c.CapacityReservationID,
		EFA: in.DescribedEFA, EFASetting: c.efaSetting(), SecurityGroups: in.SecurityGroups, PlacementGroup: in.PlacementGroup(), ElasticIP: in.ElasticIP}
	if len(in.Layout.Interfaces) > 1 {
		for _, i := range in.Layout.Interfaces {
			l.NetworkInterfaces = append(l.NetworkInterfaces, fmt.Sprintf("%d/%d %s", i.Card, i.Device, i.Type))
		}
	}
	for _, r := range in.Refused {
		l.Refused = append(l.Refused, report.LaunchRefusal{InstanceType: r.InstanceType, SubnetID: r.SubnetID, Code: r.Code, Message: r.Message})
	}
	return l
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

// onFailure applies on_failure to every copy of the AMI, detached from cancellation (the
// verdict is given), each step retried to its deadline: tag dlami:verified = false, or
// deregister, which tags first so that a copy it cannot deregister is still marked bad. What
// it cannot do is recorded for the final report with its command, and returned.
func (p *PostProcessor) onFailure(ctx context.Context, ui packersdk.Ui, ec2For func(context.Context, string) (launch.EC2API, error), run *run, all map[string]string) error {
	c := &p.config
	if c.OnFailure == OnFailureKeep {
		ui.Error("dlami: on_failure = keep: the AMI is left as it is")
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	var errs []error
	for _, r := range slices.Sorted(maps.Keys(all)) {
		api, err := ec2For(ctx, r)
		if err != nil {
			errs = append(errs, fmt.Errorf("on_failure = %s in %s: %w", c.OnFailure, r, err))
			continue
		}
		bad := map[string]string{amitags.Verified: "false", amitags.VerifiedAt: time.Now().UTC().Format(time.RFC3339)}
		terr := p.tagImage(ctx, ui, r, api, all[r], bad)
		if terr == nil {
			ui.Error(fmt.Sprintf("dlami: %s: tagged %s %s = false", r, all[r], amitags.Verified))
		}
		if c.OnFailure == OnFailureTag {
			if terr != nil {
				run.untagged = append(run.untagged, untagged{r, all[r], bad, terr})
				errs = append(errs, fmt.Errorf("on_failure = tag in %s: %w", r, terr))
			}
			continue
		}
		stop := p.waiting(regionSay(ui, r), progress.Fixed("the deregistration of "+all[r]), cmp.Or(p.cleanupTimeout, launch.CleanupTimeout))
		derr := launch.Deregister(ctx, api, all[r], p.patience())
		stop()
		if derr == nil {
			ui.Error(fmt.Sprintf("dlami: %s: deregistered %s and deleted its snapshots (on_failure = deregister)", r, all[r]))
			continue
		}
		run.leaked(r, launch.Leaks(derr))
		if terr != nil && !leftRegistered(derr) {
			terr = nil // gone: the tag does not matter
		}
		if terr != nil {
			run.untagged = append(run.untagged, untagged{r, all[r], bad, terr})
		}
		errs = append(errs, fmt.Errorf("on_failure = deregister in %s: %w", r, errors.Join(derr, terr)))
	}
	return errors.Join(errs...)
}

// leftRegistered reports whether a deregistration's error says the image is still registered
// (rather than only a snapshot left, or an image EC2 never knew).
func leftRegistered(err error) bool {
	for _, l := range launch.Leaks(err) {
		if l.Kind == launch.KindImage {
			return true
		}
	}
	return false
}

// connector is how to open the TCP connection to addr's SSH port: directly, or through the
// bastion (ssh_bastion_host), as Packer's own communicator does it.
func (c *Config) connector(addr string) (connector, error) {
	hostport := net.JoinHostPort(addr, "22")
	if c.SSHBastionHost == "" {
		return connector{hostport: hostport, dial: func() (net.Conn, error) { return net.DialTimeout("tcp", hostport, 10*time.Second) }}, nil
	}
	var auth []ssh.AuthMethod
	if c.SSHBastionAgentAuth {
		path := os.Getenv("SSH_AUTH_SOCK")
		if path == "" {
			return connector{}, errors.New("ssh_bastion_agent_auth = true but SSH_AUTH_SOCK is not set: start an SSH agent, or set ssh_bastion_private_key_file")
		}
		sock, err := net.Dial("unix", path)
		if err != nil {
			return connector{}, fmt.Errorf("ssh_bastion_agent_auth: connecting to the SSH agent at SSH_AUTH_SOCK: %w", err)
		}
		auth = append(auth, ssh.PublicKeysCallback(agent.NewClient(sock).Signers))
	} else {
		path, err := pathing.ExpandUser(c.SSHBastionPrivateKeyFile)
		if err != nil {
			return connector{}, fmt.Errorf("ssh_bastion_private_key_file %s: %w", c.SSHBastionPrivateKeyFile, err)
		}
		signer, err := sdkssh.FileSigner(path)
		if err != nil {
			return connector{}, fmt.Errorf("ssh_bastion_private_key_file %s: %w", c.SSHBastionPrivateKeyFile, err)
		}
		auth = append(auth, ssh.PublicKeys(signer))
	}
	bastion := net.JoinHostPort(c.SSHBastionHost, strconv.Itoa(c.SSHBastionPort))
	conf := &ssh.ClientConfig{User: c.SSHBastionUsername, Auth: auth, Timeout: 10 * time.Second,
		// As amazon-ebs's bastion: its host key is not known beforehand either.
		HostKeyCallback: ssh.InsecureIgnoreHostKey()}
	return connector{hostport: hostport, via: bastion, dial: sshcomm.BastionConnectFunc("tcp", bastion, conf, "tcp", hostport)}, nil
}

// connector opens the connection to the instance's SSH port.
type connector struct {
	hostport, via string
	dial          func() (net.Conn, error)
}

func (c connector) String() string {
	if c.via == "" {
		return c.hostport
	}
	return c.hostport + " through the bastion " + c.via
}

// dialSSH connects to the instance through Packer's own SSH communicator, retrying until
// timeout (sshd starts late in the boot), saying at pace's pace what it waits for and the last
// answer.
func dialSSH(ctx context.Context, connect connector, user string, signer ssh.Signer, timeout time.Duration, say func(string), pace progress.Pace) (packersdk.Communicator, error) {
	deadline := time.Now().Add(timeout)
	say("waiting for SSH on " + connect.String())
	var last error
	var lastMsg atomic.Value
	lastMsg.Store("no answer yet")
	stop := pace.Waiting(say, func() string {
		return fmt.Sprintf("SSH on %s (ssh_timeout; last: %s)", connect, lastMsg.Load())
	}, timeout)
	defer stop()
	for {
		comm, err := sshcomm.New(connect.hostport, &sshcomm.Config{
			SSHConfig: &ssh.ClientConfig{
				User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
				// A fresh throwaway instance: its host key is not known beforehand.
				HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second,
			},
			Connection:       connect.dial,
			HandshakeTimeout: 10 * time.Second,
			UseSftp:          true,
		})
		if err == nil {
			return comm, nil
		}
		last = err
		lastMsg.Store(err.Error())
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("SSH to %s did not answer within ssh_timeout %s: %w", connect, timeout, last)
		}
		if err := pause.Sleep(ctx, 3*time.Second); err != nil {
			return nil, err
		}
	}
}

// verifySettings is what the first boot is judged with, efa the EFA interfaces the launch
// attached. With nccl = true or complete_validation = true it runs the NCCL test and the tests
// that prove the hardware works, with the bake's settings from the bill of materials (DCGM's
// level, the EFA traffic and GPUDirect RDMA floors: a bake that turned DCGM off is not judged
// with it here). With EFA attached and nccl unset, the tests that prove the EFA devices the
// bake could not have: the EFA traffic test, and the NCCL test with the all-reduce forced over
// EFA (gpudirect-rdma), which runs only with it; not DCGM. nccl = false keeps the EFA traffic
// test only. Otherwise none of them, so a verification stays a first-boot check that costs no
// GPU minutes.
func verifySettings(c *Config, doc bom.BOM, efa int) checks.Settings {
	s := checks.Settings{
		Expect: c.Expect, NCCL: settings.NCCL{Skip: true},
		Function: settings.Function{EFATraffic: settings.EFATraffic{Skip: true}, GDR: settings.GDR{Skip: true}},
		Skip:     c.SkipChecks, Warn: c.WarnChecks, SkipSetting: "skip_checks (here or in the bake)", WarnSetting: "warn_checks (here or in the bake)",
	}
	nccl := c.NCCL != nil && *c.NCCL
	switch {
	case nccl || c.CompleteValidation:
		s = engine.BakeTests(s, doc)
		s.NCCL.Skip = false
	case efa > 0:
		bake := engine.BakeTests(s, doc)
		s.Skip, s.Warn = bake.Skip, bake.Warn
		s.Function.EFATraffic = bake.Function.EFATraffic
		if c.NCCL == nil {
			s.NCCL, s.Function.GDR = bake.NCCL, bake.Function.GDR
			s.NCCL.Skip = false
		}
	}
	return s
}

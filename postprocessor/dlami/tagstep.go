package dlami

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/amitags"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/progress"
	"github.com/dlami-bake/packer-plugin-dlami/version"
)

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

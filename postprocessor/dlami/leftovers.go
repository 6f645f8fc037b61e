package dlami

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
)

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

package dlami

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/amitags"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/progress"
)

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

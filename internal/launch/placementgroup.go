package launch

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
)

// createPlacementGroup makes the temporary cluster placement group. EC2 has no client token
// for it: a retry after a lost answer meets InvalidPlacementGroup.Duplicate, and the group,
// which carries this launch's own name, is the one it made.
func (in *Instance) createPlacementGroup(ctx context.Context, tags map[string]string) error {
	return in.step(ctx, func(ctx context.Context) error {
		_, err := in.api.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{
			GroupName: aws.String(in.placementGroup), Strategy: types.PlacementStrategyCluster,
			TagSpecifications: tagSpec(types.ResourceTypePlacementGroup, tags),
		})
		if awsaccess.APICode(err) == "InvalidPlacementGroup.Duplicate" {
			return nil
		}
		return err
	})
}

// deletePlacementGroup deletes the temporary placement group. EC2 refuses while an instance
// in it is not terminated yet (InvalidPlacementGroup.InUse: retried); a group EC2 does not
// know was never made, or a retry after a lost answer: done.
func (in *Instance) deletePlacementGroup(ctx context.Context, say func(string)) error {
	err := in.patience.retry(ctx, cleanupFinal, func(ctx context.Context) error {
		_, err := in.api.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String(in.placementGroup)})
		if awsaccess.APICode(err) == "InvalidPlacementGroup.Unknown" {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("deleting placement group %s: %w", in.placementGroup, err)
	}
	say("deleted temporary placement group " + in.placementGroup)
	return nil
}

// makePlacementGroup is the launch's placement group step: the user's group, or a temporary
// cluster group whose name is kept before the call (a lost answer may still have made it).
func (b *build) makePlacementGroup(ctx context.Context, say func(string)) error {
	in := b.in
	b.placementGroup = b.s.PlacementGroup
	if !b.s.TemporaryPlacementGroup {
		return nil
	}
	in.placementGroup = "dlami-verify-" + b.suffix
	if err := in.createPlacementGroup(ctx, b.tags); err != nil {
		return fmt.Errorf("creating the temporary placement group %s: %w", in.placementGroup, err)
	}
	say("created temporary cluster placement group " + in.placementGroup)
	b.placementGroup = in.placementGroup
	return nil
}

// placementGroupResources is the temporary placement group as the cleanup removes it: EC2
// refuses to delete it while an instance is in it.
func (in *Instance) placementGroupResources() []resource {
	if in.placementGroup == "" {
		return nil
	}
	return []resource{{kind: KindPlacementGroup, after: []string{KindInstance}, weight: 2, remove: in.deletePlacementGroup,
		left: func(err error) Leak {
			return Leak{Kind: KindPlacementGroup, IDs: []string{in.placementGroup}, Err: err}
		}}}
}

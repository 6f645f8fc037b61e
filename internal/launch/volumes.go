package launch

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
)

// KindVolume is an EBS volume of a verification instance that outlived it.
const KindVolume = "volume"

// readVolumes is the launch's volumes step: the image's EBS mappings, each launched with
// DeleteOnTermination = true. amazon-ebs records DeleteOnTermination = false on an AMI whose
// template leaves it unset, and EC2 launches with the AMI's mappings: without this, every
// node of every verification would leave its root volume behind, billed. The volumes carry the
// launch's tags (runInput), and the cleanup deletes any the launch tag still finds. An image
// whose mappings cannot be read is launched as it is (said): the cleanup still finds the
// volumes by their tag.
func (b *build) readVolumes(ctx context.Context, say func(string)) error {
	in := b.in
	var img *types.Image
	err := in.step(ctx, func(ctx context.Context) (err error) {
		img, err = describeImage(ctx, in.api, b.s.ImageID)
		return err
	})
	if err != nil || img == nil {
		say(fmt.Sprintf("could not read the block device mappings of %s (%v): its volumes are launched as the image says, and the cleanup deletes what the launch tag finds", b.s.ImageID, err))
		return nil
	}
	b.volumes = deleteOnTermination(img.BlockDeviceMappings)
	return nil
}

// deleteOnTermination is the override of every EBS mapping of an image: the same device,
// deleted with the instance. Instance store and suppressed devices are left as they are.
func deleteOnTermination(mappings []types.BlockDeviceMapping) []types.BlockDeviceMapping {
	var out []types.BlockDeviceMapping
	for _, m := range mappings {
		if m.Ebs == nil || m.DeviceName == nil {
			continue
		}
		out = append(out, types.BlockDeviceMapping{DeviceName: m.DeviceName, Ebs: &types.EbsBlockDevice{DeleteOnTermination: aws.Bool(true)}})
	}
	return out
}

// volumeResources are the launch's volumes as the cleanup finds them by the launch tag once
// the instances are gone: a volume EC2 kept (DeleteOnTermination false, or an image whose
// mappings could not be read) is deleted.
func (in *Instance) volumeResources() []resource {
	if in.ID == "" && in.token == "" {
		return nil
	}
	var left []string
	looked := false
	return []resource{{kind: KindVolume, after: []string{KindInstance}, weight: 2,
		remove: func(ctx context.Context, say func(string)) error {
			return in.deleteVolumes(ctx, say, &left, &looked)
		},
		left:   func(err error) Leak { return Leak{Kind: KindVolume, IDs: left, LaunchID: in.launchID, Err: err} },
		unsure: func() bool { return !looked }}}
}

// deleteVolumes deletes the volumes carrying the launch tag; left is set to those still there
// once the lookup answered. A volume still attached (its instance terminating) is retried.
func (in *Instance) deleteVolumes(ctx context.Context, say func(string), left *[]string, looked *bool) error {
	return in.patience.retryCalls(ctx, cleanupFinal, func(ctx context.Context) error {
		var out *ec2.DescribeVolumesOutput
		err := in.patience.call(ctx, func(ctx context.Context) (err error) {
			out, err = in.api.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{Filters: []types.Filter{
				{Name: aws.String("tag:" + LaunchTag), Values: []string{in.launchID}},
			}})
			return err
		})
		if err != nil {
			return err
		}
		*left, *looked = nil, true
		var errs []error
		var gone []string
		for _, v := range out.Volumes {
			id := aws.ToString(v.VolumeId)
			switch v.State {
			case types.VolumeStateDeleted, types.VolumeStateDeleting:
			case types.VolumeStateAvailable:
				gone = append(gone, id)
			default:
				*left = append(*left, id)
				errs = append(errs, fmt.Errorf("%s is %s", id, v.State))
			}
		}
		failed := removeEach(gone, func(id string) error {
			err := in.patience.call(ctx, func(ctx context.Context) error {
				_, err := in.api.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(id)})
				return err
			})
			if err != nil && awsaccess.APICode(err) != "InvalidVolume.NotFound" {
				return fmt.Errorf("deleting %s: %w", id, err)
			}
			say("deleted volume " + id + ", left after the instance")
			return nil
		})
		for i, err := range failed {
			if err != nil {
				*left = append(*left, gone[i])
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

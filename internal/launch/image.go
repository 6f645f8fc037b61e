package launch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
)

// imageGone reports whether err is EC2 saying the image is not registered (any more): NotFound,
// or Unavailable, EC2's answer for a lately deregistered one.
func imageGone(err error) bool {
	switch awsaccess.APICode(err) {
	case "InvalidAMIID.NotFound", "InvalidAMIID.Unavailable":
		return true
	}
	return false
}

// TagImage sets tags on an AMI, retrying throttled, failed and unanswered calls until the
// patience's Timeout. After every CreateTags, answered or not, it reads the tags back with
// DescribeImages, and the tagging is done only when they are there: an answer can be lost
// after EC2 set them, and a 200 whose body is broken says nothing about whether it did. A
// missing permission, an image EC2 does not know, or tags over the image's limit
// (TagLimitExceeded: EC2 sets none of them, and will not on a retry) end it at once. It runs
// detached from ctx's cancellation: it carries out a verdict that is already given.
func TagImage(ctx context.Context, api EC2API, imageID string, tags map[string]string, p Patience) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.timeout())
	defer cancel()
	final := func(err error) bool {
		return denied(err) || imageGone(err) || awsaccess.APICode(err) == "TagLimitExceeded"
	}
	err := p.retryCalls(ctx, final, func(ctx context.Context) error {
		err := p.call(ctx, func(ctx context.Context) error {
			_, err := api.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{imageID}, Tags: toTags(tags)})
			return err
		})
		if final(err) {
			return err
		}
		var tagged bool
		rerr := p.call(ctx, func(ctx context.Context) error {
			var rerr error
			tagged, rerr = hasTags(ctx, api, imageID, tags)
			return rerr
		})
		switch {
		case tagged:
			return nil
		case err != nil:
			return err
		case rerr != nil:
			return fmt.Errorf("CreateTags answered, and reading the tags back failed: %w", rerr)
		}
		return errNotTagged
	})
	if err != nil {
		return fmt.Errorf("tagging %s: %w", imageID, err)
	}
	return nil
}

// errNotTagged is a CreateTags that answered success while the tags do not read back.
var errNotTagged = errors.New("CreateTags answered success, and DescribeImages does not show the tags")

// hasTags reads imageID's tags and reports whether it carries every one of tags.
func hasTags(ctx context.Context, api EC2API, imageID string, tags map[string]string) (bool, error) {
	img, err := describeImage(ctx, api, imageID)
	if err != nil || img == nil {
		return false, err
	}
	have := map[string]string{}
	for _, t := range img.Tags {
		have[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for k, v := range tags {
		if got, ok := have[k]; !ok || got != v {
			return false, nil
		}
	}
	return true, nil
}

// describeImage is imageID as DescribeImages shows it; nil (and no error) when EC2 no longer
// knows it or shows it deregistered.
func describeImage(ctx context.Context, api EC2API, imageID string) (*types.Image, error) {
	out, err := api.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{imageID}})
	if imageGone(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for i := range out.Images {
		if img := &out.Images[i]; aws.ToString(img.ImageId) == imageID && img.State != types.ImageStateDeregistered {
			return img, nil
		}
	}
	return nil, nil
}

// Deregister deregisters an AMI and deletes its EBS snapshots, so a bad image cannot reach a
// launch template, retrying each step until its share of the patience's Timeout: it reads the
// snapshots (DescribeImages), deregisters with DeleteAssociatedSnapshots (EC2 deletes the
// snapshots with the image: a lost answer leaks nothing), and deletes whatever snapshot is
// still there. A retry that meets InvalidAMIID.NotFound or .Unavailable (the earlier try's
// answer was lost) is done, as is a snapshot EC2 no longer knows. An image EC2 does not know at
// the start is an error. What it could not remove is a LeakError, each with its command.
func Deregister(ctx context.Context, api EC2API, imageID string, p Patience) error {
	ctx = context.WithoutCancel(ctx)
	total := p.timeout()
	step := func(share float64, final func(error) bool, f func(context.Context) error) error {
		sctx, cancel := context.WithTimeout(ctx, time.Duration(share*float64(total)))
		defer cancel()
		return p.retry(sctx, final, f)
	}
	var snaps []string
	err := step(0.25, func(err error) bool { return denied(err) || errors.Is(err, errNoImage) }, func(ctx context.Context) error {
		out, err := api.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{imageID}})
		if awsaccess.APICode(err) == "InvalidAMIID.NotFound" {
			return errNoImage
		}
		if err != nil {
			return err
		}
		snaps = nil
		for _, img := range out.Images {
			if aws.ToString(img.ImageId) != imageID {
				continue
			}
			for _, bdm := range img.BlockDeviceMappings {
				if bdm.Ebs != nil && bdm.Ebs.SnapshotId != nil {
					snaps = append(snaps, aws.ToString(bdm.Ebs.SnapshotId))
				}
			}
		}
		return nil
	})
	if errors.Is(err, errNoImage) {
		return fmt.Errorf("deregistering %s: %w", imageID, err)
	}
	// Without the snapshot list (DescribeImages denied or failing) the deregistration still
	// goes ahead: DeleteAssociatedSnapshots deletes them.
	var leaks []Leak
	err = step(0.5, denied, func(ctx context.Context) error {
		_, err := api.DeregisterImage(ctx, &ec2.DeregisterImageInput{ImageId: aws.String(imageID), DeleteAssociatedSnapshots: aws.Bool(true)})
		if imageGone(err) {
			return nil
		}
		return err
	})
	if err != nil {
		leaks = append(leaks, Leak{Kind: KindImage, IDs: []string{imageID}, Err: fmt.Errorf("deregistering %s: %w", imageID, err)})
		return &LeakError{Leaks: leaks}
	}
	var left []string
	var last error
	for _, sn := range snaps {
		err := step(0.25/float64(len(snaps)), denied, func(ctx context.Context) error {
			_, err := api.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: aws.String(sn)})
			if awsaccess.APICode(err) == "InvalidSnapshot.NotFound" {
				return nil
			}
			return err
		})
		if err != nil {
			left, last = append(left, sn), err
		}
	}
	if len(left) > 0 {
		return &LeakError{Leaks: []Leak{{Kind: KindSnapshot, IDs: left, Err: fmt.Errorf("deleting the snapshots of %s: %w", imageID, last)}}}
	}
	return nil
}

// errNoImage is an image EC2 does not know: nothing to deregister.
var errNoImage = errors.New("EC2 does not know the image")

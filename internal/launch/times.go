package launch

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
)

// transitionTime is the time EC2 writes into an instance's StateTransitionReason, as in
// "User initiated (2018-06-26 07:19:42 GMT)" (the form every `aws ec2 describe-instances` of a
// stopped or terminated instance shows): the moment of the stop or termination request.
var transitionTime = regexp.MustCompile(`\((\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) GMT\)`)

// ParseTransitionTime reads the time out of a StateTransitionReason ("User initiated
// (2026-12-01 20:00:00 GMT)"); false when it carries none (an empty reason, a running
// instance's, one in another form). The last time in the text wins.
func ParseTransitionTime(reason string) (time.Time, bool) {
	m := transitionTime.FindAllStringSubmatch(reason, -1)
	if len(m) == 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.DateTime, m[len(m)-1][1])
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// Lifetime is how long an instance ran, as EC2 describes it.
type Lifetime struct {
	InstanceID   string
	InstanceType string
	// Launched is EC2's LaunchTime; Ended the time of its termination (or stop) request,
	// from StateTransitionReason, zero while it still runs.
	Launched, Ended time.Time
	// State is EC2's state name when it was read.
	State string
}

// Running reports whether the instance had not ended when it was read.
func (l Lifetime) Running() bool { return l.Ended.IsZero() }

// Duration is the time from launch to its end, or to now while it runs.
func (l Lifetime) Duration(now time.Time) time.Duration {
	end := l.Ended
	if end.IsZero() {
		end = now
	}
	return max(end.Sub(l.Launched), 0)
}

// ErrUnknownLifetime is an instance whose times EC2 could not give: not found (EC2 shows a
// terminated instance for about an hour), or described without a launch time.
var ErrUnknownLifetime = errors.New("EC2 does not describe it (a terminated instance stays visible for about an hour)")

// InstanceLifetime reads one instance's launch time and, once it stopped running, the time
// of its termination or stop request from DescribeInstances, the call retried as p says. A
// state that ended without a time in StateTransitionReason is an error: its end is not
// guessed.
func InstanceLifetime(ctx context.Context, api EC2API, instanceID string, p Patience) (Lifetime, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	var out *ec2.DescribeInstancesOutput
	err := p.retry(ctx, func(err error) bool { return denied(err) || instanceGone(err) }, func(ctx context.Context) error {
		var err error
		out, err = api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{instanceID}})
		return err
	})
	if instanceGone(err) {
		return Lifetime{}, fmt.Errorf("instance %s: %w", instanceID, ErrUnknownLifetime)
	}
	if err != nil {
		return Lifetime{}, fmt.Errorf("describing instance %s: %w", instanceID, err)
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			if aws.ToString(i.InstanceId) == instanceID {
				return lifetimeOf(i)
			}
		}
	}
	return Lifetime{}, fmt.Errorf("instance %s: %w", instanceID, ErrUnknownLifetime)
}

// lifetimeOf is the lifetime EC2's description of i gives.
func lifetimeOf(i types.Instance) (Lifetime, error) {
	l := Lifetime{InstanceID: aws.ToString(i.InstanceId), InstanceType: string(i.InstanceType), Launched: aws.ToTime(i.LaunchTime).UTC()}
	if i.LaunchTime == nil || i.State == nil {
		return l, fmt.Errorf("instance %s: described without a launch time or a state", l.InstanceID)
	}
	l.State = string(i.State.Name)
	switch i.State.Name {
	case types.InstanceStateNamePending, types.InstanceStateNameRunning:
		return l, nil
	}
	end, ok := ParseTransitionTime(aws.ToString(i.StateTransitionReason))
	if !ok {
		return l, fmt.Errorf("instance %s is %s and EC2 gives no time for it (StateTransitionReason %q)", l.InstanceID, l.State, aws.ToString(i.StateTransitionReason))
	}
	l.Ended = end
	return l, nil
}

// instanceGone is EC2 not knowing an instance id.
func instanceGone(err error) bool {
	return err != nil && awsaccess.APICode(err) == "InvalidInstanceID.NotFound"
}

// SourceInstance is the instance an AMI was made from and when the AMI was created, as
// DescribeImages says: EC2 gives SourceInstanceId for an AMI made by CreateImage, none for a
// copy or a registered one ("" then, and no error).
func SourceInstance(ctx context.Context, api EC2API, imageID string, p Patience) (instanceID string, created time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	var img *types.Image
	err = p.retry(ctx, denied, func(ctx context.Context) error {
		var err error
		img, err = describeImage(ctx, api, imageID)
		return err
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("describing %s: %w", imageID, err)
	}
	if img == nil {
		return "", time.Time{}, fmt.Errorf("describing %s: EC2 does not know it", imageID)
	}
	if t, perr := time.Parse(time.RFC3339, aws.ToString(img.CreationDate)); perr == nil {
		created = t.UTC()
	}
	return aws.ToString(img.SourceInstanceId), created, nil
}

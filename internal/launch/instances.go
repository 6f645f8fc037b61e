package launch

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
	"github.com/dlami-bake/packer-plugin-dlami/internal/pause"
)

// notFoundTries is how often a termination is retried while EC2 does not know the instance
// id yet (it is eventually consistent just after RunInstances).
const notFoundTries = 5

// efaInterfaces counts the EFA interfaces EC2 describes on an instance.
func efaInterfaces(i types.Instance) int {
	n := 0
	for _, ni := range i.NetworkInterfaces {
		if t := aws.ToString(ni.InterfaceType); t == InterfaceEFA || t == InterfaceEFAOnly {
			n++
		}
	}
	return n
}

// CapacityError is a launch whose every candidate EC2 refused for capacity.
type CapacityError struct {
	Refused []Refusal
	Err     error
}

func (e *CapacityError) Error() string {
	if len(e.Refused) < 2 {
		return e.Err.Error()
	}
	var tried []string
	for _, r := range e.Refused {
		tried = append(tried, fmt.Sprintf("%s: %s", r.Placement, r.Code))
	}
	return fmt.Sprintf("no candidate had capacity (%s): %v", strings.Join(tried, "; "), e.Err)
}

func (e *CapacityError) Unwrap() error { return e.Err }

// finalOnCapacity is a retryer that does not retry a capacity refusal.
type finalOnCapacity struct{ aws.RetryerV2 }

func (r finalOnCapacity) IsErrorRetryable(err error) bool {
	return !IsCapacity(err) && r.RetryerV2.IsErrorRetryable(err)
}

// runInput is the RunInstances request of s: every interface of layout in one request, in
// placementGroup when it is set.
func runInput(s Spec, keyName string, groups []string, placementGroup string, layout Layout, tags map[string]string) *ec2.RunInstancesInput {
	run := &ec2.RunInstancesInput{
		ImageId: aws.String(s.ImageID), InstanceType: types.InstanceType(s.InstanceType),
		MinCount: aws.Int32(int32(max(s.Count, 1))), MaxCount: aws.Int32(int32(max(s.Count, 1))), KeyName: aws.String(keyName),
		// The volumes carry the launch's tags: one EC2 kept after the instance is found by them.
		TagSpecifications: append(tagSpec(types.ResourceTypeInstance, tags), tagSpec(types.ResourceTypeVolume, tags)...),
	}
	switch {
	case len(layout.Interfaces) > 1:
		// EC2 refuses AssociatePublicIpAddress with several interfaces ("cannot be specified
		// when launching with multiple network interfaces") and gives such an instance no
		// public IP: it is not sent (an Elastic IP, a bastion or the private address reach the
		// instance). The interfaces carry the launch tag, so that any of them left after the
		// instance is found.
		for _, i := range layout.Interfaces {
			ni := types.InstanceNetworkInterfaceSpecification{
				NetworkCardIndex: aws.Int32(int32(i.Card)), DeviceIndex: aws.Int32(int32(i.Device)), InterfaceType: aws.String(i.Type),
				Groups: groups, DeleteOnTermination: aws.Bool(true),
			}
			if s.SubnetID != "" {
				ni.SubnetId = aws.String(s.SubnetID)
			}
			run.NetworkInterfaces = append(run.NetworkInterfaces, ni)
		}
		run.TagSpecifications = append(run.TagSpecifications, tagSpec(types.ResourceTypeNetworkInterface, tags)...)
	case s.SubnetID != "" || s.AssociatePublicIPAddress != nil:
		ni := types.InstanceNetworkInterfaceSpecification{DeviceIndex: aws.Int32(0), Groups: groups, DeleteOnTermination: aws.Bool(true)}
		if s.SubnetID != "" {
			ni.SubnetId = aws.String(s.SubnetID)
		}
		ni.AssociatePublicIpAddress = s.AssociatePublicIPAddress
		run.NetworkInterfaces = []types.InstanceNetworkInterfaceSpecification{ni}
	default:
		run.SecurityGroupIds = groups
	}
	if placementGroup != "" {
		run.Placement = &types.Placement{GroupName: aws.String(placementGroup)}
	}
	if s.IAMInstanceProfile != "" {
		run.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: aws.String(s.IAMInstanceProfile)}
	}
	if s.CapacityReservationPreference != "" || s.CapacityReservationID != "" || s.CapacityReservationGroupARN != "" {
		crs := &types.CapacityReservationSpecification{}
		if s.CapacityReservationPreference != "" {
			crs.CapacityReservationPreference = types.CapacityReservationPreference(s.CapacityReservationPreference)
		}
		if s.CapacityReservationID != "" || s.CapacityReservationGroupARN != "" {
			crs.CapacityReservationTarget = &types.CapacityReservationTarget{}
			if s.CapacityReservationID != "" {
				crs.CapacityReservationTarget.CapacityReservationId = aws.String(s.CapacityReservationID)
			}
			if s.CapacityReservationGroupARN != "" {
				crs.CapacityReservationTarget.CapacityReservationResourceGroupArn = aws.String(s.CapacityReservationGroupARN)
			}
		}
		run.CapacityReservationSpecification = crs
	}
	if m := s.Metadata; m != nil {
		mo := &types.InstanceMetadataOptionsRequest{
			HttpEndpoint: types.InstanceMetadataEndpointState(m.HTTPEndpoint), HttpTokens: types.HttpTokensState(m.HTTPTokens),
			InstanceMetadataTags: types.InstanceMetadataTagsState(m.InstanceMetadataTags),
		}
		if m.HTTPPutResponseHopLimit != 0 {
			mo.HttpPutResponseHopLimit = aws.Int32(m.HTTPPutResponseHopLimit)
		}
		run.MetadataOptions = mo
	}
	if len(s.UserData) > 0 {
		run.UserData = aws.String(base64.StdEncoding.EncodeToString(s.UserData))
	}
	if s.MarketType != "" {
		run.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketType(s.MarketType)}
	}
	return run
}

func capacityHint(err error) string {
	if IsCapacity(err) {
		return " (GPU capacity is scarce: target an On-Demand Capacity Reservation or a Capacity Block with capacity_reservation_id / capacity_reservation_group_arn (market_type = \"capacity-block\" for a Capacity Block), or list more instance_types or subnet_ids to try in order)"
	}
	return ""
}

func (in *Instance) describe(ctx context.Context) (types.Instance, error) {
	out, err := in.api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{in.ID}})
	if err != nil {
		return types.Instance{}, err
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			if aws.ToString(i.InstanceId) == in.ID {
				return i, nil
			}
		}
	}
	return types.Instance{}, fmt.Errorf("instance %s: not found", in.ID)
}

// waitRunning waits until EC2 describes the instance running, saying at the patience's pace
// what it waits for (the state EC2 last gave) while it takes long.
func (in *Instance) waitRunning(ctx context.Context, say func(string)) error {
	var state atomic.Value
	state.Store("no answer yet")
	var limit time.Duration
	if d, ok := ctx.Deadline(); ok {
		limit = time.Until(d)
	}
	stop := in.patience.pace().Waiting(say, func() string {
		return fmt.Sprintf("%s to run (EC2 says: %s)", in.ID, state.Load())
	}, limit)
	defer stop()
	for {
		var i types.Instance
		err := in.patience.call(ctx, func(ctx context.Context) error {
			var err error
			i, err = in.describe(ctx)
			return err
		})
		if denied(err) {
			// A missing permission does not grant itself by waiting.
			return fmt.Errorf("instance %s: reading its state: %w", in.ID, err)
		}
		if err != nil {
			state.Store(err.Error())
		}
		if err == nil && i.State != nil {
			state.Store(string(i.State.Name))
			switch i.State.Name {
			case types.InstanceStateNameRunning:
				in.PublicIP, in.PrivateIP = aws.ToString(i.PublicIpAddress), aws.ToString(i.PrivateIpAddress)
				in.PublicDNS, in.PrivateDNS = aws.ToString(i.PublicDnsName), aws.ToString(i.PrivateDnsName)
				in.primaryENI = primaryInterface(i)
				in.DescribedEFA = efaInterfaces(i)
				in.SubnetID = aws.ToString(i.SubnetId)
				in.LaunchTime = aws.ToTime(i.LaunchTime).UTC()
				return nil
			case types.InstanceStateNameTerminated, types.InstanceStateNameShuttingDown, types.InstanceStateNameStopped:
				reason := ""
				if i.StateReason != nil {
					reason = ": " + aws.ToString(i.StateReason.Message)
				}
				return fmt.Errorf("instance %s is %s instead of running%s", in.ID, i.State.Name, reason)
			}
		}
		if err := pause.Sleep(ctx, in.patience.poll()); err != nil {
			return fmt.Errorf("instance %s did not reach running: %w", in.ID, err)
		}
	}
}

// primaryInterface is the id of an instance's primary network interface (card 0, device 0).
func primaryInterface(i types.Instance) string {
	for _, ni := range i.NetworkInterfaces {
		if a := ni.Attachment; a != nil && aws.ToInt32(a.DeviceIndex) == 0 && aws.ToInt32(a.NetworkCardIndex) == 0 {
			return aws.ToString(ni.NetworkInterfaceId)
		}
	}
	return ""
}

// launched is the instances to terminate: the ones RunInstances answered with and, when the
// answer named fewer than the launch asked for (or none came), those carrying the launch tag.
// It returns the ids it knows even when the lookup failed, with the lookup's error.
func (in *Instance) launched(ctx context.Context) ([]string, error) {
	known := in.ids()
	if len(known) > 0 && len(known) >= in.count {
		return known, nil
	}
	// Every candidate's instance carries the one launch tag.
	var ids []string
	err := in.patience.retry(ctx, cleanupFinal, func(ctx context.Context) error {
		ids = nil
		out, err := in.api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{
			{Name: aws.String("tag:" + LaunchTag), Values: []string{in.launchID}},
			{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}},
		}})
		if err != nil {
			return err
		}
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				ids = append(ids, aws.ToString(i.InstanceId))
			}
		}
		return nil
	})
	for _, id := range known {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if err != nil {
		return ids, fmt.Errorf("finding the instances of launch %s (%s = %s) that RunInstances did not name: %w", in.launchID, LaunchTag, in.launchID, err)
	}
	return ids, nil
}

// terminate terminates ids and waits until EC2 says they are terminated, retrying both across
// errors (throttling, 5xx, an id EC2 does not know yet) until ctx ends.
func (in *Instance) terminate(ctx context.Context, ids []string, say func(string)) error {
	notFound := 0
	err := in.patience.retry(ctx, cleanupFinal, func(ctx context.Context) error {
		_, err := in.api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
		if awsaccess.APICode(err) == "InvalidInstanceID.NotFound" {
			if notFound++; notFound >= notFoundTries {
				return nil // gone, or never there
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("terminating %s: %w", strings.Join(ids, ", "), err)
	}
	say("terminating " + strings.Join(ids, ", "))
	// The security group can only go once the instance is gone. The waiter would stop at the
	// first describe error; a cleanup keeps asking until its deadline.
	poll := in.patience.poll()
	var last *ec2.DescribeInstancesOutput // the waiter's latest answer: the one that ended it
	var seen time.Time
	w := ec2.NewInstanceTerminatedWaiter(boundedDescribe{in.api, in.patience}, func(o *ec2.InstanceTerminatedWaiterOptions) {
		o.MinDelay, o.MaxDelay = poll, 6*poll
		terminated := o.Retryable
		o.Retryable = func(ctx context.Context, di *ec2.DescribeInstancesInput, out *ec2.DescribeInstancesOutput, err error) (bool, error) {
			if denied(err) {
				return false, err
			}
			if err != nil {
				return true, nil
			}
			last, seen = out, time.Now()
			return terminated(ctx, di, out, err)
		}
	})
	for {
		d, _ := ctx.Deadline()
		left := time.Until(d)
		if left <= 0 {
			return fmt.Errorf("waiting for %s to terminate: %w", strings.Join(ids, ", "), context.DeadlineExceeded)
		}
		err := w.Wait(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids}, left)
		if err == nil {
			in.recordTerminated(last, seen)
			return nil
		}
		if ctx.Err() != nil || denied(err) {
			return fmt.Errorf("waiting for %s to terminate: %w", strings.Join(ids, ", "), err)
		}
		// Pending or stopping (the termination did not take yet): terminate again.
		_ = in.patience.call(ctx, func(ctx context.Context) error {
			_, err := in.api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
			return err
		})
		if err := pause.Sleep(ctx, poll); err != nil {
			return fmt.Errorf("waiting for %s to terminate: %w", strings.Join(ids, ", "), err)
		}
	}
}

// recordTerminated sets each node's Terminated from the answer in which EC2 described the
// launch terminated: the time EC2 gives for the termination request, else seen.
func (in *Instance) recordTerminated(out *ec2.DescribeInstancesOutput, seen time.Time) {
	if out == nil {
		return
	}
	nodes := map[string]*Instance{}
	for _, n := range in.Nodes() {
		nodes[n.ID] = n
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			n := nodes[aws.ToString(i.InstanceId)]
			if n == nil || i.State == nil || i.State.Name != types.InstanceStateNameTerminated {
				continue
			}
			n.Terminated = seen.UTC()
			if t, ok := ParseTransitionTime(aws.ToString(i.StateTransitionReason)); ok {
				n.Terminated = t
			}
		}
	}
}

// boundedDescribe bounds each DescribeInstances of the waiter by the call timeout.
type boundedDescribe struct {
	api EC2API
	p   Patience
}

func (b boundedDescribe) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	var out *ec2.DescribeInstancesOutput
	err := b.p.call(ctx, func(ctx context.Context) error {
		var err error
		out, err = b.api.DescribeInstances(ctx, in, optFns...)
		return err
	})
	return out, err
}

// runInstances is the launch's instances step: one RunInstances per candidate, in order, each
// after a capacity refusal of the one before. The client token makes a retry of a launch whose
// answer was lost (the SDK's or this step's) the same launch, not a second instance; the
// launch tag finds it when no answer came at all. One RunInstances attaches every interface of
// the layout.
func (b *build) runInstances(ctx context.Context, say func(string)) error {
	in, s := b.in, b.s
	in.launchID = b.tags[LaunchTag]
	var out *ec2.RunInstancesOutput
	for i, c := range b.candidates {
		one := s
		one.InstanceType, one.SubnetID = c.InstanceType, c.SubnetID
		layout := b.layouts[c.InstanceType]
		run := runInput(one, in.keyName, b.groups, b.placementGroup, layout, b.tags)
		run.BlockDeviceMappings = b.volumes
		if len(run.NetworkInterfaces) > 1 {
			in.interfaces = true
		}
		in.token = in.launchID
		if i > 0 {
			in.token = fmt.Sprintf("%s-%d", in.launchID, i+1)
		}
		run.ClientToken = aws.String(in.token)
		last := i == len(b.candidates)-1
		var optFns []func(*ec2.Options)
		if !last {
			// The next candidate is the retry: a capacity refusal falls through at once instead
			// of spending the SDK's attempts on a zone that has none.
			optFns = append(optFns, func(o *ec2.Options) {
				if r, ok := o.Retryer.(aws.RetryerV2); ok {
					o.Retryer = finalOnCapacity{r}
				}
			})
		}
		err := in.step(ctx, func(ctx context.Context) error {
			var err error
			out, err = in.api.RunInstances(ctx, run, optFns...)
			return err
		})
		if err == nil {
			in.Placement, in.Layout, in.placementGroupUsed = c, layout, b.placementGroup
			break
		}
		if !IsCapacity(err) {
			return fmt.Errorf("launching %s from %s: %w%s%s", c, s.ImageID, err, capacityHint(err), layoutHint(layout))
		}
		in.Refused = append(in.Refused, Refusal{Placement: c, Code: awsaccess.APICode(err), Message: awsaccess.APIMessage(err)})
		if last {
			return &CapacityError{Refused: in.Refused, Err: fmt.Errorf("launching %s from %s: %w%s", c, s.ImageID, err, capacityHint(err))}
		}
		say(fmt.Sprintf("no capacity for %s (%s); trying %s", c, awsaccess.APICode(err), b.candidates[i+1]))
	}
	return b.takeInstances(out, say)
}

// takeInstances records the instances RunInstances answered with, one node each in launch
// index order.
func (b *build) takeInstances(out *ec2.RunInstancesOutput, say func(string)) error {
	in, count := b.in, max(b.s.Count, 1)
	in.count = count
	launched := slices.Clone(out.Instances)
	slices.SortFunc(launched, func(a, b types.Instance) int {
		return int(aws.ToInt32(a.AmiLaunchIndex) - aws.ToInt32(b.AmiLaunchIndex))
	})
	for i, li := range launched {
		n := in
		if i > 0 {
			n = &Instance{api: in.api, patience: in.patience, launchID: in.launchID, tags: in.tags, Placement: in.Placement, Layout: in.Layout,
				SecurityGroups: in.SecurityGroups, Signer: in.Signer, placementGroupUsed: in.placementGroupUsed}
			in.peers = append(in.peers, n)
		}
		n.ID, n.node = aws.ToString(li.InstanceId), i+1
	}
	if len(out.Instances) != count {
		// MinCount = MaxCount: EC2 launches all or none. Anything else is not a fleet to test.
		return fmt.Errorf("RunInstances returned %d instances, asked for %d", len(out.Instances), count)
	}
	attached := ""
	if in.Layout.EFA > 0 {
		attached = fmt.Sprintf(", %d EFA interfaces each: %s", in.Layout.EFA, in.Layout)
	}
	say(fmt.Sprintf("launched %s (%s from %s%s); waiting until it runs", strings.Join(in.ids(), ", "), in.Placement, b.s.ImageID, attached))
	return nil
}

// waitRunning is the launch's wait: every node running.
func (b *build) waitRunning(ctx context.Context, say func(string)) error {
	for _, n := range b.in.Nodes() {
		if err := n.waitRunning(ctx, say); err != nil {
			return err
		}
	}
	return nil
}

// instanceResources are the launch's instances as the cleanup terminates them: the ones
// RunInstances answered with, else those a RunInstances without an answer made, found by the
// launch tag.
func (in *Instance) instanceResources() []resource {
	if in.ID == "" && in.token == "" {
		return nil
	}
	var ids []string
	return []resource{{kind: KindInstance, weight: 5,
		remove: func(ctx context.Context, say func(string)) error {
			var err error
			ids, err = in.launched(ctx)
			if len(ids) == 0 {
				return err
			}
			return errors.Join(err, in.terminate(ctx, ids, say))
		},
		left: func(err error) Leak {
			return Leak{Kind: KindInstance, IDs: ids, LaunchID: in.launchID, Err: err}
		}}}
}

// Lost names the nodes of the launch that EC2 no longer describes as running ("i-0a1b is
// shutting-down"): a host retired under a test, a Capacity Block that ended. What the nodes
// said after that is no verdict on their image. It asks once, bounded by two call bounds, and
// returns the lookup's error when EC2 did not answer.
func (in *Instance) Lost(ctx context.Context) ([]string, error) {
	ids := in.ids()
	if len(ids) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*in.patience.callTimeout())
	defer cancel()
	var out *ec2.DescribeInstancesOutput
	err := in.patience.retry(ctx, lasting, func(ctx context.Context) (err error) {
		out, err = in.api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
		return err
	})
	if awsaccess.APICode(err) == "InvalidInstanceID.NotFound" {
		out, err = &ec2.DescribeInstancesOutput{}, nil // EC2 knows none of them any more
	}
	if err != nil {
		return nil, fmt.Errorf("reading the state of %s: %w", strings.Join(ids, ", "), err)
	}
	state := map[string]string{}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			if i.State != nil {
				state[aws.ToString(i.InstanceId)] = string(i.State.Name)
			}
		}
	}
	var lost []string
	for _, id := range ids {
		switch s := state[id]; s {
		case string(types.InstanceStateNameRunning):
		case "":
			lost = append(lost, id+" is not described")
		default:
			lost = append(lost, id+" is "+s)
		}
	}
	return lost, nil
}

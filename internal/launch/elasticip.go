package launch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
	"github.com/dlami-bake/packer-plugin-dlami/internal/pause"
)

// attachElasticIP allocates a temporary Elastic IP and associates it with the primary
// interface: the instance's public address when EC2 gave it none at launch. AllocateAddress
// has no client token: the address carries the launch tag, and a retry first looks for one
// with this launch's tag, so that a lost answer does not allocate a second.
func (in *Instance) attachElasticIP(ctx context.Context, say func(string)) error {
	if in.primaryENI == "" {
		return fmt.Errorf("instance %s: DescribeInstances shows no primary network interface to associate an Elastic IP with", in.ID)
	}
	in.elasticIP = true
	var public string
	tried := false
	err := in.stepCalls(ctx, func(ctx context.Context) error {
		if tried {
			// An earlier try may have allocated it, its answer lost.
			var found types.Address
			if err := in.patience.call(ctx, func(ctx context.Context) (err error) {
				found, err = in.lookupAddress(ctx)
				return err
			}); err != nil {
				return err
			}
			if found.AllocationId != nil {
				in.allocationID, public = aws.ToString(found.AllocationId), aws.ToString(found.PublicIp)
				return nil
			}
		}
		tried = true
		return in.patience.call(ctx, func(ctx context.Context) error {
			// Not the SDK's retries: they would resend it blind; this step's retry looks first.
			out, err := in.api.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: types.DomainTypeVpc, TagSpecifications: tagSpec(types.ResourceTypeElasticIp, in.addressTags())},
				func(o *ec2.Options) { o.Retryer = aws.NopRetryer{} })
			if err != nil {
				if mayHaveActed(err) {
					in.unanswered++ // the cleanup looks for what it may have made
				}
				return err
			}
			in.allocationID, public = aws.ToString(out.AllocationId), aws.ToString(out.PublicIp)
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("allocating a temporary Elastic IP for %s: %w", in.ID, err)
	}
	say(fmt.Sprintf("allocated temporary Elastic IP %s (%s)", public, in.allocationID))
	// AllowReassociation: a retry after a lost answer associates the address with the same
	// interface again.
	err = in.step(ctx, func(ctx context.Context) error {
		_, err := in.api.AssociateAddress(ctx, &ec2.AssociateAddressInput{
			AllocationId: aws.String(in.allocationID), NetworkInterfaceId: aws.String(in.primaryENI), AllowReassociation: aws.Bool(true),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("associating Elastic IP %s with %s's primary interface %s: %w", public, in.ID, in.primaryENI, err)
	}
	in.ElasticIP, in.PublicIP = public, public
	say(fmt.Sprintf("associated %s with %s's primary interface %s (EC2 gives an instance with %d network interfaces no public IP at launch)",
		public, in.ID, in.primaryENI, max(len(in.Layout.Interfaces), 1)))
	return nil
}

// lookupAddress is the Elastic IP carrying this launch's tag; zero when there is none.
func (in *Instance) lookupAddress(ctx context.Context) (types.Address, error) {
	out, err := in.api.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: []types.Filter{
		{Name: aws.String("tag:" + LaunchTag), Values: []string{in.launchID}},
		{Name: aws.String("tag:" + NodeTag), Values: []string{in.nodeTag()}},
	}})
	if err != nil || len(out.Addresses) == 0 {
		return types.Address{}, err
	}
	return out.Addresses[0], nil
}

// releaseElasticIP disassociates and releases the temporary Elastic IP, found by the launch tag
// when the allocation's answer was lost. It waits for nothing: disassociated first, it goes
// while the instance may still be terminating. A retry after a lost answer meets
// InvalidAllocationID.NotFound or InvalidAssociationID.NotFound: done.
func (in *Instance) releaseElasticIP(ctx context.Context, say func(string)) error {
	var released []string
	if in.allocationID != "" {
		if err := in.releaseAddress(ctx, in.allocationID); err != nil {
			return fmt.Errorf("releasing Elastic IP %s: %w", in.allocationID, err)
		}
		released = append(released, in.allocationID)
		say("released temporary Elastic IP " + in.allocationID)
	}
	// Then every address carrying the launch's and the node's tags: one an AllocateAddress
	// without an answer made, which DescribeAddresses (eventually consistent) may not have
	// listed when the step looked before allocating again. While fewer are found than the
	// calls that may have made one, it looks again, a few times.
	want := len(released) + in.unanswered
	for look := 1; ; look++ {
		var found []types.Address
		err := in.patience.retry(ctx, cleanupFinal, func(ctx context.Context) (err error) {
			found, err = in.lookupAddresses(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("finding the Elastic IPs of launch %s (%s = %s): %w", in.launchID, LaunchTag, in.launchID, err)
		}
		for _, a := range found {
			id := aws.ToString(a.AllocationId)
			if slices.Contains(released, id) {
				continue // released: EC2 may list it a while yet
			}
			in.extraAllocations = append(in.extraAllocations, id)
			if err := in.releaseAddress(ctx, id); err != nil {
				return fmt.Errorf("releasing Elastic IP %s, allocated by a call whose answer was lost: %w", id, err)
			}
			in.extraAllocations = slices.DeleteFunc(in.extraAllocations, func(x string) bool { return x == id })
			released = append(released, id)
			say("released temporary Elastic IP " + id + ", allocated by a call whose answer was lost")
		}
		if len(released) >= want || look >= addressLooks {
			break
		}
		if err := pause.Sleep(ctx, in.patience.poll()); err != nil {
			break
		}
	}
	if len(released) < want {
		say(fmt.Sprintf("%d AllocateAddress calls of node %s got no answer and EC2 lists no address they made; any that shows up later carries %s = %s and %s = %s",
			in.unanswered, in.nodeTag(), LaunchTag, in.launchID, NodeTag, in.nodeTag()))
	}
	return nil
}

// addressLooks is how often the cleanup lists a node's Elastic IPs while fewer are found than
// AllocateAddress calls may have made.
const addressLooks = 3

// lookupAddresses are the Elastic IPs carrying this launch's tag and this node's.
func (in *Instance) lookupAddresses(ctx context.Context) ([]types.Address, error) {
	out, err := in.api.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: []types.Filter{
		{Name: aws.String("tag:" + LaunchTag), Values: []string{in.launchID}},
		{Name: aws.String("tag:" + NodeTag), Values: []string{in.nodeTag()}},
	}})
	if err != nil {
		return nil, err
	}
	return out.Addresses, nil
}

// releaseAddress disassociates and releases one Elastic IP, retried until ctx ends. A retry
// after a lost answer meets InvalidAllocationID.NotFound or InvalidAssociationID.NotFound: done.
func (in *Instance) releaseAddress(ctx context.Context, id string) error {
	return in.patience.retryCalls(ctx, cleanupFinal, func(ctx context.Context) error {
		var out *ec2.DescribeAddressesOutput
		err := in.patience.call(ctx, func(ctx context.Context) (err error) {
			out, err = in.api.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{AllocationIds: []string{id}})
			return err
		})
		if awsaccess.APICode(err) == "InvalidAllocationID.NotFound" {
			return nil
		}
		if err != nil {
			return err
		}
		for _, a := range out.Addresses {
			if a.AssociationId == nil {
				continue
			}
			err := in.patience.call(ctx, func(ctx context.Context) error {
				_, err := in.api.DisassociateAddress(ctx, &ec2.DisassociateAddressInput{AssociationId: a.AssociationId})
				return err
			})
			if err != nil && awsaccess.APICode(err) != "InvalidAssociationID.NotFound" {
				return fmt.Errorf("disassociating it: %w", err)
			}
		}
		err = in.patience.call(ctx, func(ctx context.Context) error {
			_, err := in.api.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: aws.String(id)})
			return err
		})
		if awsaccess.APICode(err) == "InvalidAllocationID.NotFound" {
			return nil
		}
		return err
	})
}

// mayHaveActed reports whether a failed call may still have been carried out: no answer came
// (a dropped connection, a call cut at its bound), an answer came that could not be read, or
// EC2 failed with a 5xx after it may have acted. A refusal (throttling, any other 4xx) did
// nothing.
func mayHaveActed(err error) bool {
	if awsaccess.IsThrottle(err) {
		return false
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		code := re.HTTPStatusCode()
		return code < 400 || code >= 500
	}
	return err != nil
}

// nodeTag is the instance's number in its launch, as its Elastic IP's NodeTag says it.
func (in *Instance) nodeTag() string { return strconv.Itoa(max(in.node, 1)) }

// addressTags are the launch's tags and the instance's node number.
func (in *Instance) addressTags() map[string]string {
	tags := maps.Clone(in.tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[NodeTag] = in.nodeTag()
	return tags
}

// NodeTag numbers each instance's Elastic IP in a launch of several: a lost AllocateAddress
// answer is found again by it.
const NodeTag = "dlami:node"

// wantsElasticIP reports whether the launch gets a temporary Elastic IP.
func (s Spec) wantsElasticIP(l Layout) bool {
	switch s.ElasticIP {
	case AlwaysElasticIP:
		return true
	case ElasticIPWhenSeveralInterfaces:
		return len(l.Interfaces) > 1
	}
	return false
}

// attachElasticIPs is the launch's Elastic IP step: one for each node, when the layout leaves
// the instances without a public IP (or the spec always wants one).
func (b *build) attachElasticIPs(ctx context.Context, say func(string)) error {
	if !b.s.wantsElasticIP(b.in.Layout) {
		return nil
	}
	for _, n := range b.in.Nodes() {
		if err := n.attachElasticIP(ctx, say); err != nil {
			return err
		}
	}
	return nil
}

// elasticIPResources are the nodes' temporary Elastic IPs as the cleanup releases them: they
// wait for nothing (disassociated first, they stop costing before the instance is gone).
func (in *Instance) elasticIPResources() []resource {
	var out []resource
	for _, n := range in.Nodes() {
		if !n.elasticIP {
			continue
		}
		out = append(out, resource{kind: KindElasticIP, weight: 2, remove: n.releaseElasticIP,
			left: func(err error) Leak {
				l := Leak{Kind: KindElasticIP, LaunchID: n.launchID, Err: err}
				if n.allocationID != "" {
					l.IDs = []string{n.allocationID}
				}
				l.IDs = append(l.IDs, n.extraAllocations...)
				return l
			}})
	}
	return out
}

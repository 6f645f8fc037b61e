package launch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/progress"
)

// Kinds of what a run makes or carries out a verdict on, as a Leak names them.
const (
	KindInstance      = "instance"
	KindKeyPair       = "key pair"
	KindSecurityGroup = "security group"
	KindImage         = "image"
	KindSnapshot      = "snapshot"
	// KindInterface is a network interface of a launch with EFA that outlived the instance;
	// KindElasticIP the temporary Elastic IP; KindPlacementGroup the temporary placement group.
	KindInterface      = "network interface"
	KindElasticIP      = "Elastic IP"
	KindPlacementGroup = "placement group"
)

// Leak is something a run made, or was to remove, that is still there: a temporary its cleanup
// could not delete, an AMI on_failure could not deregister, a snapshot left behind. It names
// the thing and the AWS CLI command that removes it.
type Leak struct {
	Kind string
	// IDs are the ids (the name, for a key pair and a placement group); empty when the id
	// never came back (the answer was lost and the lookup failed): then Name and VPC (a
	// security group) or LaunchID (an instance, network interfaces, an Elastic IP) find it.
	IDs      []string
	Name     string
	VPC      string
	LaunchID string
	// Err is why it is still there.
	Err error
}

// Command is the AWS CLI command that removes the leak in region.
func (l Leak) Command(region string) string {
	ids := strings.Join(l.IDs, " ")
	switch l.Kind {
	case KindInstance:
		if ids == "" {
			ids = fmt.Sprintf("$(aws ec2 describe-instances --region %s --filters Name=tag:%s,Values=%s Name=instance-state-name,Values=pending,running,stopping,stopped --query 'Reservations[].Instances[].InstanceId' --output text)",
				region, LaunchTag, l.LaunchID)
		}
		return fmt.Sprintf("aws ec2 terminate-instances --region %s --instance-ids %s", region, ids)
	case KindKeyPair:
		return fmt.Sprintf("aws ec2 delete-key-pair --region %s --key-name %s", region, ids)
	case KindSecurityGroup:
		if ids == "" {
			ids = fmt.Sprintf("$(aws ec2 describe-security-groups --region %s --filters Name=group-name,Values=%s Name=vpc-id,Values=%s --query 'SecurityGroups[0].GroupId' --output text)",
				region, l.Name, l.VPC)
		}
		return fmt.Sprintf("aws ec2 delete-security-group --region %s --group-id %s", region, ids)
	case KindInterface:
		if len(l.IDs) == 0 {
			return fmt.Sprintf("for eni in $(aws ec2 describe-network-interfaces --region %s --filters Name=tag:%s,Values=%s --query 'NetworkInterfaces[].NetworkInterfaceId' --output text); do aws ec2 delete-network-interface --region %s --network-interface-id \"$eni\"; done",
				region, LaunchTag, l.LaunchID, region)
		}
		var cmds []string
		for _, id := range l.IDs {
			cmds = append(cmds, fmt.Sprintf("aws ec2 delete-network-interface --region %s --network-interface-id %s", region, id))
		}
		return strings.Join(cmds, "; ")
	case KindElasticIP:
		if ids == "" {
			return fmt.Sprintf("for a in $(aws ec2 describe-addresses --region %s --filters Name=tag:%s,Values=%s --query 'Addresses[].AllocationId' --output text); do aws ec2 release-address --region %s --allocation-id \"$a\"; done",
				region, LaunchTag, l.LaunchID, region)
		}
		var cmds []string
		for _, id := range l.IDs {
			cmds = append(cmds, fmt.Sprintf("aws ec2 release-address --region %s --allocation-id %s", region, id))
		}
		return strings.Join(cmds, "; ")
	case KindVolume:
		if len(l.IDs) == 0 {
			return fmt.Sprintf("for v in $(aws ec2 describe-volumes --region %s --filters Name=tag:%s,Values=%s --query 'Volumes[].VolumeId' --output text); do aws ec2 delete-volume --region %s --volume-id \"$v\"; done",
				region, LaunchTag, l.LaunchID, region)
		}
		var cmds []string
		for _, id := range l.IDs {
			cmds = append(cmds, fmt.Sprintf("aws ec2 delete-volume --region %s --volume-id %s", region, id))
		}
		return strings.Join(cmds, "; ")
	case KindPlacementGroup:
		return fmt.Sprintf("aws ec2 delete-placement-group --region %s --group-name %s", region, ids)
	case KindImage:
		return fmt.Sprintf("aws ec2 deregister-image --region %s --image-id %s --delete-associated-snapshots", region, ids)
	case KindSnapshot:
		var cmds []string
		for _, id := range l.IDs {
			cmds = append(cmds, fmt.Sprintf("aws ec2 delete-snapshot --region %s --snapshot-id %s", region, id))
		}
		return strings.Join(cmds, "; ")
	}
	return ""
}

// What names the leak for a person: "key pair dlami-verify-0a1b", "instances tagged ...".
func (l Leak) What() string {
	switch {
	case len(l.IDs) > 0:
		return l.Kind + " " + strings.Join(l.IDs, ", ")
	case l.Kind == KindInstance:
		return fmt.Sprintf("the instance of launch %s (%s = %s)", l.LaunchID, LaunchTag, l.LaunchID)
	case l.Kind == KindInterface:
		return fmt.Sprintf("the network interfaces of launch %s (%s = %s)", l.LaunchID, LaunchTag, l.LaunchID)
	case l.Kind == KindVolume:
		return fmt.Sprintf("the volumes of launch %s (%s = %s)", l.LaunchID, LaunchTag, l.LaunchID)
	case l.Kind == KindElasticIP:
		return fmt.Sprintf("the Elastic IP of launch %s (%s = %s)", l.LaunchID, LaunchTag, l.LaunchID)
	case l.Name != "":
		return fmt.Sprintf("%s %s in %s", l.Kind, l.Name, l.VPC)
	}
	return l.Kind
}

// LeakError is what a cleanup or a deregistration could not remove by its deadline.
type LeakError struct{ Leaks []Leak }

func (e *LeakError) Error() string {
	var parts []string
	for _, l := range e.Leaks {
		parts = append(parts, fmt.Sprintf("%s not removed: %v", l.What(), l.Err))
	}
	return strings.Join(parts, "; ")
}

// Unwrap is every leak's error.
func (e *LeakError) Unwrap() []error {
	var errs []error
	for _, l := range e.Leaks {
		errs = append(errs, l.Err)
	}
	return errs
}

// Leaks returns what err says is still there, if anything.
func Leaks(err error) []Leak {
	var le *LeakError
	if errors.As(err, &le) {
		return le.Leaks
	}
	return nil
}

// NotTerminated returns the instances err says are still running, if any.
func NotTerminated(err error) []string {
	var ids []string
	for _, l := range Leaks(err) {
		if l.Kind == KindInstance {
			ids = append(ids, l.IDs...)
		}
	}
	return ids
}

// resource is one thing a launch made, as its cleanup removes it. Cleanup removes resources in
// an order where each comes after the kinds it names in after, those that wait for nothing
// first, and gives each its own share of the cleanup's deadline (weight against the weights of
// those still to go), so that a resource whose removal keeps failing, or an instance that is
// slow to terminate, cannot use up the time of the others. A kind a launch learns to make (a
// network interface, an Elastic IP, a placement group) is one more entry of Instance.resources
// with what must be gone before it.
type resource struct {
	kind   string
	after  []string
	weight int
	// remove deletes it, retrying until its context ends; it is not called for a resource
	// that was never made.
	remove func(ctx context.Context, say func(string)) error
	// left is what a failed removal leaves behind.
	left func(err error) Leak
	// unsure, when set and true after a failed removal, says the removal could not even tell
	// whether anything is there (a denied lookup): what waits for the kind is still tried, and
	// EC2 refuses it itself if something is.
	unsure func() bool
	// order is its place in the cleanup, for the leaks' order.
	order int
}

// resources are what in's launch made, or may have made when an answer was lost: the key pair
// (EC2 deletes one in use: it waits for nothing), the temporary Elastic IP (disassociated
// first: it waits for nothing either, and stops costing before the instance is gone), the
// instance, the network interfaces of an EFA layout that outlived it, the temporary placement
// group (EC2 refuses to delete it while the
// instance is in it), and the security group (EC2 refuses to delete it while a network
// interface in it is there).
func (in *Instance) resources() []resource {
	var out []resource
	for _, rs := range [][]resource{
		in.keyPairResources(), in.elasticIPResources(), in.instanceResources(), in.interfaceResources(), in.volumeResources(),
		in.placementGroupResources(), in.securityGroupResources(),
	} {
		out = append(out, rs...)
	}
	return out
}

// ordered sorts rs so that each comes after every resource of the kinds it waits for, keeping
// the given order otherwise; several resources may share a kind (one per network interface),
// and a kind that waits for one that is not there waits for nothing.
func ordered(rs []resource) []resource {
	pending := map[string]int{} // kind -> resources of it not placed yet
	for _, r := range rs {
		pending[r.kind]++
	}
	placed := make([]bool, len(rs))
	var out []resource
	for len(out) < len(rs) {
		progressed := false
		for i, r := range rs {
			if placed[i] {
				continue
			}
			ready := true
			for _, a := range r.after {
				if a != r.kind && pending[a] > 0 {
					ready = false
				}
			}
			if ready {
				out, placed[i], progressed = append(out, r), true, true
				pending[r.kind]--
			}
		}
		if !progressed {
			// A cycle: the rest in the given order rather than never.
			for i, r := range rs {
				if !placed[i] {
					out, placed[i] = append(out, r), true
				}
			}
		}
	}
	return out
}

// Cleanup terminates the instance and deletes the temporary key pair, security group,
// placement group and Elastic IP and any network interface the instance left, and what a
// launch whose answer was lost may have made. It runs detached from ctx's cancellation
// (a cancelled run must still clean up) for at most the launch's CleanupTimeout: what waits for
// nothing (the key pair) goes first, and each resource gets its own share of that deadline.
// Each call is bounded by CallTimeout, and throttled and failed calls are retried with backoff
// until the resource's share ends (a missing permission ends it at once). It is safe on a
// partly launched Instance and on nil, keeps going past errors, and returns what it could not
// remove as a LeakError, each with the command that removes it.
func Cleanup(ctx context.Context, in *Instance, say func(string)) error {
	if in == nil {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	say = serialized(say)
	deadline := time.Now().Add(in.patience.timeout())
	// stuck: kinds whose removal failed for good (a missing permission): what waits for them
	// cannot go either, and is not tried. One that ran out of time is not stuck: it may be
	// gone by the time the next one is tried.
	stuck := map[string]error{}
	rs := ordered(in.resources())
	for i := range rs {
		rs[i].order = i
	}
	failed := in.cleanupPass(ctx, rs, deadline, stuck, say)
	// A second pass over what failed for want of time, while time is left: a share that one
	// unanswered call used up, a resource that waited for one that is gone since.
	var again []resource
	for _, f := range failed {
		if !f.final {
			again = append(again, f.r)
		}
	}
	if len(again) > 0 && time.Until(deadline) > 0 {
		retried := in.cleanupPass(ctx, again, deadline, stuck, say)
		failed = slices.DeleteFunc(failed, func(f failure) bool { return !f.final })
		failed = append(failed, retried...)
	}
	slices.SortFunc(failed, func(a, b failure) int { return a.r.order - b.r.order })
	var leaks []Leak
	for _, f := range failed {
		leaks = append(leaks, f.r.left(f.err))
	}
	if len(leaks) > 0 {
		return &LeakError{Leaks: leaks}
	}
	return nil
}

// failure is a resource a cleanup pass could not remove; final when trying again cannot help
// (a missing permission, or it waits for a kind that is stuck).
type failure struct {
	r     resource
	err   error
	final bool
}

// cleanupPass removes rs in order, each in its own share of the time left to deadline: its
// weight against the weights of those still to go, and at least one call bound plus a retry
// where an even split of the time left allows that much. It returns what it could not remove.
func (in *Instance) cleanupPass(ctx context.Context, rs []resource, deadline time.Time, stuck map[string]error, say func(string)) []failure {
	var failed []failure
	floor := 2*in.patience.callTimeout() + in.patience.poll()
	for i, r := range rs {
		if err := waitsFor(r, stuck); err != nil {
			failed = append(failed, failure{r, err, true})
			stuck[r.kind] = err
			continue
		}
		weights := 0
		for _, later := range rs[i:] {
			weights += later.weight
		}
		left := time.Until(deadline)
		share := max(time.Duration(float64(left)*float64(r.weight)/float64(weights)), min(floor, left/time.Duration(len(rs)-i)))
		rctx, cancel := context.WithTimeout(ctx, max(share, 0))
		stop := in.patience.pace().Waiting(say, progress.Fixed(in.removing(r.kind)), share)
		err := r.remove(rctx, say)
		stop()
		cancel()
		if err != nil {
			final := denied(err) && (r.unsure == nil || !r.unsure())
			if final {
				stuck[r.kind] = err
			}
			failed = append(failed, failure{r, err, final})
		}
	}
	return failed
}

// removing names, for a progress line, the removal of a resource of kind: the instances by
// their ids.
func (in *Instance) removing(kind string) string {
	if ids := in.ids(); kind == KindInstance && len(ids) > 0 {
		return "the cleanup to terminate " + strings.Join(ids, ", ")
	}
	return "the cleanup to remove the temporary " + kind
}

// waitsFor is the reason r cannot be removed, when a kind it waits for is stuck.
func waitsFor(r resource, stuck map[string]error) error {
	for _, a := range r.after {
		if err := stuck[a]; err != nil {
			return fmt.Errorf("not tried: it waits for the %s, which could not be removed (%w)", a, err)
		}
	}
	return nil
}

// cleanupFinal is the final-error test of a removal: a missing permission.
func cleanupFinal(err error) bool { return denied(err) }

// removeAtOnce is how many removals of one kind (a node's interfaces, the nodes' volumes) run at
// the same time: eight nodes of p5.48xlarge keep up to 256 interfaces, too many to delete one
// after another within a share of the deadline, and not so many at once that EC2 throttles
// them all.
const removeAtOnce = 8

// serialized wraps say so that removals running at once (removeEach) never call it
// concurrently: callers pass plain functions that append to a slice or write to a stream.
func serialized(say func(string)) func(string) {
	var mu sync.Mutex
	return func(s string) {
		mu.Lock()
		defer mu.Unlock()
		say(s)
	}
}

// removeEach calls remove for each id, removeAtOnce at a time, and returns each one's error in
// the order of ids.
func removeEach(ids []string, remove func(id string) error) []error {
	errs := make([]error, len(ids))
	sem := make(chan struct{}, removeAtOnce)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = remove(id)
		}()
	}
	wg.Wait()
	return errs
}

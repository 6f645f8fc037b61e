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

// deleteInterfaces deletes the network interfaces of the launch EC2 did not delete with the
// instance, found by the launch tag; left is set to those still there, looked once the lookup
// answered. Interfaces launched
// with DeleteOnTermination go with the instance: this finds none unless EC2 kept one (an
// interface still attached is retried until it is available, or gone).
func (in *Instance) deleteInterfaces(ctx context.Context, say func(string), left *[]string, looked *bool) error {
	return in.patience.retryCalls(ctx, cleanupFinal, func(ctx context.Context) error {
		var out *ec2.DescribeNetworkInterfacesOutput
		err := in.patience.call(ctx, func(ctx context.Context) (err error) {
			out, err = in.api.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
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
		for _, ni := range out.NetworkInterfaces {
			id := aws.ToString(ni.NetworkInterfaceId)
			if ni.Status == types.NetworkInterfaceStatusInUse {
				*left = append(*left, id)
				errs = append(errs, fmt.Errorf("%s is still attached", id))
				continue
			}
			gone = append(gone, id)
		}
		// At once, a few at a time: eight nodes keep up to 256 interfaces.
		failed := removeEach(gone, func(id string) error {
			err := in.patience.call(ctx, func(ctx context.Context) error {
				_, err := in.api.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
				return err
			})
			if err != nil && awsaccess.APICode(err) != "InvalidNetworkInterfaceID.NotFound" {
				return fmt.Errorf("deleting %s: %w", id, err)
			}
			say("deleted network interface " + id + ", left after the instance")
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

// interfaceResources are the network interfaces of an EFA layout that outlived the instance,
// as the cleanup finds them by the launch tag and deletes them.
func (in *Instance) interfaceResources() []resource {
	if !in.interfaces {
		return nil
	}
	var left []string
	looked := false
	return []resource{{kind: KindInterface, after: []string{KindInstance}, weight: 2,
		remove: func(ctx context.Context, say func(string)) error {
			return in.deleteInterfaces(ctx, say, &left, &looked)
		},
		left:   func(err error) Leak { return Leak{Kind: KindInterface, IDs: left, LaunchID: in.launchID, Err: err} },
		unsure: func() bool { return !looked }}}
}

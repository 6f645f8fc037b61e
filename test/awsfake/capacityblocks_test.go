package awsfake

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// armDLAMI is the seeded arm64 Base OSS DLAMI (Ubuntu 24.04) a GB200 tray runs.
func armDLAMI() *string {
	return aws.String(SeedAMIID("us-east-1", SeedName("arm64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", "20261002")))
}

// intoBlock targets a Capacity Block as the post-processor launches into one: the reservation
// as the target and the capacity-block market type.
func intoBlock(in *ec2.RunInstancesInput) {
	in.CapacityReservationSpecification = &ec2types.CapacityReservationSpecification{
		CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String("cr-0123456789abcdef0")},
	}
	in.InstanceMarketOptions = &ec2types.InstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
}

func gb200Launch(n int32, mutate func(*ec2.RunInstancesInput)) *ec2.RunInstancesInput {
	in := &ec2.RunInstancesInput{ImageId: armDLAMI(), InstanceType: "p6e-gb200.36xlarge", MinCount: aws.Int32(n), MaxCount: aws.Int32(n)}
	if mutate != nil {
		mutate(in)
	}
	return in
}

// A p6e-gb200.36xlarge exists only inside an UltraServer Capacity Block: EC2 refuses it
// elsewhere, and the fake does too, launching nothing.
func TestCapacityBlockOnlyTypeRefusedOutsideABlock(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	ctx := context.Background()
	tests := []struct {
		name      string
		mutate    func(*ec2.RunInstancesInput)
		code, msg string
	}{
		{"no reservation", nil, DefaultCapacityBlockOnlyCode,
			"p6e-gb200.36xlarge is offered only in UltraServers, through EC2 Capacity Blocks for ML"},
		{"only the capacity-block market type", func(in *ec2.RunInstancesInput) {
			in.InstanceMarketOptions = &ec2types.InstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
		}, DefaultCapacityBlockOnlyCode, "Capacity Blocks for ML"},
		{"an open preference is no target", func(in *ec2.RunInstancesInput) {
			in.CapacityReservationSpecification = &ec2types.CapacityReservationSpecification{CapacityReservationPreference: ec2types.CapacityReservationPreferenceOpen}
		}, DefaultCapacityBlockOnlyCode, "Capacity Blocks for ML"},
		{"the block without the capacity-block market type", func(in *ec2.RunInstancesInput) {
			intoBlock(in)
			in.InstanceMarketOptions = nil
		}, "InvalidParameterValue", "The market type (purchasing) option is not valid"},
		{"a malformed reservation id", func(in *ec2.RunInstancesInput) {
			intoBlock(in)
			in.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId = aws.String("reservation-1")
		}, "InvalidCapacityReservationId.Malformed", `Invalid id: "reservation-1"`},
		{"a preference beside the target", func(in *ec2.RunInstancesInput) {
			intoBlock(in)
			in.CapacityReservationSpecification.CapacityReservationPreference = ec2types.CapacityReservationPreferenceOpen
		}, "InvalidParameterCombination", "CapacityReservationPreference and CapacityReservationTarget"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.RunInstances(ctx, gb200Launch(2, tc.mutate))
			if errorCode(err) != tc.code || httpStatus(err) != http.StatusBadRequest || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v (HTTP %d), want %s %q", err, httpStatus(err), tc.code, tc.msg)
			}
			if rs := e.fake.State("us-east-1", true).Regions["us-east-1"]; len(rs.Instances) != 0 {
				t.Errorf("a refused launch left %d instances", len(rs.Instances))
			}
		})
	}
}

// Inside a block (a reservation id or a resource group's ARN as the target, the capacity-block
// market type) the trays launch; other types need no reservation.
func TestCapacityBlockOnlyTypeLaunchesIntoABlock(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	ctx := context.Background()
	out, err := c.RunInstances(ctx, gb200Launch(2, intoBlock))
	if err != nil {
		t.Fatalf("2 trays into the block: %v", err)
	}
	if len(out.Instances) != 2 || out.Instances[0].InstanceType != "p6e-gb200.36xlarge" {
		t.Fatalf("launched %+v, want 2 p6e-gb200.36xlarge", out.Instances)
	}
	_, err = c.RunInstances(ctx, gb200Launch(1, func(in *ec2.RunInstancesInput) {
		intoBlock(in)
		in.CapacityReservationSpecification.CapacityReservationTarget = &ec2types.CapacityReservationTarget{
			CapacityReservationResourceGroupArn: aws.String("arn:aws:resource-groups:us-east-1:123456789012:group/ultraservers"),
		}
	}))
	if err != nil {
		t.Fatalf("a tray into the block's resource group: %v", err)
	}
	for _, typ := range []ec2types.InstanceType{"p5.48xlarge", "c8g.8xlarge"} {
		if _, err := c.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: armDLAMI(), InstanceType: typ, MinCount: aws.Int32(1), MaxCount: aws.Int32(1)}); err != nil {
			t.Errorf("%s without a reservation: %v", typ, err)
		}
	}
	if rs := e.fake.State("us-east-1", true).Regions["us-east-1"]; len(rs.Instances) != 5 {
		t.Errorf("%d instances, want 5", len(rs.Instances))
	}
}

// The refusal's code and message switch, for when EC2's real answer is known.
func TestCapacityBlockOnlyRefusalSwitches(t *testing.T) {
	e := newEC2Env(t, nil)
	e.fake.SetCapacityBlockOnlyRefusal("InsufficientInstanceCapacity", "no %s outside a block")
	_, err := e.client("us-east-1").RunInstances(context.Background(), gb200Launch(1, nil))
	if errorCode(err) != "InsufficientInstanceCapacity" || !strings.Contains(err.Error(), "no p6e-gb200.36xlarge outside a block") {
		t.Fatalf("err = %v, want the switched refusal", err)
	}
	e.fake.SetCapacityBlockOnlyRefusal("", "")
	_, err = e.client("us-east-1").RunInstances(context.Background(), gb200Launch(1, nil))
	if errorCode(err) != DefaultCapacityBlockOnlyCode {
		t.Fatalf("err = %v, want the default %s again", err, DefaultCapacityBlockOnlyCode)
	}
}

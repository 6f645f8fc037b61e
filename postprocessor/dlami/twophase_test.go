package dlami

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// The settings of issue 21 (instance_types, subnet_ids, market_type, complete_validation):
// each bad combination is refused at configure time with an error naming the settings.
func TestTwoPhaseSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  map[string]interface{}
		want string
	}{
		{"type and types", map[string]interface{}{"instance_type": "p5.48xlarge", "instance_types": []string{"p5e.48xlarge"}}, "instance_type and instance_types: set one"},
		{"subnet and subnets", map[string]interface{}{"subnet_id": "subnet-1", "subnet_ids": []string{"subnet-2"}}, "subnet_id and subnet_ids: set one"},
		{"empty type", map[string]interface{}{"instance_types": []string{"p5.48xlarge", ""}}, "instance_types[1] is empty"},
		{"type twice", map[string]interface{}{"instance_types": []string{"p5.48xlarge", "p5.48xlarge"}}, `instance_types[1] "p5.48xlarge" is listed twice`},
		{"subnet twice", map[string]interface{}{"subnet_ids": []string{"subnet-1", "subnet-1"}}, `subnet_ids[1] "subnet-1" is listed twice`},
		{"spot", map[string]interface{}{"market_type": "spot"}, `market_type "spot": use "capacity-block"`},
		{"block without reservation", map[string]interface{}{"market_type": "capacity-block"}, `market_type = "capacity-block" needs the Capacity Block's reservation: set capacity_reservation_id`},
		{"reservation and types", map[string]interface{}{"capacity_reservation_id": "cr-1", "instance_types": []string{"p5.48xlarge", "p5e.48xlarge"}}, "capacity_reservation_id with several instance_types"},
		{"reservation and subnets", map[string]interface{}{"capacity_reservation_id": "cr-1", "subnet_ids": []string{"subnet-1", "subnet-2"}}, "capacity_reservation_id with several instance_types or subnet_ids"},
		{"complete without type", map[string]interface{}{"complete_validation": true}, "complete_validation = true needs instance_type or instance_types"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := configure(t, tc.raw); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
	for _, raw := range []map[string]interface{}{
		{"complete_validation": true, "instance_types": []string{"p5.48xlarge", "p5e.48xlarge"}},
		{"complete_validation": true, "instance_type": "p6-b200.48xlarge"},
		{"market_type": "capacity-block", "capacity_reservation_id": "cr-0123456789abcdef0", "instance_type": "p5.48xlarge"},
		{"market_type": "capacity-block", "capacity_reservation_group_arn": "arn:aws:resource-groups:us-east-1:1:group/x", "instance_types": []string{"p5.48xlarge", "p5e.48xlarge"}},
		{"subnet_ids": []string{"subnet-1", "subnet-2"}, "instance_types": []string{"p5.48xlarge", "p5e.48xlarge"}},
	} {
		if _, err := configure(t, raw); err != nil {
			t.Errorf("%v refused: %v", raw, err)
		}
	}
	p, err := configure(t, map[string]interface{}{})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.config; c.CompleteValidation || c.MarketType != "" || len(c.InstanceTypes) != 0 || len(c.SubnetIDs) != 0 {
		t.Errorf("defaults %+v: complete_validation false, on-demand, no fallbacks", c)
	}
}

// Every instance type in every subnet, instance type first.
func TestCandidatesOrder(t *testing.T) {
	c := Config{InstanceTypes: []string{"p5.48xlarge", "p5e.48xlarge"}, SubnetIDs: []string{"subnet-a", "subnet-b"}}
	var got []string
	for _, p := range c.candidates("ignored") {
		got = append(got, p.String())
	}
	want := "p5.48xlarge in subnet-a|p5.48xlarge in subnet-b|p5e.48xlarge in subnet-a|p5e.48xlarge in subnet-b"
	if strings.Join(got, "|") != want {
		t.Errorf("candidates %q, want %q", got, want)
	}
	c = Config{SubnetID: "subnet-a"}
	if got := c.candidates("p6-b200.48xlarge"); len(got) != 1 || got[0] != (launch.Placement{InstanceType: "p6-b200.48xlarge", SubnetID: "subnet-a"}) {
		t.Errorf("single candidate %v", got)
	}
}

// A bill of materials that says the bake deferred its validation fails the post-processor
// before anything is launched unless complete_validation = true, naming both settings.
func TestDeferredBOMRefusedBeforeLaunching(t *testing.T) {
	b := bom.BOM{Kernel: "7.0.0-1014-aws", InstanceType: "c7i.8xlarge", Guarded: map[string]bom.Package{"linux-aws": {Version: "7.0.0.1014.14", Held: true}},
		Deferred: &bom.Deferred{Checks: []string{"gpu"}, BuildInstanceType: "c7i.8xlarge", Reason: "defer_validation = true"}}
	data, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), BOMFileName)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := configure(t, map[string]interface{}{"bom_file": file, "skip_credential_validation": true})
	if err != nil {
		t.Fatal(err)
	}
	launched := false
	p.ec2For = func(context.Context, string) (launch.EC2API, error) { launched = true; return nil, nil }
	_, keep, _, err := p.PostProcess(context.Background(), packersdk.TestUi(t), ebsArtifact("us-east-1:ami-0a"))
	if err == nil || !keep || !strings.Contains(err.Error(), "complete_validation = true") || !strings.Contains(err.Error(), "defer_validation = true") ||
		!strings.Contains(err.Error(), file) {
		t.Fatalf("err %v: want one naming both settings and the bom_file", err)
	}
	if launched {
		t.Error("an EC2 client was made for a deferred image without complete_validation")
	}
}

// instance_types falls through a capacity refusal to the next type, and says so; the launch
// uses the post-processor's own settings end to end (here no SSH answers, so it then fails
// unverified and cleans up).
func TestInstanceTypesFallBack(t *testing.T) {
	const ami = "ami-0000000000000e021"
	f := newFakeEC2(t, "us-east-1")
	f.own(t, "us-east-1", ami, "snap-00000000000000e21")
	p, err := configure(t, map[string]interface{}{"instance_types": []string{"p5.48xlarge", "p6-b200.48xlarge"}, "skip_credential_validation": true,
		"report_dir": t.TempDir(), "ssh_timeout": "1s", "complete_validation": true})
	if err != nil {
		t.Fatal(err)
	}
	p.ec2For = f.client
	f.srv.SetFault("RunInstances", "us-east-1", awsfake.Fault{InsufficientCapacity: 1})
	var out bytes.Buffer
	ui := &packersdk.BasicUi{Reader: new(bytes.Buffer), Writer: &out, ErrorWriter: &out}
	_, _, _, err = p.PostProcess(context.Background(), ui, ebsArtifact("us-east-1:"+ami))
	if err == nil || !strings.Contains(err.Error(), "could not be verified") {
		t.Fatalf("err %v", err)
	}
	rs := f.srv.State("us-east-1", false).Regions["us-east-1"]
	if len(rs.Instances) != 1 || rs.Instances[0].InstanceType != "p6-b200.48xlarge" || rs.Instances[0].State != "terminated" {
		t.Fatalf("instances %+v: want one p6-b200.48xlarge, terminated", rs.Instances)
	}
	for _, want := range []string{"on p5.48xlarge, then p6-b200.48xlarge", "no capacity for p5.48xlarge (InsufficientInstanceCapacity); trying p6-b200.48xlarge",
		"verifying on p6-b200.48xlarge (no capacity for p5.48xlarge: InsufficientInstanceCapacity)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("UI lacks %q:\n%s", want, out.String())
		}
	}
	if len(rs.KeyPairs) != 0 {
		t.Errorf("key pairs left %v", rs.KeyPairs)
	}
}

package dlami

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
	"github.com/dlami-bake/packer-plugin-dlami/test/awstest"
)

// kmsForEncryptedAMIs are the KMS actions AWS documents for launching an instance from an AMI
// whose EBS snapshots are encrypted with a customer managed key: EC2 calls KMS on the caller's
// behalf, so the fake never serves them, and the policies must list them all the same.
var kmsForEncryptedAMIs = []string{"kms:CreateGrant", "kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlainText", "kms:ReEncryptFrom", "kms:ReEncryptTo"}

// TestIAMPolicyCoversEveryCall runs the post-processor through the paths that reach AWS (a
// healthy first boot with an ami_regions copy, the default VPC and price_lookup; a subnet and a
// CreateSecurityGroup without an answer, whose cleanup looks the group up; a failed first boot
// with on_failure = deregister) through the real clients against the fake, and fails when an
// action the fake served, or a method of the EC2 client interface the post-processor calls
// (internal/launch.EC2API), or the STS calls of internal/awsaccess, is missing from the IAM
// policy in docs/post-processors/dlami.mdx or in docs/aws.md, or the KMS actions for
// encrypted AMIs are.
func TestIAMPolicyCoversEveryCall(t *testing.T) {
	awstest.IsolateEnv(t)
	f := newFakeEC2(t, "us-east-1", "us-west-2")
	// price_lookup's Price List API client finds the fake by the SDK's own endpoint setting,
	// as a user's would: the plugin has no endpoint setting for it.
	t.Setenv("AWS_ENDPOINT_URL_PRICING", f.url)
	run := func(t *testing.T, raw map[string]interface{}, artifact string, check error) error {
		t.Helper()
		raw["instance_type"], raw["report_dir"], raw["ssh_timeout"] = "p5.48xlarge", t.TempDir(), "1s"
		raw["access_key"], raw["secret_key"] = "AKIAFAKEPPTEST000000", "secret"
		raw["custom_endpoint_ec2"], raw["sts_endpoint"] = f.url, f.url
		p, err := configure(t, raw)
		if err != nil {
			t.Fatal(err)
		}
		p.checkBoot = func(context.Context, packersdk.Ui, *launch.Instance, target, string, func(string)) error {
			return check
		}
		_, _, _, err = p.PostProcess(context.Background(), packersdk.TestUi(t), ebsArtifact(artifact))
		return err
	}
	f.own(t, "us-east-1", "ami-0000000000000e021", "snap-00000000000000e21")
	f.own(t, "us-west-2", "ami-0000000000000e022", "snap-00000000000000e22")
	if err := run(t, map[string]interface{}{"region": "us-east-1", "price_lookup": true}, "us-east-1:ami-0000000000000e021,us-west-2:ami-0000000000000e022", nil); err != nil {
		t.Fatalf("healthy first boot: %v", err)
	}
	f.srv.SetFault(awsfake.OpCreateSecurityGroup, "us-east-1", awsfake.Fault{AccessDenied: true})
	subnet := f.srv.State("us-east-1", false).Regions["us-east-1"].Subnet.ID
	if err := run(t, map[string]interface{}{"subnet_id": subnet}, "us-east-1:ami-0000000000000e021", nil); err == nil {
		t.Fatal("CreateSecurityGroup denied: want an error")
	}
	f.srv.ClearFaults()
	f.own(t, "us-east-1", "ami-0000000000000e023", "snap-00000000000000e23")
	if err := run(t, map[string]interface{}{"on_failure": "deregister"}, "us-east-1:ami-0000000000000e023", &engine.DriftError{Stage: "first boot", Failed: []string{"first-boot-kernel"}}); err == nil || !strings.Contains(err.Error(), "did not boot healthy") {
		t.Fatalf("failed first boot: %v", err)
	}

	called := f.srv.ActionsServed()
	for _, want := range []string{"ec2:DescribeVpcs", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DeregisterImage", "ec2:CreateTags", "sts:GetCallerIdentity", "pricing:GetProducts"} {
		if !slices.Contains(called, want) {
			t.Errorf("the scenario never called %s (served: %v)", want, called)
		}
	}
	called = append(called, awstest.ClientActions[launch.EC2API]("ec2")...)
	// internal/awsaccess's credential check (sts:AssumeRole, with assume_role, is granted to the
	// calling identity, not in this policy: the docs say so).
	called = append(called, "sts:GetCallerIdentity")
	for _, doc := range []string{filepath.Join("..", "..", "docs", "post-processors", "dlami.mdx"), filepath.Join("..", "..", "docs", "aws.md")} {
		policy := awstest.PolicyActions(t, doc)
		if missing := awstest.Ungranted(policy, called); len(missing) > 0 {
			slices.Sort(missing)
			t.Errorf("%s: the IAM policy lacks %s, which the post-processor calls", doc, strings.Join(slices.Compact(missing), ", "))
		}
		if missing := awstest.Ungranted(policy, kmsForEncryptedAMIs); len(missing) > 0 {
			t.Errorf("%s: the IAM policy lacks %s, needed to launch an AMI with encrypted snapshots", doc, strings.Join(missing, ", "))
		}
	}
}

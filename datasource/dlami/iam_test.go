package dlami

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/dlamiresolve"
	"github.com/dlami-bake/packer-plugin-dlami/test/awstest"
)

// TestIAMPolicyCoversEveryCall runs the data source through the paths that reach AWS (the
// latest DLAMI through SSM, a parameter that does not exist, a pinned build, a trusted owner
// "self", the golden lookup, an assumed role) through the real clients against the fake, and
// fails when an action the fake served, or a method of the client interfaces the resolver calls
// (internal/dlamiresolve.SSMAPI and EC2API), is missing from the IAM policy in
// docs/datasources/dlami.mdx or docs/aws.md. The STS calls are documented beside the policy:
// sts:AssumeRole is granted to the calling identity, sts:GetCallerIdentity needs no
// permission; the docs must name them.
func TestIAMPolicyCoversEveryCall(t *testing.T) {
	f, url := startFake(t, "us-east-1", "eu-west-1")
	for _, src := range []string{
		"region = \"us-east-1\"\nregions = [\"eu-west-1\"]\ngolden {\n  name_prefix = \"golden-\"\n}\n",
		"region = \"us-east-1\"\nbuild = \"20260904\"\nowners = [\"amazon\", \"self\"]\n",
		"region = \"us-east-1\"\nassume_role {\n  role_arn = \"arn:aws:iam::123456789012:role/packer-dlami-read\"\n}\n",
	} {
		if _, err := configureHCL(t, endpointHCL(url)+src).Execute(); err != nil {
			t.Fatalf("Execute(%s): %v", src, err)
		}
	}
	if _, err := configureHCL(t, endpointHCL(url)+"region = \"us-east-1\"\nflavor = \"no-such-flavor\"\n").Execute(); err == nil {
		t.Fatal("a parameter that does not exist: want an error")
	}
	called := f.ActionsServed()
	for _, want := range []string{"ssm:GetParameter", "ssm:GetParametersByPath", "ec2:DescribeImages", "sts:AssumeRole", "sts:GetCallerIdentity"} {
		if !slices.Contains(called, want) {
			t.Errorf("the scenario never called %s (served: %v)", want, called)
		}
	}
	called = append(called, awstest.ClientActions[dlamiresolve.SSMAPI]("ssm")...)
	called = append(called, awstest.ClientActions[dlamiresolve.EC2API]("ec2")...)
	besidePolicy := []string{"sts:AssumeRole", "sts:GetCallerIdentity"}
	for _, doc := range []string{filepath.Join("..", "..", "docs", "datasources", "dlami.mdx"), filepath.Join("..", "..", "docs", "aws.md")} {
		policy := awstest.PolicyActions(t, doc)
		var missing []string
		for _, a := range awstest.Ungranted(policy, called) {
			if !slices.Contains(besidePolicy, a) {
				missing = append(missing, a)
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			t.Errorf("%s: the IAM policy lacks %s, which the data source calls", doc, strings.Join(slices.Compact(missing), ", "))
		}
		text := awstest.ReadFile(t, doc)
		for _, a := range besidePolicy {
			if !awstest.Granted(policy, a) && !strings.Contains(text, a) {
				t.Errorf("%s: %s is neither in the policy nor explained beside it", doc, a)
			}
		}
	}
}

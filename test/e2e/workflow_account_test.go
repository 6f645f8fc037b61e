package e2e

// The rebake workflow on a real AWS account (issue 20): credentials that outlast the job, a
// run id on everything the bake creates, and a cleanup that runs when the job is cancelled.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// ciRunTag is the tag the rebake template puts on every resource of a bake and the
// workflow's cleanup step looks for.
const ciRunTag = "dlami:ci_run"

// cleanupStep returns the rebake job's cleanup step (its last).
func cleanupStep(t *testing.T, job workflowJob) workflowStep {
	t.Helper()
	s := job.Steps[len(job.Steps)-1]
	if !strings.Contains(s.Run, "terminate-instances") {
		t.Fatalf("the last step of jobs.rebake (%q) is not the cleanup: it terminates nothing", s.label())
	}
	return s
}

func TestRebakeWorkflowIsSafeOnARealAccount(t *testing.T) {
	_, job := readRebakeWorkflow(t)

	t.Run("credentials outlast the job", func(t *testing.T) {
		timeout, err := strconv.Atoi(job.TimeoutMinutes)
		if err != nil {
			t.Fatalf("jobs.rebake.timeout-minutes = %q: want a number", job.TimeoutMinutes)
		}
		for _, s := range job.Steps {
			if !strings.HasPrefix(s.Uses, "aws-actions/configure-aws-credentials@") {
				continue
			}
			d, err := strconv.Atoi(s.With["role-duration-seconds"])
			if err != nil || d < timeout*60 {
				t.Errorf("%s: role-duration-seconds = %q, want at least timeout-minutes (%d) x 60 = %d: the default hour expires mid-bake (ExpiredToken) and Packer cannot terminate its instance",
					s.Uses, s.With["role-duration-seconds"], timeout, timeout*60)
			}
		}
	})

	t.Run("a run id per job", func(t *testing.T) {
		id := job.Env["PKR_VAR_run_id"]
		for _, want := range []string{"${{ github.run_id }}", "${{ github.run_attempt }}", "${{ matrix.region }}", "${{ matrix.instance_type }}"} {
			if !strings.Contains(id, want) {
				t.Errorf("jobs.rebake.env.PKR_VAR_run_id = %q lacks %s: each job of the matrix must clean up only its own", id, want)
			}
		}
	})

	t.Run("the template tags everything with it", func(t *testing.T) {
		path := filepath.Join("..", "..", "examples", "rebake", "rebake.pkr.hcl")
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, diags := hclsyntax.ParseConfig(src, path, hcl.Pos{Line: 1, Column: 1})
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		refersTo := func(e hclsyntax.Expression, root, name string) bool {
			for _, tr := range e.Variables() {
				if tr.RootName() == root && len(tr) > 1 {
					if a, ok := tr[1].(hcl.TraverseAttr); ok && a.Name == name {
						return true
					}
				}
			}
			return false
		}
		found := map[string]bool{}
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			switch {
			case b.Type == "locals":
				if a, ok := b.Body.Attributes["ci_run_tags"]; ok {
					obj, ok := a.Expr.(*hclsyntax.ObjectConsExpr)
					for _, item := range func() []hclsyntax.ObjectConsItem {
						if ok {
							return obj.Items
						}
						return nil
					}() {
						k, _ := item.KeyExpr.Value(nil)
						if k.AsString() == ciRunTag && refersTo(item.ValueExpr, "var", "run_id") {
							found["locals.ci_run_tags"] = true
						}
					}
				}
			case b.Type == "source" && b.Labels[0] == "amazon-ebs":
				for _, attr := range []string{"run_tags", "run_volume_tags", "snapshot_tags"} {
					if a, ok := b.Body.Attributes[attr]; ok && refersTo(a.Expr, "local", "ci_run_tags") {
						found["amazon-ebs."+attr] = true
					}
				}
			case b.Type == "build":
				for _, pp := range b.Body.Blocks {
					if pp.Type == "post-processor" && pp.Labels[0] == "dlami" {
						if a, ok := pp.Body.Attributes["run_tags"]; ok && refersTo(a.Expr, "local", "ci_run_tags") {
							found["post-processor.run_tags"] = true
						}
					}
				}
			}
		}
		for _, want := range []string{"locals.ci_run_tags", "amazon-ebs.run_tags", "amazon-ebs.run_volume_tags", "amazon-ebs.snapshot_tags", "post-processor.run_tags"} {
			if !found[want] {
				t.Errorf("%s: %s does not carry %s = var.run_id (through local.ci_run_tags)", path, want, ciRunTag)
			}
		}
	})

	t.Run("a cleanup that runs when the job is cancelled", func(t *testing.T) {
		s := cleanupStep(t, job)
		if !strings.Contains(s.If, "always()") && !strings.Contains(s.If, "cancelled()") {
			t.Errorf("the cleanup step's if: %q runs only when the job succeeds: want always() (or cancelled())", s.If)
		}
		for _, want := range []string{"tag:" + ciRunTag, "$PKR_VAR_run_id", "terminate-instances", "delete-key-pair", "delete-security-group"} {
			if !strings.Contains(s.Run, want) {
				t.Errorf("the cleanup step lacks %q", want)
			}
		}
	})
}

// TestRebakeCleanupStepTerminatesWhatTheJobLeft runs the workflow's cleanup script with bash,
// against a stand-in `aws` that answers as EC2 would with what a cancelled job left (an
// instance, a key pair, a security group, all tagged with the job's run id) and records every
// call: the script must look only for its own run id and terminate, wait, and delete them.
func TestRebakeCleanupStepTerminatesWhatTheJobLeft(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	_, job := readRebakeWorkflow(t)
	script := cleanupStep(t, job).Run
	const runID = "4242-1-us-east-1-p5.48xlarge"
	for _, tc := range []struct {
		name string
		left bool
	}{{"cancelled mid-bake", true}, {"nothing left", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "calls")
			answer := func(v string) string {
				if tc.left {
					return v
				}
				return ""
			}
			stub := `#!/bin/bash
echo "$*" >>"` + log + `"
case "$*" in
  *"Values=` + runID + `"*) ;;
  *describe-*) exit 0 ;;
esac
case "$2" in
  describe-instances) echo "` + answer("i-0aaa1 i-0aaa2") + `" ;;
  describe-key-pairs) echo "` + answer("packer_6750a1b2") + `" ;;
  describe-security-groups) echo "` + answer("sg-0bbb1") + `" ;;
esac
`
			if err := os.WriteFile(filepath.Join(dir, "aws"), []byte(stub), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", "-e", "-c", script)
			cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "PKR_VAR_run_id="+runID, "PKR_VAR_region=us-east-1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the cleanup step failed: %v\n%s", err, out)
			}
			b, _ := os.ReadFile(log)
			calls := strings.Split(strings.TrimSpace(string(b)), "\n")
			var describes, acts []string
			for _, c := range calls {
				if strings.HasPrefix(c, "ec2 describe-") {
					describes = append(describes, c)
					if !strings.Contains(c, "Name=tag:"+ciRunTag+",Values="+runID) || !strings.Contains(c, "--region us-east-1") {
						t.Errorf("%q: not limited to this job's run id and region", c)
					}
				} else {
					acts = append(acts, c)
				}
			}
			if len(describes) != 3 {
				t.Errorf("describe calls %q: want instances, key pairs and security groups", describes)
			}
			want := []string{
				"ec2 terminate-instances --region us-east-1 --instance-ids i-0aaa1 i-0aaa2",
				"ec2 wait instance-terminated --region us-east-1 --instance-ids i-0aaa1 i-0aaa2",
				"ec2 delete-key-pair --region us-east-1 --key-name packer_6750a1b2",
				"ec2 delete-security-group --region us-east-1 --group-id sg-0bbb1",
			}
			if !tc.left {
				want = nil
			}
			if strings.Join(acts, "\n") != strings.Join(want, "\n") {
				t.Errorf("the cleanup did:\n  %s\nwant:\n  %s\noutput:\n%s", strings.Join(acts, "\n  "), strings.Join(want, "\n  "), out)
			}
		})
	}
}

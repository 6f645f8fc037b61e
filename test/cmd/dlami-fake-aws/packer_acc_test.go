package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// The template a user writes for amazon-ebs, with only the endpoints
// changed: no ssh_host/ssh_port, no vpc or subnet, the default key pair and
// security group handling. communicator = "none" because this test runs
// without simulated hosts (the --simhost scenarios live in test/e2e).
const amazonEBSTemplate = `
packer {
  required_plugins {
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = "= 1.8.0"
    }
  }
}

variable "endpoint" { type = string }
variable "source_ami" { type = string }
variable "skip_credential_validation" { type = bool }

source "amazon-ebs" "golden" {
  access_key                 = "AKIAFAKEFAKEFAKE0001"
  secret_key                 = "fakeSecretKeyfakeSecretKeyfakeSecretKe"
  region                     = "us-east-1"
  custom_endpoint_ec2        = var.endpoint
  skip_credential_validation = var.skip_credential_validation
  skip_metadata_api_check    = true
  source_ami                 = var.source_ami
  instance_type              = "p6-b200.48xlarge"
  ami_name                   = "ml-golden-{{timestamp}}"
  ami_regions                = ["us-west-2"]
  communicator               = "none"
  tags = {
    team  = "ml-platform"
    build = "golden"
  }
  aws_polling {
    delay_seconds = 1
    max_attempts  = 120
  }
}

build {
  sources = ["source.amazon-ebs.golden"]
}
`

// packerPrereqs finds bin/packer and the installed amazon plugin; without
// them the test fails under CI=true and is skipped (with the reason) elsewhere.
func packerPrereqs(t *testing.T) (packer, pluginDir string) {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	packer = filepath.Join(root, "bin", "packer")
	pluginDir = filepath.Join(root, ".packer-plugins")
	amazon, _ := filepath.Glob(filepath.Join(pluginDir, "github.com", "hashicorp", "amazon", "packer-plugin-amazon_v1.8.0_*_linux_amd64"))
	var missing []string
	if _, err := os.Stat(packer); err != nil {
		missing = append(missing, packer+" (make tools)")
	}
	if len(amazon) == 0 {
		missing = append(missing, "the amazon plugin v1.8.0 in "+pluginDir+" (make dev)")
	}
	if len(missing) > 0 {
		msg := "missing " + strings.Join(missing, " and ")
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return packer, pluginDir
}

var artifactLine = regexp.MustCompile(`(?m)^(us-[a-z]+-\d): (ami-[0-9a-f]{17})$`)

// A real amazon-ebs bake through Packer and the amazon plugin completes
// against the fake and leaves nothing behind but the AMIs, tagged, in both
// regions. Run once skipping credential validation and once validating
// through STS GetCallerIdentity.
func TestPackerAmazonEBSBake(t *testing.T) {
	if testing.Short() {
		t.Skip("runs packer build (about 35 s per case); skipped with -short")
	}
	packer, pluginDir := packerPrereqs(t)
	sourceAMI := awsfake.SeedAMIID("us-east-1", awsfake.SeedName("x86_64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", "20261002"))
	tests := []struct {
		name                 string
		skipValidation       bool
		wantCallerIdentities int
	}{
		{"skip credential validation", true, 0},
		{"validate credentials through STS", false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tmpl := filepath.Join(dir, "golden.pkr.hcl")
			if err := os.WriteFile(tmpl, []byte(amazonEBSTemplate), 0o644); err != nil {
				t.Fatal(err)
			}
			url, fakeLog, stop := startRun(t, []string{"--listen", "127.0.0.1:0", "--regions", "us-east-1,us-west-2"}, testDeps(nil))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, packer, "build", "-color=false",
				"-var", "endpoint="+url, "-var", "source_ami="+sourceAMI, "-var", "skip_credential_validation="+boolString(tc.skipValidation), tmpl)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(),
				"PACKER_PLUGIN_PATH="+pluginDir,
				"CHECKPOINT_DISABLE=1",
				// STS (credential validation) and the per-region EC2 clients
				// of ami_regions ignore custom_endpoint_ec2: they follow the
				// SDK's AWS_ENDPOINT_URL.
				"AWS_ENDPOINT_URL="+url,
				"AWS_EC2_METADATA_DISABLED=true",
				"AWS_CONFIG_FILE="+filepath.Join(dir, "no-aws-config"),
				"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "no-aws-credentials"),
			)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			t.Logf("packer build took %s", time.Since(start).Round(time.Second))
			if err != nil {
				t.Fatalf("packer build: %v\n%s\nfake log:\n%s", err, out, fakeLog.String())
			}
			amis := map[string]string{}
			for _, m := range artifactLine.FindAllStringSubmatch(string(out), -1) {
				amis[m[1]] = m[2]
			}
			if len(amis) != 2 || amis["us-east-1"] == "" || amis["us-west-2"] == "" {
				t.Fatalf("artifacts %v, want one AMI in us-east-1 and one in us-west-2:\n%s", amis, out)
			}

			resp, err := http.Get(url + "/_fake/state?owner=self")
			if err != nil {
				t.Fatal(err)
			}
			var st awsfake.StateDump
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			east, west := st.Regions["us-east-1"], st.Regions["us-west-2"]
			if len(east.Instances) != 1 || east.Instances[0].State != awsfake.StateTerminated || east.Instances[0].InstanceType != "p6-b200.48xlarge" ||
				east.Instances[0].ImageID != sourceAMI || east.Instances[0].Address != "" {
				t.Errorf("us-east-1 instances %+v, want the one builder instance, terminated", east.Instances)
			}
			if len(west.Instances) != 0 {
				t.Errorf("us-west-2 instances %+v, want none", west.Instances)
			}
			for region, rs := range map[string]awsfake.RegionState{"us-east-1": east, "us-west-2": west} {
				if len(rs.KeyPairs) != 0 || len(rs.Volumes) != 0 {
					t.Errorf("%s: left key pairs %+v, volumes %+v", region, rs.KeyPairs, rs.Volumes)
				}
				if len(rs.SecurityGroups) != 1 || rs.SecurityGroups[0].Name != "default" {
					t.Errorf("%s: security groups %+v, want only the default", region, rs.SecurityGroups)
				}
				if len(rs.Images) != 1 {
					t.Fatalf("%s: own images %+v, want exactly the baked AMI", region, rs.Images)
				}
				img := rs.Images[0]
				if img.ID != amis[region] || img.State != "available" || !strings.HasPrefix(img.Name, "ml-golden-") ||
					img.Tags["team"] != "ml-platform" || img.Tags["build"] != "golden" || len(img.BlockDevices) != 1 {
					t.Errorf("%s: image %+v, want %s available with the template's tags", region, img, amis[region])
				}
				if len(rs.Snapshots) != 1 || rs.Snapshots[0].ID != img.BlockDevices[0].SnapshotID || rs.Snapshots[0].State != "completed" {
					t.Errorf("%s: snapshots %+v, want the image's own, completed", region, rs.Snapshots)
				}
			}
			if west.Images[0].SourceImageID != amis["us-east-1"] || west.Images[0].Name != east.Images[0].Name || west.Snapshots[0].ID == east.Snapshots[0].ID {
				t.Errorf("the us-west-2 AMI is not a copy of the us-east-1 one: %+v", west.Images[0])
			}
			if n := strings.Count(fakeLog.String(), "us-east-1 GetCallerIdentity -> 200"); n != tc.wantCallerIdentities {
				t.Errorf("GetCallerIdentity calls: %d, want %d", n, tc.wantCallerIdentities)
			}
			if err := stop(); err != nil {
				t.Fatalf("stopping the fake: %v", err)
			}
		})
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

package dlami

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// Every mistake in the launch settings a real account needs is refused at validation, naming
// the setting and what to write instead.
func TestLaunchSettingsErrorsNameTheSetting(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 16<<10+1), 0o644); err != nil {
		t.Fatal(err)
	}
	ud := filepath.Join(dir, "ud.sh")
	if err := os.WriteFile(ud, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		raw  map[string]interface{}
		want string
	}{
		{"http_tokens", map[string]interface{}{"metadata_options": map[string]interface{}{"http_tokens": "v2"}}, `metadata_options { http_tokens = "v2" }: use "required" or "optional"`},
		{"http_endpoint", map[string]interface{}{"metadata_options": map[string]interface{}{"http_endpoint": "on"}}, `metadata_options { http_endpoint = "on" }`},
		{"instance_metadata_tags", map[string]interface{}{"metadata_options": map[string]interface{}{"instance_metadata_tags": "yes"}}, `instance_metadata_tags = "yes"`},
		{"hop limit", map[string]interface{}{"metadata_options": map[string]interface{}{"http_put_response_hop_limit": 65}}, "http_put_response_hop_limit = 65 }: use 1 to 64"},
		{"both user data", map[string]interface{}{"user_data": "x", "user_data_file": ud}, "user_data and user_data_file: set one"},
		{"missing user data file", map[string]interface{}{"user_data_file": filepath.Join(dir, "absent")}, "user_data_file " + filepath.Join(dir, "absent")},
		{"user data too big", map[string]interface{}{"user_data_file": big}, "at most 16384 bytes"},
		{"both cidr settings", map[string]interface{}{"temporary_security_group_source_cidr": "10.0.0.0/8", "temporary_security_group_source_cidrs": []string{"10.0.0.0/8"}}, "temporary_security_group_source_cidr and temporary_security_group_source_cidrs: set one"},
		{"not a cidr", map[string]interface{}{"temporary_security_group_source_cidrs": []string{"10.0.0.0/8", "my office"}}, `temporary_security_group_source_cidrs[1] "my office": not a CIDR block`},
		{"host bits", map[string]interface{}{"temporary_security_group_source_cidrs": []string{"10.1.2.3/16"}}, "host bits are set; use 10.1.0.0/16"},
		{"ipv6", map[string]interface{}{"temporary_security_group_source_cidrs": []string{"2001:db8::/32"}}, "IPv4 sources only"},
		{"twice", map[string]interface{}{"temporary_security_group_source_cidrs": []string{"10.0.0.0/8", "10.0.0.0/8"}}, "listed twice"},
		{"singular checked too", map[string]interface{}{"temporary_security_group_source_cidr": "10.0.0.0"}, `temporary_security_group_source_cidr "10.0.0.0": not a CIDR block`},
		{"cidrs with own groups", map[string]interface{}{"security_group_ids": []string{"sg-0a"}, "temporary_security_group_source_cidrs": []string{"10.0.0.0/8"}}, "not made when security_group_ids is set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := configure(t, tc.raw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
	p, err := configure(t, map[string]interface{}{"user_data_file": ud, "temporary_security_group_source_cidrs": []string{"10.0.0.0/8", "203.0.113.7/32"}})
	if err != nil {
		t.Fatal(err)
	}
	if m := p.config.MetadataOptions; m.HTTPEndpoint != "enabled" || m.HTTPTokens != "required" || m.HTTPPutResponseHopLimit != 0 || m.InstanceMetadataTags != "" {
		t.Errorf("metadata_options defaults %+v: want IMDS enabled with IMDSv2 required, the rest unsent", m)
	}
	if string(p.config.userData) != "#!/bin/sh\n" {
		t.Errorf("user data %q", p.config.userData)
	}
}

// The verification instance is launched with the template's metadata options, user data and
// SSH sources (here nothing answers SSH: the launch itself is what is judged), and without a
// metadata_options block it still requires IMDSv2.
func TestVerificationLaunchCarriesTheLaunchSettings(t *testing.T) {
	const ami = "ami-0000000000000e006"
	ud := filepath.Join(t.TempDir(), "nodeadm.yaml")
	const nodeConfig = "---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: it's-mine\n"
	if err := os.WriteFile(ud, []byte(nodeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		raw       map[string]interface{}
		metadata  awsfake.MetadataOptions
		userData  string
		ingressOf []string
	}{
		{"set", map[string]interface{}{
			"metadata_options":                      map[string]interface{}{"http_tokens": "required", "http_put_response_hop_limit": 2, "instance_metadata_tags": "enabled"},
			"user_data_file":                        ud,
			"temporary_security_group_source_cidrs": []string{"10.0.0.0/16", "203.0.113.7/32"},
		}, awsfake.MetadataOptions{HTTPEndpoint: "enabled", HTTPTokens: "required", HTTPPutResponseHopLimit: 2, InstanceMetadataTags: "enabled"}, nodeConfig, []string{"10.0.0.0/16", "203.0.113.7/32"}},
		{"defaults", map[string]interface{}{"user_data": "#cloud-config\nruncmd: [\"true\"]\n", "temporary_security_group_source_cidr": "198.51.100.0/24"},
			awsfake.MetadataOptions{HTTPEndpoint: "enabled", HTTPTokens: "required"}, "#cloud-config\nruncmd: [\"true\"]\n", []string{"198.51.100.0/24"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.raw["ssh_timeout"] = "1s"
			f, p := launchable(t, ami, "snap-00000000000000e06", tc.raw)
			var launched awsfake.Instance
			var ingress []awsfake.Permission
			f.srv.Observe(func(c awsfake.Call) {
				if c.Op != "RunInstances" {
					return
				}
				rs := f.srv.State("us-east-1", false).Regions["us-east-1"]
				if len(rs.Instances) > 0 {
					launched = rs.Instances[0]
				}
				for _, g := range rs.SecurityGroups {
					if g.Name != "default" {
						ingress = g.Ingress
					}
				}
			})
			_, _, _, err := p.PostProcess(context.Background(), packersdk.TestUi(t), ebsArtifact("us-east-1:"+ami))
			if err == nil {
				t.Fatal("nothing answers SSH, yet the verification passed")
			}
			if launched.ID == "" {
				t.Fatal("no instance launched")
			}
			if launched.MetadataOptions == nil || *launched.MetadataOptions != tc.metadata {
				t.Errorf("metadata options %+v, want %+v", launched.MetadataOptions, tc.metadata)
			}
			if launched.UserData != tc.userData {
				t.Errorf("user data %q, want %q", launched.UserData, tc.userData)
			}
			// Port 22 from the sources only; and, the launch having EFA, all traffic from the
			// group itself.
			if len(ingress) != 2 || ingress[0].FromPort != 22 || !slices.Equal(ingress[0].CIDRs, tc.ingressOf) ||
				ingress[1].Protocol != "-1" || len(ingress[1].CIDRs) != 0 || len(ingress[1].GroupIDs) != 1 {
				t.Errorf("temporary group's ingress %+v, want port 22 from %v and all traffic from the group itself", ingress, tc.ingressOf)
			}
		})
	}
}

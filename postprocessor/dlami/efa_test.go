package dlami

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// Every mistake in the network settings is refused at validation, naming the setting and what
// to write instead.
func TestNetworkSettingsErrorsNameTheSetting(t *testing.T) {
	key := filepath.Join(t.TempDir(), "bastion")
	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		raw  map[string]interface{}
		want string
	}{
		{"efa word", map[string]interface{}{"efa": "most"}, `efa = "most": use "all" (every EFA interface of the instance type, the default), "none", or a count from 1 to 32 such as "8"`},
		{"efa zero", map[string]interface{}{"efa": "0"}, `efa = "0": use "all"`},
		{"efa negative", map[string]interface{}{"efa": -2}, `efa = "-2"`},
		{"both placement groups", map[string]interface{}{"placement_group": "pg", "temporary_placement_group": true}, "placement_group and temporary_placement_group = true: set one"},
		{"session manager", map[string]interface{}{"ssh_interface": "session_manager"}, "does not offer Session Manager"},
		{"bastion port alone", map[string]interface{}{"ssh_bastion_port": 2222}, "ssh_bastion_port without ssh_bastion_host"},
		{"bastion without user", map[string]interface{}{"ssh_bastion_host": "10.0.0.5", "ssh_bastion_agent_auth": true}, "ssh_bastion_host needs ssh_bastion_username"},
		{"bastion without auth", map[string]interface{}{"ssh_bastion_host": "10.0.0.5", "ssh_bastion_username": "ec2-user"}, "needs ssh_bastion_private_key_file or ssh_bastion_agent_auth = true"},
		{"bastion bad key", map[string]interface{}{"ssh_bastion_host": "10.0.0.5", "ssh_bastion_username": "ec2-user", "ssh_bastion_private_key_file": key}, "ssh_bastion_private_key_file " + key},
		{"bastion public address", map[string]interface{}{"ssh_bastion_host": "10.0.0.5", "ssh_bastion_username": "ec2-user", "ssh_bastion_agent_auth": true, "ssh_interface": "public_ip"},
			`ssh_bastion_host with ssh_interface = "public_ip"`},
		{"bastion port", map[string]interface{}{"ssh_bastion_host": "10.0.0.5", "ssh_bastion_port": 70000}, "ssh_bastion_port = 70000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SSH_AUTH_SOCK", "/nonexistent/agent.sock")
			_, err := configure(t, tc.raw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		efa     string
		want    int
		setting string
	}{{"", launch.EFAAll, `efa = "all"`}, {"all", launch.EFAAll, `efa = "all"`}, {"none", 0, `efa = "none"`}, {"4", 4, "efa = 4"}} {
		p, err := configure(t, map[string]interface{}{"efa": tc.efa})
		if err != nil {
			t.Fatal(err)
		}
		if p.config.efa != tc.want || p.config.efaSetting() != tc.setting {
			t.Errorf("efa %q: %d %q, want %d %q", tc.efa, p.config.efa, p.config.efaSetting(), tc.want, tc.setting)
		}
	}
}

// When a temporary Elastic IP is made, and which address is reached.
func TestReachingTheInstance(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name  string
		c     Config
		eip   launch.ElasticIPPolicy
		iface string
	}{
		{"default: an Elastic IP when several interfaces", Config{}, launch.ElasticIPWhenSeveralInterfaces, ""},
		{"private_ip: Packer inside the VPC", Config{SSHInterface: "private_ip"}, launch.NoElasticIP, "private_ip"},
		{"a bastion: the private address", Config{SSHBastionHost: "10.0.0.5"}, launch.NoElasticIP, "private_ip"},
		{"no public IP asked", Config{AssociatePublicIPAddress: &no}, launch.NoElasticIP, ""},
		{"always", Config{TemporaryElasticIP: &yes, SSHInterface: "public_ip"}, launch.AlwaysElasticIP, "public_ip"},
		{"never", Config{TemporaryElasticIP: &no}, launch.NoElasticIP, ""},
	} {
		if got := tc.c.elasticIP(); got != tc.eip {
			t.Errorf("%s: elastic IP policy %d, want %d", tc.name, got, tc.eip)
		}
		if got := tc.c.sshInterface(); got != tc.iface {
			t.Errorf("%s: ssh interface %q, want %q", tc.name, got, tc.iface)
		}
	}
}

// The verification launch attaches what efa says in the User Guide's layout, and the engine is
// told exactly that: the count, the setting, the groups EFA traffic depends on; the report's
// launch object says it too.
func TestVerificationAttachesEFA(t *testing.T) {
	for _, tc := range []struct {
		efa, typ string
		want     int
		layout   string
	}{
		{"", "p5.48xlarge", 32, "0/0 interface, 0/1 efa-only, 1-31/0 efa-only"},
		{"all", "p6-b200.48xlarge", 8, "0/0 interface, 0/1 efa-only, 1-7/0 efa-only"},
		{"2", "p6-b300.48xlarge", 2, "0/0 interface, 1-2/0 efa-only"},
		{"none", "p5.48xlarge", 0, ""},
		{"all", "g5.xlarge", 0, ""},
	} {
		t.Run(tc.efa+"/"+tc.typ, func(t *testing.T) {
			const ami = "ami-0000000000000e031"
			f, p := launchable(t, ami, "snap-00000000000000e31", map[string]interface{}{"efa": tc.efa})
			p.config.InstanceType = tc.typ
			var got launch.Instance
			var eip []awsfake.ElasticIP
			p.checkBoot = func(_ context.Context, _ packersdk.Ui, in *launch.Instance, _ target, _ string, _ func(string)) error {
				got = *in
				eip = f.srv.State("us-east-1", false).Regions["us-east-1"].ElasticIPs
				return nil
			}
			if _, _, _, err := p.PostProcess(context.Background(), packersdk.TestUi(t), ebsArtifact("us-east-1:"+ami)); err != nil {
				t.Fatal(err)
			}
			if got.Layout.EFA != tc.want || (tc.want > 0 && got.Layout.String() != tc.layout) {
				t.Errorf("attached %d EFA (%s), want %d (%s)", got.Layout.EFA, got.Layout, tc.want, tc.layout)
			}
			if tc.efa == "none" && f.srv.CallCount(awsfake.OpDescribeInstanceTypes, "us-east-1") != 0 {
				t.Error(`efa = "none" still read DescribeInstanceTypes`)
			}
			// Several interfaces: EC2 gives no public IP; a temporary Elastic IP reaches it.
			if several := tc.want > 0; several != (len(eip) == 1) || several != (got.ElasticIP != "") {
				t.Errorf("%d EFA: Elastic IPs %+v, instance's %q", tc.want, eip, got.ElasticIP)
			}
			o := p.config.verifyOptions(&got, target{"us-east-1", ami}, tc.typ, bom.BOM{})
			l := o.Launch
			if !o.Common.Launch.Known || o.Common.Launch.EFA != tc.want || o.Common.Launch.Setting != p.config.efaSetting() ||
				!slices.Equal(o.Common.Launch.SecurityGroups, got.SecurityGroups) || len(got.SecurityGroups) != 1 {
				t.Errorf("the engine is told %+v", o.Common.Launch)
			}
			if l.EFA != tc.want || l.EFASetting != p.config.efaSetting() || (tc.want > 0) != (len(l.NetworkInterfaces) == tc.want+1) {
				t.Errorf("report launch %+v", l)
			}
			if rs := f.srv.State("us-east-1", false).Regions["us-east-1"]; len(rs.ElasticIPs) != 0 || len(rs.NetworkInterfaces) != 0 {
				t.Errorf("left behind: %+v %+v", rs.ElasticIPs, rs.NetworkInterfaces)
			}
		})
	}
}

// A user's security group that does not carry EFA traffic is refused before anything is
// launched, naming the rule it lacks; the AMI is left alone.
func TestUserGroupWithoutTheSelfRuleIsRefused(t *testing.T) {
	const ami = "ami-0000000000000e032"
	f, p := launchable(t, ami, "snap-00000000000000e32", map[string]interface{}{})
	def := ""
	for _, g := range f.srv.State("us-east-1", false).Regions["us-east-1"].SecurityGroups {
		def = g.ID // the default VPC's default group: all in from itself, out to 0.0.0.0/0 only
	}
	p.config.SecurityGroupIDs = []string{def}
	_, _, _, err := p.PostProcess(context.Background(), packersdk.TestUi(t), ebsArtifact("us-east-1:"+ami))
	if err == nil || !strings.Contains(err.Error(), "security_group_ids "+def+": the EFA interfaces' traffic needs an outbound rule allowing all traffic (protocol -1, all ports) to the group itself") ||
		!strings.Contains(err.Error(), "could not be verified (on_failure was not applied)") {
		t.Fatalf("err %v", err)
	}
	if n := f.srv.CallCount(awsfake.OpRunInstances, "us-east-1") + f.srv.CallCount(awsfake.OpCreateKeyPair, "us-east-1"); n != 0 {
		t.Errorf("%d launch calls before the refusal", n)
	}
}

// With EFA attached the verification runs the EFA traffic test and, with the NCCL test it
// belongs to, GPUDirect RDMA, with the bake's settings; not DCGM. nccl = false keeps the EFA
// traffic test only; without EFA nothing runs; nccl = true runs everything the bake did. The
// bake's check selection holds in every case (settings.Checks.Overlay's one rule).
func TestVerifySettingsFollowTheAttachedEFA(t *testing.T) {
	doc := bom.BOM{Checks: &settings.Checks{
		NCCL: settings.NCCL{Timeout: 7 * time.Minute},
		Function: settings.Function{DCGMLevel: 2, EFATraffic: settings.EFATraffic{MinBandwidthMBps: 3000, Timeout: 20 * time.Second},
			GDR: settings.GDR{BusBWFloorGBps: 40}},
		Skip: []string{"lustre"},
	}}
	yes, no := true, false
	for _, tc := range []struct {
		name                   string
		nccl                   *bool
		efa                    int
		ncclOn, efaOn, gdrOn   bool
		dcgm                   settings.DCGMLevel
		skipsLustreFromTheBake bool
	}{
		{"EFA attached", nil, 32, true, true, true, 0, true},
		{"EFA attached, nccl = false", &no, 32, false, true, false, 0, true},
		{"no EFA", nil, 0, false, false, false, 0, true},
		{"nccl = true", &yes, 0, true, true, true, 2, true},
	} {
		s := verifySettings(&Config{NCCL: tc.nccl}, doc, tc.efa)
		if s.NCCL.Skip == tc.ncclOn || s.Function.EFATraffic.Skip == tc.efaOn || s.Function.GDR.Skip == tc.gdrOn || s.Function.DCGMLevel != tc.dcgm {
			t.Errorf("%s: nccl skip %v, efa traffic skip %v, gdr skip %v, dcgm %d", tc.name, s.NCCL.Skip, s.Function.EFATraffic.Skip, s.Function.GDR.Skip, s.Function.DCGMLevel)
		}
		if tc.efaOn && (s.Function.EFATraffic.MinBandwidthMBps != 3000 || s.Function.EFATraffic.Timeout != 20*time.Second) {
			t.Errorf("%s: EFA traffic settings %+v, want the bake's", tc.name, s.Function.EFATraffic)
		}
		if tc.gdrOn && (s.Function.GDR.BusBWFloorGBps != 40 || s.NCCL.Timeout != 7*time.Minute) {
			t.Errorf("%s: GDR %+v, NCCL %+v, want the bake's", tc.name, s.Function.GDR, s.NCCL)
		}
		if got := slices.Contains(s.Skip, "lustre"); got != tc.skipsLustreFromTheBake {
			t.Errorf("%s: skip %v", tc.name, s.Skip)
		}
	}
}

package dlami

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/secretfilter"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
)

func TestNodesSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  map[string]interface{}
		want string
	}{
		{"too many", map[string]interface{}{"nodes": 17}, "nodes = 17: use 1"},
		{"negative", map[string]interface{}{"nodes": -1}, "nodes = -1"},
		{"without EFA", map[string]interface{}{"nodes": 2, "efa": "none"}, `nodes = 2 with efa = "none"`},
		{"block without nodes", map[string]interface{}{"multi_node": map[string]interface{}{"max_bytes": "1G"}}, "multi_node without nodes"},
		{"bad size", map[string]interface{}{"nodes": 2, "multi_node": map[string]interface{}{"max_bytes": "2GB"}}, `multi_node.max_bytes "2GB"`},
		{"bad env", map[string]interface{}{"nodes": 2, "multi_node": map[string]interface{}{"env": map[string]string{"LD_PRELOAD": "x"}}}, `multi_node.env key "LD_PRELOAD"`},
		{"short timeout", map[string]interface{}{"nodes": 2, "multi_node": map[string]interface{}{"timeout": "1s"}}, "multi_node.timeout"},
		// Refused at validate, before a GPU instance runs (today found after N instances ran,
		// or silently changed).
		{"fractional nodes", map[string]interface{}{"nodes": 1.5}, "'nodes'"},
		{"fractional ranks", map[string]interface{}{"nodes": 2, "multi_node": map[string]interface{}{"ranks_per_node": 7.5}}, "ranks_per_node"},
		{"debug file", map[string]interface{}{"nodes": 2, "multi_node": map[string]interface{}{"env": map[string]string{"NCCL_DEBUG_FILE": "/tmp/x"}}}, "multi_node.env key NCCL_DEBUG_FILE"},
		{"debug subsystems", map[string]interface{}{"nodes": 2, "multi_node": map[string]interface{}{"env": map[string]string{"NCCL_DEBUG_SUBSYS": "INIT"}}}, "multi_node.env key NCCL_DEBUG_SUBSYS"},
		{"absurd floor", map[string]interface{}{"nodes": 2, "multi_node": map[string]interface{}{"busbw_floor_gbps": 1e9}}, "multi_node.busbw_floor_gbps"},
		{"absurd efa count", map[string]interface{}{"efa": "1000"}, `efa = "1000"`},
		{"public DNS of an EFA launch", map[string]interface{}{"nodes": 2, "ssh_interface": "public_dns"}, `ssh_interface = "public_dns" with efa = "all"`},
		{"public DNS of 8 EFA", map[string]interface{}{"efa": "8", "ssh_interface": "public_dns"}, `ssh_interface = "public_dns" with efa = 8`},
		{"public IP without the Elastic IP", map[string]interface{}{"nodes": 2, "ssh_interface": "public_ip", "temporary_elastic_ip": false}, `temporary_elastic_ip = false with ssh_interface = "public_ip"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := configure(t, tc.raw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
	p, err := configure(t, map[string]interface{}{"nodes": 2, "multi_node": map[string]interface{}{"timeout": "5m", "busbw_floor_gbps": 400}})
	if err != nil {
		t.Fatal(err)
	}
	c := &p.config
	m, err := c.multiNode().Resolved()
	if err != nil || !c.TemporaryPlacementGroup || !m.On() || m.Timeout != 5*time.Minute || m.BusBWFloorGBps != 400 || m.MaxBytes != "2G" {
		t.Errorf("nodes = 2: temporary placement group %v, test %+v %v", c.TemporaryPlacementGroup, m, err)
	}
	p, err = configure(t, map[string]interface{}{"nodes": 2, "placement_group": "ml-cluster"})
	if err != nil || p.config.TemporaryPlacementGroup {
		t.Errorf("an existing placement group: %v, temporary %v", err, p.config.TemporaryPlacementGroup)
	}
	p, err = configure(t, map[string]interface{}{})
	if err != nil || p.config.Nodes != 1 || p.config.TemporaryPlacementGroup {
		t.Errorf("default: nodes %d, temporary placement group %v (%v)", p.config.Nodes, p.config.TemporaryPlacementGroup, err)
	}
}

// multi_node.env values that can be secret are kept out of the UI, the logs and the reports,
// as the provisioner keeps nccl.env's; the verdict words in it are not.
func TestMultiNodeEnvSecrets(t *testing.T) {
	const token = "ghp_0123456789abcdefghijABCDEFGHIJ"
	p, err := configure(t, map[string]interface{}{"nodes": 2, "access_key": "AKIAFAKEPPTEST000000", "secret_key": "fake-secret-key-0123456789",
		"multi_node": map[string]interface{}{"env": map[string]string{
			"FI_EFA_AUTH_KEY":  "s3cr3t-value",
			"OFI_NCCL_PROXY":   "https://user:" + token + "@proxy.example:3128",
			"NCCL_ALGO":        "Ring,Tree",
			"FI_PROVIDER_PATH": "/opt/amazon/efa/lib/libfabric",
		}}})
	if err != nil {
		t.Fatal(err)
	}
	secrets := p.config.Secrets()
	for _, want := range []string{"fake-secret-key-0123456789", "s3cr3t-value", token} {
		if !slices.Contains(secrets, want) {
			t.Errorf("%q is not a secret: %q", want, secrets)
		}
	}
	for _, not := range []string{"Ring,Tree", "/opt/amazon/efa/lib/libfabric"} {
		if slices.Contains(secrets, not) {
			t.Errorf("%q registered as a secret: it would blank the same words in verdicts", not)
		}
	}
	var out bytes.Buffer
	ui := secretfilter.New(secrets...).UI(&packersdk.BasicUi{Reader: new(bytes.Buffer), Writer: &out, ErrorWriter: &out})
	ui.Say("mpirun -x OFI_NCCL_PROXY=https://user:" + token + "@proxy.example:3128")
	if strings.Contains(out.String(), token) || !strings.Contains(out.String(), "mpirun -x OFI_NCCL_PROXY") {
		t.Errorf("the UI line: %q", out.String())
	}
	// The reports of every node's verification and of the test across nodes are redacted.
	if o := p.config.verifyOptions(&launch.Instance{}, target{region: "us-east-1"}, "p5.48xlarge", bom.BOM{}); !slices.Contains(o.Secrets, token) {
		t.Errorf("the verification's reports are not redacted of %q: %q", token, o.Secrets)
	}
}

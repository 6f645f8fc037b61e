package checks

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// The GB200 fixtures are derived from shared/docs/grace-blackwell.md 1.4 (see their .source
// files in internal/parse/nvlink/testdata).
const (
	gb200Healthy      = "derived-query-4xGB200-570.172.08-mnnvl-healthy.txt"
	gb200Insufficient = "derived-query-4xGB200-570.172.08-insufficient-resources.txt"
	gb200Pending      = "derived-query-4xGB200-570.172.08-in-progress-not-started.txt"
	gb200NotSupported = "derived-query-4xGB200-570.172.08-not-supported.txt"
	gb200Unhealthy    = "derived-query-4xGB200-570.172.08-health-unhealthy.txt"
)

func fabricHost(fabric facts.Fact[[]facts.NVLinkFabric]) facts.Run {
	return facts.Run{Host: facts.Host{Health: facts.Health{Fabric: fabric}}}
}

func TestNVLinkFabric(t *testing.T) {
	fix := func(name string) facts.Fact[[]facts.NVLinkFabric] {
		return fabricFact(readFixture(t, nvlinkFixtures+name))
	}
	healthyText := readFixture(t, nvlinkFixtures+gb200Healthy)
	gb200 := withPCI(profiled(t, "p6e-gb200.36xlarge"), pciFixture(t, "p6e-gb200-like.txt"))
	unprofiledGB200 := withPCI(Target{InstanceType: "p6e-gb300.36xlarge"}, pciFixture(t, "p6e-gb200-like.txt"))
	p5 := withPCI(profiled(t, "p5.48xlarge"), pciFixture(t, "p5-48xlarge-like.txt"))
	p6 := withPCI(profiled(t, "p6-b200.48xlarge"), pciFixture(t, "p6-b200-like.txt"))
	on, off := true, false
	forced := p5
	forced.Expect.MultiNodeNVLink = &on
	optedOut := gb200
	optedOut.Expect.MultiNodeNVLink = &off
	zeroH100 := fix("query-1xH100-560.35.03-fabric-clique-health.txt")
	for _, tt := range []struct {
		name     string
		target   Target
		fabric   facts.Fact[[]facts.NVLinkFabric]
		status   result.Status
		mentions []string
	}{
		{"healthy GB200 tray", gb200, fix(gb200Healthy), result.Pass, nil},
		{"healthy GB200 without a profile, known from its PCI bus", unprofiledGB200, fix(gb200Healthy), result.Pass, nil},
		{"Insufficient Resources", gb200, fix(gb200Insufficient), result.Fail, []string{"GPUs 0, 1, 2, 3: State Completed with Status \"Insufficient Resources\"", "fabric error"}},
		{"In Progress and Not Started", gb200, fix(gb200Pending), result.Fail, []string{"GPU 1 (00000009:01:00.0): State In Progress", "stuck", "GPU 2 (00000018:01:00.0): State Not Started", "never started"}},
		{"Not Supported", gb200, fix(gb200NotSupported), result.Fail, []string{"Not Supported", "no fabric"}},
		{"Health Summary Unhealthy, and a clique that differs", gb200, fix(gb200Unhealthy), result.Fail, []string{"GPU 1", "Unhealthy", "different cliques", "4026 on GPUs 0, 2, 3; 2 on GPU 1"}},
		{"Completed/Success with a zero clique on a GB200", gb200, fabricFact(strings.ReplaceAll(strings.ReplaceAll(healthyText,
			"4026", "0"), "9c6f5af3-5b2e-4c1d-a8f7-31e0b6d4c2a9", "00000000-0000-0000-0000-000000000000")), result.Fail, []string{"GPUs 0, 1, 2, 3: CliqueId 0", "GPUs 0, 1, 2, 3: ClusterUUID 00000000", "no multi-node NVLink domain"}},
		{"two NVLink domains", gb200, fabricFact(strings.Replace(healthyText, "9c6f5af3-5b2e-4c1d-a8f7-31e0b6d4c2a9", "1b2c3d4e-5b2e-4c1d-a8f7-31e0b6d4c2a9", 1)), result.Fail, []string{"different NVLink domains"}},
		{"Limited Capacity warns", gb200, fabricFact(strings.Replace(healthyText, "Summary                       : Healthy", "Summary                       : Limited Capacity", 1)), result.Warn, []string{"Limited Capacity"}},
		{"3 of 4 GPUs listed", gb200, fabricFact(strings.Replace(strings.Replace(healthyText, "Attached GPUs                             : 4", "Attached GPUs                             : 3", 1), "GPU 00000019:01:00.0", "Removed", 1)), result.Fail, []string{"3 of 4 GPUs"}},
		{"fabric unreadable fails closed", gb200, facts.Unread[[]facts.NVLinkFabric]("nvidia-smi -q: exit 9", "NVIDIA-SMI has failed"), result.Fail, []string{"could not be read", "exit 9"}},
		{"driver before R550: no clique printed", gb200, fix("query-8xH100-535.183.01-fabric-completed-no-clique.txt"), result.Fail, []string{"not printed"}},
		// The non-zero rule never applies to single-node NVSwitch hosts: zero is healthy there.
		{"H100 with zero clique: not applicable", p5, zeroH100, result.Skip, []string{"not applicable"}},
		{"B200 with zero clique: not applicable", p6, fabricFact(fabricText(8, "Blackwell", registered)), result.Skip, []string{"not applicable"}},
		{"B200 fabric unreadable: not applicable either", p6, facts.Unread[[]facts.NVLinkFabric]("timed out", ""), result.Skip, nil},
		{"expect.multi_node_nvlink = false on a GB200", optedOut, fix(gb200Insufficient), result.Skip, []string{"setting"}},
		{"expect.multi_node_nvlink = true judges an H100's zero clique", forced, zeroH100, result.Fail, []string{"CliqueId 0"}},
		{"nothing says", Target{PCIProblem: "no sysfs"}, fix(gb200Healthy), result.Warn, []string{"expect.multi_node_nvlink", "no sysfs"}},
	} {
		c := judgeNVLinkFabric(fabricHost(tt.fabric), tt.target)
		if c.Status != tt.status {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
			continue
		}
		for _, m := range tt.mentions {
			if !strings.Contains(c.Message, m) {
				t.Errorf("%s: message lacks %q: %s", tt.name, m, c.Message)
			}
		}
		if c.Status == result.Pass && (c.Basis == "" || !strings.Contains(c.Actual, "CliqueId 4026")) {
			t.Errorf("%s: pass without basis or clique: %+v", tt.name, c)
		}
	}
}

// A GB200 tray runs no Fabric Manager (grace-blackwell.md 1.3): the fabricmanager check does
// not fail it, with or without a profile, while an HGX H100 without it still fails.
func TestFabricManagerNotRequiredOnGB200(t *testing.T) {
	gbBus := pciFixture(t, "p6e-gb200-like.txt")
	missing := facts.Read("inactive", "inactive") // the unit is not installed
	for _, tt := range []struct {
		name   string
		target Target
		fm     facts.Fact[string]
		status result.Status
	}{
		{"profiled tray, unit missing", withPCI(profiled(t, "p6e-gb200.36xlarge"), gbBus), missing, result.Skip},
		{"unprofiled tray, unit missing", withPCI(Target{InstanceType: "p6e-gb300.36xlarge"}, gbBus), missing, result.Skip},
		{"tray, unit unreadable", withPCI(profiled(t, "p6e-gb200.36xlarge"), gbBus), facts.Unread[string]("systemctl: timed out", ""), result.Skip},
		{"p5 without Fabric Manager still fails", withPCI(profiled(t, "p5.48xlarge"), pciFixture(t, "p5-48xlarge-like.txt")), missing, result.Fail},
	} {
		c := judgeFabricManager(facts.Run{Host: facts.Host{FabricManager: tt.fm}}, tt.target)
		if c.Status != tt.status {
			t.Errorf("%s: %s: %s", tt.name, c.Status, c.Message)
		}
	}
}

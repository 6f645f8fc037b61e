package checks

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// EFA traffic that stalls on a launch the run made names the security group its arrival
// depends on (without the rules to and from itself, EFA traffic never arrives and the tools
// only wait); other failures, and hosts whose launch the run did not make, do not.
func TestEFATrafficStallNamesTheLaunchsGroup(t *testing.T) {
	devs := []string{"rdmap79s0", "rdmap80s0"}
	hung := facts.Run{EFATraffic: facts.EFATraffic{Tested: devs, Devices: []facts.Fact[facts.PingPong]{
		facts.Unread[facts.PingPong]("rdmap79s0: the ping-pong hung and was stopped", ""),
		facts.Unread[facts.PingPong]("rdmap80s0: the ping-pong hung and was stopped", ""),
	}}}
	errored := facts.Run{EFATraffic: facts.EFATraffic{Tested: devs, Devices: []facts.Fact[facts.PingPong]{
		facts.Unread[facts.PingPong]("rdmap79s0: fi_av_insert(): ret=-22 (Invalid argument)", ""),
		facts.Unread[facts.PingPong]("rdmap80s0: fi_av_insert(): ret=-22 (Invalid argument)", ""),
	}}}
	launched := Target{Launch: Launch{Known: true, EFA: 2, Setting: `efa = "all"`, SecurityGroups: []string{"sg-0a1b"}}}
	for _, tc := range []struct {
		name  string
		run   facts.Run
		tg    Target
		named bool
	}{
		{"stalled, launched by the run", hung, launched, true},
		{"stalled, a bake's host", hung, Target{}, false},
		{"failed otherwise", errored, launched, false},
	} {
		c := judgeEFATraffic(tc.run, tc.tg)
		if c.Status != result.Fail {
			t.Errorf("%s: %s %q, want fail", tc.name, c.Status, c.Message)
		}
		if got := strings.Contains(c.Message, "sg-0a1b") && strings.Contains(c.Message, "all inbound and all outbound traffic to and from itself"); got != tc.named {
			t.Errorf("%s: the group named %v, want %v: %q", tc.name, got, tc.named, c.Message)
		}
	}
}

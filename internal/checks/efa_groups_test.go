package checks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/ibport"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/rdmastat"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
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

// 32 EFA devices of a p5.48xlarge (the real fabtests table on every device that passes): one
// device hanging while the other 31 carried traffic through the same security group names
// that device (its port state, the error counters that grew on it), never the group; all 32
// hanging names the group's self rules.
func TestEFATrafficHangBlamesTheRightCause(t *testing.T) {
	portText := fixture.Read(t, "ibport-derived-p5-rdmap98s0-down.txt")
	ports, err := ibport.Parse(portText)
	if err != nil {
		t.Fatal(err)
	}
	var devs []string
	for _, p := range ports {
		devs = append(devs, p.Device)
	}
	counters := func(grow map[string]int) facts.Fact[[]rdmastat.Link] {
		var b strings.Builder
		for _, d := range devs {
			fmt.Fprintf(&b, "link %s/1 tx_bytes 100 rx_bytes 100 rx_drops 0 retrans_timeout_events %d unresponsive_remote_events 0\n", d, grow[d])
		}
		l, err := rdmastat.Parse(b.String())
		if err != nil {
			t.Fatal(err)
		}
		return facts.Read(l, b.String())
	}
	hang := func(ds ...string) map[string]struct {
		out string
		rc  int
	} {
		m := map[string]struct {
			out string
			rc  int
		}{}
		for _, d := range ds {
			m[d] = struct {
				out string
				rc  int
			}{"", 124}
		}
		return m
	}
	launched := Target{Launch: Launch{Known: true, EFA: 32, Setting: `efa = "all"`, SecurityGroups: []string{"sg-0efa"}},
		Checks: settings.Checks{Function: settings.Function{EFATraffic: settings.EFATraffic{MinBandwidthMBps: 1000}}}}
	upPortsFact := upPorts(t, devs)
	tests := []struct {
		name         string
		hung         []string
		ports        facts.Fact[[]ibport.Port]
		grow         map[string]int
		tg           Target
		says, absent []string
	}{
		{name: "one of 32 hung, its port down and retransmissions timing out", hung: []string{"rdmap98s0"},
			ports: facts.Read(ports, portText), grow: map[string]int{"rdmap98s0": 7}, tg: launched,
			says: []string{"rdmap98s0: the ping-pong hung", "1 of 32 devices hung while 31 carried traffic through the same security groups, so the groups are not the cause",
				`rdmap98s0: port 1: DOWN, 3: Disabled (not up)`, "retrans_timeout_events +7"},
			absent: []string{"sg-0efa", "self-referencing"}},
		{name: "one of 32 hung, its port up, no counter grew", hung: []string{"rdmap131s0"}, ports: upPortsFact, tg: launched,
			says:   []string{"31 carried traffic", "rdmap131s0: port 4: ACTIVE, 5: LinkUp (up), no rdma statistic error counter grew"},
			absent: []string{"sg-0efa"}},
		{name: "all 32 hung: the group of the launch", hung: devs, ports: upPortsFact, tg: launched,
			says:   []string{"all 32 devices hung", "sg-0efa", "all inbound and all outbound traffic to and from itself"},
			absent: []string{"not the cause"}},
		{name: "all 32 hung on a host the run did not launch: the group, unnamed", hung: devs, ports: upPortsFact,
			tg:     Target{Checks: launched.Checks},
			says:   []string{"all 32 devices hung", "the security group of the instance's EFA interfaces allows all inbound and all outbound traffic to and from itself"},
			absent: []string{"not the cause"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pp, err := probe.ParseEFATraffic(efaOutput(t, devs, hang(tc.hung...)))
			if err != nil {
				t.Fatal(err)
			}
			run := facts.Run{Host: facts.Host{RDMAPorts: tc.ports},
				EFATraffic: facts.EFATraffic{Tested: devs, Devices: pp, StatsBefore: counters(nil), StatsAfter: counters(tc.grow)}}
			c := judgeEFATraffic(run, tc.tg)
			if c.Status != result.Fail {
				t.Errorf("status %s, want fail: %s", c.Status, c.Message)
			}
			for _, s := range tc.says {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message lacks %q: %s", s, c.Message)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(c.Message, s) {
					t.Errorf("message has %q: %s", s, c.Message)
				}
			}
		})
	}
}

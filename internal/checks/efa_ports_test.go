package checks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/ibport"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// upPorts is the port listing of devs, every port "4: ACTIVE" / "5: LinkUp", read through the
// parser.
func upPorts(t *testing.T, devs []string) facts.Fact[[]ibport.Port] {
	t.Helper()
	var b strings.Builder
	for _, d := range devs {
		fmt.Fprintf(&b, "%s state 4: ACTIVE\n%s phys_state 5: LinkUp\n", d, d)
	}
	ports, err := ibport.Parse(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return facts.Read(ports, "")
}

// A p5.48xlarge with its 32 EFA devices all present (PCI = /sys/class/infiniband = fi_info):
// efa-devices passes only when every device's port is ACTIVE with its link up; a port DOWN,
// INIT or still Polling fails, naming the device and what sysfs read.
func TestEFADevicesPortState(t *testing.T) {
	p5, _ := profile.Lookup("p5.48xlarge")
	host := func(t *testing.T, file string) (facts.Host, []string) {
		t.Helper()
		ports, err := ibport.Parse(fixture.Read(t, file))
		if err != nil {
			t.Fatal(err)
		}
		var devs []string
		var pciLines strings.Builder
		for _, p := range ports {
			devs = append(devs, p.Device)
			pciLines.WriteString("0000:82:00.0 0x1d0f 0xefa2 0x020000\n")
		}
		inv, err := pciParse(strings.Repeat("0000:51:00.0 0x10de 0x2330 0x030200\n", 8) + pciLines.String())
		if err != nil {
			t.Fatal(err)
		}
		h := facts.Host{PCI: facts.Read(inv, ""), RDMA: facts.Read(facts.RDMADevices{EFA: devs}, ""),
			RDMAPorts: facts.Read(ports, "[host.infiniband_ports: exit 0]"), Domains: facts.Read(devs, "")}
		return h, devs
	}
	tests := []struct {
		name   string
		file   string
		change func(*facts.Host)
		want   result.Status
		says   []string
		absent []string
	}{
		{name: "32 ports ACTIVE / LinkUp", file: "ibport-derived-p5-32efa-healthy.txt", want: result.Pass},
		{name: "one port DOWN", file: "ibport-derived-p5-rdmap98s0-down.txt", want: result.Fail,
			says: []string{`rdmap98s0: port 1 is "1: DOWN", physical state "3: Disabled"`, "cannot carry traffic"}, absent: []string{"rdmap97s0", "rdmap99s0"}},
		{name: "one port INIT, link Polling", file: "ibport-derived-p5-rdmap131s0-init-polling.txt", want: result.Fail,
			says: []string{`rdmap131s0: port 1 is "2: INIT", physical state "2: Polling"`}, absent: []string{"rdmap130s0"}},
		{name: "ACTIVE but the link still Polling", file: "ibport-derived-p5-32efa-healthy.txt", want: result.Fail,
			change: func(h *facts.Host) { h.RDMAPorts.Value[5].PhysState = &ibport.Attr{Code: 2, Name: "Polling"} },
			says:   []string{`rdmap97s0: port 1 is "4: ACTIVE", physical state "2: Polling"`}},
		{name: "two ports DOWN are named together", file: "ibport-derived-p5-rdmap98s0-down.txt", want: result.Fail,
			change: func(h *facts.Host) {
				h.RDMAPorts.Value[0].State = &ibport.Attr{Code: 1, Name: "DOWN"}
				h.RDMAPorts.Value[0].PhysState = &ibport.Attr{Code: 3, Name: "Disabled"}
			},
			says: []string{`rdmap79s0, rdmap98s0: port 1 is "1: DOWN"`}},
		{name: "the listing unreadable: fail closed", file: "ibport-derived-p5-32efa-healthy.txt", want: result.Fail,
			change: func(h *facts.Host) { h.RDMAPorts = facts.Unread[[]ibport.Port]("host.infiniband_ports: timed out", "") },
			says:   []string{"port state", "could not be read", "timed out"}},
		{name: "a device missing from the listing: fail closed", file: "ibport-derived-p5-32efa-healthy.txt", want: result.Fail,
			change: func(h *facts.Host) { h.RDMAPorts.Value = h.RDMAPorts.Value[1:] },
			says:   []string{"rdmap79s0: port state not read"}},
		{name: "one port unreadable: fail closed", file: "ibport-derived-p5-32efa-healthy.txt", want: result.Fail,
			change: func(h *facts.Host) { h.RDMAPorts.Value[3].Problem = "ports/1/state unreadable: Input/output error" },
			says:   []string{"rdmap82s0: port state unreadable: ports/1/state unreadable: Input/output error"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, devs := host(t, tc.file)
			if len(devs) != 32 {
				t.Fatalf("%d devices", len(devs))
			}
			if tc.change != nil {
				tc.change(&h)
			}
			inv := h.PCI.Value
			c := judgeEFADevices(facts.Run{Host: h}, Target{InstanceType: "p5.48xlarge", Profile: &p5, PCI: &inv})
			if c.Status != tc.want {
				t.Errorf("status %s, want %s: %s", c.Status, tc.want, c.Message)
			}
			for _, s := range tc.says {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message lacks %q: %s", s, c.Message)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(c.Message, s) {
					t.Errorf("message names %q: %s", s, c.Message)
				}
			}
		})
	}
}

package simfleet

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/imexctl"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// TestIMEXDomainAcrossInstances: two GB200 trays of a fleet form an IMEX domain as the plugin
// will form it (every tray's private address in each nodes_config.cfg, nvidia-imex restarted
// as root): each tray's daemon stand-in listens on its own private address only (knob
// private-ip, written by the fleet), each tray's nvidia-imex-ctl reports the domain UP, and a
// terminated tray's listener is gone with it (teardown kills every process of the host).
func TestIMEXDomainAcrossInstances(t *testing.T) {
	f := hostFleet(t)
	ctx := context.Background()
	key := newKeyPair(t)
	const idA, idB = "i-0dddddddddddddd01", "i-0dddddddddddddd02"
	for _, m := range []awsfake.MachineSpec{
		{InstanceID: idA, InstanceType: "p6e-gb200.36xlarge", Address: addrA, AuthorizedKey: key.line, Network: awsfake.MachineNetwork{EFACards: []int{0, 1, 2, 3}, EFATraffic: true}},
		{InstanceID: idB, InstanceType: "p6e-gb200.36xlarge", Address: addrB, AuthorizedKey: key.line, Network: awsfake.MachineNetwork{EFACards: []int{0, 1, 2, 3}, EFATraffic: true}},
	} {
		if err := f.Start(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []string{addrA, addrB} {
		key.run(t, a, "sudo mkdir -p /etc/nvidia-imex && printf '%s\\n' "+addrA+" "+addrB+" | sudo tee /etc/nvidia-imex/nodes_config.cfg >/dev/null && sudo systemctl restart nvidia-imex")
	}
	view := func(a string) imexctl.Domain {
		t.Helper()
		d, err := imexctl.ParseJSON(key.run(t, a, "/usr/bin/nvidia-imex-ctl -N -j"))
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		return d
	}
	for _, a := range []string{addrA, addrB} {
		if d := view(a); !d.Healthy() || len(d.Nodes) != 2 || d.Nodes[0].Host != addrA || d.Nodes[1].Host != addrB {
			t.Errorf("%s's view: %v %+v", a, d.Problems(), d)
		}
	}
	// Each daemon on its own address: nothing answers on another loopback address.
	for _, a := range []string{addrA, addrB} {
		c, err := net.DialTimeout("tcp", a+":50000", time.Second)
		if err != nil {
			t.Errorf("no IMEX daemon on %s:50000: %v", a, err)
			continue
		}
		c.Close()
	}
	if c, err := net.DialTimeout("tcp", addrNone+":50000", time.Second); err == nil {
		c.Close()
		t.Errorf("something answers on %s:50000: a daemon bound more than its own address", addrNone)
	}
	// Tray A terminated: its listener is gone, tray B sees it UNAVAILABLE.
	if err := f.Terminate(ctx, idA); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addrA+":50000", time.Second); err == nil {
		c.Close()
		t.Errorf("tray A's IMEX listener outlived its instance")
	}
	d := view(addrB)
	if d.Healthy() || d.Nodes[0].Status != imexctl.NodeUnavailable || !strings.Contains(strings.Join(d.Problems(), "; "), "NEVER_CONNECTED") {
		t.Errorf("tray B's view with tray A gone: %v %+v", d.Problems(), d)
	}
	if err := f.Terminate(ctx, idB); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addrB+":50000", time.Second); err == nil {
		c.Close()
		t.Errorf("tray B's IMEX listener outlived its instance")
	}
}

package checks

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/imexctl"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// trayView is one tray's view of the domain of n trays at 10.0.1.5, 10.0.1.6, ...: every node
// READY and connected, except the nodes in down (UNAVAILABLE, NEVER_CONNECTED to and from them);
// the domain UP when down is empty, else DEGRADED.
func trayView(n int, down ...int) imexctl.Domain {
	isDown := map[int]bool{}
	for _, k := range down {
		isDown[k] = true
	}
	d := imexctl.Domain{Status: imexctl.DomainUp}
	if len(down) > 0 {
		d.Status = imexctl.DomainDegraded
	}
	for i := range n {
		node := imexctl.Node{Index: i, Host: fmt.Sprintf("10.0.1.%d", 5+i), Status: imexctl.NodeReady, Version: "595.91.07"}
		if isDown[i] {
			node.Status = imexctl.NodeUnavailable
		}
		for k := range n {
			st := imexctl.ConnConnected
			if isDown[i] || isDown[k] {
				st = imexctl.ConnNeverConnected
			}
			node.Connections = append(node.Connections, imexctl.Connection{To: k, Host: fmt.Sprintf("10.0.1.%d", 5+k), Status: st})
		}
		d.Nodes = append(d.Nodes, node)
	}
	return d
}

// trays is a verification of n GB200 trays whose IMEX domain formed with every view healthy.
func trays(n int) facts.MultiNodeRun {
	mn := facts.MultiNodeRun{IMEXDomain: facts.IMEXDomainRun{Ran: true, Bound: time.Minute, Waited: 4 * time.Second}}
	for i := range n {
		addr := fmt.Sprintf("10.0.1.%d", 5+i)
		mn.Nodes = append(mn.Nodes, facts.MultiNodeNode{InstanceID: fmt.Sprintf("i-0tray%d", i+1), Address: addr})
		mn.IMEXDomain.Addresses = append(mn.IMEXDomain.Addresses, addr)
		mn.IMEXDomain.Nodes = append(mn.IMEXDomain.Nodes, facts.IMEXDomainNode{Active: facts.Read("active", ""), View: facts.Read(trayView(n), "")})
	}
	return mn
}

func TestIMEXDomainAcrossTrays(t *testing.T) {
	const gb = "p6e-gb200.36xlarge"
	failed := func(mn *facts.MultiNodeRun, k int) {
		n := &mn.IMEXDomain.Nodes[k]
		n.RestartExit, n.RestartOutput = 1, "Job for nvidia-imex.service failed because the control process exited with error code."
		n.Active, n.View = facts.Read("failed", ""), facts.Unread[imexctl.Domain]("nvidia-imex-ctl not run: nvidia-imex is not active", "")
	}
	for _, tc := range []struct {
		name   string
		typ    string
		mode   settings.IMEX
		tweak  func(*facts.MultiNodeRun)
		status result.Status
		says   []string
		never  string // a substring the message must not hold
	}{
		{"healthy pair", gb, settings.IMEXUnset, nil, result.Pass, []string{"10.0.1.5, 10.0.1.6 UP"}, ""},
		{"healthy 9 trays", gb, settings.IMEXHost, func(mn *facts.MultiNodeRun) { *mn = trays(9) }, result.Pass, []string{"10.0.1.13 UP"}, ""},
		{"tray 2's service failed", gb, settings.IMEXUnset, func(mn *facts.MultiNodeRun) {
			failed(mn, 1)
			mn.IMEXDomain.Nodes[0].View = facts.Read(trayView(2, 1), "")
		}, result.Fail, []string{"node 2 (i-0tray2, 10.0.1.6) never joined", "`systemctl restart nvidia-imex` exited 1", "its nvidia-imex failed", "node #1 (10.0.1.6) UNAVAILABLE"}, "node 1 (i-0tray1, 10.0.1.5) never"},
		{"a tray 3 of 3 nobody reaches", gb, settings.IMEXUnset, func(mn *facts.MultiNodeRun) {
			*mn = trays(3)
			for i := range mn.IMEXDomain.Nodes {
				mn.IMEXDomain.Nodes[i].View = facts.Read(trayView(3, 2), "")
			}
		}, result.Fail, []string{"node 3 (i-0tray3, 10.0.1.7) never joined"}, "node 1 (i-0tray1, 10.0.1.5) never"},
		{"a pair that cannot reach each other: neither named", gb, settings.IMEXUnset, func(mn *facts.MultiNodeRun) {
			v0, v1 := trayView(2, 1), trayView(2, 0)
			mn.IMEXDomain.Nodes[0].View, mn.IMEXDomain.Nodes[1].View = facts.Read(v0, ""), facts.Read(v1, "")
			mn.IMEXDomain.TimedOut = true
		}, result.Fail, []string{"the IMEX domain across the trays did not come up within 1m0s", "TCP 50000"}, "never joined"},
		{"a tray that read another list", gb, settings.IMEXUnset, func(mn *facts.MultiNodeRun) {
			v := trayView(2)
			v.Nodes[1].Host = "10.0.1.99"
			mn.IMEXDomain.Nodes[1].View = facts.Read(v, "")
		}, result.Fail, []string{"node #1 is 10.0.1.99, not 10.0.1.6"}, ""},
		{"a view unread", gb, settings.IMEXUnset, func(mn *facts.MultiNodeRun) {
			mn.IMEXDomain.Nodes[1].View = facts.Unread[imexctl.Domain]("nvidia-imex-ctl -N -j: not JSON", "")
		}, result.Fail, []string{"its view of the domain could not be read: nvidia-imex-ctl -N -j: not JSON"}, ""},
		{"a node not configured", gb, settings.IMEXUnset, func(mn *facts.MultiNodeRun) {
			mn.IMEXDomain.Nodes[0].Problem = "systemctl is not installed"
		}, result.Fail, []string{"node 1 (i-0tray1, 10.0.1.5) never joined", "could not be configured: systemctl is not installed"}, ""},
		{"bad node list", gb, settings.IMEXUnset, func(mn *facts.MultiNodeRun) { mn.IMEXDomain.Problem = `"x" is not an IPv4 address` }, result.Error, []string{"could not be brought up"}, ""},
		{"not brought up", gb, settings.IMEXUnset, func(mn *facts.MultiNodeRun) { mn.IMEXDomain = facts.IMEXDomainRun{} }, result.Error, []string{"was not brought up"}, ""},
		{"multi-node test not run", gb, settings.IMEXUnset, func(mn *facts.MultiNodeRun) { mn.NotRun = "node 2 failed its first boot" }, result.Skip, []string{"not run: node 2 failed"}, ""},
		{"multi-node test could not run", gb, settings.IMEXUnset, func(mn *facts.MultiNodeRun) { mn.Problem = "node 2: no answer" }, result.Error, []string{"could not run: node 2: no answer"}, ""},
		{"dra", gb, settings.IMEXDRA, nil, result.Warn, []string{`not judged: imex = "dra"`, `set imex = "host"`}, ""},
		{"off", gb, settings.IMEXOff, nil, result.Skip, []string{`imex = "off"`}, ""},
		{"p5: no NVLink across trays", "p5.48xlarge", settings.IMEXUnset, nil, result.Skip, []string{"not applicable"}, ""},
		{"unknown type", "p7-future.48xlarge", settings.IMEXUnset, nil, result.Warn, []string{"set expect.multi_node_nvlink"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mn := trays(2)
			if tc.tweak != nil {
				tc.tweak(&mn)
			}
			c := judgeIMEXAcrossTrays(facts.Run{MultiNode: mn}, gbTarget(tc.mode, tc.typ))
			if c.Status != tc.status {
				t.Errorf("status %s, want %s: %s", c.Status, tc.status, c.Message)
			}
			for _, s := range tc.says {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message does not say %q: %s", s, c.Message)
				}
			}
			if tc.never != "" && strings.Contains(c.Message, tc.never) {
				t.Errorf("message says %q: %s", tc.never, c.Message)
			}
		})
	}
}

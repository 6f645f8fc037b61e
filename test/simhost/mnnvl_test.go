package simhost_test

// The all-reduce across 2 simulated GB200 trays with NCCL_MNNVL_ENABLE (issue 35): the
// simulated all_reduce_perf connects the trays over P2P/MNNVL when every tray's fabric is
// healthy and in the same clique, and otherwise goes on over EFA as recent NCCL does
// (src/mnnvl.cc returns without MNNVL, no error); NCCL refuses (its fabric handle self-test
// fails) when a tray's IMEX domain is not UP, and knob nccl-mnnvl-refused forces or prevents
// that refusal.

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMultiNodeMNNVL(t *testing.T) {
	const gb200 = "p6e-gb200.36xlarge"
	// Every tray's IMEX domain UP (the canned healthy domain; TestMultiNodeMNNVLNeedsIMEX runs
	// the daemons).
	healthy := map[string]string{"efa-cards": allCards(4), "imex-ctl": "healthy"}
	with := func(k, v string) map[string]string {
		m := map[string]string{"efa-cards": allCards(4), "imex-ctl": "healthy"}
		m[k] = v
		return m
	}
	for _, tc := range []struct {
		name      string
		second    map[string]string
		product2  string
		env       []string
		wantMNNVL bool
		wantCode  int
		says      string
	}{
		{name: "healthy trays, MNNVL required", second: healthy, product2: gb200, env: []string{"NCCL_MNNVL_ENABLE=1"}, wantMNNVL: true},
		{name: "healthy trays, NCCL's default takes MNNVL", second: healthy, product2: gb200, wantMNNVL: true},
		{name: "MNNVL off: over EFA", second: healthy, product2: gb200, env: []string{"NCCL_MNNVL_ENABLE=0"}},
		{name: "tray 2 in another clique: falls back to EFA", second: with("fabric-clique", "all: 4027"), product2: gb200, env: []string{"NCCL_MNNVL_ENABLE=1"}},
		{name: "tray 2 in another UltraServer: falls back to EFA", second: with("fabric-cluster-uuid", "all: 1b2c3d4e-0000-4000-8000-000000000001"), product2: gb200, env: []string{"NCCL_MNNVL_ENABLE=1"}},
		{name: "tray 2's fabric Insufficient Resources: falls back to EFA", second: with("fabric-status", "all: Insufficient Resources"), product2: gb200, env: []string{"NCCL_MNNVL_ENABLE=1"}},
		{name: "tray 2's GPU 3 never registered: falls back", second: with("fabric-state", "3: In Progress"), product2: gb200, env: []string{"NCCL_MNNVL_ENABLE=1"}},
		{name: "IMEX refuses the fabric handles", second: with("nccl-mnnvl-refused", "1"), product2: gb200, env: []string{"NCCL_MNNVL_ENABLE=1"}, wantCode: 1,
			says: "is available but not working on this system"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := healthy
			if tc.says != "" {
				first = tc.second
			}
			nodes := []mpiNode{newMPINode(t, "10.1.0.5", gb200, first), newMPINode(t, "10.1.0.6", tc.product2, tc.second)}
			r := runMPIWith(t, nodes, []string{"10.1.0.5", "10.1.0.6"}, 30*time.Second, 4, tc.env...)
			if r.code != tc.wantCode {
				t.Fatalf("exit %d, want %d:\n%s", r.code, tc.wantCode, r.out)
			}
			if tc.says != "" {
				if !strings.Contains(r.out, tc.says) {
					t.Errorf("output lacks %q:\n%s", tc.says, r.out)
				}
				return
			}
			res := parseRun(t, r)
			got := slices.Contains(res.Transport.DataTransports, "P2P/MNNVL")
			if got != tc.wantMNNVL {
				t.Errorf("P2P/MNNVL = %v, want %v (transports %q)", got, tc.wantMNNVL, res.Transport.DataTransports)
			}
			for _, n := range nodes {
				h := hostByName(t, res, n.name)
				if h.NetPaths == tc.wantMNNVL {
					t.Errorf("%s: connections over the network = %v with MNNVL %v", n.name, h.NetPaths, tc.wantMNNVL)
				}
				if len(h.Ranks) != 4 {
					t.Errorf("%s: ranks %v", n.name, h.Ranks)
				}
			}
			if tc.wantMNNVL != strings.Contains(r.out, "NCCL INFO MNNVL 1 cliqueId 4026 cliqueSize 8") {
				t.Errorf("the MNNVL init line does not match MNNVL %v:\n%s", tc.wantMNNVL, r.out)
			}
		})
	}
}

// NCCL over multi-node NVLink needs every tray's IMEX domain UP: the trays of a fleet run the
// IMEX daemon's stand-in (their private addresses in each nodes_config.cfg, the unit restarted)
// and the all-reduce goes over P2P/MNNVL; with a tray's IMEX stopped, or never configured, NCCL
// refuses (exit 1, the WARN naming nvidia-imex-ctl -N), unless knob nccl-mnnvl-refused=0.
func TestMultiNodeMNNVLNeedsIMEX(t *testing.T) {
	const gb200, sc = "p6e-gb200.36xlarge", "root/usr/bin/systemctl"
	const refusal = "NCCL WARN MNNVL (cliqueSize 8) is available but not working on this system. Check the IMEX configuration (nvidia-imex-ctl -N)."
	tray := func(addr, ip string) mpiNode {
		n := newMPINode(t, addr, gb200, map[string]string{"efa-cards": allCards(4), "service-nvidia-imex": "inactive", "private-ip": ip})
		n.h.stopIMEXAtCleanup()
		n.h.writeFile("etc/nvidia-imex/config.cfg", "SERVER_PORT=50918\n")
		n.h.writeFile("etc/nvidia-imex/nodes_config.cfg", "127.0.9.5\n127.0.9.6\n")
		return n
	}
	nodes := []mpiNode{tray("10.1.0.5", "127.0.9.5"), tray("10.1.0.6", "127.0.9.6")}
	run := func(name string, wantMNNVL bool) {
		t.Helper()
		r := runMPIWith(t, nodes, []string{"10.1.0.5", "10.1.0.6"}, 30*time.Second, 4, "NCCL_MNNVL_ENABLE=1")
		if !wantMNNVL {
			if r.code != 1 || !strings.Contains(r.out, refusal) {
				t.Errorf("%s: exit %d, want 1 with %q:\n%s", name, r.code, refusal, r.out)
			}
			return
		}
		if r.code != 0 {
			t.Fatalf("%s: exit %d:\n%s", name, r.code, r.out)
		}
		res := parseRun(t, r)
		if !slices.Contains(res.Transport.DataTransports, "P2P/MNNVL") || strings.Contains(r.out, "NCCL WARN") {
			t.Errorf("%s: transports %q:\n%s", name, res.Transport.DataTransports, r.out)
		}
	}
	// Nothing configured yet: IMEX does not run.
	run("IMEX not started", false)
	for _, n := range nodes {
		n.h.run(nil, sc, "restart", "nvidia-imex")
	}
	for _, n := range nodes {
		if d := n.h.imexView(); !d.Healthy() || len(d.Nodes) != 2 {
			t.Fatalf("%s's IMEX view: %v", n.name, d.Problems())
		}
	}
	run("both trays' IMEX UP", true)
	// Tray 2's IMEX stopped: neither domain is UP (tray 1 sees tray 2 UNAVAILABLE).
	nodes[1].h.run(nil, sc, "stop", "nvidia-imex")
	run("tray 2's IMEX stopped", false)
	// The knob overrides the domain: 0 never refuses.
	for _, n := range nodes {
		n.h.knob("nccl-mnnvl-refused", "0")
	}
	run("knob nccl-mnnvl-refused=0", true)
}

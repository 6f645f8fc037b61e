package simhost_test

// The all-reduce across 2 simulated GB200 trays with NCCL_MNNVL_ENABLE (issue 35): the
// simulated all_reduce_perf connects the trays over P2P/MNNVL when every tray's fabric is
// healthy and in the same clique, and otherwise goes on over EFA as recent NCCL does
// (src/mnnvl.cc returns without MNNVL, no error); knob nccl-mnnvl-refused is NCCL's refusal
// when the fabric handles cannot be shared.

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMultiNodeMNNVL(t *testing.T) {
	const gb200 = "p6e-gb200.36xlarge"
	healthy := map[string]string{"efa-cards": allCards(4)}
	with := func(k, v string) map[string]string {
		m := map[string]string{"efa-cards": allCards(4)}
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

package nccltests

import (
	"slices"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

// TestHostsOfTwoNodeLog reads the real 2 × p4d.24xlarge log: each worker's eight ranks, the OFI
// plugin and GPUDirect RDMA on both, no socket.
func TestHostsOfTwoNodeLog(t *testing.T) {
	r, err := ParseString(fixture.Read(t, "p4d-2node-efa-nccl2.9.9-mpi-tagged.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.NRanks != 16 {
		t.Errorf("NRanks = %d, want 16", r.NRanks)
	}
	if len(r.Hosts) != 2 {
		t.Fatalf("Hosts = %+v, want the two workers", r.Hosts)
	}
	for i, want := range []string{"nccl-tests-efa-16-worker-0", "nccl-tests-efa-16-worker-1"} {
		h := r.Hosts[i]
		if h.Name != want {
			t.Errorf("host %d is %q, want %q", i, h.Name, want)
		}
		if len(h.Ranks) != 8 || !h.OFIPlugin || h.Socket || !h.NetPaths || !h.GDRDMA || h.NoGDRDMALine != "" {
			t.Errorf("host %s = %+v, want 8 ranks over OFI with GDRDMA, no socket", h.Name, h)
		}
		if !slices.Equal(h.Networks, []string{"AWS Libfabric"}) {
			t.Errorf("host %s networks = %q", h.Name, h.Networks)
		}
		if h.NICs != nil {
			t.Errorf("host %s NICs = %d, but this aws-ofi-nccl does not print a count", h.Name, *h.NICs)
		}
	}
}

// TestHostsNameTheNodeThatFellBack: one host over EFA, one on sockets without GPUDirect RDMA; a
// line that is not "host:pid:tid [dev]" names no host.
func TestHostsNameTheNodeThatFellBack(t *testing.T) {
	log := strings.Join([]string{
		"node-a:100:100 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)",
		"node-a:100:100 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 16 nics)",
		"node-a:100:100 [0] NCCL INFO Using network Libfabric",
		"node-a:100:130 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Libfabric/0/GDRDMA",
		"node-a:100:100 [0] NCCL INFO ncclCommInitRankConfig comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 53000 commId 0x2 - Init COMPLETE",
		"node-a:100:100 [0] NCCL INFO ncclCommInitRankConfig comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 53000 commId 0x2 - Init COMPLETE",
		"[1,1]<stdout>:node-b:200:200 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>",
		"[1,1]<stdout>:node-b:200:200 [0] NCCL INFO Using network Socket",
		"[1,1]<stdout>:node-b:200:230 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [send] via NET/Socket/0",
		"[1,1]<stdout>:node-b:200:200 [0] NCCL INFO ncclCommInitRankConfig comm 0x1 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 53000 commId 0x2 - Init COMPLETE",
		"libfabric:200:1700000000::core:core:fi_getinfo_():1392<warn> fi_getinfo: provider efa output empty list",
		"Using network Socket",
		"",
	}, "\n")
	r, err := ParseString(log)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Hosts) != 2 {
		t.Fatalf("Hosts = %+v, want node-a and node-b", r.Hosts)
	}
	a, b := r.Hosts[0], r.Hosts[1]
	if a.Name != "node-a" || a.Socket || !a.OFIPlugin || !a.GDRDMA || a.NICs == nil || *a.NICs != 32 || !slices.Equal(a.Ranks, []int{0}) {
		t.Errorf("node-a = %+v", a)
	}
	if b.Name != "node-b" || !b.Socket || b.OFIPlugin || b.GDRDMA || !b.NetPaths || !slices.Equal(b.Ranks, []int{1}) {
		t.Errorf("node-b = %+v", b)
	}
	if !strings.Contains(b.SocketLine, "NET/Socket : Using") || !strings.Contains(b.NoGDRDMALine, "via NET/Socket/0") {
		t.Errorf("node-b evidence: socket %q, no GDRDMA %q", b.SocketLine, b.NoGDRDMALine)
	}
	if r.NRanks != 2 {
		t.Errorf("NRanks = %d", r.NRanks)
	}
}

func TestHostOf(t *testing.T) {
	tests := []struct{ line, want string }{
		{"ip-10-0-1-23:4100:4160 [0] NCCL INFO x", "ip-10-0-1-23"},
		{"a:1:2 [0] NCCL WARN x", "a"},
		{"a:1:2[0] NCCL INFO x", ""},
		{":1:2 [0] NCCL INFO x", ""},
		{"a b:1:2 [0] NCCL INFO x", ""},
		{"a:x:2 [0] NCCL INFO x", ""},
		{"a:1 [0] NCCL INFO x", ""},
		{"a:1:2", ""},
		{"NCCL INFO x", ""},
	}
	for _, tc := range tests {
		if got := string(hostOf([]byte(tc.line))); got != tc.want {
			t.Errorf("hostOf(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestHostsBounded: a log naming more hosts than MaxHosts keeps MaxHosts.
func TestHostsBounded(t *testing.T) {
	var b strings.Builder
	for i := range MaxHosts + 10 {
		b.WriteString("h" + strings.Repeat("x", i) + ":1:1 [0] NCCL INFO Using network Libfabric\n")
	}
	r, err := ParseString(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Hosts) != MaxHosts {
		t.Errorf("%d hosts kept, want %d", len(r.Hosts), MaxHosts)
	}
}

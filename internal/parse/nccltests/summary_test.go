package nccltests

import (
	"strconv"
	"testing"
)

func TestPathTransport(t *testing.T) {
	tests := []struct{ path, want string }{
		{"P2P/CUMEM/read", "P2P/CUMEM"},
		{"P2P/CUMEM", "P2P/CUMEM"},
		{"P2P/CUMEM/read/CE", "P2P/CUMEM"},
		{"P2P/MNNVL/read", "P2P/MNNVL"},
		{"P2P/IPC", "P2P/IPC"},
		{"P2P/direct pointer/read", "P2P/direct pointer"},
		{"P2P/indirect/3[3]/read", "P2P/indirect"},
		{"P2P/common device", "P2P/common device"},
		{"SHM/direct/direct", "SHM"},
		{"SHM/CE/direct", "SHM"},
		{"SHM/direct", "SHM"},
		{"direct shared memory", "SHM"},
		{"NET/Socket/0", "NET/Socket"},
		{"NET/AWS Libfabric/2/GDRDMA", "NET/AWS Libfabric"},
		{"NET/IBext_v8/7(15)/GDRDMA(PCI)/Shared", "NET/IBext_v8"},
		{"COLLNET/SHARP/0/GDRDMA", "COLLNET/SHARP"},
		{"SOMETHING", "SOMETHING"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := string(pathTransport([]byte(tc.path))); got != tc.want {
			t.Errorf("pathTransport(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestDataTransport(t *testing.T) {
	tests := []struct {
		name string
		tr   Transport
		want string
	}{
		{"nothing shown is not nothing used", Transport{}, ""},
		{"NVLS available only", Transport{NVLSAvailable: true}, ""},
		{"NVLink peer-to-peer", Transport{DataTransports: []string{"P2P/CUMEM"}}, "P2P/CUMEM (NVLink or PCIe peer-to-peer)"},
		{"NVLS comes first", Transport{NVLS: true, DataTransports: []string{"P2P/CUMEM"}},
			"NVLS + P2P/CUMEM (NVLink or PCIe peer-to-peer)"},
		{"NVLS without channel lines", Transport{NVLS: true}, "NVLS"},
		{"host memory", Transport{DataTransports: []string{"SHM"}}, "SHM"},
		{"sockets", Transport{DataTransports: []string{"NET/Socket"}}, "NET/Socket"},
		{"two nodes, first seen first", Transport{DataTransports: []string{"NET/Libfabric", "P2P/IPC"}},
			"NET/Libfabric + P2P/IPC (NVLink or PCIe peer-to-peer)"},
		{"multi-node NVLink", Transport{DataTransports: []string{"P2P/MNNVL"}}, "P2P/MNNVL (multi-node NVLink)"},
		{"through another GPU", Transport{DataTransports: []string{"P2P/indirect"}}, "P2P/indirect (peer-to-peer through another GPU)"},
		{"same GPU", Transport{DataTransports: []string{"P2P/common device"}}, "P2P/common device (ranks on the same GPU)"},
		{"CollNet", Transport{DataTransports: []string{"COLLNET/SHARP"}}, "COLLNET/SHARP"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tr.DataTransport(); got != tc.want {
				t.Errorf("DataTransport() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDataTransportsCompleteWhenPathsFull checks that a host with more NIC paths than
// MaxDataPaths still reports every transport: the SHM path after 40 NET paths is not lost.
func TestDataTransportsCompleteWhenPathsFull(t *testing.T) {
	var in []byte
	for dev := 0; dev < 40; dev++ {
		in = append(in, []byte("h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Libfabric/"+strconv.Itoa(dev)+"/GDRDMA\n")...)
	}
	in = append(in, "h:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n"...)
	r, err := ParseString(string(in))
	if err != nil {
		t.Fatal(err)
	}
	tr := r.Transport
	if len(tr.DataPaths) != MaxDataPaths || tr.DataPaths[MaxDataPaths-1] != "NET/Libfabric/15/GDRDMA" {
		t.Errorf("DataPaths = %q, want the first %d", tr.DataPaths, MaxDataPaths)
	}
	if got := tr.DataTransport(); got != "NET/Libfabric + SHM" {
		t.Errorf("DataTransport() = %q", got)
	}
}

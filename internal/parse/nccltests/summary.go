package nccltests

import (
	"bytes"
	"strings"
)

// pathTransport names the transport of a "via" path without the device numbers and options
// NCCL appends: "P2P/CUMEM/read" -> "P2P/CUMEM", "P2P/indirect/3[3]/read" -> "P2P/indirect",
// "NET/AWS Libfabric/0/GDRDMA" -> "NET/AWS Libfabric", "NET/IBext_v8/7(15)/GDRDMA/Shared" ->
// "NET/IBext_v8", "COLLNET/SHARP/0/GDRDMA" -> "COLLNET/SHARP". Shared memory is "SHM" in every
// spelling: "SHM/direct/direct", "SHM/CE/direct", "SHM/direct" (NCCL 2.28+) and "direct shared
// memory" (NCCL 2.5-2.12).
func pathTransport(path []byte) []byte {
	if bytes.HasPrefix(path, []byte("SHM/")) || string(path) == "SHM" || string(path) == "direct shared memory" {
		return []byte("SHM")
	}
	first := bytes.IndexByte(path, '/')
	if first < 0 {
		return path
	}
	second := bytes.IndexByte(path[first+1:], '/')
	if second < 0 {
		return path
	}
	return path[:first+1+second]
}

// DataTransport says in words which transports carried the test's data between ranks, as the
// NVLS and "via" connection lines show: "NVLS", "P2P/CUMEM (NVLink or PCIe peer-to-peer)",
// "SHM", "NET/Socket", joined by " + " when there are several, NVLS first. On a 1-node test
// every path is inside the node, so this is the intra-node transport. It is "" when the log has
// none of these lines (NCCL_DEBUG was not INFO, or NCCL failed before connecting): nothing was
// shown, which is not the same as nothing used.
func (t Transport) DataTransport() string {
	parts := make([]string, 0, len(t.DataTransports)+1)
	if t.NVLS {
		parts = append(parts, "NVLS")
	}
	for _, k := range t.DataTransports {
		parts = append(parts, describeTransport(k))
	}
	return strings.Join(parts, " + ")
}

// describeTransport adds what a P2P flavour means physically; SHM, NET and COLLNET names say it
// themselves.
func describeTransport(kind string) string {
	switch kind {
	case "P2P/CUMEM", "P2P/IPC", "P2P/direct pointer":
		return kind + " (NVLink or PCIe peer-to-peer)"
	case "P2P/MNNVL":
		return kind + " (multi-node NVLink)"
	case "P2P/indirect":
		return kind + " (peer-to-peer through another GPU)"
	case "P2P/common device":
		return kind + " (ranks on the same GPU)"
	}
	return kind
}

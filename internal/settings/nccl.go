package settings

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// NCCL are the settings of the 1-node NCCL all_reduce_perf test.
type NCCL struct {
	// Skip turns the test off.
	Skip bool `json:"skip"`
	// CUDAVersion picks /usr/local/cuda-<v>/efa/test-cuda-<v>/all_reduce_perf ("13.2"); ""
	// takes the newest CUDA on the host that has the nccl-tests binaries.
	CUDAVersion string `json:"cuda_version,omitempty"`
	// Ranks is the number of MPI ranks, one per GPU; 0 takes the expected GPU count, else the
	// GPUs nvidia-smi -L lists on the host.
	Ranks int `json:"ranks,omitempty"`
	// Args are the all_reduce_perf arguments; empty means NCCLDefaultArgs.
	Args []string `json:"args,omitempty"`
	// Timeout bounds the whole mpirun (a hung collective never ends by itself).
	Timeout time.Duration `json:"timeout,omitempty"`
	// Env is passed to every rank with mpirun -x KEY=VALUE. LD_LIBRARY_PATH and NCCL_DEBUG are
	// set by the test itself. It is never written into the image (values may be secret).
	Env map[string]string `json:"-"`
	// Transport is what nccl-transport requires.
	Transport Transport `json:"transport,omitempty"`
}

// Transport is the nccl-transport check's policy.
type Transport string

// Transport policies. TransportAuto ("") chooses from the host: EFA when it has EFA functions
// or the settings or profile expect them, else any.
const (
	TransportAuto Transport = ""
	// TransportEFA requires aws-ofi-nccl over EFA ("Using network Libfabric", provider efa).
	TransportEFA Transport = "efa"
	// TransportAny accepts whatever NCCL chose on one node (NVLink, P2P, SHM, even sockets)
	// and reports it: the right policy for instance types without EFA.
	TransportAny Transport = "any"
)

// NCCLDefaultArgs are the all_reduce_perf arguments of host-layer.md: 8 B to 1 GiB doubling,
// one GPU per rank, data validated, 50 iterations.
var NCCLDefaultArgs = []string{"-b", "8", "-e", "1G", "-f", "2", "-g", "1", "-c", "1", "-n", "50"}

// NCCLDefaultTimeout bounds the test when no timeout is set.
const NCCLDefaultTimeout = 15 * time.Minute

const (
	ncclMaxRanks   = 1024
	ncclMaxTimeout = 24 * time.Hour
)

var (
	ncclEnvKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// CUDAVersionPattern is the shape of a CUDA version setting ("13.2"), as in
	// /usr/local/cuda-13.2.
	CUDAVersionPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)
	// ncclReservedEnv are set by the test itself: the transport check reads the INFO lines,
	// and the library path is what puts aws-ofi-nccl in front of NCCL.
	ncclReservedEnv = map[string]bool{"LD_LIBRARY_PATH": true, "NCCL_DEBUG": true}
	// HiddenDebugEnv are the NCCL variables that hide from the judge the INFO lines it reads
	// (which transport and which network plugin the ranks used), with why: the NCCL test's
	// env and the multi-node test's refuse them.
	HiddenDebugEnv = map[string]string{
		"NCCL_DEBUG_FILE":   "it sends NCCL's INFO lines, which the transport check reads, to a file instead of the test's output",
		"NCCL_DEBUG_SUBSYS": "it narrows NCCL's INFO lines to some subsystems, hiding the network lines the transport check reads",
	}
)

// Resolved checks n and fills in the defaults, naming the setting (prefix "nccl.") it refuses.
func (n NCCL) Resolved() (NCCL, error) {
	if n.CUDAVersion != "" && !CUDAVersionPattern.MatchString(n.CUDAVersion) {
		return n, fmt.Errorf("nccl.cuda_version %q: use MAJOR.MINOR as in /usr/local/cuda-13.2 (\"13.2\"), or leave it empty for the newest", n.CUDAVersion)
	}
	switch n.Transport {
	case TransportAuto, TransportEFA, TransportAny:
	default:
		return n, fmt.Errorf("nccl.transport %q: use %q, %q, or leave it empty to choose from the host's EFA devices", n.Transport, TransportEFA, TransportAny)
	}
	if n.Ranks < 0 || n.Ranks > ncclMaxRanks {
		return n, fmt.Errorf("nccl.ranks = %d: use 1 to %d (one per GPU), or 0 to count the GPUs", n.Ranks, ncclMaxRanks)
	}
	if n.Timeout != 0 && (n.Timeout < time.Second || n.Timeout > ncclMaxTimeout) {
		return n, fmt.Errorf("nccl.timeout = %s: use a duration from 1s to %s, or leave it unset for %s", n.Timeout, ncclMaxTimeout, NCCLDefaultTimeout)
	}
	if n.Timeout == 0 {
		n.Timeout = NCCLDefaultTimeout
	}
	if len(n.Args) == 0 {
		n.Args = NCCLDefaultArgs
	}
	for i, a := range n.Args {
		if strings.ContainsAny(a, "\x00\n\r") {
			return n, fmt.Errorf("nccl.args[%d] %q: a NUL or line break cannot be passed to all_reduce_perf", i, a)
		}
	}
	for k, v := range n.Env {
		if !ncclEnvKey.MatchString(k) {
			return n, fmt.Errorf("nccl.env key %q: use letters, digits and '_', not starting with a digit", k)
		}
		if ncclReservedEnv[k] {
			return n, fmt.Errorf("nccl.env key %s: set by the NCCL test itself (the transport check needs NCCL_DEBUG=INFO and the DLAMI library path); remove it", k)
		}
		if why, hides := HiddenDebugEnv[k]; hides {
			return n, fmt.Errorf("nccl.env key %s: %s; remove it", k, why)
		}
		if strings.ContainsAny(v, "\x00\n\r") {
			return n, fmt.Errorf("nccl.env[%q]: the value contains a NUL or line break", k)
		}
	}
	return n, nil
}

// Warnings lists settings in n that are legal but likely wrong.
func (n NCCL) Warnings() []string {
	var w []string
	if n.ForcesIB() {
		w = append(w, "nccl.env sets NCCL_NET=IB: NCCL then skips aws-ofi-nccl and tries its built-in IB transport, which fails on the DOWN ConnectX-7 ports some instance types show; leave NCCL_NET unset, NCCL picks EFA by itself")
	}
	if n.ValidationOff() {
		w = append(w, "nccl.args turn validation off (-c 0): the correctness check can only warn")
	}
	return w
}

// ForcesIB reports whether the environment forces NCCL's built-in IB transport (NCCL_NET=IB).
func (n NCCL) ForcesIB() bool {
	v, ok := n.Env["NCCL_NET"]
	return ok && strings.EqualFold(strings.Trim(strings.TrimSpace(v), `"'`), "IB")
}

// ValidationOff reports whether the all_reduce_perf arguments turn data validation off.
func (n NCCL) ValidationOff() bool {
	for i := 0; i+1 < len(n.Args); i++ {
		if (n.Args[i] == "-c" || n.Args[i] == "--check") && n.Args[i+1] == "0" {
			return true
		}
	}
	return false
}

// GDRArgs are the forced-network all-reduce's arguments: short (it only has to prove the path),
// large enough messages to reach the network's bandwidth, data validated.
var GDRArgs = []string{"-b", "8M", "-e", "256M", "-f", "2", "-g", "1", "-c", "1", "-n", "20"}

// GDREnv switches NVLink, shared memory and NVLink SHARP off, so the ranks of one node talk
// through the network plugin and the EFA devices.
var GDREnv = map[string]string{"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_NVLS_ENABLE": "0"}

// ForcedNetwork is the NCCL test of the GPUDirect RDMA check, from the bake's NCCL settings:
// its CUDA version, ranks, timeout and environment, with GDRArgs, GDREnv and EFA required.
func (n NCCL) ForcedNetwork() NCCL {
	env := map[string]string{}
	for k, v := range n.Env {
		env[k] = v
	}
	for k, v := range GDREnv {
		env[k] = v
	}
	n.Env, n.Args, n.Transport, n.Skip = env, GDRArgs, TransportEFA, false
	return n
}

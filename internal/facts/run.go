package facts

import (
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// Run is everything one run of the checks read of a host, phase by phase: the judges read only
// this. A phase leaves its part zero until it runs; a test the engine did not run says why
// in its NotRun, and its checks say so instead of passing.
type Run struct {
	// Host is the host phase's reading (one round trip), JobMemlock the limits where jobs run.
	Host       Host
	JobMemlock JobMemlock
	// BootLog is the kernel log a bake read with its baseline, before any layer ran: an Xid
	// logged then stays judged when a layer clears the ring buffer. Unset outside a bake.
	BootLog *Fact[KernelLog]
	// Load is the NCCL test and what the host showed while it ran.
	Load Load
	// DCGM, EFATraffic and GDR are the function phase's tests.
	DCGM       DCGMRun
	EFATraffic EFATraffic
	GDR        NCCLRun
	// Containers is the container-gpu test: the container toolkit and a container started
	// with all GPUs on each engine.
	Containers ContainerRun
	// Site are the site checks' runs, in name order.
	Site []SiteRun
	// Hygiene is image hygiene's run, the bake's last step.
	Hygiene Hygiene
	// NodeCheck is the image's own node check, run on a verification instance.
	NodeCheck NodeCheckRun
	// MultiNode is the NCCL test across a verification's nodes.
	MultiNode MultiNodeRun
}

// Load is what the host showed while it worked: the NCCL test's run, GPU health samples taken
// while it ran (idle GPUs lower their PCIe link speed on purpose, so only these judge the
// link), the NVLink counters before and after, and the kernel log after it.
type Load struct {
	// Ran is false when no load ran; NotRun says why.
	Ran    bool
	NotRun string
	// NCCL is the NCCL test's run.
	NCCL NCCLRun
	// Samples are the readings taken during the test; a sample that could not be read is kept
	// with its problem.
	Samples []Fact[[]GPUHealth]
	// NVLinkBefore and NVLinkAfter are the counters read around the test.
	NVLinkBefore, NVLinkAfter Fact[[]NVLinkCounters]
	// Mark is where the kernel log ended before the test; KernelLog and KernelJournal are
	// read after it.
	Mark          *Mark
	KernelLog     Fact[KernelLog]
	KernelJournal Fact[KernelJournal]
}

// NCCLRun is one run of the NCCL test script (all_reduce_perf under mpirun): what its own
// marker lines said and what nccl-tests printed, parsed.
type NCCLRun struct {
	// NotRun says why the engine did not run it ("" when it ran), NotApplicable why it does
	// not apply to this host (no EFA for the forced-network run); Problem why it could not run
	// (the job could not start, the connection dropped).
	NotRun        string
	NotApplicable string
	Problem       string
	// Binary and Ranks are what the script chose (Ranks per node), Nodes the node count of a
	// test across nodes ("" on one node); ScriptErrors why it could not start the
	// test (no binary, no mpirun, no GPU); MarkerLines the script's own lines, as evidence.
	Binary, Ranks, Nodes string
	ScriptErrors         []string
	MarkerLines          []string
	// Result is nccl-tests' output, parsed.
	Result NCCLResult
	// ExitCode is the script's; TimedOut when its bound (Timeout) stopped it.
	ExitCode int
	TimedOut bool
	Timeout  time.Duration
	// Tail is the end of the output, as evidence.
	Tail string
	Took time.Duration
}

// Ran reports whether the test ran to an exit status.
func (r NCCLRun) Ran() bool { return r.NotRun == "" && r.Problem == "" }

// DCGM is a dcgmi diag run: its report, or why it could not run. Level is the run level.
type DCGM struct {
	Level  int
	Report DCGMReport
	// ExitCode is dcgmi's exit status (the script's EXIT line); -1 when it did not say.
	// Exit is what that status means (meaningful when ExitCode >= 0).
	ExitCode int
	Exit     DCGMExit
	// StartedHostEngine is true when the run started nv-hostengine itself (and stopped it).
	StartedHostEngine bool
}

// DCGMRun is the DCGM diagnostics of the function phase.
type DCGMRun struct {
	// NotRun says why the engine did not run them ("" when it did).
	NotRun string
	Result Fact[DCGM]
	// Missing is true when DCGM is not installed (a failure class of its own: the fix is to
	// install it or turn the level off).
	Missing  bool
	TimedOut bool
	Took     time.Duration
}

// PingPong is one EFA device's RDM ping-pong between a server and a client on the device,
// with shared-memory transfer off so the bytes cross the device.
type PingPong struct {
	Device string
	// Client is the client's table (its largest row carries the bandwidth); TimedOut when the
	// pair was stopped at its bound.
	Client   []PingPongTable
	TimedOut bool
	ExitCode int
}

// EFATraffic is the traffic test of every EFA device, with the device counters around it.
type EFATraffic struct {
	// NotRun says why the engine did not run it; Problem why it could not run.
	NotRun  string
	Problem string
	// Tested are the devices the test ran on, in order.
	Tested         []string
	Devices        []Fact[PingPong]
	StatsBefore    Fact[[]RDMALink]
	StatsAfter     Fact[[]RDMALink]
	ShmTransferOff bool
	Evidence       string
	Took           time.Duration
}

// SiteRun is one site check: an executable of the site's own, run with a bound.
type SiteRun struct {
	// Name is the executable's file name; Path where it ran from.
	Name, Path string
	ExitCode   int
	TimedOut   bool
	// Problem says why it could not run at all.
	Problem string
	Output  string
	Took    time.Duration
}

// Hygiene is image hygiene's run and what it left, read back as root afterwards.
type Hygiene struct {
	// CleanupExit is the cleanup script's exit status, CleanupLog what it said it did.
	CleanupExit int
	CleanupLog  string
	// BuildKeyKnown is false when the key Packer logged in with is not known (agent or
	// password authentication): no authorized_keys line was removed.
	BuildKeyKnown bool
	// State is the read-back, or why it could not be read.
	State Fact[HygieneState]
}

// HygieneState is what the read-back found, one field per fact image-hygiene judges.
type HygieneState struct {
	// KeyFiles are the authorized_keys files of root and the login user.
	KeyFiles []KeyFile
	// HostKeys are the SSH host key files left.
	HostKeys []string
	// MachineID is /etc/machine-id: "absent", "notfile" or "size=N"; DBusMachineID
	// /var/lib/dbus/machine-id: "absent", "link=TARGET" or "size=N".
	MachineID, DBusMachineID string
	// CloudState are cloud-init's instance state paths left.
	CloudState []string
	// History are the shell history files left, with their sizes.
	History []SizedFile
	// NonEmptyLogs counts the non-empty *.log files under /var/log.
	NonEmptyLogs int
	// IMEXNodesConfig is /etc/nvidia-imex/nodes_config.cfg as the image keeps it.
	IMEXNodesConfig *IMEXNodesConfig
	// Unreadable are the read-back's lines that could not be read; Missing the facts it did
	// not answer.
	Unreadable, Missing []string
}

// IMEXNodesConfig is IMEX's node list file: absent, or how many of its lines are real
// addresses (an IPv4 address other than the placeholder 0.0.0.0; grace-blackwell.md 1.5), the
// first few of them.
type IMEXNodesConfig struct {
	Path      string
	Present   bool
	Count     int
	Addresses []string
}

// KeyFile is an authorized_keys file: absent, or its line count and how many hold the build
// key.
type KeyFile struct {
	Path       string
	Absent     bool
	Lines      int
	BuildLines int
}

// SizedFile is a file and its size in bytes.
type SizedFile struct {
	Path string
	Size int64
}

// NodeCheckRun is a run of the image's own node check (dlami-node-check --mode report --json)
// on a verification instance.
type NodeCheckRun struct {
	// Absent is true when the image has no node check.
	Absent bool
	// ExitCode is the command's exit status, TimedOut when its bound stopped it.
	ExitCode int
	TimedOut bool
	// Output is what it printed (the JSON report), as evidence of a run that could not be read.
	Output string
	// Result, Checks and Failed are its report's verdict, checks and failed ids; Unreadable
	// says why the report could not be read.
	Result     string
	Checks     []result.Check
	Failed     []string
	Unreadable string
	// Table is its checks as the reports' table renders them, as evidence.
	Table string
}

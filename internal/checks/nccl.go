package checks

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nccltests"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// NCCLOptions configures the 1-node NCCL all_reduce_perf test.
type NCCLOptions struct {
	// CUDAVersion picks /usr/local/cuda-<v>/efa/test-cuda-<v>/all_reduce_perf ("13.2"); ""
	// takes the newest CUDA on the host that has the nccl-tests binaries.
	CUDAVersion string
	// Ranks is the number of MPI ranks, one per GPU; 0 counts the GPUs nvidia-smi -L lists on
	// the host.
	Ranks int
	// Args are the all_reduce_perf arguments; empty means NCCLDefaultArgs.
	Args []string
	// TimeoutSeconds bounds the whole mpirun (a hung collective never ends by itself); 0 means
	// NCCLDefaultTimeoutSeconds.
	TimeoutSeconds int
	// Env is passed to every rank with mpirun -x KEY=VALUE. LD_LIBRARY_PATH and NCCL_DEBUG are
	// set by the command and cannot be overridden.
	Env map[string]string
	// Transport is what nccl-transport requires: TransportEFA, TransportAny, or "" to choose
	// from the host (EFA when it has EFA functions or the settings/profile expect EFA).
	Transport string
}

// Transport policies of the nccl-transport check.
const (
	// TransportEFA requires aws-ofi-nccl over EFA ("Using network Libfabric", provider efa).
	TransportEFA = "efa"
	// TransportAny accepts whatever NCCL chose on one node (NVLink, P2P, SHM, even sockets)
	// and reports it: the right policy for instance types without EFA.
	TransportAny = "any"
)

// NCCLDefaultArgs are the all_reduce_perf arguments of host-layer.md: 8 B to 1 GiB doubling,
// one GPU per rank, data validated, 50 iterations.
var NCCLDefaultArgs = []string{"-b", "8", "-e", "1G", "-f", "2", "-g", "1", "-c", "1", "-n", "50"}

const (
	// NCCLDefaultTimeoutSeconds bounds the test when NCCLOptions.TimeoutSeconds is 0.
	NCCLDefaultTimeoutSeconds = 900
	// NCCLDefaultTimeout is NCCLDefaultTimeoutSeconds as a duration, for settings.
	NCCLDefaultTimeout = NCCLDefaultTimeoutSeconds * time.Second
	// NCCLMarker starts the lines the NCCL script prints about itself ("@@DLAMI-NCCL BINARY
	// <path>", "@@DLAMI-NCCL RANKS <n>", "@@DLAMI-NCCL ERROR <why>").
	NCCLMarker = "@@DLAMI-NCCL"
	// ncclNoBinaryExit is the script's exit status when it cannot start the test at all.
	ncclNoBinaryExit = 127
	ncclMPIRun       = "/opt/amazon/openmpi/bin/mpirun"
	ncclEvidenceMax  = 3000
	ncclMaxRanks     = 1024
	ncclMaxTimeout   = 24 * 3600
)

var (
	ncclEnvKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// CUDAVersionPattern is the shape of a CUDA version setting ("13.2"), as in
	// /usr/local/cuda-13.2.
	CUDAVersionPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)
	// ncclReservedEnv are set by NCCLCommand itself: the transport check reads the INFO lines,
	// and the library path is what puts aws-ofi-nccl in front of NCCL.
	ncclReservedEnv = map[string]bool{"LD_LIBRARY_PATH": true, "NCCL_DEBUG": true}
)

// ncclValidate checks o and fills in the defaults.
func ncclValidate(o NCCLOptions) (NCCLOptions, error) {
	if o.CUDAVersion != "" && !CUDAVersionPattern.MatchString(o.CUDAVersion) {
		return o, fmt.Errorf("nccl.cuda_version %q: use MAJOR.MINOR as in /usr/local/cuda-13.2 (\"13.2\"), or leave it empty for the newest", o.CUDAVersion)
	}
	switch o.Transport {
	case "", TransportEFA, TransportAny:
	default:
		return o, fmt.Errorf("nccl.transport %q: use %q, %q, or leave it empty to choose from the host's EFA devices", o.Transport, TransportEFA, TransportAny)
	}
	if o.Ranks < 0 || o.Ranks > ncclMaxRanks {
		return o, fmt.Errorf("nccl.ranks = %d: use 1 to %d (one per GPU), or 0 to count the GPUs", o.Ranks, ncclMaxRanks)
	}
	if o.TimeoutSeconds < 0 || o.TimeoutSeconds > ncclMaxTimeout {
		return o, fmt.Errorf("nccl.timeout = %s: use a duration from 1s to %s, or leave it unset for %s", time.Duration(o.TimeoutSeconds)*time.Second, time.Duration(ncclMaxTimeout)*time.Second, NCCLDefaultTimeout)
	}
	if o.TimeoutSeconds == 0 {
		o.TimeoutSeconds = NCCLDefaultTimeoutSeconds
	}
	if len(o.Args) == 0 {
		o.Args = NCCLDefaultArgs
	}
	for i, a := range o.Args {
		if strings.ContainsAny(a, "\x00\n\r") {
			return o, fmt.Errorf("nccl.args[%d] %q: a NUL or line break cannot be passed to all_reduce_perf", i, a)
		}
	}
	for k, v := range o.Env {
		if !ncclEnvKey.MatchString(k) {
			return o, fmt.Errorf("nccl.env key %q: use letters, digits and '_', not starting with a digit", k)
		}
		if ncclReservedEnv[k] {
			return o, fmt.Errorf("nccl.env key %s: set by the NCCL test itself (the transport check needs NCCL_DEBUG=INFO and the DLAMI library path); remove it", k)
		}
		if strings.ContainsAny(v, "\x00\n\r") {
			return o, fmt.Errorf("nccl.env[%q]: the value contains a NUL or line break", k)
		}
	}
	return o, nil
}

// NCCLCommand returns the POSIX sh script that runs the 1-node NCCL test of host-layer.md as
// the login user (not root; Open MPI refuses root without extra flags, and the test needs no
// privilege). It prints "@@DLAMI-NCCL BINARY <path>" first, then the test's stdout and stderr;
// its exit status is mpirun's (124 or 137 when the timeout stopped it), or 127 with an
// "@@DLAMI-NCCL ERROR" line when there is no binary, no mpirun or no GPU to run on.
func NCCLCommand(o NCCLOptions) (string, error) {
	o, err := ncclValidate(o)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("#!/bin/sh\n")
	w("# 1-node NCCL all_reduce_perf over the DLAMI's nccl-tests (packer-plugin-dlami).\n")
	// Packer's commands get no login profile and sudo's secure_path varies: the system
	// directories are added to PATH for the coreutils, grep and nvidia-smi called by name.
	w("PATH=${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nexport PATH\n")
	w("M=%s\n", NCCLMarker)
	w("want=%s\n", bundle.Quote(o.CUDAVersion))
	w(`if [ -n "$want" ]; then
  cuda=/usr/local/cuda-$want
  bin=$cuda/efa/test-cuda-$want/all_reduce_perf
  if [ ! -x "$bin" ]; then
    echo "$M ERROR no nccl-tests binary for CUDA $want: $bin is missing or not executable; installed: $(ls -d /usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf 2>/dev/null | tr '\n' ' ')"
    exit %[1]d
  fi
else
  # Newest CUDA first by numeric version (13.10 > 13.9), whatever the locale.
  best=$(for f in /usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf; do
      [ -x "$f" ] || continue
      v=${f#/usr/local/cuda-}; v=${v%%%%/*}
      case $v in ''|*[!0-9.]*) continue ;; esac
      echo "$v $f"
    done | sort -t. -k1,1n -k2,2n | tail -n 1)
  if [ -z "$best" ]; then
    echo "$M ERROR no nccl-tests binary: nothing matches /usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf (is this the Deep Learning Base OSS DLAMI?)"
    exit %[1]d
  fi
  cuda=/usr/local/cuda-${best%%%% *}
  bin=${best#* }
fi
mpirun=%[2]s
if [ ! -x "$mpirun" ]; then
  echo "$M ERROR $mpirun not found: Open MPI from the EFA installer is missing"
  exit %[1]d
fi
`, ncclNoBinaryExit, ncclMPIRun)
	if o.Ranks > 0 {
		w("ranks=%d\n", o.Ranks)
	} else {
		w(`ranks=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${ranks:-0}" -lt 1 ]; then
  echo "$M ERROR nvidia-smi lists no GPU: cannot choose the number of ranks"
  exit %d
fi
`, ncclNoBinaryExit)
	}
	w("echo \"$M BINARY $bin\"\n")
	w("echo \"$M RANKS $ranks\"\n")
	w("timeout -k 10 %d \"$mpirun\" -n \"$ranks\" --bind-to none \\\n", o.TimeoutSeconds)
	// ${LD_LIBRARY_PATH:+:...} rather than host-layer.md's plain :$LD_LIBRARY_PATH: an unset
	// variable would leave a trailing ':', which puts the working directory on the search path.
	w("  -x \"LD_LIBRARY_PATH=$cuda/lib:$cuda/lib64:/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\" \\\n")
	w("  -x NCCL_DEBUG=INFO \\\n")
	for _, k := range slices.Sorted(maps.Keys(o.Env)) {
		w("  -x %s \\\n", bundle.Quote(k+"="+o.Env[k]))
	}
	w("  \"$bin\"")
	for _, a := range o.Args {
		w(" %s", bundle.Quote(a))
	}
	w(" </dev/null 2>&1\n")
	w("exit $?\n")
	return b.String(), nil
}

// NCCLWarnings lists settings in o that are legal but likely wrong.
func NCCLWarnings(o NCCLOptions) []string {
	var w []string
	if ncclEnvSetsIB(o.Env) {
		w = append(w, "nccl.env sets NCCL_NET=IB: NCCL then skips aws-ofi-nccl and tries its built-in IB transport, which fails on the DOWN ConnectX-7 ports some instance types show; leave NCCL_NET unset, NCCL picks EFA by itself")
	}
	if validationOffArgs(o.Args) {
		w = append(w, "nccl.args turn validation off (-c 0): the correctness check can only warn")
	}
	return w
}

// validationOffArgs reports whether all_reduce_perf arguments turn data validation off.
func validationOffArgs(args []string) bool {
	for i := 0; i+1 < len(args); i++ {
		if (args[i] == "-c" || args[i] == "--check") && args[i+1] == "0" {
			return true
		}
	}
	return false
}

func ncclEnvSetsIB(env map[string]string) bool {
	v, ok := env["NCCL_NET"]
	return ok && strings.EqualFold(strings.Trim(strings.TrimSpace(v), `"'`), "IB")
}

// NCCLFigures are the measured values of one NCCL test, for the report.
type NCCLFigures struct {
	Binary           string `json:"binary"`
	NCCLVersion      string `json:"nccl_version"`
	LargestSizeBytes int64  `json:"largest_size_bytes"`
	// BusBWGBps is the busbw of the largest message size, out-of-place (BusBWPlacement).
	BusBWGBps      *float64 `json:"busbw_gbps"`
	BusBWPlacement string   `json:"busbw_placement"`
	AvgBusBWGBps   *float64 `json:"avg_busbw_gbps"`
	OutOfBounds    *int64   `json:"out_of_bounds"`
	Network        string   `json:"network"`
	Provider       string   `json:"provider"`
	// DataTransport says what moved the data on this node ("NVLS + P2P/CUMEM (NVLink or
	// PCIe peer-to-peer)", "SHM", "NET/Socket"); "" when the log does not say.
	DataTransport string `json:"data_transport"`
	NICs          *int   `json:"nics"`
	ExitCode      int    `json:"exit_code"`
	TimedOut      bool   `json:"timed_out"`
}

// ncclRun is what the script's own marker lines say.
type ncclRun struct {
	binary, ranks string
	errors        []string
	lines         []string
}

func ncclMarkers(output string) ncclRun {
	var r ncclRun
	prefix := NCCLMarker + " "
	for rest := output; rest != ""; {
		i := strings.Index(rest, prefix)
		if i < 0 {
			break
		}
		if i > 0 && rest[i-1] != '\n' {
			rest = rest[i+len(prefix):]
			continue
		}
		line := rest[i:]
		if j := strings.IndexByte(line, '\n'); j >= 0 {
			line = line[:j]
		}
		rest = rest[i+len(line):]
		line = strings.TrimRight(line, "\r")
		kind, val, _ := strings.Cut(strings.TrimPrefix(line, prefix), " ")
		switch kind {
		case "BINARY":
			r.binary = textcut.Head(val, 300)
		case "RANKS":
			r.ranks = textcut.Head(val, 20)
		case "ERROR":
			r.errors = append(r.errors, textcut.Head(val, 500))
		default:
			continue
		}
		if len(r.lines) < 5 {
			r.lines = append(r.lines, textcut.Head(line, 500))
		}
	}
	return r
}

// NCCLExpect is what the NCCL checks compare against, resolved from a Target.
type NCCLExpect struct {
	// BusBWFloorGBps is the lowest acceptable busbw at the largest size; 0 = no floor (warn).
	BusBWFloorGBps float64
	FloorBasis     string
	// EFACount is the EFA device count aws-ofi-nccl must find; 0 = not compared.
	EFACount int
	// Transport is TransportEFA or TransportAny; TransportBasis says why.
	Transport      string
	TransportBasis string
	// Ranks is one per expected GPU (0 = let the script count them).
	Ranks int
}

// NCCLExpect resolves the NCCL expectations: the busbw floor (setting, else profile), the EFA
// count (as efa-devices resolves it) and the transport policy (setting, else EFA when the host
// or its expectations have EFA devices, else any).
func (t Target) NCCLExpect(o NCCLOptions) NCCLExpect {
	x := NCCLExpect{BusBWFloorGBps: t.Expect.BusBWFloorGBps, FloorBasis: BasisSetting}
	if x.BusBWFloorGBps == 0 {
		x.FloorBasis = ""
		if t.Profile != nil && t.Profile.BusBWFloorGBps > 0 {
			x.BusBWFloorGBps, x.FloorBasis = t.Profile.BusBWFloorGBps, t.profileName()
		}
	}
	if n, basis, ok := t.expectedCount(t.Expect.EFACount, func(p profile.Profile) int { return p.EFACount }, func(i pci.Inventory) int { return len(i.EFA) }); ok {
		x.EFACount = n
		x.TransportBasis = basis
	}
	if n, _, ok := t.expectedCount(t.Expect.GPUCount, func(p profile.Profile) int { return p.GPUCount }, func(i pci.Inventory) int { return len(i.GPUs) }); ok {
		x.Ranks = n
	}
	switch {
	case o.Transport != "":
		x.Transport, x.TransportBasis = o.Transport, "setting nccl.transport"
	case x.EFACount > 0:
		x.Transport = TransportEFA
		x.TransportBasis = fmt.Sprintf("%d EFA devices expected (%s)", x.EFACount, x.TransportBasis)
	case t.efaOnHost() > 0:
		// expect.efa_count = -1 turns the count off, not EFA: a socket fallback on an EFA host
		// must still fail.
		x.Transport = TransportEFA
		x.TransportBasis = fmt.Sprintf("the host has %d EFA devices (expect.efa_count = -1 turns only the count off)", t.efaOnHost())
	case t.PCI != nil:
		x.Transport, x.TransportBasis = TransportAny, "PCI inventory: no EFA function"
	default:
		// Nothing says whether the host has EFA: require it rather than pass a socket run.
		x.Transport, x.TransportBasis = TransportEFA, "default: the PCI inventory is unreadable"
	}
	return x
}

// JudgeNCCL judges the output of NCCLCommand's script into three checks, always in this order:
// result.NCCLCorrectness, result.NCCLBusBW, result.NCCLTransport. A run that timed out, or that
// could not start, fails all three.
func JudgeNCCL(output string, exitCode int, timedOut bool, x NCCLExpect, o NCCLOptions) ([]result.Check, NCCLFigures) {
	res, _ := nccltests.ParseString(output) // reading a string cannot fail
	run := ncclMarkers(output)
	timedOut = timedOut || bundle.TimedOut(exitCode)
	fig := ncclFigures(res, run, exitCode, timedOut)

	if len(run.errors) > 0 || (run.binary == "" && exitCode == ncclNoBinaryExit) {
		why := strings.Join(run.errors, "; ")
		if why == "" {
			why = fmt.Sprintf("the NCCL test script exited %d before starting the test", exitCode)
		}
		msg := "the NCCL test could not start: " + why
		ev := textcut.Tail(output, ncclEvidenceMax)
		return []result.Check{
			check(result.NCCLCorrectness, result.Fail, BasisRule, "0 OK, exit 0", "not run", msg, ev),
			check(result.NCCLBusBW, result.Fail, x.FloorBasis, ncclFloorText(x), "not run", msg, ev),
			check(result.NCCLTransport, result.Fail, x.TransportBasis, ncclTransportExpected(x), "not run", msg, ev),
		}, fig
	}
	if timedOut {
		t := o.TimeoutSeconds
		if t <= 0 {
			t = NCCLDefaultTimeoutSeconds
		}
		msg := fmt.Sprintf("the NCCL test did not finish: stopped by its timeout (%d s, exit %d); a hang in NCCL init or in a collective fails the host whatever the partial figures say", t, exitCode)
		ev := ncclJoinEvidence(res.Errors, []string{textcut.Tail(output, ncclEvidenceMax/2)})
		actual := fmt.Sprintf("timed out after %d s", t)
		return []result.Check{
			check(result.NCCLCorrectness, result.Fail, BasisRule, "0 OK, exit 0", actual, msg, ev),
			check(result.NCCLBusBW, result.Fail, x.FloorBasis, ncclFloorText(x), actual, msg, ev),
			check(result.NCCLTransport, result.Fail, x.TransportBasis, ncclTransportExpected(x), actual, msg, ev),
		}, fig
	}
	return []result.Check{
		ncclCorrectness(res, output, exitCode, o),
		ncclBusBW(res, output, exitCode, x),
		ncclTransport(res, output, x, o),
	}, fig
}

func ncclFigures(res nccltests.Result, run ncclRun, exitCode int, timedOut bool) NCCLFigures {
	f := NCCLFigures{
		Binary:         run.binary,
		NCCLVersion:    res.NCCLVersion,
		BusBWPlacement: "out-of-place",
		AvgBusBWGBps:   res.AvgBusBW,
		OutOfBounds:    res.OutOfBounds,
		ExitCode:       exitCode,
		TimedOut:       timedOut,
	}
	if l := res.Largest; l != nil {
		f.LargestSizeBytes = l.SizeBytes
		f.BusBWGBps = l.OutOfPlace.BusBW
	}
	if n := res.Transport.Networks; len(n) > 0 {
		f.Network = n[0]
	}
	f.DataTransport = res.Transport.DataTransport()
	if p := res.Transport.Providers; len(p) > 0 {
		f.Provider = p[0].Name
		f.NICs = p[0].NICs
	}
	return f
}

func ncclCorrectness(res nccltests.Result, output string, exitCode int, o NCCLOptions) result.Check {
	const expected = "0 OK, exit 0"
	var wrongRows []string
	for _, r := range res.Rows {
		if (r.OutOfPlace.Wrong != nil && *r.OutOfPlace.Wrong > 0) || (r.InPlace.Wrong != nil && *r.InPlace.Wrong > 0) {
			if len(wrongRows) < 5 {
				wrongRows = append(wrongRows, r.Line)
			}
		}
	}
	ev := ncclJoinEvidence([]string{res.OutOfBoundsLine}, wrongRows, res.Errors)
	oob := "no trailer"
	if res.OutOfBounds != nil {
		oob = strconv.FormatInt(*res.OutOfBounds, 10) + " FAILED"
		if res.OutOfBoundsOK {
			oob = strconv.FormatInt(*res.OutOfBounds, 10) + " OK"
		}
	}
	actual := fmt.Sprintf("%s, exit %d", oob, exitCode)
	switch {
	case res.OutOfBounds == nil:
		if ev == "" {
			ev = textcut.Tail(output, ncclEvidenceMax)
		}
		return check(result.NCCLCorrectness, result.Fail, BasisRule, expected, actual,
			"the test printed no 'Out of bounds values' line: it did not finish (crash, abort, or the output was cut)", ev)
	case *res.OutOfBounds != 0 || !res.OutOfBoundsOK:
		return check(result.NCCLCorrectness, result.Fail, BasisRule, expected, actual,
			"all_reduce_perf found wrong values: the GPUs or NVLink corrupt data; this fails the host whatever the bandwidth", ev)
	case res.FailedTrailers > 0:
		return check(result.NCCLCorrectness, result.Fail, BasisRule, expected, actual,
			fmt.Sprintf("an earlier run in the same output reported out-of-bounds values (%d failed trailer lines)", res.FailedTrailers), ev)
	case len(wrongRows) > 0:
		return check(result.NCCLCorrectness, result.Fail, BasisRule, expected, actual,
			"rows report #wrong values although the trailer says 0", ev)
	case exitCode != 0:
		return check(result.NCCLCorrectness, result.Fail, BasisRule, expected, actual,
			fmt.Sprintf("the test exited %d: a rank or mpirun failed even though the values checked were right", exitCode),
			ncclJoinEvidence([]string{ev, textcut.Tail(output, ncclEvidenceMax/2)}))
	case ncclValidationOff(res, o):
		return check(result.NCCLCorrectness, result.Warn, BasisRule, expected, actual+", validation off",
			"the test ran with validation off (-c 0): '0 OK' means nothing was checked; run with -c 1 to judge correctness", ev)
	}
	return check(result.NCCLCorrectness, result.Pass, BasisRule, expected, actual, "", ev)
}

func ncclValidationOff(res nccltests.Result, o NCCLOptions) bool {
	if res.Config != nil && res.Config.Validation != nil {
		return *res.Config.Validation == 0
	}
	return validationOffArgs(o.Args)
}

func ncclFloorText(x NCCLExpect) string {
	if x.BusBWFloorGBps <= 0 {
		return "no floor set"
	}
	return fmt.Sprintf(">= %s GB/s", ncclNum(x.BusBWFloorGBps))
}

func ncclBusBW(res nccltests.Result, output string, exitCode int, x NCCLExpect) result.Check {
	expected := ncclFloorText(x)
	l := res.Largest
	if l == nil {
		ev := ncclJoinEvidence(res.Errors)
		if ev == "" {
			ev = textcut.Tail(output, ncclEvidenceMax)
		}
		return check(result.NCCLBusBW, result.Fail, x.FloorBasis, expected, "no result rows",
			"the test printed no result table, so there is no bandwidth to judge", ev)
	}
	header := ""
	if len(res.Columns) > 0 {
		header = "# " + strings.Join(res.Columns, " ")
	}
	ev := ncclJoinEvidence([]string{header, l.Line, res.AvgBusBWLine})
	if l.OutOfPlace.BusBW == nil {
		return check(result.NCCLBusBW, result.Fail, x.FloorBasis, expected, fmt.Sprintf("N/A at %s", ncclSize(l.SizeBytes)),
			"the busbw cell of the largest message size is not a number", ev)
	}
	bw := *l.OutOfPlace.BusBW
	actual := fmt.Sprintf("%s GB/s at %s (out-of-place)", ncclNum(bw), ncclSize(l.SizeBytes))
	switch {
	case res.OutOfBounds == nil:
		return check(result.NCCLBusBW, result.Fail, x.FloorBasis, expected, actual,
			fmt.Sprintf("the test did not finish (no trailer): the table stops at %s, so this is not the figure of the full run", ncclSize(l.SizeBytes)), ev)
	case exitCode != 0:
		return check(result.NCCLBusBW, result.Fail, x.FloorBasis, expected, actual,
			fmt.Sprintf("the test exited %d: the bandwidth of a failed run is not trusted", exitCode), ev)
	case x.BusBWFloorGBps <= 0:
		return check(result.NCCLBusBW, result.Warn, "", expected, actual,
			"not judged: no busbw floor for this instance type; set expect.busbw_floor_gbps (P6-B200 1-node all-reduce reference: 711 GB/s at 1 GiB)", ev)
	case bw < x.BusBWFloorGBps:
		return check(result.NCCLBusBW, result.Fail, x.FloorBasis, expected, actual,
			fmt.Sprintf("busbw %s GB/s is below the floor of %s GB/s: GPUs or NVLink do not reach their bandwidth (Fabric Manager, a degraded NVLink, or throttled GPUs)", ncclNum(bw), ncclNum(x.BusBWFloorGBps)), ev)
	}
	return check(result.NCCLBusBW, result.Pass, x.FloorBasis, expected, actual, "", ev)
}

func ncclTransportExpected(x NCCLExpect) string {
	switch {
	case x.Transport == TransportAny:
		return "any transport on one node (reported)"
	case x.EFACount > 0:
		return fmt.Sprintf("Libfabric (aws-ofi-nccl) over EFA, %d nics", x.EFACount)
	}
	return "Libfabric (aws-ofi-nccl) over EFA"
}

// ncclTransport judges the network NCCL chose. On one node the data moves over NVLink, but
// NCCL still initialises its network at communicator setup, so the INFO lines show whether
// aws-ofi-nccl and EFA would carry a multi-node job. On a host without EFA (policy any) a
// socket or no-network run is right: one node uses NVLink, P2P or SHM, and the check reports
// what NCCL chose.
func ncclTransport(res nccltests.Result, output string, x NCCLExpect, o NCCLOptions) result.Check {
	expected := ncclTransportExpected(x)
	basis := x.TransportBasis
	tr := res.Transport
	ev := ncclJoinEvidence(tr.Lines, res.Errors)
	if ev == "" {
		ev = textcut.Tail(output, ncclEvidenceMax)
	}
	actual := ncclTransportActual(tr)
	ibSet := tr.NCCLNetIB || ncclEnvSetsIB(o.Env)
	ibNote := ""
	if ibSet {
		ibNote = "; NCCL_NET=IB was set: never force it, NCCL picks EFA by itself"
	}
	if x.Transport == TransportAny {
		if ibSet {
			return check(result.NCCLTransport, result.Warn, basis, expected, actual,
				"NCCL_NET=IB was set: it breaks NCCL on hosts with DOWN ConnectX-7 ports; leave NCCL_NET unset", ev)
		}
		return check(result.NCCLTransport, result.Pass, basis, expected, actual,
			"no EFA on this host: NCCL's choice is reported, not required ("+actual+")", ev)
	}
	hasNet := func(name string) bool {
		for _, n := range tr.Networks {
			if strings.EqualFold(n, name) {
				return true
			}
		}
		return false
	}
	switch {
	case tr.Socket:
		return check(result.NCCLTransport, result.Fail, basis, expected, actual,
			"NCCL fell back to sockets (NET/Socket): aws-ofi-nccl did not load or found no EFA device; check that the NCCL, aws-ofi-nccl and libfabric versions match and that /opt/amazon/ofi-nccl/lib is on LD_LIBRARY_PATH (an instance type without EFA gets nccl.transport = \"any\" by itself)"+ibNote, ev)
	case hasNet("IB"):
		return check(result.NCCLTransport, result.Fail, basis, expected, actual,
			"NCCL used its built-in IB transport instead of aws-ofi-nccl over EFA"+ibNote, ev)
	case len(tr.Networks) == 0:
		msg := "no 'Using network' line: NCCL failed before choosing a network, or its INFO output is missing (NCCL_DEBUG=INFO)"
		return check(result.NCCLTransport, result.Fail, basis, expected, actual, msg+ibNote, ev)
	case len(tr.Providers) == 0:
		return check(result.NCCLTransport, result.Fail, basis, expected, actual,
			"aws-ofi-nccl printed no 'Selected provider' line: which libfabric provider would carry traffic (efa, or tcp leaving the host) is unknown, so EFA is not proven"+ibNote, ev)
	}
	for _, n := range tr.Networks {
		if n != "Libfabric" && n != "AWS Libfabric" {
			return check(result.NCCLTransport, result.Fail, basis, expected, actual,
				fmt.Sprintf("NCCL used network %q, not aws-ofi-nccl (Libfabric)%s", n, ibNote), ev)
		}
	}
	for _, p := range tr.Providers {
		if !strings.HasPrefix(p.Name, "efa") {
			return check(result.NCCLTransport, result.Fail, basis, expected, actual,
				fmt.Sprintf("aws-ofi-nccl selected the libfabric provider %q, not efa: traffic would leave the host over TCP", p.Name), ev)
		}
		if x.EFACount > 0 && p.NICs != nil && *p.NICs != x.EFACount {
			return check(result.NCCLTransport, result.Fail, basis, expected, actual,
				fmt.Sprintf("aws-ofi-nccl found %d EFA nics, the instance has %d: some EFA devices are missing or down", *p.NICs, x.EFACount), ev)
		}
	}
	if ibSet {
		return check(result.NCCLTransport, result.Warn, basis, expected, actual,
			"NCCL_NET=IB was set: this run still used Libfabric, but forcing IB breaks NCCL on hosts with DOWN ConnectX-7 ports; leave NCCL_NET unset", ev)
	}
	msg := ""
	if x.EFACount > 0 && !ncclHasNICCount(tr.Providers) {
		msg = "this aws-ofi-nccl does not print its nic count; the count was not compared"
	}
	if tr.ForwardCompat {
		msg = strings.TrimPrefix(msg+"; CUDA Forward Compatibility mode is enabled (normal with a newer container CUDA)", "; ")
	}
	return check(result.NCCLTransport, result.Pass, basis, expected, actual, msg, ev)
}

func ncclHasNICCount(ps []nccltests.Provider) bool {
	for _, p := range ps {
		if p.NICs != nil {
			return true
		}
	}
	return false
}

func ncclTransportActual(tr nccltests.Transport) string {
	var parts []string
	if len(tr.Networks) == 0 {
		parts = append(parts, "no network line")
	} else {
		parts = append(parts, strings.Join(tr.Networks, "+"))
	}
	for _, p := range tr.Providers {
		s := p.Name
		if p.NICs != nil {
			s += fmt.Sprintf(", %d nics", *p.NICs)
		}
		parts = append(parts, s)
	}
	if tr.Socket && !strings.Contains(parts[0], "Socket") {
		parts = append(parts, "NET/Socket")
	}
	if tr.NCCLNetIB {
		parts = append(parts, "NCCL_NET=IB")
	}
	if d := tr.DataTransport(); d != "" {
		parts = append(parts, "data over "+d)
	}
	return strings.Join(parts, ", ")
}

// ncclJoinEvidence joins non-empty lines, at most ncclEvidenceMax bytes.
func ncclJoinEvidence(groups ...[]string) string {
	var b strings.Builder
	for _, g := range groups {
		for _, l := range g {
			l = strings.TrimSpace(l)
			if l == "" {
				continue
			}
			if b.Len()+len(l)+1 > ncclEvidenceMax {
				if b.Len() == 0 {
					b.WriteString(textcut.Head(l, ncclEvidenceMax))
				}
				return b.String()
			}
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(l)
		}
	}
	return b.String()
}

func ncclNum(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// ncclSize prints a byte count the way the report reads it ("1 GiB", "256 MiB", "1000 B").
func ncclSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	u := 0
	for u < len(units)-1 && n >= 1024 && n%1024 == 0 {
		n /= 1024
		u++
	}
	return fmt.Sprintf("%d %s", n, units[u])
}

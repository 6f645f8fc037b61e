package checks

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

func init() {
	register(Entry{
		ID: result.NCCLCorrectness, Phase: PhaseLoad, Family: "nccl", Order: 400, Judge: judgeNCCLCorrectness,
		Doc:   "the all-reduce ran to completion and reported `Out of bounds values : 0 OK`",
		Reads: "`all_reduce_perf` output",
	})
	register(Entry{
		ID: result.NCCLBusBW, Phase: PhaseLoad, Family: "nccl", Order: 410, Judge: judgeNCCLBusBW,
		Doc:   "busbw at the largest message size is at least the floor",
		Reads: "`all_reduce_perf` output",
	})
	register(Entry{
		ID: result.NCCLTransport, Phase: PhaseLoad, Family: "nccl", Order: 420, Judge: judgeNCCLTransport,
		Doc:   "with `transport = \"efa\"`: NCCL loaded aws-ofi-nccl and used `Libfabric`/`AWS Libfabric` with as many NICs as EFA devices (a socket fallback fails); with `any`: what NCCL chose is reported; `NCCL_NET=IB` warns; on an EFA-capable host whose launch attached no EFA interface the EFA rule is not judged: what NCCL chose is reported with a warning; on a fleet node, or a verification whose launch asked for EFA, it is judged, and a socket fallback names the missing EFA interfaces",
		Reads: "the `NCCL_DEBUG=INFO` lines",
	})
}

// ncclEvidenceMax bounds the NCCL output quoted as evidence.
const ncclEvidenceMax = 3000

// NCCLExpect is what the NCCL checks compare against, resolved from a Target.
type NCCLExpect struct {
	// BusBWFloorGBps is the lowest acceptable busbw at the largest size; 0 = no floor (warn).
	BusBWFloorGBps float64
	FloorBasis     string
	// EFACount is the EFA device count aws-ofi-nccl must find; 0 = not compared.
	EFACount int
	// Transport is settings.TransportEFA or settings.TransportAny; TransportBasis says why.
	Transport      settings.Transport
	TransportBasis string
	// Ranks is one per expected GPU (0 = let the script count them).
	Ranks int
	// EFAUnattached, when set, says why the EFA rule is not judged on this host: its launch
	// attached no EFA interface. The transport is then reported with a warning.
	EFAUnattached string
	// EFAMissing, when set, says why EFA was due on this host and is missing (a verification
	// launch EC2 gave fewer EFA interfaces, a fleet node whose launch template attached none):
	// the EFA rule is judged, and a socket fallback names it.
	EFAMissing string
}

// NCCLExpect resolves the NCCL expectations: the busbw floor (setting, else profile), the EFA
// count (as efa-devices resolves it) and the transport policy (setting, else EFA when the host
// or its expectations have EFA devices, else any).
func (t Target) NCCLExpect() NCCLExpect {
	x := NCCLExpect{BusBWFloorGBps: t.Expect.BusBWFloorGBps, FloorBasis: BasisSetting}
	if x.BusBWFloorGBps == 0 {
		x.FloorBasis = ""
		if t.Profile != nil && t.Profile.BusBWFloorGBps > 0 {
			x.BusBWFloorGBps, x.FloorBasis = t.Profile.BusBWFloorGBps, t.profileName()
		}
	}
	if why := t.efaUnattached(); why != "" && t.NCCL.Transport == settings.TransportAuto {
		x.Transport, x.TransportBasis, x.EFAUnattached = settings.TransportAny, "no EFA attached at launch", why
		if n, _, ok := t.expectedCount(t.Expect.GPUCount, func(p profile.Profile) int { return p.GPUCount }, func(i facts.PCIInventory) int { return len(i.GPUs) }); ok {
			x.Ranks = n
		}
		return x
	}
	x.EFAMissing = t.efaMissing()
	if n, basis, ok := t.expectedEFA(); ok {
		x.EFACount = n
		x.TransportBasis = basis
	}
	if n, _, ok := t.expectedCount(t.Expect.GPUCount, func(p profile.Profile) int { return p.GPUCount }, func(i facts.PCIInventory) int { return len(i.GPUs) }); ok {
		x.Ranks = n
	}
	switch {
	case t.NCCL.Transport != settings.TransportAuto:
		x.Transport, x.TransportBasis = t.NCCL.Transport, "setting nccl.transport"
	case x.EFACount > 0:
		x.Transport = settings.TransportEFA
		x.TransportBasis = fmt.Sprintf("%d EFA devices expected (%s)", x.EFACount, x.TransportBasis)
	case t.efaOnHost() > 0:
		// expect.efa_count = -1 turns the count off, not EFA: a socket fallback on an EFA host
		// must still fail.
		x.Transport = settings.TransportEFA
		x.TransportBasis = fmt.Sprintf("the host has %d EFA devices (expect.efa_count = -1 turns only the count off)", t.efaOnHost())
	case t.PCI != nil:
		x.Transport, x.TransportBasis = settings.TransportAny, "PCI inventory: no EFA function"
	default:
		// Nothing says whether the host has EFA: require it rather than pass a socket run.
		x.Transport, x.TransportBasis = settings.TransportEFA, "default: the PCI inventory is unreadable"
	}
	return x
}

// ncclNotJudged returns the verdict of a check of an NCCL run that did not run, could not
// run, could not start the test, or was stopped by its bound; ok is false when the run can be
// judged. A run that timed out, or could not start, fails all three checks.
func ncclNotJudged(id string, run facts.NCCLRun, basis, expected string) (result.Check, bool) {
	switch {
	case run.NotRun != "":
		return check(id, result.Skip, "", "", "", "not run: "+run.NotRun, ""), true
	case run.Problem != "":
		if id == result.NCCLCorrectness {
			return check(id, result.Error, "", "the NCCL test runs to completion", "could not run", run.Problem, run.Tail), true
		}
		return check(id, result.Skip, "", "", "", "not run: the NCCL test could not run", ""), true
	case len(run.ScriptErrors) > 0 || (run.Binary == "" && run.ExitCode == ncclNoTestExit):
		why := strings.Join(run.ScriptErrors, "; ")
		if why == "" {
			why = fmt.Sprintf("the NCCL test script exited %d before starting the test", run.ExitCode)
		}
		return check(id, result.Fail, basis, expected, "not run", "the NCCL test could not start: "+why, textcut.Tail(run.Tail, ncclEvidenceMax)), true
	case run.TimedOut:
		secs := int(run.Timeout.Seconds())
		msg := fmt.Sprintf("the NCCL test did not finish: stopped by its timeout (%d s, exit %d); a hang in NCCL init or in a collective fails the host whatever the partial figures say", secs, run.ExitCode)
		return check(id, result.Fail, basis, expected, fmt.Sprintf("timed out after %d s", secs), msg,
			ncclJoinEvidence(run.Result.Errors, []string{textcut.Tail(run.Tail, ncclEvidenceMax/2)})), true
	}
	return result.Check{}, false
}

// ncclNoTestExit is the script's exit status when it cannot start the test at all.
const ncclNoTestExit = 127

// judgeNCCLCorrectness judges that the all-reduce ran to completion with correct data.
func judgeNCCLCorrectness(f facts.Run, t Target) result.Check {
	return ncclVerdicts(f.Load.NCCL, t.NCCLExpect(), t.NCCL)[0]
}

// judgeNCCLBusBW judges the bus bandwidth at the largest message size against the floor.
func judgeNCCLBusBW(f facts.Run, t Target) result.Check {
	return ncclVerdicts(f.Load.NCCL, t.NCCLExpect(), t.NCCL)[1]
}

// judgeNCCLTransport judges the network NCCL chose.
func judgeNCCLTransport(f facts.Run, t Target) result.Check {
	return ncclVerdicts(f.Load.NCCL, t.NCCLExpect(), t.NCCL)[2]
}

// ncclVerdicts are the three NCCL checks of one run, in order: correctness, busbw, transport.
func ncclVerdicts(run facts.NCCLRun, x NCCLExpect, o settings.NCCL) [3]result.Check {
	var out [3]result.Check
	for i, c := range []struct {
		id, basis, expected string
		verdict             func() result.Check
	}{
		{result.NCCLCorrectness, BasisRule, ncclCorrectExpected, func() result.Check { return ncclCorrectness(run, o) }},
		{result.NCCLBusBW, x.FloorBasis, ncclFloorText(x), func() result.Check { return ncclBusBW(run, x) }},
		{result.NCCLTransport, x.TransportBasis, ncclTransportExpected(x), func() result.Check { return ncclTransport(run, x, o) }},
	} {
		if v, done := ncclNotJudged(c.id, run, c.basis, c.expected); done {
			out[i] = v
		} else {
			out[i] = c.verdict()
		}
	}
	return out
}

const ncclCorrectExpected = "0 OK, exit 0"

func ncclCorrectness(run facts.NCCLRun, o settings.NCCL) result.Check {
	res, exitCode := run.Result, run.ExitCode
	const expected = ncclCorrectExpected
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
			ev = textcut.Tail(run.Tail, ncclEvidenceMax)
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
			ncclJoinEvidence([]string{ev, textcut.Tail(run.Tail, ncclEvidenceMax/2)}))
	case ncclValidationOff(res, o):
		return check(result.NCCLCorrectness, result.Warn, BasisRule, expected, actual+", validation off",
			"the test ran with validation off (-c 0): '0 OK' means nothing was checked; run with -c 1 to judge correctness", ev)
	}
	return check(result.NCCLCorrectness, result.Pass, BasisRule, expected, actual, "", ev)
}

func ncclValidationOff(res facts.NCCLResult, o settings.NCCL) bool {
	if res.Config != nil && res.Config.Validation != nil {
		return *res.Config.Validation == 0
	}
	return o.ValidationOff()
}

func ncclFloorText(x NCCLExpect) string {
	if x.BusBWFloorGBps <= 0 {
		return "no floor set"
	}
	return fmt.Sprintf(">= %s GB/s", ncclNum(x.BusBWFloorGBps))
}

func ncclBusBW(run facts.NCCLRun, x NCCLExpect) result.Check {
	res, exitCode := run.Result, run.ExitCode
	expected := ncclFloorText(x)
	l := res.Largest
	if l == nil {
		ev := ncclJoinEvidence(res.Errors)
		if ev == "" {
			ev = textcut.Tail(run.Tail, ncclEvidenceMax)
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
	case x.EFAUnattached != "":
		return "Libfabric (aws-ofi-nccl) over EFA, where EFA is attached (not here)"
	case x.Transport == settings.TransportAny:
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
func ncclTransport(run facts.NCCLRun, x NCCLExpect, o settings.NCCL) result.Check {
	res := run.Result
	expected := ncclTransportExpected(x)
	basis := x.TransportBasis
	tr := res.Transport
	ev := ncclJoinEvidence(tr.Lines, res.Errors)
	if ev == "" {
		ev = textcut.Tail(run.Tail, ncclEvidenceMax)
	}
	actual := ncclTransportActual(tr)
	ibSet := tr.NCCLNetIB || o.ForcesIB()
	ibNote := ""
	if ibSet {
		ibNote = "; NCCL_NET=IB was set: never force it, NCCL picks EFA by itself"
	}
	if x.EFAUnattached != "" {
		return check(result.NCCLTransport, result.Warn, basis, expected, actual,
			"the EFA rule is not judged here: "+x.EFAUnattached+"; "+efaProvenElsewhere+" (NCCL chose "+actual+")", ev)
	}
	if x.Transport == settings.TransportAny {
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
	case tr.Socket && x.EFAMissing != "":
		return check(result.NCCLTransport, result.Fail, basis, expected, actual,
			"NCCL fell back to sockets (NET/Socket): "+x.EFAMissing+ibNote, ev)
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

func ncclHasNICCount(ps []facts.NCCLProvider) bool {
	for _, p := range ps {
		if p.NICs != nil {
			return true
		}
	}
	return false
}

func ncclTransportActual(tr facts.NCCLTransport) string {
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

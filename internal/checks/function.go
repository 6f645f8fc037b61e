package checks

import (
	"bufio"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dcgmdiag"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/efapkgs"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/lsmod"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nccltests"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pingpong"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/rdmastat"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// FunctionOptions are the settings of the tests that prove the hardware works: DCGM's
// diagnostics, bytes across every EFA device, GPUDirect RDMA.
type FunctionOptions struct {
	// DCGMLevel is dcgmi diag's run level: 0 off, 1, 2 (DefaultDCGMLevel) or 3.
	DCGMLevel  int
	EFATraffic EFATrafficOptions
	GDR        GDROptions
}

// DefaultDCGMLevel is level 2, the production gate of AWS's GPU cluster health check
// (awsome-distributed-training 4.validation_and_observability/2.gpu-cluster-healthcheck): a
// few minutes, the medium set of tests (memory, PCIe, NVLink bandwidth...).
const DefaultDCGMLevel = 2

// dcgmTimeoutSeconds bounds a dcgmi diag run per level: DCGM's documentation gives level 1 a
// few seconds, level 2 about two minutes and level 3 up to 30 minutes; the bounds leave room.
var dcgmTimeoutSeconds = map[int]int{1: 300, 2: 900, 3: 3600}

// DCGMTimeout bounds the diagnostics of level.
func DCGMTimeout(level int) int { return dcgmTimeoutSeconds[level] }

// ValidateDCGMLevel names the setting when the level is not one DCGM runs.
func ValidateDCGMLevel(level int) error {
	if level < 0 || level > 3 {
		return fmt.Errorf("dcgm_level = %d: use 0 (off), 1, 2 or 3", level)
	}
	return nil
}

// dcgmMarker starts the lines the DCGM script prints about itself.
const dcgmMarker = "@@DLAMI-DCGM"

// DCGMCommand is the POSIX sh script that runs `dcgmi diag -r level -j`, starting DCGM's host
// engine when none answers and stopping the one it started. dcgmi's stderr is kept apart so
// the JSON document stays whole.
func DCGMCommand(level int) (string, error) {
	if err := ValidateDCGMLevel(level); err != nil || level == 0 {
		return "", fmt.Errorf("dcgm: no run at level %d", level)
	}
	return fmt.Sprintf(`#!/bin/sh
dcgmi=/usr/bin/dcgmi; he=/usr/bin/nv-hostengine; m=%[1]s
if [ ! -x "$dcgmi" ]; then echo "$m ERROR dcgmi is not installed at $dcgmi"; exit 127; fi
started=
if ! "$dcgmi" discovery -l >/dev/null 2>&1; then
  if [ ! -x "$he" ]; then echo "$m ERROR no DCGM host engine answers and $he is not installed"; exit 127; fi
  sudo -n "$he" >/dev/null 2>&1 || { echo "$m ERROR could not start $he"; exit 127; }
  started=1; echo "$m STARTED nv-hostengine"
  i=0; while ! "$dcgmi" discovery -l >/dev/null 2>&1; do i=$((i+1)); [ $i -ge 30 ] && break; sleep 1; done
fi
err=$(mktemp) || exit 1
"$dcgmi" diag -r %[2]d -j 2>"$err"; rc=$?
echo; echo "$m EXIT $rc"; echo "$m STDERR"; cat "$err"; rm -f "$err"
if [ -n "$started" ]; then sudo -n "$he" --term >/dev/null 2>&1; echo "$m STOPPED nv-hostengine"; fi
exit $rc
`, dcgmMarker, level), nil
}

// ParseDCGMRun reads the DCGM script's output into facts: the diagnostics' report, or why they
// could not run.
func ParseDCGMRun(output string, level int) facts.Fact[facts.DCGM] {
	ev := textcut.Tail(output, 4*evidenceMax)
	var doc, stderr strings.Builder
	d := facts.DCGM{Level: level}
	inErr := false
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, dcgmMarker+" "); ok {
			word, arg, _ := strings.Cut(rest, " ")
			switch word {
			case "ERROR":
				return facts.Unread[facts.DCGM]("dcgm: "+arg, ev)
			case "STARTED":
				d.StartedHostEngine = true
			case "STDERR":
				inErr = true
			}
			continue
		}
		if inErr {
			stderr.WriteString(line + "\n")
		} else {
			doc.WriteString(line + "\n")
		}
	}
	rep, err := dcgmdiag.Parse(doc.String())
	if err != nil {
		msg := err.Error()
		if s := strings.TrimSpace(stderr.String()); s != "" {
			msg += ": " + textcut.Head(s, 300)
		}
		return facts.Unread[facts.DCGM](msg, ev)
	}
	d.Report = rep
	return facts.Read(d, ev)
}

// JudgeDCGM judges a dcgmi diag run: a failed test fails, naming the test, the GPU and DCGM's
// message; a test DCGM skipped or did not run, and a run that could not happen at all
// (DCGM_ST_* errors, no host engine), are "could not run": an error, never a pass. DCGM
// missing with a level above 0 fails, naming dcgm_level.
func JudgeDCGM(f facts.Fact[facts.DCGM], level int, timedOut bool) result.Check {
	id := result.DCGM
	expected := fmt.Sprintf("dcgmi diag -r %d: every test passes", level)
	basis := "setting dcgm_level"
	if level == 0 {
		return check(id, result.Skip, basis, "not run", "dcgm_level = 0", "DCGM diagnostics are off (dcgm_level = 0)", "")
	}
	switch {
	case timedOut:
		return check(id, result.Error, basis, expected, "timed out", fmt.Sprintf("dcgmi diag -r %d did not finish within %ds: could not run", level, DCGMTimeout(level)), f.Evidence)
	case !f.OK() && strings.Contains(f.Problem, "not installed"):
		return check(id, result.Fail, basis, expected, "DCGM missing",
			f.Problem+": install DCGM (datacenter-gpu-manager-4, as the DLAMI ships it) or set dcgm_level = 0 to turn the diagnostics off", f.Evidence)
	case !f.OK():
		return check(id, result.Error, basis, expected, "could not run", "DCGM could not run the diagnostics: "+f.Problem, f.Evidence)
	}
	var fails, notRun, warns []string
	passed := 0
	for _, t := range f.Value.Report.Tests {
		for _, r := range t.Results {
			what := fmt.Sprintf("%s on %s %d", t.Name, r.Entity, r.EntityID)
			msg := ""
			if len(r.Warnings) > 0 {
				msg = ": " + textcut.Head(r.Warnings[0].Text, 200)
			}
			switch r.Outcome {
			case dcgmdiag.Pass:
				passed++
			case dcgmdiag.Fail, dcgmdiag.Unknown:
				fails = append(fails, what+" "+r.Outcome.String()+msg)
			case dcgmdiag.Skip, dcgmdiag.NotRun:
				notRun = append(notRun, what+" "+r.Outcome.String()+msg)
			case dcgmdiag.Warn:
				warns = append(warns, what+msg)
			}
		}
		if len(t.Results) == 0 && t.Summary != dcgmdiag.Pass {
			notRun = append(notRun, t.Name+" "+t.Summary.String())
		}
	}
	actual := fmt.Sprintf("%d tests, %d results passed (DCGM %s)", len(f.Value.Report.Tests), passed, f.Value.Report.Version)
	switch {
	case len(fails) > 0:
		return check(id, result.Fail, basis, expected, actual, "DCGM diagnostics failed: "+strings.Join(fails, "; "), f.Evidence)
	case len(notRun) > 0:
		return check(id, result.Error, basis, expected, actual, "could not run: DCGM skipped or did not run "+strings.Join(notRun, "; "), f.Evidence)
	case passed == 0:
		return check(id, result.Error, basis, expected, actual, "could not run: DCGM reported no result", f.Evidence)
	case len(warns) > 0:
		return check(id, result.Warn, basis, expected, actual, "DCGM warned: "+strings.Join(warns, "; "), f.Evidence)
	}
	return check(id, result.Pass, basis, expected, actual, "", "")
}

// EFATrafficOptions configure the EFA traffic test.
type EFATrafficOptions struct {
	Skip bool
	// MinBandwidthMBps is the lowest acceptable fi_pingpong bandwidth per device; 0 = report
	// with a warning.
	MinBandwidthMBps float64
	// TimeoutSeconds bounds one device's ping-pong; Concurrency is how many devices are tested
	// at once.
	TimeoutSeconds int
	Concurrency    int
}

// Defaults of EFATrafficOptions: 32 devices on p5 in groups of 8 take four rounds of at most
// the per-device bound.
const (
	DefaultEFATrafficTimeoutSeconds = 60
	DefaultEFATrafficConcurrency    = 8
	efaPingIterations               = 1000
	efaPingSize                     = 65536
	efaBasePort                     = 47800
	efaMarker                       = "@@DLAMI-EFA"
)

var efaDeviceName = regexp.MustCompile(`^(rdmap[0-9a-z]+|efa_[0-9]+)$`)

// EFATrafficCommand is the POSIX sh script that runs, for every device, an RDM fi_pingpong
// between a server and a client on that device with FI_EFA_ENABLE_SHM_TRANSFER=0: same-host
// traffic otherwise goes through libfabric's shared-memory path and never crosses the device.
// Devices run concurrently in groups, each pair bounded in time; each device's client output
// is printed between markers with both exit statuses.
func EFATrafficCommand(devices []string, o EFATrafficOptions) (string, error) {
	o = o.withDefaults()
	var b strings.Builder
	fmt.Fprintf(&b, `#!/bin/sh
ping=/opt/amazon/efa/bin/fi_pingpong; m=%s
[ -x "$ping" ] || ping=/usr/bin/fi_pingpong
[ -x "$ping" ] || { echo "$m ERROR fi_pingpong is not installed (/opt/amazon/efa/bin/fi_pingpong)"; exit 127; }
FI_EFA_ENABLE_SHM_TRANSFER=0; export FI_EFA_ENABLE_SHM_TRANSFER
dir=$(mktemp -d) || exit 1
pair() {
  timeout -k 2 %d "$ping" -p efa -e rdm -d "$1-rdm" -B "$2" -I %d -S %d >"$dir/$1.server" 2>&1 &
  s=$!
  sleep 0.5
  timeout -k 2 %d "$ping" -p efa -e rdm -d "$1-rdm" -P "$2" -I %d -S %d 127.0.0.1 >"$dir/$1.client" 2>&1
  echo $? >"$dir/$1.rc"
  wait $s; echo $? >"$dir/$1.src"
}
`, efaMarker, o.TimeoutSeconds, efaPingIterations, efaPingSize, o.TimeoutSeconds, efaPingIterations, efaPingSize)
	for i, d := range devices {
		if !efaDeviceName.MatchString(d) {
			return "", fmt.Errorf("efa traffic: %q is not an EFA device name", d)
		}
		fmt.Fprintf(&b, "pair %s %d &\n", bundle.Quote(d), efaBasePort+i)
		if (i+1)%o.Concurrency == 0 || i == len(devices)-1 {
			b.WriteString("wait\n")
		}
	}
	for _, d := range devices {
		q := bundle.Quote(d)
		fmt.Fprintf(&b, "echo \"$m BEGIN %s\"; cat \"$dir/\"%s.client; echo; echo \"$m END %s $(cat \"$dir/\"%s.rc) $(cat \"$dir/\"%s.src)\"\n", d, q, d, q, q)
	}
	b.WriteString("rm -rf \"$dir\"\nexit 0\n")
	return b.String(), nil
}

func (o EFATrafficOptions) withDefaults() EFATrafficOptions {
	if o.TimeoutSeconds <= 0 {
		o.TimeoutSeconds = DefaultEFATrafficTimeoutSeconds
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultEFATrafficConcurrency
	}
	return o
}

// EFATrafficBudgetSeconds bounds the whole test of n devices.
func EFATrafficBudgetSeconds(n int, o EFATrafficOptions) int {
	o = o.withDefaults()
	rounds := (n + o.Concurrency - 1) / o.Concurrency
	return rounds*(o.TimeoutSeconds+5) + 30
}

// ParseEFATraffic reads the traffic script's output: one ping-pong per device.
func ParseEFATraffic(output string) ([]facts.Fact[facts.PingPong], error) {
	var out []facts.Fact[facts.PingPong]
	var cur *facts.PingPong
	var body strings.Builder
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, efaMarker+" ")
		if !ok {
			if cur != nil {
				body.WriteString(line + "\n")
			}
			continue
		}
		f := strings.Fields(rest)
		switch {
		case len(f) >= 1 && f[0] == "ERROR":
			return nil, fmt.Errorf("efa traffic: %s", strings.TrimPrefix(rest, "ERROR "))
		case len(f) == 2 && f[0] == "BEGIN":
			cur = &facts.PingPong{Device: f[1]}
			body.Reset()
		case len(f) >= 3 && f[0] == "END" && cur != nil && f[1] == cur.Device:
			rc, _ := strconv.Atoi(f[2])
			src := -1
			if len(f) >= 4 {
				src, _ = strconv.Atoi(f[3])
			}
			cur.ExitCode = rc
			cur.TimedOut = bundle.TimedOut(rc) || bundle.TimedOut(src)
			text := strings.TrimSpace(body.String())
			ev := fmt.Sprintf("[%s client: exit %d, server: exit %d]\n%s", cur.Device, rc, src, textcut.HeadNote(text, evidenceMax))
			switch tables, err := pingpong.Parse(text); {
			case cur.TimedOut:
				out = append(out, facts.Unread[facts.PingPong](fmt.Sprintf("%s: the ping-pong hung and was stopped", cur.Device), ev))
			case rc != 0 || (src != 0 && src != -1):
				why := fmt.Sprintf("%s: the ping-pong failed (client exit %d, server exit %d)", cur.Device, rc, src)
				if err != nil {
					why += ": " + err.Error()
				}
				out = append(out, facts.Unread[facts.PingPong](why, ev))
			case err != nil:
				out = append(out, facts.Unread[facts.PingPong](cur.Device+": "+err.Error(), ev))
			default:
				cur.Client = tables
				out = append(out, facts.Read(*cur, ev))
			}
			cur = nil
		}
	}
	if cur != nil {
		return out, fmt.Errorf("efa traffic: the output of %s is cut short", cur.Device)
	}
	return out, nil
}

// efaCounterWatched are the EFA device counters whose growth during traffic warns: packets
// dropped, retransmission timeouts, unresponsive or impaired remote connections.
var efaCounterWatched = []string{"rx_drops", "retrans_timeout_events", "unresponsive_remote_events", "impaired_remote_conn_events", "rdma_read_wr_err", "rdma_write_wr_err"}

// JudgeEFATraffic judges the EFA traffic test: every EFA device must carry an RDM ping-pong
// across the device (a device that hangs, errors or falls below the floor fails and is named),
// with bandwidth and latency reported per device; error counters that grew warn.
func JudgeEFATraffic(t facts.EFATraffic, devices []string, o EFATrafficOptions) result.Check {
	id := result.EFATraffic
	expected := fmt.Sprintf("an RDM ping-pong across each of %d EFA devices (FI_EFA_ENABLE_SHM_TRANSFER=0)", len(devices))
	basis := BasisRule
	if o.MinBandwidthMBps > 0 {
		expected += fmt.Sprintf(", at least %s MB/s each", ncclNum(o.MinBandwidthMBps))
		basis = BasisSetting
	}
	byDevice := map[string]facts.Fact[facts.PingPong]{}
	for i, f := range t.Devices {
		name := f.Value.Device
		if name == "" && i < len(devices) {
			name = devices[i]
		}
		byDevice[name] = f
	}
	var fails, figures []string
	var evs []string
	var low float64 = -1
	for _, d := range devices {
		f, ok := byDevice[d]
		switch {
		case !ok:
			fails = append(fails, d+": no result (the test did not reach it)")
			continue
		case !f.OK():
			fails = append(fails, f.Problem)
			evs = append(evs, f.Evidence)
			continue
		}
		var best pingpong.Row
		for _, tab := range f.Value.Client {
			if r := tab.Largest(); r.Bytes >= best.Bytes {
				best = r
			}
		}
		if !best.Complete() {
			fails = append(fails, fmt.Sprintf("%s: %d of %d messages acknowledged", d, best.Acked, best.Sent))
			evs = append(evs, f.Evidence)
			continue
		}
		figures = append(figures, fmt.Sprintf("%s %s MB/s %s us", d, ncclNum(best.MBps), ncclNum(best.UsecPerXfer)))
		if low < 0 || best.MBps < low {
			low = best.MBps
		}
		if o.MinBandwidthMBps > 0 && best.MBps < o.MinBandwidthMBps {
			fails = append(fails, fmt.Sprintf("%s: %s MB/s, below efa_traffic.min_bandwidth_mbps %s", d, ncclNum(best.MBps), ncclNum(o.MinBandwidthMBps)))
			evs = append(evs, f.Evidence)
		}
	}
	actual := fmt.Sprintf("%d of %d devices carried traffic", len(figures), len(devices))
	if low >= 0 {
		actual += fmt.Sprintf(", lowest %s MB/s", ncclNum(low))
	}
	grew := efaCounterGrowth(t.StatsBefore, t.StatsAfter)
	ev := evidence(strings.Join(evs, "\n"), strings.Join(figures, "\n"))
	if len(fails) > 0 {
		return check(id, result.Fail, basis, expected, actual, "EFA traffic failed: "+strings.Join(append(fails, grew...), "; "), ev)
	}
	var warns []string
	if len(grew) > 0 {
		warns = append(warns, "EFA error counters grew during the traffic test: "+strings.Join(grew, ", "))
		ev = evidence(ev, t.StatsAfter.Evidence)
	}
	if o.MinBandwidthMBps == 0 {
		warns = append(warns, "bandwidth not judged: set efa_traffic.min_bandwidth_mbps to set a floor (figures per device in the evidence)")
	}
	if len(warns) > 0 {
		return check(id, result.Warn, basis, expected, actual, strings.Join(warns, "; "), ev)
	}
	return check(id, result.Pass, basis, expected, actual, "", ev)
}

// efaCounterGrowth lists the watched counters that grew; unreadable counters are named too.
func efaCounterGrowth(before, after facts.Fact[[]rdmastat.Link]) []string {
	if !before.OK() || !after.OK() {
		return []string{"the EFA device counters could not be read around the test: " + strings.TrimPrefix(before.Problem+"; "+after.Problem, "; ")}
	}
	changes, err := rdmastat.Delta(before.Value, after.Value)
	if err != nil {
		return []string{"the EFA device counters cannot be compared: " + err.Error()}
	}
	var out []string
	for _, c := range changes {
		for _, w := range efaCounterWatched {
			if c.Counter == w && c.Increase() > 0 {
				out = append(out, c.String())
			}
		}
	}
	sort.Strings(out)
	return out
}

// GDROptions configure the GPUDirect RDMA test.
type GDROptions struct {
	Skip bool
	// BusBWFloorGBps is the lowest acceptable bus bandwidth of the forced-network all-reduce;
	// 0 = report with a warning.
	BusBWFloorGBps float64
}

// GDRArgs are the forced-network all-reduce's arguments: short (it only has to prove the path),
// large enough messages to reach the network's bandwidth, data validated.
var GDRArgs = []string{"-b", "8M", "-e", "256M", "-f", "2", "-g", "1", "-c", "1", "-n", "20"}

// GDREnv switches NVLink, shared memory and NVLink SHARP off, so the ranks of one node talk
// through the network plugin and the EFA devices.
var GDREnv = map[string]string{"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_NVLS_ENABLE": "0"}

// GDROptionsFor is the NCCL test of the GPUDirect RDMA check, from the bake's NCCL settings.
func GDROptionsFor(o NCCLOptions) NCCLOptions {
	env := map[string]string{}
	for k, v := range o.Env {
		env[k] = v
	}
	for k, v := range GDREnv {
		env[k] = v
	}
	o.Env, o.Args, o.Transport = env, GDRArgs, TransportEFA
	return o
}

// peerMemModule is the kernel module that lets the EFA device read and write GPU memory, which
// the EFA installer ships as efa-nv-peermem.
const peerMemModule = "efa_nv_peermem"

// JudgeGPUDirectRDMA judges the forced-network all-reduce: its data must be correct, every
// network channel must go via NET/...Libfabric.../GDRDMA (without GPUDirect RDMA, NCCL
// silently stages every transfer through host memory at a fraction of the bandwidth), and
// the bus bandwidth is reported against a floor. The peer-memory module the EFA installer
// record lists must be loaded.
func JudgeGPUDirectRDMA(output string, exitCode int, timedOut bool, o GDROptions, installer facts.Fact[efapkgs.Installed], loaded facts.Fact[lsmod.Set]) result.Check {
	id := result.GPUDirectRDMA
	expected := "channels via NET/Libfabric/.../GDRDMA, correct data"
	basis := BasisRule
	if o.BusBWFloorGBps > 0 {
		expected += fmt.Sprintf(", busbw >= %s GB/s", ncclNum(o.BusBWFloorGBps))
		basis = BasisSetting
	}
	res, _ := nccltests.ParseString(output)
	ev := textcut.Tail(output, ncclEvidenceMax)
	var fails []string
	if installer.OK() {
		if listed := slices.Contains(installer.Value.Names, "efa-nv-peermem"); listed {
			switch {
			case !loaded.OK():
				fails = append(fails, "the loaded modules could not be read: "+loaded.Problem)
			case !loaded.Value.Has(peerMemModule):
				fails = append(fails, "the EFA installer lists efa-nv-peermem but the "+peerMemModule+" module is not loaded: the EFA device cannot reach GPU memory (modprobe "+peerMemModule+")")
			}
		}
	}
	if timedOut || bundle.TimedOut(exitCode) {
		return check(id, result.Fail, basis, expected, "timed out", strings.Join(append(fails, "the forced-network all-reduce did not finish"), "; "), ev)
	}
	corr := ncclCorrectness(res, output, exitCode, NCCLOptions{Args: GDRArgs})
	if corr.Status.Failing() {
		fails = append(fails, "the forced-network all-reduce is not correct: "+corr.Message)
	}
	var net, gdr []string
	for _, p := range res.Transport.DataPaths {
		if strings.HasPrefix(p, "NET/") {
			net = append(net, p)
			if strings.HasSuffix(p, "/GDRDMA") && strings.Contains(strings.ToLower(p), "libfabric") {
				gdr = append(gdr, p)
			}
		}
	}
	switch {
	case len(net) == 0:
		fails = append(fails, "no channel went over the network: NCCL did not use aws-ofi-nccl with NVLink and shared memory off")
	case len(gdr) < len(net):
		fails = append(fails, "channels go via "+strings.Join(net, ", ")+" without GDRDMA: NCCL stages every transfer through host memory (check the peer-memory module and that the GPUs and EFA devices share a PCIe switch)")
	}
	bw := -1.0
	if res.Largest != nil && res.Largest.OutOfPlace.BusBW != nil {
		bw = *res.Largest.OutOfPlace.BusBW
	}
	actual := fmt.Sprintf("%s; busbw %s GB/s", strings.Join(net, ", "), ncclNum(max(bw, 0)))
	if bw < 0 {
		fails = append(fails, "the forced-network all-reduce printed no bus bandwidth")
	} else if o.BusBWFloorGBps > 0 && bw < o.BusBWFloorGBps {
		fails = append(fails, fmt.Sprintf("busbw %s GB/s below gpudirect_rdma.busbw_floor_gbps %s", ncclNum(bw), ncclNum(o.BusBWFloorGBps)))
	}
	if len(fails) > 0 {
		return check(id, result.Fail, basis, expected, actual, strings.Join(fails, "; "), ev)
	}
	if o.BusBWFloorGBps == 0 {
		return check(id, result.Warn, basis, expected, actual, "bus bandwidth not judged: set gpudirect_rdma.busbw_floor_gbps to set a floor", "")
	}
	return check(id, result.Pass, basis, expected, actual, "", "")
}

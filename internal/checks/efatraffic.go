package checks

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func init() {
	register(Entry{
		ID: result.EFATraffic, Phase: PhaseFunction, Family: "efa", Order: 510, Judge: judgeEFATraffic,
		Doc:   "for every EFA device, an RDM `fi_pingpong` between a server and a client on that device with `FI_EFA_ENABLE_SHM_TRANSFER=0` (otherwise same-host traffic takes libfabric's shared-memory path and never crosses the device), in groups of `efa_traffic.concurrency`, each bounded by `efa_traffic.timeout`: a device that hangs, errors or falls below `efa_traffic.min_bandwidth_mbps` fails and is named; every device hanging points at the security group's rules to and from itself, some hanging while others carry traffic through the same group points at those devices (their port state, the `rdma statistic` error counters that grew on them); bandwidth and latency per device in the evidence; device error counters (`rx_drops`, `retrans_timeout_events`, ...) that grew warn; skipped on hosts without EFA; on an EFA-capable host whose launch attached no EFA interface it warns (not judged here: the post-processor's verification attaches them and judges it); where EFA was due and is missing (a verification launch EC2 gave none, a fleet node) it warns, and `efa-devices` fails",
		Reads: "`/opt/amazon/efa/bin/fi_pingpong`, `rdma statistic show`",
	})
}

// efaCounterWatched are the EFA device counters whose growth during traffic warns: packets
// dropped, retransmission timeouts, unresponsive or impaired remote connections.
var efaCounterWatched = []string{"rx_drops", "retrans_timeout_events", "unresponsive_remote_events", "impaired_remote_conn_events", "rdma_read_wr_err", "rdma_write_wr_err"}

// judgeEFATraffic judges the EFA traffic test: every EFA device must carry an RDM ping-pong
// across the device (a device that hangs, errors or falls below the floor fails and is named),
// with bandwidth and latency reported per device; error counters that grew warn.
func judgeEFATraffic(run facts.Run, tg Target) result.Check {
	id := result.EFATraffic
	t, o := run.EFATraffic, tg.Function.EFATraffic
	devices := t.Tested
	switch {
	case t.NotRun != "":
		return check(id, result.Skip, "", "", "", "not run: "+t.NotRun, "")
	case len(devices) == 0 && t.Problem == "" && tg.efaUnattached() != "":
		return check(id, result.Warn, "", "an RDM ping-pong across every EFA device", "no EFA device attached", "not judged here: "+tg.efaUnattached()+"; "+efaProvenElsewhere, "")
	case len(devices) == 0 && t.Problem == "" && tg.efaMissing() != "":
		// EFA was due here and is missing: efa-devices fails with why; this test is not
		// judged, and never passes or skips as if the host had no EFA by design.
		return check(id, result.Warn, "", "an RDM ping-pong across every EFA device", "no EFA device", "not judged: no EFA device to test: "+tg.efaMissing(), "")
	case len(devices) == 0 && t.Problem == "":
		return check(id, result.Skip, BasisRule, "no EFA device", "no EFA device", "no EFA on this host: nothing to test", "")
	case t.Problem != "":
		msg := t.Problem
		if strings.Contains(msg, "did not finish within its bound") {
			msg += tg.efaGroupsHint()
		}
		return check(id, result.Fail, BasisRule, "an RDM ping-pong across every EFA device", "could not run", msg, t.Evidence)
	}
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
	var fails, figures, hung []string
	var evs []string
	var low float64 = -1
	for _, d := range devices {
		f, ok := byDevice[d]
		switch {
		case !ok:
			fails = append(fails, d+": no result (the test did not reach it)")
			continue
		case !f.OK():
			if efaHung(f.Problem) {
				hung = append(hung, d)
			}
			fails = append(fails, f.Problem)
			evs = append(evs, f.Evidence)
			continue
		}
		var best facts.PingPongRow
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
		msg := "EFA traffic failed: " + strings.Join(append(fails, grew...), "; ")
		msg += efaStallCause(run, tg, devices, hung, len(figures))
		return check(id, result.Fail, basis, expected, actual, msg, ev)
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

// efaHung reports whether a device's ping-pong problem is a stall its bound stopped (the
// probe's words for it), not an error the tool printed.
func efaHung(problem string) bool { return strings.Contains(problem, "hung and was stopped") }

// efaStallCause says what the stalls point at. A security group without its rules to and from
// itself stops EFA traffic on every device at once (the group is per interface, and a launch
// gives all its EFA interfaces the same groups): only when every device hung is the group
// named. One device hanging while others carried traffic through the same groups is that
// device: its port state and its error counters are named instead.
func efaStallCause(run facts.Run, tg Target, devices, hung []string, carried int) string {
	switch {
	case len(hung) == 0:
		return ""
	case len(hung) == len(devices):
		if h := tg.efaGroupsHint(); h != "" {
			return fmt.Sprintf(" (all %d devices hung:%s)", len(devices), strings.TrimPrefix(h, " ("))
		}
		return fmt.Sprintf(" (all %d devices hung: EFA traffic arrives only while the security group of the instance's EFA interfaces allows all inbound and all outbound traffic to and from itself: check its self-referencing rules)", len(devices))
	}
	var parts []string
	for _, d := range hung {
		parts = append(parts, d+": "+efaDeviceState(run, d))
	}
	lead := fmt.Sprintf("%d of %d devices hung", len(hung), len(devices))
	if carried > 0 {
		lead += fmt.Sprintf(" while %d carried traffic through the same security groups, so the groups are not the cause: the hung device is", carried)
	}
	return " (" + lead + "; " + strings.Join(parts, "; ") + "; see dmesg | grep efa, and replace the instance if the device stays stuck)"
}

// efaDeviceState says what the host shows of one device: its port state (efa-devices judges
// it) and the watched error counters that grew on it during the test.
func efaDeviceState(run facts.Run, dev string) string {
	var out []string
	ports := run.Host.RDMAPorts
	switch {
	case !ports.OK():
		out = append(out, "port state not read ("+ports.Problem+")")
	case len(ports.Value) == 0:
		out = append(out, "port state not read")
	default:
		port := "port state not listed"
		for _, p := range ports.Value {
			switch {
			case p.Device != dev:
			case p.Problem != "":
				port = "port state unreadable: " + p.Problem
			case p.Up():
				port = fmt.Sprintf("port %s, %s (up)", p.State, p.PhysState)
			default:
				port = fmt.Sprintf("port %s, %s (not up)", p.State, p.PhysState)
			}
		}
		out = append(out, port)
	}
	t := run.EFATraffic
	if !t.StatsBefore.OK() || !t.StatsAfter.OK() {
		out = append(out, "rdma statistic counters not read")
	} else if changes, err := facts.RDMADelta(t.StatsBefore.Value, t.StatsAfter.Value); err == nil {
		var grew []string
		for _, c := range changes {
			if strings.HasPrefix(c.Link, dev+"/") && slices.Contains(efaCounterWatched, c.Counter) && c.Increase() > 0 {
				grew = append(grew, c.Counter+fmt.Sprintf(" +%d", c.Increase()))
			}
		}
		if len(grew) > 0 {
			out = append(out, "rdma statistic errors grew: "+strings.Join(grew, ", "))
		} else {
			out = append(out, "no rdma statistic error counter grew")
		}
	}
	return strings.Join(out, ", ")
}

// efaGroupsHint names, for EFA traffic that stalled on a launch the run made, the security
// groups its arrival depends on: traffic that never arrives is what a group without the rules
// to and from itself gives (EC2 User Guide, "Get started with EFA", step 1), and the tools say
// nothing more than that they waited.
func (t Target) efaGroupsHint() string {
	if !t.Launch.Known || len(t.Launch.SecurityGroups) == 0 {
		return ""
	}
	return fmt.Sprintf(" (EFA traffic arrives only while the security group of the launch's EFA interfaces, %s, allows all inbound and all outbound traffic to and from itself: check that its self-referencing rules are still there)",
		strings.Join(t.Launch.SecurityGroups, ", "))
}

// efaCounterGrowth lists the watched counters that grew; unreadable counters are named too.
func efaCounterGrowth(before, after facts.Fact[[]facts.RDMALink]) []string {
	if !before.OK() || !after.OK() {
		return []string{"the EFA device counters could not be read around the test: " + strings.TrimPrefix(before.Problem+"; "+after.Problem, "; ")}
	}
	changes, err := facts.RDMADelta(before.Value, after.Value)
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

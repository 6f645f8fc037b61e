package checks

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func init() {
	register(Entry{
		ID: result.EFATraffic, Phase: PhaseFunction, Family: "efa", Order: 510, Judge: judgeEFATraffic,
		Doc:   "for every EFA device, an RDM `fi_pingpong` between a server and a client on that device with `FI_EFA_ENABLE_SHM_TRANSFER=0` (otherwise same-host traffic takes libfabric's shared-memory path and never crosses the device), in groups of `efa_traffic.concurrency`, each bounded by `efa_traffic.timeout`: a device that hangs, errors or falls below `efa_traffic.min_bandwidth_mbps` fails and is named; bandwidth and latency per device in the evidence; device error counters (`rx_drops`, `retrans_timeout_events`, ...) that grew warn; skipped on hosts without EFA; on an EFA-capable host whose launch attached no EFA interface it warns (not judged here: the post-processor's verification attaches them and judges it); where EFA was due and is missing (a verification launch EC2 gave none, a fleet node) it warns, and `efa-devices` fails",
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
		if stalled := strings.Contains(msg, "hung and was stopped"); stalled {
			msg += tg.efaGroupsHint()
		}
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

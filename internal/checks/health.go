package checks

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func init() {
	register(Entry{
		ID: result.GPUMemory, Phase: PhaseHost, Family: "gpu", Order: 230, Judge: judgeGPUMemory,
		Doc:   "ECC enabled; no volatile uncorrectable ECC error; no row remap pending or failed (Ampere and newer), no page retirement pending (older GPUs): a pending remap fails with \"reboot the instance to apply the remap, then rebake\"",
		Reads: "`nvidia-smi --query-gpu=index,pci.bus_id,persistence_mode,ecc.mode.current,ecc.errors.uncorrected.volatile.total,retired_pages.pending,remapped_rows.pending,remapped_rows.failure,pcie.link.*,clocks_event_reasons.* --format=csv,noheader`",
	})
	register(Entry{
		ID: result.NVLink, Phase: PhaseHost, Family: "gpu", Order: 240, Judge: judgeNVLink,
		Refined: []Phase{PhaseLoad},
		Doc:     "on NVLink types every GPU has its expected active links (`expect.nvlinks`, else the profile: 18 on H100/H200/B200, 12 on A100) and none is inactive; on NVSwitch systems every GPU's fabric registration is `Completed`/`Success`; the NVLink error counters read before and after the NCCL test: CRC, malformed-packet or failed-recovery growth fails, a replay/recovery burst warns",
		Reads:   "`nvidia-smi nvlink -s`, `nvidia-smi -q` (Fabric), `nvidia-smi nvlink -e`",
	})
}

func init() {
	register(Entry{
		ID: result.PCIeLink, Phase: PhaseLoad, Family: "gpu", Order: 430, Judge: judgePCIeLink,
		Doc:   "each GPU's PCIe link, sampled over a second SSH session every 5 s **while the NCCL test runs** (idle GPUs lower the link speed on purpose, so an idle reading proves nothing): width below the maximum under load fails, generation below the maximum warns; without a load the check warns",
		Reads: "`nvidia-smi --query-gpu=...,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,...` during the test",
	})
	register(Entry{
		ID: result.GPUClocks, Phase: PhaseLoad, Family: "gpu", Order: 440, Judge: judgeGPUClocks,
		Doc:   "no hardware slowdown, hardware thermal slowdown or power-brake slowdown clock-event reason active during the NCCL test (software power capping is not a fault)",
		Reads: "the same samples",
	})
}

// judgeGPUMemory judges the GPUs' memory health as fleet health checks do (AWS's GPU cluster
// health check, Azure's node health checks): ECC enabled, no volatile uncorrectable ECC error
// since the driver loaded, no row remap pending or failed (Ampere and newer), no page
// retirement pending (older GPUs). A pending remap is applied at the next GPU reset: the image
// must not be baked before it is.
func judgeGPUMemory(run facts.Run, _ Target) result.Check {
	h := run.Host
	id := result.GPUMemory
	const expected = "ECC enabled, 0 volatile uncorrectable ECC errors, no pending or failed row remap"
	f := h.Health.GPUs
	if !f.OK() {
		return check(id, result.Fail, BasisRule, expected, "unreadable",
			"the GPUs' memory health could not be read: "+f.Problem, f.Evidence)
	}
	if len(f.Value) == 0 {
		return check(id, result.Fail, BasisRule, expected, "no GPU", "nvidia-smi lists no GPU to read memory health from", f.Evidence)
	}
	var fails, warns []string
	for _, g := range f.Value {
		gpu := fmt.Sprintf("GPU %d (%s)", g.Index, g.BusID)
		switch {
		case g.ECCMode.IsFalse():
			fails = append(fails, gpu+": ECC is disabled (nvidia-smi -e 1 and a GPU reset enable it)")
		case !g.ECCMode.Known():
			warns = append(warns, gpu+": ECC mode not reported ("+g.ECCMode.Raw+")")
		}
		if g.ECCUncorrectedVolatile.Known && g.ECCUncorrectedVolatile.N > 0 {
			fails = append(fails, fmt.Sprintf("%s: %d volatile uncorrectable ECC errors since the driver loaded (retire the instance if they recur after a reset)", gpu, g.ECCUncorrectedVolatile.N))
		}
		if g.RemappedRowsFailure.IsTrue() {
			fails = append(fails, gpu+": a row remap failed: the GPU has no spare rows left; retire the instance")
		}
		if g.RemappedRowsPending.IsTrue() {
			fails = append(fails, gpu+": a row remap is pending: reboot the instance to apply the remap, then rebake")
		}
		if g.RetiredPagesPending.IsTrue() {
			fails = append(fails, gpu+": a page retirement is pending: reboot the instance to apply it, then rebake")
		}
		if !g.RemappedRowsPending.Known() && !g.RetiredPagesPending.Known() {
			warns = append(warns, gpu+": neither row remapping nor page retirement is reported")
		}
	}
	actual := fmt.Sprintf("%d GPUs read", len(f.Value))
	switch {
	case len(fails) > 0:
		return check(id, result.Fail, BasisRule, expected, actual, strings.Join(append(fails, warns...), "; "), f.Evidence)
	case len(warns) > 0:
		return check(id, result.Warn, BasisRule, expected, actual, strings.Join(warns, "; ")+": not judged on these GPUs", f.Evidence)
	}
	return check(id, result.Pass, BasisRule, expected, actual+": ECC on, no errors, no pending remap", "", "")
}

// nvlinkExpected says whether the host's GPUs should have NVLink and how many links each, and
// on what basis: the profile's link count, else the NVSwitch fabric the profile or the PCI
// bus shows.
func (t Target) nvlinkExpected() (want bool, links int, basis string) {
	switch {
	case t.Expect.NVLinks > 0:
		return true, t.Expect.NVLinks, BasisSetting
	case t.Expect.NVLinks < 0:
		return t.Profile != nil && t.Profile.NVSwitch || t.PCI != nil && t.PCI.HasNVLinkFabric(), 0, BasisRule
	}
	if t.Profile != nil {
		return t.Profile.NVLinks > 0 || t.Profile.NVSwitch, t.Profile.NVLinks, t.profileName()
	}
	if t.PCI != nil && t.PCI.HasNVLinkFabric() {
		return true, 0, BasisPCI
	}
	return false, 0, BasisRule
}

// judgeNVLink judges the GPUs' NVLink: on NVLink types every GPU has its expected links up (a
// link listed as inactive fails wherever it is), and on NVSwitch systems every GPU's fabric
// registration completed with success. The counters are judged around the NCCL test
// (NVLinkDuring).
func judgeNVLink(f facts.Run, t Target) result.Check {
	c := nvlinkAtRest(f.Host, t)
	if f.Load.Ran {
		c = nvlinkDuring(c, f.Load.NVLinkBefore, f.Load.NVLinkAfter, "during the NCCL test")
	}
	return c
}

// nvlinkAtRest judges the links and the fabric registration of the host reading.
func nvlinkAtRest(h facts.Host, t Target) result.Check {
	id := result.NVLink
	want, links, basis := t.nvlinkExpected()
	expected := "no inactive NVLink"
	if links > 0 {
		expected = fmt.Sprintf("%d active NVLink links per GPU", links)
	}
	fabric := want && (t.fabricRequired())
	if fabric {
		expected += "; fabric registration Completed/Success on every GPU"
	}
	st := h.Health.NVLink
	ev := func() string { return evidence(st.Evidence, h.Health.Fabric.Evidence) }
	if !st.OK() {
		if !want {
			return check(id, result.Skip, basis, "no NVLink expected", "unknown", "no NVLink expected on this host; nvidia-smi nvlink -s: "+st.Problem, "")
		}
		return check(id, result.Fail, basis, expected, "unreadable", "the NVLink state could not be read: "+st.Problem, ev())
	}
	total, up := 0, 0
	var fails []string
	counts := map[int]int{}
	for _, g := range st.Value {
		n := g.ActiveLinks()
		counts[n]++
		total += len(g.Links)
		up += n
		var down []string
		for _, l := range g.Links {
			if !l.Active {
				down = append(down, fmt.Sprint(l.Index))
			}
		}
		if len(down) > 0 {
			fails = append(fails, fmt.Sprintf("GPU %d: link %s inactive", g.Index, strings.Join(down, ", ")))
		} else if links > 0 && n != links {
			fails = append(fails, fmt.Sprintf("GPU %d: %d active links, %s says %d", g.Index, n, basis, links))
		}
	}
	if !want && total == 0 {
		return check(id, result.Skip, basis, "no NVLink expected", "no NVLink", "no NVLink on this host and none expected", "")
	}
	if want && total == 0 {
		fails = append(fails, fmt.Sprintf("nvidia-smi lists no NVLink link, %s says the GPUs have NVLink", basis))
	}
	if links == 0 && len(counts) > 1 {
		fails = append(fails, "the GPUs have different numbers of active links: "+linkCounts(counts))
	}
	actual := fmt.Sprintf("%d of %d links active on %d GPUs", up, total, len(st.Value))
	if fabric {
		fr := h.Health.Fabric
		switch {
		case !fr.OK():
			fails = append(fails, "the GPUs' fabric state could not be read (nvidia-smi -q): "+fr.Problem)
		default:
			var bad []string
			for _, g := range fr.Value {
				if !g.Registered() {
					bad = append(bad, fmt.Sprintf("%s %s/%s", g.BusID, g.State, g.Status))
				}
			}
			if len(bad) > 0 {
				fails = append(fails, "GPU fabric registration not completed with success (Fabric Manager must register every GPU with the NVSwitches): "+strings.Join(bad, ", "))
			} else {
				actual += fmt.Sprintf("; fabric Completed/Success on %d GPUs", len(fr.Value))
			}
		}
	}
	if len(fails) > 0 {
		return check(id, result.Fail, basis, expected, actual, strings.Join(fails, "; "), ev())
	}
	if links == 0 {
		return check(id, result.Warn, basis, expected, actual, "the link count per GPU is not known for this type: judged for inactive links only (set expect.nvlinks to judge the count)", "")
	}
	return check(id, result.Pass, basis, expected, actual, "", "")
}

func linkCounts(counts map[int]int) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d GPUs with %d", counts[n], n))
	}
	return strings.Join(parts, ", ")
}

// fabricRequired is whether the GPUs sit on an NVSwitch fabric, by whatever basis knows.
func (t Target) fabricRequired() bool {
	want, _, known := t.fabricManagerRequired()
	return known && want
}

// nvlinkCounterClass says what growth of an NVLink counter means. Traffic counters (packets,
// bytes) and FEC counters (symbols the forward error correction fixed) grow on a healthy link.
// CRC, malformed-packet, receive, integrity, overrun and effective (post-FEC) errors, and failed
// recoveries, are data the link corrupted or lost (fail). Replays, successful recoveries,
// symbol errors and discards are the link correcting itself (a burst warns). Blackwell drivers
// print the second set of names (see internal/parse/nvlink).
func nvlinkCounterClass(name string) result.Status {
	n := strings.ToLower(name)
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(n, s) {
				return true
			}
		}
		return false
	}
	switch {
	case has("packets", "bytes") || strings.HasPrefix(n, "fec "):
		return result.Pass
	case has("crc", "malformed", "rx errors", "rx remote errors", "rx general errors", "integrity",
		"overrun", "effective errors", "recovery failed", "fatal"):
		return result.Fail
	}
	return result.Warn
}

// nvlinkDuring folds into the nvlink check what the NVLink error counters did during a step:
// growth of a corrupting counter fails, a replay or recovery burst warns, and counters that
// could not be read before and after fail on NVLink hosts (the step is not proven clean).
func nvlinkDuring(earlier result.Check, before, after facts.Fact[[]facts.NVLinkCounters], during string) result.Check {
	if earlier.Status == result.Skip {
		return earlier
	}
	c := earlier
	addFail := func(msg, ev string) {
		c.Status = result.Fail
		c.Message = strings.TrimPrefix(c.Message+"; "+msg, "; ")
		c.Evidence = evidence(c.Evidence, ev)
	}
	if !before.OK() || !after.OK() {
		addFail("the NVLink error counters could not be read "+during+": "+strings.TrimPrefix(before.Problem+"; "+after.Problem, "; "), evidence(before.Evidence, after.Evidence))
		return c
	}
	changes, err := facts.NVLinkDelta(before.Value, after.Value)
	if err != nil {
		addFail("the NVLink error counters "+during+" cannot be compared: "+err.Error(), evidence(before.Evidence, after.Evidence))
		return c
	}
	var bad, burst []string
	for _, ch := range changes {
		if ch.Increase() == 0 {
			continue
		}
		switch nvlinkCounterClass(ch.Counter) {
		case result.Fail:
			bad = append(bad, ch.String())
		case result.Warn:
			burst = append(burst, ch.String())
		}
	}
	switch {
	case len(bad) > 0:
		addFail("NVLink errors grew "+during+": "+strings.Join(bad, ", ")+" (a link corrupting data: reseat/replace, retire the instance)", after.Evidence)
	case len(burst) > 0 && c.Status != result.Fail:
		c.Status = result.Warn
		c.Message = strings.TrimPrefix(c.Message+"; NVLink replays/recoveries "+during+": "+strings.Join(burst, ", "), "; ")
		c.Evidence = evidence(c.Evidence, after.Evidence)
	}
	return c
}

// underLoad keeps the samples that were read, and says why none can judge and whether that
// is a failure (readings that could not be read) or only a warning (no load, or a test that
// ended before the first reading).
func underLoad(l facts.Load) ([][]facts.GPUHealth, string, result.Status) {
	if !l.Ran {
		return nil, "not judged: the link and clocks are read under load, during the NCCL test, which did not run (" + l.NotRun + ")", result.Warn
	}
	if len(l.Samples) == 0 {
		return nil, "not judged: the NCCL test ended before the first reading under load; lengthen the test (nccl.args) to judge the link and clocks", result.Warn
	}
	var out [][]facts.GPUHealth
	var problems []string
	for _, s := range l.Samples {
		if s.OK() {
			out = append(out, s.Value)
		} else {
			problems = append(problems, s.Problem)
		}
	}
	if len(out) == 0 {
		return nil, "no reading taken during the NCCL test could be read: " + problems[0], result.Fail
	}
	return out, "", ""
}

// judgePCIeLink judges each GPU's PCIe link while the NCCL test ran: idle GPUs lower the link
// speed on purpose, so an idle reading proves nothing. Each GPU's best reading under load
// counts: a width below the maximum fails (lanes lost: the GPU moves data at a fraction of
// its bandwidth), a generation below the maximum warns.
func judgePCIeLink(f facts.Run, _ Target) result.Check {
	l := f.Load
	id := result.PCIeLink
	const expected = "every GPU at its maximum PCIe width (and generation) under load"
	samples, why, st := underLoad(l)
	if samples == nil {
		return check(id, st, BasisRule, expected, "not read under load", why, sampleEvidence(l))
	}
	type best struct{ gen, genMax, width, widthMax uint64 }
	bests := map[int]*best{}
	var order []int
	for _, s := range samples {
		for _, g := range s {
			b, ok := bests[g.Index]
			if !ok {
				b = &best{}
				bests[g.Index] = b
				order = append(order, g.Index)
			}
			b.gen, b.width = max(b.gen, g.PCIeGenCurrent.N), max(b.width, g.PCIeWidthCurrent.N)
			b.genMax, b.widthMax = max(b.genMax, g.PCIeGenMax.N), max(b.widthMax, g.PCIeWidthMax.N)
		}
	}
	slices.Sort(order)
	var fails, warns []string
	for _, i := range order {
		b := bests[i]
		switch {
		case b.widthMax == 0 || b.genMax == 0:
			warns = append(warns, fmt.Sprintf("GPU %d: the PCIe maxima are not reported", i))
		case b.width < b.widthMax:
			fails = append(fails, fmt.Sprintf("GPU %d at x%d of x%d under load (lanes lost: reseat or retire the instance)", i, b.width, b.widthMax))
		case b.gen < b.genMax:
			warns = append(warns, fmt.Sprintf("GPU %d at gen %d of %d under load", i, b.gen, b.genMax))
		}
	}
	actual := fmt.Sprintf("%d GPUs, %d samples during the NCCL test", len(order), len(samples))
	switch {
	case len(fails) > 0:
		return check(id, result.Fail, BasisRule, expected, actual, strings.Join(append(fails, warns...), "; "), sampleEvidence(l))
	case len(warns) > 0:
		return check(id, result.Warn, BasisRule, expected, actual, strings.Join(warns, "; "), sampleEvidence(l))
	}
	return check(id, result.Pass, BasisRule, expected, actual+": every GPU at its maximum width and generation", "", "")
}

// judgeGPUClocks judges the clock event reasons while the NCCL test ran: hardware slowdown,
// hardware thermal slowdown and power-brake slowdown mean the GPU throttled itself (cooling,
// power delivery) and fail; software power capping is the driver keeping the power limit and
// does not.
func judgeGPUClocks(f facts.Run, _ Target) result.Check {
	l := f.Load
	id := result.GPUClocks
	const expected = "no hardware, thermal or power-brake slowdown under load"
	samples, why, st := underLoad(l)
	if samples == nil {
		return check(id, st, BasisRule, expected, "not read under load", why, sampleEvidence(l))
	}
	seen := map[string]bool{}
	var fails []string
	swCap, unknown := 0, 0
	for _, s := range samples {
		for _, g := range s {
			for _, r := range []struct {
				name string
				f    facts.HealthFlag
			}{{"hardware slowdown", g.HWSlowdown}, {"hardware thermal slowdown", g.HWThermalSlowdown}, {"power-brake slowdown", g.HWPowerBrakeSlowdown}} {
				switch {
				case r.f.IsTrue():
					if k := fmt.Sprintf("GPU %d: %s", g.Index, r.name); !seen[k] {
						seen[k] = true
						fails = append(fails, k)
					}
				case !r.f.Known():
					unknown++
				}
			}
			if g.SWPowerCap.IsTrue() {
				swCap++
			}
		}
	}
	actual := fmt.Sprintf("%d samples during the NCCL test", len(samples))
	if swCap > 0 {
		actual += fmt.Sprintf("; software power cap active in %d GPU readings (not a fault)", swCap)
	}
	switch {
	case len(fails) > 0:
		return check(id, result.Fail, BasisRule, expected, actual, strings.Join(fails, "; ")+" during the NCCL test (check cooling and power; retire the instance if it persists)", sampleEvidence(l))
	case unknown > 0:
		return check(id, result.Warn, BasisRule, expected, actual, fmt.Sprintf("%d clock event readings were not reported by the driver: not judged", unknown), sampleEvidence(l))
	}
	return check(id, result.Pass, BasisRule, expected, actual, "", "")
}

// sampleEvidence is the last sample's raw output.
func sampleEvidence(l facts.Load) string {
	if len(l.Samples) == 0 {
		return ""
	}
	return l.Samples[len(l.Samples)-1].Evidence
}

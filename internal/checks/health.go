package checks

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func init() {
	register(Entry{
		ID: result.GPUMemory, Phase: PhaseHost, Family: "gpu", Order: 230, Judge: judgeGPUMemory,
		Doc:   "every expected GPU (`expect.gpu_count`, the profile, else the PCI bus) is listed; ECC enabled (a GPU without ECC warns); no volatile uncorrectable ECC error; the memory repair of the GPU's generation (the profile's, or `nvidia-smi -q`'s Product Architecture): no row remap pending or failed (Ampere and newer), no page retirement pending (older GPUs); a pending remap fails with \"reboot the instance to apply the remap, then rebake\". A value nvidia-smi could not give (`[Unknown Error]`, `[GPU is lost]`, `[N/A]` where the generation has the field) fails; a field the generation lacks is not judged; remapping `[Not Supported]` (MIG) warns",
		Reads: "`nvidia-smi --query-gpu=index,pci.bus_id,persistence_mode,ecc.mode.current,ecc.errors.uncorrected.volatile.total,retired_pages.pending,remapped_rows.pending,remapped_rows.failure,pcie.link.*,clocks_event_reasons.* --format=csv` (columns read by the header's names), `nvidia-smi -q` (Product Architecture)",
	})
	register(Entry{
		ID: result.NVLink, Phase: PhaseHost, Family: "gpu", Order: 240, Judge: judgeNVLink,
		Refined: []Phase{PhaseLoad},
		Doc:     "on NVLink types every expected GPU is listed with its expected active links (`expect.nvlinks`, else the profile: 18 on H100/H200/B200, 12 on A100) and none is inactive; on NVSwitch systems every GPU whose generation has a fabric state (Hopper and newer) is registered `Completed`/`Success` (`N/A`, pending, failed or unreadable fails), and where it has none (A100 prints `N/A`) Fabric Manager must be active instead; the fabric Health section is not judged. The NVLink error counters read before and after the NCCL test: CRC, malformed-packet or failed-recovery growth fails, a replay/recovery burst warns, and an error counter that reads no value (`N/A`, `[Unknown Error]`), no counter at all, or fewer GPUs than expected fail",
		Reads:   "`nvidia-smi nvlink -s`, `nvidia-smi -q` (Fabric), `nvidia-smi nvlink -e`",
	})
}

func init() {
	register(Entry{
		ID: result.PCIeLink, Phase: PhaseLoad, Family: "gpu", Order: 430, Judge: judgePCIeLink,
		Doc:   "each GPU's PCIe link, sampled over a second SSH session every 5 s **while the NCCL test runs** (idle GPUs lower the link speed on purpose, so an idle reading proves nothing): the best width under load must reach the slot's width (`expect.pcie_width`, else the profile's figure with its source: x8 on the single-GPU G6/Gr6 sizes, else the GPU's own maximum) and must not change between readings; on a type without a profile (or whose slot width is unsettled) a width below the GPU's maximum warns, naming `expect.pcie_width`; generation below the maximum warns; a field nvidia-smi failed to read fails, one without a value warns; without a load the check warns",
		Reads: "`nvidia-smi --query-gpu=...,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,...` during the test",
	})
	register(Entry{
		ID: result.GPUClocks, Phase: PhaseLoad, Family: "gpu", Order: 440, Judge: judgeGPUClocks,
		Doc:   "no hardware slowdown, hardware thermal slowdown or power-brake slowdown clock-event reason active during the NCCL test (software power capping is not a fault); a reason nvidia-smi failed to read (`[Unknown Error]`) fails, one without a value warns",
		Reads: "the same samples",
	})
}

// gpusExpected is how many GPUs the host must have: expectedGPUs' count (expect.gpu_count,
// else EC2's description, else the profile's, else the NVIDIA GPUs on the PCI bus), and the
// bus also when expect.gpu_count = -1 turns the count off (the bus is still what a list of
// GPUs is compared with). ok is false when nothing says.
func (t Target) gpusExpected() (n int, basis string, ok bool) {
	if n, basis, ok = t.expectedGPUs(); ok && n > 0 {
		return n, basis, true
	}
	if t.PCI != nil && len(t.PCI.GPUs) > 0 {
		return len(t.PCI.GPUs), BasisPCI, true
	}
	return 0, "", false
}

// gpuList names GPU indexes: "GPU 7", "GPUs 1, 2, 3".
func gpuList(idx []int) string {
	s := make([]string, len(idx))
	for i, n := range idx {
		s[i] = fmt.Sprint(n)
	}
	if len(idx) == 1 {
		return "GPU " + s[0]
	}
	return "GPUs " + strings.Join(s, ", ")
}

// generationOf is the generation of a GPU whose nvidia-smi -q "Product Architecture" is arch:
// what the GPU says of itself when it is a known generation, else the profile's; "" (unknown)
// when neither says.
func (t Target) generationOf(arch string) profile.Generation {
	if g := profile.Generation(strings.TrimSpace(arch)); g.Known() {
		return g
	}
	if t.Profile != nil {
		return t.Profile.Generation
	}
	return ""
}

// architecture is the "Product Architecture" nvidia-smi -q prints for the GPU at busID: from
// the GPU's own reading, else the -q health reading, else the fabric report; "" when none has it.
func architecture(h facts.Health, g facts.GPUHealth) string {
	if g.Architecture != "" {
		return g.Architecture
	}
	if h.Query.OK() {
		for _, q := range h.Query.Value {
			if strings.EqualFold(q.BusID, g.BusID) && q.Architecture != "" {
				return q.Architecture
			}
		}
	}
	if h.Fabric.OK() {
		for _, f := range h.Fabric.Value {
			if strings.EqualFold(f.BusID, g.BusID) && f.Architecture != "" {
				return f.Architecture
			}
		}
	}
	return ""
}

// shown is a field's text as nvidia-smi printed it, for messages.
func shown(raw string) string {
	if raw == "" {
		return "nothing (not queried)"
	}
	return raw
}

// judgeGPUMemory judges the GPUs' memory health as fleet health checks do (AWS's GPU cluster
// health check, Azure's node health checks): every expected GPU read, ECC enabled, no volatile
// uncorrectable ECC error since the driver loaded, and the memory repair the GPU's generation
// has: no row remap pending or failed (Ampere and newer), no page retirement pending (older
// GPUs). A pending remap is applied at the next GPU reset: the image must not be baked before
// it is. A value nvidia-smi could not give ([Unknown Error], [GPU is lost], [N/A] where the
// generation has the field) is never a pass; a field the generation does not have is not
// judged and not warned about.
func judgeGPUMemory(run facts.Run, t Target) result.Check {
	h := run.Host
	id := result.GPUMemory
	const expected = "every GPU read, ECC enabled, 0 volatile uncorrectable ECC errors, no pending or failed row remap (Ampere and newer) or page retirement (older GPUs)"
	f := h.Health.GPUs
	if !f.OK() {
		return check(id, result.Fail, BasisRule, expected, "unreadable",
			"the GPUs' memory health could not be read: "+f.Problem, f.Evidence)
	}
	if len(f.Value) == 0 {
		return check(id, result.Fail, BasisRule, expected, "no GPU", "nvidia-smi lists no GPU to read memory health from", f.Evidence)
	}
	var fails, warns []string
	basis := BasisRule
	if want, b, ok := t.gpusExpected(); ok {
		basis = b
		if missing := facts.MissingGPUs(f.Value, want); len(missing) > 0 {
			fails = append(fails, fmt.Sprintf("%s missing from nvidia-smi's health query (%s says %d GPUs): memory health not read", gpuList(missing), b, want))
		}
	}
	gens := map[profile.Generation]int{}
	for _, g := range f.Value {
		gen := t.generationOf(architecture(h.Health, g))
		gens[gen]++
		fl, wl := memoryFindings(g, gen)
		fails, warns = append(fails, fl...), append(warns, wl...)
	}
	actual := fmt.Sprintf("%d GPUs read (%s)", len(f.Value), generationCounts(gens))
	switch {
	case len(fails) > 0:
		return check(id, result.Fail, basis, expected, actual, strings.Join(append(fails, warns...), "; "), f.Evidence)
	case len(warns) > 0:
		return check(id, result.Warn, basis, expected, actual, strings.Join(warns, "; "), f.Evidence)
	}
	return check(id, result.Pass, basis, expected, actual+": ECC on, no errors, no pending memory repair", "", "")
}

// generationCounts describes the generations judged: "Ampere", "8 unknown generation".
func generationCounts(gens map[profile.Generation]int) string {
	var parts []string
	for _, g := range slices.Sorted(maps.Keys(gens)) {
		name := string(g)
		if !g.Known() {
			name = "generation unknown"
		}
		if len(gens) > 1 {
			name = fmt.Sprintf("%d %s", gens[g], name)
		}
		parts = append(parts, name)
	}
	return strings.Join(parts, ", ")
}

// memoryFindings judges one GPU's memory fields, for its generation gen ("" when unknown:
// then the fields that read a value say which repair the GPU has).
func memoryFindings(g facts.GPUHealth, gen profile.Generation) (fails, warns []string) {
	gpu := fmt.Sprintf("GPU %d (%s)", g.Index, g.BusID)
	fail := func(format string, a ...any) { fails = append(fails, gpu+": "+fmt.Sprintf(format, a...)) }
	warn := func(format string, a ...any) { warns = append(warns, gpu+": "+fmt.Sprintf(format, a...)) }

	switch m := g.ECCMode; {
	case m.IsFalse():
		fail("ECC is disabled (nvidia-smi -e 1 and a GPU reset enable it)")
	case m.Kind.ReadFailed():
		fail("the ECC mode reads %s: unreadable, the driver failed to read it", shown(m.Raw))
	case !m.Known():
		warn("the ECC mode reads %s (a GPU without ECC): ECC not judged", shown(m.Raw))
	}
	switch c := g.ECCUncorrectedVolatile; {
	case c.Known && c.N > 0:
		fail("%d volatile uncorrectable ECC errors since the driver loaded (retire the instance if they recur after a reset)", c.N)
	case c.Known:
	case c.Kind.ReadFailed():
		fail("the volatile uncorrectable ECC count reads %s: unreadable, not a count of 0", shown(c.Raw))
	case g.ECCMode.IsTrue():
		fail("the volatile uncorrectable ECC count reads %s with ECC enabled: not judged, never a pass", shown(c.Raw))
	}

	pending, failure, retired := g.RemappedRowsPending, g.RemappedRowsFailure, g.RetiredPagesPending
	remaps, retires := gen.HasRowRemapping(), gen.HasPageRetirement()
	if !gen.Known() {
		// The fields that read a value say which repair the GPU has (Volta and older retire
		// pages, Ampere and newer remap rows); the other reads N/A.
		remaps = pending.Kind == facts.KindValue || failure.Kind == facts.KindValue
		retires = retired.Kind == facts.KindValue
		if !remaps && !retires {
			var unread []string
			for _, f := range []struct {
				name string
				f    facts.HealthFlag
			}{{"remapped_rows.pending", pending}, {"remapped_rows.failure", failure}, {"retired_pages.pending", retired}} {
				if f.f.Kind.ReadFailed() {
					unread = append(unread, f.name+" reads "+shown(f.f.Raw))
				}
			}
			if len(unread) > 0 {
				fail("%s: unreadable", strings.Join(unread, ", "))
			} else {
				warn("neither row remapping nor page retirement is reported (remapped_rows %s, retired_pages %s) and the GPU generation is unknown: memory repair not judged", shown(pending.Raw), shown(retired.Raw))
			}
		}
	}
	if failure.IsTrue() {
		fail("a row remap failed: the GPU has no spare rows left; retire the instance")
	}
	if pending.IsTrue() {
		fail("a row remap is pending: reboot the instance to apply the remap, then rebake")
	}
	if retired.IsTrue() {
		fail("a page retirement is pending: reboot the instance to apply it, then rebake")
	}
	if remaps {
		for _, f := range []struct {
			name string
			f    facts.HealthFlag
		}{{"remapped_rows.pending", pending}, {"remapped_rows.failure", failure}} {
			switch {
			case f.f.Known():
			case f.f.Kind == facts.KindNotSupported:
				warn("%s reads %s (row remapping is not reported while MIG instances are active): not judged", f.name, shown(f.f.Raw))
			default:
				fail("%s reads %s on a GPU that remaps rows (%s): not judged, never a pass", f.name, shown(f.f.Raw), generationName(gen))
			}
		}
	}
	if retires && !retired.Known() {
		fail("retired_pages.pending reads %s on a GPU that retires pages (%s): not judged, never a pass", shown(retired.Raw), generationName(gen))
	}
	return fails, warns
}

// generationName names a generation in messages.
func generationName(g profile.Generation) string {
	if !g.Known() {
		return "generation unknown"
	}
	return string(g)
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

// judgeNVLink judges the GPUs' NVLink: on NVLink types every expected GPU is listed with its
// expected links up (a link listed as inactive fails wherever it is); on NVSwitch systems
// every GPU whose generation has a fabric state (Hopper and newer) registered with the fabric,
// and where it has none (A100) Fabric Manager is active instead. The counters are judged
// around the NCCL test (nvlinkDuring).
func judgeNVLink(f facts.Run, t Target) result.Check {
	c := nvlinkAtRest(f.Host, t)
	if f.Load.Ran {
		c = nvlinkDuring(c, f.Load.NVLinkBefore, f.Load.NVLinkAfter, "during the NCCL test", t)
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
	nvswitch := want && t.fabricRequired()
	if nvswitch {
		expected += "; every GPU registered with the NVSwitch fabric (Completed/Success; Fabric Manager active where the GPU has no fabric state)"
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
		if down := g.Inactive(); len(down) > 0 {
			fails = append(fails, fmt.Sprintf("GPU %d: link %s inactive", g.Index, joinInts(down)))
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
	if n, b, ok := t.gpusExpected(); ok && want && len(st.Value) < n {
		fails = append(fails, fmt.Sprintf("nvidia-smi nvlink -s lists %d of %d GPUs (%s): the links of the others are not read", len(st.Value), n, b))
	}
	if links == 0 && len(counts) > 1 {
		fails = append(fails, "the GPUs have different numbers of active links: "+linkCounts(counts))
	}
	actual := fmt.Sprintf("%d of %d links active on %d GPUs", up, total, len(st.Value))
	if nvswitch {
		fl, note := fabricFindings(h, t)
		fails = append(fails, fl...)
		actual += note
	}
	if len(fails) > 0 {
		return check(id, result.Fail, basis, expected, actual, strings.Join(fails, "; "), ev())
	}
	if links == 0 {
		return check(id, result.Warn, basis, expected, actual, "the link count per GPU is not known for this type: judged for inactive links only (set expect.nvlinks to judge the count)", "")
	}
	return check(id, result.Pass, basis, expected, actual, "", "")
}

// fabricFindings judges the GPUs' NVSwitch fabric registration (nvidia-smi -q's Fabric
// section, R535 and later). A GPU whose generation has a fabric state (Hopper and newer, or
// a generation this package does not know) must read Completed/Success; one without it (an
// A100 prints N/A, NVSwitch or not) is not judged by it: Fabric Manager must then be active,
// and the links are judged by nvidia-smi nvlink -s. The Health subsection ("Bandwidth: N/A"
// on R550/R560) is not judged. note extends the check's actual.
func fabricFindings(h facts.Host, t Target) (fails []string, note string) {
	fr := h.Health.Fabric
	withoutState := 0
	if !fr.OK() {
		if g := t.generationOf(""); !g.Known() || g.HasFabricState() {
			return []string{"the GPUs' fabric state could not be read (nvidia-smi -q): " + fr.Problem}, ""
		}
		withoutState = 1 // the profile's generation has none: Fabric Manager is the evidence
	} else {
		var bad []string
		registered := 0
		for _, g := range fr.Value {
			gen := t.generationOf(g.Architecture)
			required := !gen.Known() || gen.HasFabricState()
			what := fmt.Sprintf("%s %s/%s", g.BusID, g.State, g.Status)
			switch g.Kind {
			case facts.FabricRegistered:
				registered++
			case facts.FabricNotApplicable, facts.FabricNotSupported:
				if required {
					bad = append(bad, what+" (a "+generationName(gen)+" GPU on an NVSwitch fabric reports its registration; N/A means it has none)")
				} else {
					withoutState++
				}
			case facts.FabricPending:
				bad = append(bad, what+" (Fabric Manager has not finished registering it)")
			case facts.FabricFailed:
				bad = append(bad, what+" (the registration failed)")
			case facts.FabricAbsent:
				bad = append(bad, g.BusID+": no Fabric section (driver older than R535)")
			default:
				bad = append(bad, what+" (unreadable)")
			}
		}
		if len(bad) > 0 {
			fails = append(fails, "GPU fabric registration not completed with success (Fabric Manager must register every GPU with the NVSwitches): "+strings.Join(bad, ", "))
		}
		if n, b, ok := t.gpusExpected(); ok && len(fr.Value) < n {
			fails = append(fails, fmt.Sprintf("nvidia-smi -q's fabric report lists %d of %d GPUs (%s)", len(fr.Value), n, b))
		}
		if registered > 0 {
			note = fmt.Sprintf("; fabric Completed/Success on %d GPUs", registered)
		}
	}
	if withoutState > 0 {
		fm := h.FabricManager
		switch {
		case !fm.OK():
			fails = append(fails, "the GPUs have no fabric state (A100: N/A), so Fabric Manager's state is the evidence of the fabric, and it could not be read: "+fm.Problem)
		case fm.Value != "active":
			fails = append(fails, fmt.Sprintf("the GPUs have no fabric state (A100: N/A), so Fabric Manager must be active to drive the NVSwitches: nvidia-fabricmanager is %s", fm.Value))
		default:
			if fr.OK() {
				note += fmt.Sprintf("; %d GPUs without a fabric state (their generation has none): Fabric Manager active", withoutState)
			} else {
				note += "; no fabric state on this generation: Fabric Manager active"
			}
		}
	}
	return fails, note
}

// joinInts joins numbers with ", ".
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
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
// print the second set of names (see internal/parse/nvlink), with bit error rates ("Effective
// BER: 15e-255") and the raw, pre-FEC lane figures ("Raw BER Lane 0", "Raw Errors Lane 0") that
// a healthy link's FEC corrects: neither is judged (the effective errors are).
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
	case has("packets", "bytes", " ber") || strings.HasPrefix(n, "fec ") || strings.HasPrefix(n, "raw "):
		return result.Pass
	case has("crc", "malformed", "rx errors", "rx remote errors", "rx general errors", "integrity",
		"overrun", "effective errors", "recovery failed", "fatal"):
		return result.Fail
	}
	return result.Warn
}

// nvlinkDuring folds into the nvlink check what the NVLink error counters did during a step:
// growth of a corrupting counter fails, a replay or recovery burst warns. On NVLink hosts a
// reading that could not be read, lists fewer GPUs than the host has, holds no counter at all,
// or holds an error counter the driver gave no value for ("N/A", "[Unknown Error]") before or
// after fails: the step is not proven clean.
func nvlinkDuring(earlier result.Check, before, after facts.Fact[[]facts.NVLinkCounters], during string, t Target) result.Check {
	if earlier.Status == result.Skip {
		return earlier
	}
	c := earlier
	addFail := func(msg, ev string) {
		c.Status = result.Fail
		c.Message = strings.TrimPrefix(c.Message+"; "+msg, "; ")
		c.Evidence = evidence(c.Evidence, ev)
	}
	ev := evidence(before.Evidence, after.Evidence)
	if !before.OK() || !after.OK() {
		addFail("the NVLink error counters could not be read "+during+": "+strings.TrimPrefix(before.Problem+"; "+after.Problem, "; "), ev)
		return c
	}
	if n, b, ok := t.gpusExpected(); ok {
		for _, r := range []struct {
			when string
			cs   []facts.NVLinkCounters
		}{{"before", before.Value}, {"after", after.Value}} {
			if len(r.cs) < n {
				addFail(fmt.Sprintf("nvidia-smi nvlink -e lists %d of %d GPUs %s the step (%s): their counters are not read", len(r.cs), n, r.when, b), ev)
			}
		}
	}
	var unread []string
	for _, r := range append(facts.NVLinkUnreadable(before.Value), facts.NVLinkUnreadable(after.Value)...) {
		if nvlinkCounterClass(r.Counter) != result.Pass && !slices.Contains(unread, r.String()) {
			unread = append(unread, r.String())
		}
	}
	if len(unread) > 0 {
		shown := unread
		if len(shown) > 6 {
			shown = append(slices.Clone(shown[:6]), fmt.Sprintf("and %d more", len(unread)-6))
		}
		addFail(fmt.Sprintf("%d NVLink error counters read no value around the step, so the links are not proven clean %s: %s", len(unread), during, strings.Join(shown, ", ")), ev)
	}
	if facts.NVLinkReadable(after.Value) == 0 {
		addFail("nvidia-smi nvlink -e gave no counter as a number "+during+": nothing read could show an error", ev)
	}
	changes, err := facts.NVLinkDelta(before.Value, after.Value)
	if err != nil {
		addFail("the NVLink error counters "+during+" cannot be compared: "+err.Error(), ev)
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

// SlotPCIeWidth is the PCIe width of the GPUs' slots when it is narrower by design than the
// GPUs' own maximum: expect.pcie_width, else the profile's figure; 0 when neither gives one
// (the GPUs' maximum is then expected). basis names where it came from. The engine tells DCGM's
// pcie test the same figure (probe.DCGMOptions.MinPCIeWidth).
func (t Target) SlotPCIeWidth() (width int, basis string) {
	switch {
	case t.Expect.PCIeWidth > 0:
		return t.Expect.PCIeWidth, BasisSetting
	case t.Profile != nil && t.Profile.PCIeWidth > 0:
		return t.Profile.PCIeWidth, t.profileName()
	}
	return 0, ""
}

// pcieReading is what the readings under load say of one GPU's link.
type pcieReading struct {
	widths           []uint64 // the distinct current widths read, in order
	width, widthMax  uint64   // the best current width and the maximum
	gen, genMax      uint64
	failed, unread   []string // fields nvidia-smi could not read, and fields it has no value for
	seenFail, seenNA map[string]bool
}

// field records one field of one reading: its value, or why it has none.
func (r *pcieReading) field(name string, c facts.HealthCount, dst *uint64) {
	switch {
	case c.Known:
		*dst = max(*dst, c.N)
	case c.Kind.ReadFailed():
		if k := name + " reads " + shown(c.Raw); !r.seenFail[k] {
			r.seenFail[k] = true
			r.failed = append(r.failed, k)
		}
	default:
		if k := name + " reads " + shown(c.Raw); !r.seenNA[k] {
			r.seenNA[k] = true
			r.unread = append(r.unread, k)
		}
	}
}

// judgePCIeLink judges each GPU's PCIe link while the NCCL test ran: idle GPUs lower the link
// speed on purpose, so an idle reading proves nothing. Each GPU's best reading under load is
// compared with the slot's width (expect.pcie_width, else the profile's figure, else the GPU's
// own maximum): below it fails (lanes lost: the GPU moves data at a fraction of its
// bandwidth), and so does a width that changed between readings under load (a link
// retraining). On an instance type without a profile a width below the GPU's maximum only
// warns, naming expect.pcie_width. A generation below the maximum warns; a field nvidia-smi
// failed to read fails, one it has no value for warns.
func judgePCIeLink(f facts.Run, t Target) result.Check {
	l := f.Load
	id := result.PCIeLink
	slot, slotBasis := t.SlotPCIeWidth()
	expected := "every GPU at its maximum PCIe width (and generation) under load"
	basis := BasisRule
	if slot > 0 {
		expected, basis = fmt.Sprintf("every GPU at x%d (the slot's width) or more under load, and its maximum generation", slot), slotBasis
	} else if t.Profile != nil {
		basis = t.profileName()
	}
	samples, why, st := underLoad(l)
	if samples == nil {
		return check(id, st, basis, expected, "not read under load", why, sampleEvidence(l))
	}
	readings := map[int]*pcieReading{}
	var order []int
	for _, s := range samples {
		for _, g := range s {
			r, ok := readings[g.Index]
			if !ok {
				r = &pcieReading{seenFail: map[string]bool{}, seenNA: map[string]bool{}}
				readings[g.Index] = r
				order = append(order, g.Index)
			}
			var w uint64
			r.field("pcie.link.width.current", g.PCIeWidthCurrent, &w)
			if g.PCIeWidthCurrent.Known && !slices.Contains(r.widths, w) {
				r.widths = append(r.widths, w)
			}
			r.width = max(r.width, w)
			r.field("pcie.link.width.max", g.PCIeWidthMax, &r.widthMax)
			r.field("pcie.link.gen.current", g.PCIeGenCurrent, &r.gen)
			r.field("pcie.link.gen.max", g.PCIeGenMax, &r.genMax)
		}
	}
	slices.Sort(order)
	var fails, warns, narrow []string
	for _, i := range order {
		r := readings[i]
		gpu := fmt.Sprintf("GPU %d", i)
		if len(r.failed) > 0 {
			fails = append(fails, fmt.Sprintf("%s: %s under load: unreadable", gpu, strings.Join(r.failed, ", ")))
		}
		if len(r.unread) > 0 {
			warns = append(warns, fmt.Sprintf("%s: %s under load: not judged", gpu, strings.Join(r.unread, ", ")))
		}
		if len(r.widths) > 1 {
			ws := make([]string, len(r.widths))
			for k, w := range r.widths {
				ws[k] = fmt.Sprintf("x%d", w)
			}
			fails = append(fails, fmt.Sprintf("%s: the width changed between readings under load (%s): the link retrains; reseat or retire the instance", gpu, strings.Join(ws, " then ")))
		}
		if r.width == 0 || r.widthMax == 0 {
			continue
		}
		want := r.widthMax
		if slot > 0 {
			want = uint64(slot)
		}
		switch {
		case r.width < want && slot > 0:
			fails = append(fails, fmt.Sprintf("%s at x%d under load, below the slot's x%d (%s): lanes lost; reseat or retire the instance", gpu, r.width, slot, slotBasis))
		case r.width < want && (t.Profile == nil || t.Profile.PCIeWidthUnsettled):
			why := t.noProfileNote()
			if t.Profile != nil {
				why = "the slot width of " + t.Profile.InstanceType + " is not settled by public sources"
			}
			warns = append(warns, fmt.Sprintf("%s at x%d of its x%d under load: %s, so a narrower slot cannot be told from lost lanes; set expect.pcie_width to the slot's width to judge it", gpu, r.width, r.widthMax, why))
		case r.width < want:
			fails = append(fails, fmt.Sprintf("%s at x%d of x%d under load (lanes lost: reseat or retire the instance)", gpu, r.width, r.widthMax))
		case r.width < r.widthMax:
			narrow = append(narrow, fmt.Sprintf("%s at x%d of its x%d", gpu, r.width, r.widthMax))
		}
		if r.gen > 0 && r.genMax > 0 && r.gen < r.genMax {
			warns = append(warns, fmt.Sprintf("%s at gen %d of %d under load", gpu, r.gen, r.genMax))
		}
	}
	actual := fmt.Sprintf("%d GPUs, %d samples during the NCCL test", len(order), len(samples))
	msg := ""
	if len(narrow) > 0 {
		src := slotBasis
		if slotBasis != BasisSetting && t.Profile != nil {
			src += ": " + t.Profile.Source
		}
		msg = fmt.Sprintf("%s: the slot's width by design (%s)", strings.Join(narrow, ", "), src)
	}
	switch {
	case len(fails) > 0:
		return check(id, result.Fail, basis, expected, actual, strings.Join(append(fails, warns...), "; "), sampleEvidence(l))
	case len(warns) > 0:
		if msg != "" {
			warns = append(warns, msg)
		}
		return check(id, result.Warn, basis, expected, actual, strings.Join(warns, "; "), sampleEvidence(l))
	}
	if len(narrow) == 0 {
		actual += ": every GPU at its maximum width and generation"
	}
	return check(id, result.Pass, basis, expected, actual, msg, "")
}

// judgeGPUClocks judges the clock event reasons while the NCCL test ran: hardware slowdown,
// hardware thermal slowdown and power-brake slowdown mean the GPU throttled itself (cooling,
// power delivery) and fail; software power capping is the driver keeping the power limit and
// does not. A reason nvidia-smi failed to read ([Unknown Error], [GPU is lost]) fails; one it
// has no value for warns.
func judgeGPUClocks(f facts.Run, _ Target) result.Check {
	l := f.Load
	id := result.GPUClocks
	const expected = "no hardware, thermal or power-brake slowdown under load"
	samples, why, st := underLoad(l)
	if samples == nil {
		return check(id, st, BasisRule, expected, "not read under load", why, sampleEvidence(l))
	}
	seen := map[string]bool{}
	var fails, unreadable []string
	swCap, unknown := 0, 0
	for _, s := range samples {
		for _, g := range s {
			for _, r := range []struct {
				name string
				f    facts.HealthFlag
			}{{"hardware slowdown", g.HWSlowdown}, {"hardware thermal slowdown", g.HWThermalSlowdown}, {"power-brake slowdown", g.HWPowerBrakeSlowdown}} {
				k := fmt.Sprintf("GPU %d: %s", g.Index, r.name)
				switch {
				case r.f.IsTrue():
					if !seen[k] {
						seen[k] = true
						fails = append(fails, k)
					}
				case r.f.Kind.ReadFailed():
					if k += " reads " + shown(r.f.Raw); !seen[k] {
						seen[k] = true
						unreadable = append(unreadable, k)
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
	var msgs []string
	if len(fails) > 0 {
		msgs = append(msgs, strings.Join(fails, "; ")+" during the NCCL test (check cooling and power; retire the instance if it persists)")
	}
	if len(unreadable) > 0 {
		msgs = append(msgs, strings.Join(unreadable, "; ")+" during the NCCL test: unreadable, not judged")
	}
	switch {
	case len(msgs) > 0:
		return check(id, result.Fail, BasisRule, expected, actual, strings.Join(msgs, "; "), sampleEvidence(l))
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

package checks

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

func init() {
	register(Entry{
		ID: result.NVLinkFabric, Phase: PhaseHost, Family: "gpu", Order: 255, Judge: judgeNVLinkFabric,
		Doc: "on a multi-node NVLink host (an UltraServer tray such as p6e-gb200.36xlarge: setting, profile, else more than one GB200 on the PCI bus) every GPU registered with the rack's NVLink fabric: State Completed, Status Success, CliqueId and ClusterUUID non-zero and the same on all GPUs, Health Summary not Unhealthy; " +
			"not applicable elsewhere (an H100/B200 NVSwitch board's zero clique is healthy there; the nvlink check judges its registration). Fabric Manager is not required on such a tray",
		Reads: "`nvidia-smi -q` (Fabric: State, Status, CliqueId, ClusterUUID, Health), `/sys/bus/pci/devices`",
	})
}

// MultiNodeNVLink resolves whether the GPUs' NVLink domain spans trays: the setting, else the
// profile's answer, else (or when the profile says no) whether the PCI bus shows more than
// one GB200 (ParallelCluster's rule), so a tray is recognized without a profile and a profile
// that misses one does not hide it. known is false when nothing could say. nvlink-fabric,
// imex's default, nccl-mnnvl and the engine's second all-reduce (only where want and known)
// all follow it.
func (t Target) MultiNodeNVLink() (want bool, basis string, known bool) {
	switch {
	case t.Expect.MultiNodeNVLink != nil:
		return *t.Expect.MultiNodeNVLink, BasisSetting, true
	case t.Profile != nil && t.Profile.MultiNodeNVLink:
		return true, t.profileName(), true
	case t.PCI != nil && t.PCI.HasMultiNodeNVLink():
		return true, fmt.Sprintf("%s: %d GB200 GPUs (10de:2941)", BasisPCI, t.PCI.MultiNodeNVLinkGPUs()), true
	case t.Profile != nil:
		return false, t.profileName(), true
	case t.PCI != nil:
		return false, BasisPCI, true
	}
	return false, "", false
}

// fabricStateMeaning says what a Fabric State or Status other than Completed/Success means on
// a multi-node NVLink GPU (shared/docs/grace-blackwell.md 1.4: NVML's state enum as
// utkuozdemir/nvidia_gpu_exporter PR 448 and NVIDIA/NVSentinel PR 1382 read it; the fabric
// error of Azure/azhpc-images PR 506; Not Supported from leptonai/gpud PR 1108, PR 1140).
func fabricStateMeaning(f facts.NVLinkFabric) string {
	switch f.Kind {
	case facts.FabricPending:
		if strings.EqualFold(strings.TrimSpace(f.State), "Not Started") {
			return "State Not Started: the fabric registration never started (the GPU's fabric agent did not start it); the GPU is not in the rack's NVLink domain"
		}
		return "State In Progress: the registration with the rack's NVLink fabric is stuck and has not completed; multi-node NVLink jobs cannot use this GPU"
	case facts.FabricFailed:
		return fmt.Sprintf("State Completed with Status %q: a fabric error, the registration failed (the GPU gets no clique and no cluster); multi-node NVLink jobs cannot use this GPU", f.Status)
	case facts.FabricNotSupported:
		return "State Not Supported: the GPU reports no fabric at all (NVML says so when the GPU is set up outside a multi-node NVLink domain); a tray's GPUs must register with the rack's fabric"
	case facts.FabricNotApplicable:
		return "State N/A: the GPU reports no fabric registration; a tray's GPUs must register with the rack's fabric"
	case facts.FabricAbsent:
		return "no Fabric section (a driver older than R535 prints none)"
	}
	return fmt.Sprintf("State %q / Status %q: unreadable", f.State, f.Status)
}

// idProblem says why a registered GPU's CliqueId or ClusterUUID does not place it in a
// multi-node NVLink domain; "" when it does.
func idProblem(field, value string, k facts.FabricIDKind) string {
	switch k {
	case facts.FabricIDSet:
		return ""
	case facts.FabricIDZero:
		return fmt.Sprintf("%s %s: registered, but in no multi-node NVLink domain (zero is healthy only on a single-node NVSwitch board)", field, value)
	case facts.FabricIDAbsent:
		return field + " not printed (drivers before R550 print none): the NVLink domain cannot be proven"
	}
	return fmt.Sprintf("%s %q unreadable", field, textcut.Head(value, 60))
}

// judgeNVLinkFabric judges the multi-node NVLink fabric of an UltraServer tray: every GPU
// registered (Completed/Success) into one clique of one NVLink domain (non-zero CliqueId and
// ClusterUUID, the same on all GPUs) and not reported unhealthy. On hosts whose NVLink stays
// on the board it is not applicable: an H100/B200 NVSwitch GPU reports a zero clique and
// cluster and is healthy (its registration is the nvlink check's). Unreadable output fails.
func judgeNVLinkFabric(f facts.Run, t Target) result.Check {
	id := result.NVLinkFabric
	h := f.Host
	want, basis, known := t.MultiNodeNVLink()
	const expected = "every GPU State Completed, Status Success, CliqueId and ClusterUUID non-zero and the same on all GPUs, Health Summary not Unhealthy"
	fr := h.Health.Fabric
	ev := func() string { return evidence(fr.Evidence, h.PCI.Evidence) }
	if !known {
		return check(id, result.Warn, "", expected, "not judged",
			"not judged: no setting, no profile and no readable PCI inventory ("+t.PCIProblem+"); set expect.multi_node_nvlink", ev())
	}
	if !want {
		return check(id, result.Skip, basis, "no multi-node NVLink", "not applicable",
			"not applicable: "+basis+" says the GPUs' NVLink does not span trays (a zero CliqueId/ClusterUUID is healthy here); set expect.multi_node_nvlink = true to judge it", "")
	}
	if !fr.OK() {
		return check(id, result.Fail, basis, expected, "unreadable",
			"the GPUs' fabric state could not be read (nvidia-smi -q): "+fr.Problem, ev())
	}
	if len(fr.Value) == 0 {
		return check(id, result.Fail, basis, expected, "no GPU", "nvidia-smi -q lists no GPU with a Fabric section", ev())
	}
	var fails, warns []string
	// Each finding once, with the GPUs it was found on, in the order of its first GPU.
	var found []string
	onGPUs := map[string][]int{}
	note := func(i int, what string) {
		if _, ok := onGPUs[what]; !ok {
			found = append(found, what)
		}
		onGPUs[what] = append(onGPUs[what], i)
	}
	cliques, clusters := map[string][]int{}, map[string][]int{}
	registered := 0
	for i, g := range fr.Value {
		if g.Kind != facts.FabricRegistered {
			note(i, fabricStateMeaning(g))
			continue
		}
		registered++
		var bad []string
		if p := idProblem("CliqueId", g.CliqueID, g.Clique()); p != "" {
			bad = append(bad, p)
		} else {
			cliques[g.CliqueID] = append(cliques[g.CliqueID], i)
		}
		if p := idProblem("ClusterUUID", g.ClusterUUID, g.Cluster()); p != "" {
			bad = append(bad, p)
		} else {
			clusters[strings.ToLower(g.ClusterUUID)] = append(clusters[strings.ToLower(g.ClusterUUID)], i)
		}
		switch s := strings.TrimSpace(g.HealthSummary()); strings.ToLower(s) {
		case "unhealthy":
			bad = append(bad, "Health Summary Unhealthy: attached to the fabric but degraded (NVLink paths down); NCCL and the DRA driver fall back to non-MNNVL paths or crash enrolling the clique")
		case "limited capacity":
			warns = append(warns, fmt.Sprintf("GPU %d (%s): Health Summary Limited Capacity: the fabric runs with reduced NVLink bandwidth", i, g.BusID))
		}
		for _, b := range bad {
			note(i, b)
		}
	}
	for _, what := range found {
		fails = append(fails, gpuNames(fr.Value, onGPUs[what])+": "+what)
	}
	if len(cliques) > 1 {
		fails = append(fails, "the GPUs are in different cliques ("+idGroups(cliques)+"): one tray's GPUs must share one clique")
	}
	if len(clusters) > 1 {
		fails = append(fails, "the GPUs are in different NVLink domains (ClusterUUID "+idGroups(clusters)+")")
	}
	if n, b, ok := t.gpusExpected(); ok && len(fr.Value) < n {
		fails = append(fails, fmt.Sprintf("nvidia-smi -q's fabric report lists %d of %d GPUs (%s)", len(fr.Value), n, b))
	}
	actual := fmt.Sprintf("%d of %d GPUs Completed/Success", registered, len(fr.Value))
	if len(cliques) == 1 && len(clusters) == 1 {
		for c := range cliques {
			actual += ", CliqueId " + c
		}
		for u := range clusters {
			actual += ", ClusterUUID " + u
		}
	}
	switch {
	case len(fails) > 0:
		return check(id, result.Fail, basis, expected, actual, "multi-node NVLink fabric not registered: "+strings.Join(fails, "; "), ev())
	case len(warns) > 0:
		return check(id, result.Warn, basis, expected, actual, strings.Join(warns, "; "), ev())
	}
	return check(id, result.Pass, basis, expected, actual, "", "")
}

// idGroups lists each value with the GPUs that report it: "4026 on GPUs 0, 2, 3; 2 on GPU 1".
func idGroups(m map[string][]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return slices.Min(m[a]) - slices.Min(m[b]) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		w := "GPU "
		if len(m[k]) > 1 {
			w = "GPUs "
		}
		parts[i] = k + " on " + w + joinInts(m[k])
	}
	return strings.Join(parts, "; ")
}

// gpuNames names GPUs by index, with the bus id of a single one: "GPU 2 (00000000:62:00.0)",
// "GPUs 0, 1, 2, 3".
func gpuNames(gpus []facts.NVLinkFabric, idx []int) string {
	if len(idx) == 1 {
		return fmt.Sprintf("GPU %d (%s)", idx[0], gpus[idx[0]].BusID)
	}
	return "GPUs " + joinInts(idx)
}

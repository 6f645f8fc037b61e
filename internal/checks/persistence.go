package checks

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func init() {
	register(Entry{
		ID: result.Persistence, Phase: PhaseHost, Family: "gpu", Order: 220, Judge: judgePersistence,
		Doc:   "the driver keeps GPU state between jobs: `nvidia-persistenced` is active (the DLAMI ships it), or persistence mode is on for every GPU",
		Reads: "`systemctl is-active nvidia-persistenced`, `nvidia-smi --query-gpu=...,persistence_mode,...`",
	})
}

// judgePersistence judges that the driver keeps GPU state between jobs: nvidia-persistenced
// active (the DLAMI ships and enables it), or persistence mode on every GPU. Without either the
// driver tears the GPUs down when the last process exits: every job pays the initialisation,
// and NVIDIA's health checks (DCGM, AWS's and Azure's suites) expect it on.
func judgePersistence(f facts.Run, _ Target) result.Check {
	h := f.Host
	id := result.Persistence
	const expected = "nvidia-persistenced active, or persistence mode on every GPU"
	ev := func() string { return evidence(h.Persistenced.Evidence, h.Health.GPUs.Evidence) }
	if h.Persistenced.OK() && h.Persistenced.Value == "active" {
		return check(id, result.Pass, BasisRule, expected, "nvidia-persistenced active", "", "")
	}
	daemon := cmp.Or(h.Persistenced.Value, "unknown")
	if !h.Health.GPUs.OK() {
		return check(id, result.Fail, BasisRule, expected, "nvidia-persistenced "+daemon+", persistence mode unreadable",
			"nvidia-persistenced is not active and the GPUs' persistence mode could not be read: "+h.Health.GPUs.Problem, ev())
	}
	var off []string
	for _, g := range h.Health.GPUs.Value {
		if !g.Persistence.IsTrue() {
			off = append(off, fmt.Sprint(g.Index))
		}
	}
	n := len(h.Health.GPUs.Value)
	switch {
	case n == 0:
		return check(id, result.Fail, BasisRule, expected, "nvidia-persistenced "+daemon+", no GPU listed",
			"nvidia-persistenced is not active and nvidia-smi lists no GPU to read persistence mode from", ev())
	case len(off) > 0:
		return check(id, result.Fail, BasisRule, expected, fmt.Sprintf("nvidia-persistenced %s, persistence mode off on GPU %s", daemon, strings.Join(off, ", ")),
			fmt.Sprintf("nvidia-persistenced is %s and persistence mode is off on GPU %s: the driver tears the GPUs down between jobs (systemctl enable --now nvidia-persistenced, as the DLAMI ships it)", daemon, strings.Join(off, ", ")), ev())
	}
	return check(id, result.Pass, BasisRule, expected, fmt.Sprintf("persistence mode on all %d GPUs (nvidia-persistenced %s)", n, daemon), "", "")
}

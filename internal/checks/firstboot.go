package checks

import (
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// SettleProblem says why a first boot cannot be judged yet: it did not settle in time, the wait
// failed, or cloud-init reports an error. "" means it settled: the first boot cannot be compared
// with the image while it is still changing.
func SettleProblem(f facts.Fact[facts.Settle]) (problem string) {
	switch {
	case f.OK() && f.Value.TimedOut:
		return "cloud-init or apt did not settle within settle_timeout: the first boot is still changing the instance"
	case !f.OK():
		return "waiting for the first boot to settle failed: " + f.Problem
	case strings.Contains(f.Value.Status, "status: error"):
		return "cloud-init reports an error: " + f.Value.Status
	}
	return ""
}

// Unsettled returns the first-boot checks failed for problem.
func Unsettled(problem, evidence string) []result.Check {
	ids := IDs(PhaseFirstBoot)
	out := make([]result.Check, 0, len(ids))
	for _, id := range ids {
		out = append(out, result.Check{ID: id, Status: result.Fail, Basis: "bill of materials", Expected: "a settled first boot", Actual: "not settled", Message: problem, Evidence: evidence})
	}
	return out
}

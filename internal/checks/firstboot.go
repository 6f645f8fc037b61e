package checks

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// HostSectionSettle is the section of SettleCommand.
const HostSectionSettle = "host.settle"

// settleShell waits for the first boot to settle: cloud-init done (its per-instance and
// per-boot scripts ran), then no apt, dpkg or unattended-upgrade process left. It prints
// cloud-init's final status line. A first-boot upgrade that is still running would otherwise be
// judged half done.
const settleShell = `ci=/usr/bin/cloud-init
if [ -x "$ci" ]; then "$ci" status --wait >/dev/null 2>&1; fi
while pgrep -x 'apt|apt-get|dpkg|unattended-upgr|unattended-upgrade' >/dev/null 2>&1; do sleep 2; done
if [ -x "$ci" ]; then "$ci" status 2>&1 | head -n 1; else echo "status: no cloud-init"; fi`

// SettleCommand waits at most timeoutSeconds for the first boot to settle.
func SettleCommand(timeoutSeconds int) bundle.Command {
	return bundle.Command{Name: HostSectionSettle, Shell: settleShell, TimeoutSeconds: timeoutSeconds}
}

// JudgeSettle fails both first-boot checks when the instance did not settle in time or
// cloud-init reports an error: the first boot cannot be compared with the image while it is
// still changing.
func JudgeSettle(s bundle.Section, ok bool) (problem string) {
	switch {
	case !ok:
		return "the settle command did not run"
	case s.TimedOut:
		return "cloud-init or apt did not settle within settle_timeout: the first boot is still changing the instance"
	case s.ExitCode != 0:
		return fmt.Sprintf("waiting for the first boot to settle exited %d: %s", s.ExitCode, strings.TrimSpace(s.Output))
	case strings.Contains(s.Output, "status: error"):
		return "cloud-init reports an error: " + strings.TrimSpace(s.Output)
	}
	return ""
}

// Unsettled returns the first-boot checks failed for problem.
func Unsettled(problem, evidence string) []result.Check {
	out := make([]result.Check, 0, len(result.FirstBootIDs))
	for _, id := range result.FirstBootIDs {
		out = append(out, result.Check{ID: id, Status: result.Fail, Basis: "bill of materials", Expected: "a settled first boot", Actual: "not settled", Message: problem, Evidence: evidence})
	}
	return out
}

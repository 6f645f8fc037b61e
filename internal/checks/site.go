package checks

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Site check exit statuses. 0 and 1 are node-problem-detector's custom plugin convention (OK,
// problem); 2, which NPD reads as "unknown", is a warning here: the site's check ran and says
// something is worth a look without failing the node. Any other status, a check that could
// not run or one its bound stopped fails: a site check that cannot judge never passes.
const (
	SitePass = 0
	SiteFail = 1
	SiteWarn = 2
)

// siteOutputMax bounds the output of a site check kept as evidence.
const siteOutputMax = 4000

// JudgeSite judges one site check from its run; its id is "site:<executable>". t's skip and
// warn selections apply to it like to any check.
func JudgeSite(run facts.SiteRun, t Target) result.Check {
	id := result.SitePrefix + run.Name
	if t.Skips(id) {
		return skippedBySetting(id, t.SkipSetting)
	}
	c := result.Check{ID: id, Basis: "site check " + run.Path, Expected: "exit 0 (1 fails, 2 warns)",
		Evidence: textcut.Tail(strings.TrimSpace(run.Output), siteOutputMax)}
	last := lastLine(run.Output)
	switch {
	case run.Problem != "":
		c.Status, c.Actual, c.Message = result.Fail, "could not run", run.Problem
	case run.TimedOut:
		c.Status, c.Actual, c.Message = result.Fail, "timed out", fmt.Sprintf("%s did not finish within its bound and was stopped: a check that cannot judge never passes", run.Path)
	case run.ExitCode == SitePass:
		c.Status, c.Actual, c.Message = result.Pass, "exit 0", last
	case run.ExitCode == SiteWarn:
		c.Status, c.Actual, c.Message = result.Warn, "exit 2", last
	case run.ExitCode == SiteFail:
		c.Status, c.Actual, c.Message = result.Fail, "exit 1", last
	default:
		c.Status, c.Actual = result.Fail, fmt.Sprintf("exit %d", run.ExitCode)
		c.Message = fmt.Sprintf("%s exited %d, which is neither 0 (pass), 1 (fail) nor 2 (warn): it did not judge", run.Path, run.ExitCode)
	}
	if c.Message == "" && c.Status != result.Pass {
		c.Message = run.Path + " printed nothing"
	}
	return t.demote(c)
}

// lastLine is the last non-empty line of out: a site check's verdict in words.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return textcut.Head(strings.TrimSpace(lines[len(lines)-1]), 300)
}

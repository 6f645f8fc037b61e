package engine

import (
	"encoding/json"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
)

// readNodeCheckReport reads the JSON report a node check printed (n.Output) into n's verdict,
// checks and table; a run that timed out or exited other than 0 (pass) or 1 (fail) is left as
// it is, and a report that cannot be read says why in Unreadable. The probe only carries the
// output: the report's format is package report's.
func readNodeCheckReport(n facts.NodeCheckRun) facts.NodeCheckRun {
	if n.Absent || n.TimedOut || n.ExitCode != 0 && n.ExitCode != 1 {
		return n
	}
	var r report.Report
	err := json.Unmarshal([]byte(n.Output), &r)
	switch {
	case err != nil:
		n.Unreadable = err.Error()
	case r.Result == "":
		n.Unreadable = "the report has no result"
	default:
		n.Result, n.Checks, n.Failed, n.Table = r.Result, r.Checks, r.FailedChecks, report.Table(r.Checks)
	}
	return n
}

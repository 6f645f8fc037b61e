package nodecheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
)

// Metric names of the node_exporter textfile.
const (
	MetricCheck   = "dlami_node_check"
	MetricInfo    = "dlami_node_check_info"
	MetricLastRun = "dlami_node_check_last_run_timestamp_seconds"
	// MetricEvidence and MetricReplacement say what a failing run kept and asked: written only
	// by a run that did either.
	MetricEvidence    = "dlami_node_check_evidence_ok"
	MetricReplacement = "dlami_node_check_replacement_requested"
)

// Textfile renders the Prometheus text exposition of a run for node_exporter's textfile
// collector: one gauge per check id (1 when the check did not fail, 0 when it failed, its
// status as a label), the info gauge with the image's build and this command's version, and
// the time of the run.
//
// A --simulate-failure run adds simulated="true" to every series, so that alerts and
// dashboards tell a drill from a fault (a real run adds no such label: PromQL reads a missing
// label as "", so `simulated!="true"` matches it).
func Textfile(n report.Report, version string, now time.Time) string {
	var b strings.Builder
	sim := ""
	if n.Simulated != "" {
		sim = `,simulated="true"`
	}
	fmt.Fprintf(&b, "# HELP %s Whether a dlami node check passed on this node: 1 unless it failed (status fail or error); the status label says which.\n", MetricCheck)
	fmt.Fprintf(&b, "# TYPE %s gauge\n", MetricCheck)
	for _, c := range n.Checks {
		v := 1
		if c.Status.Failing() {
			v = 0
		}
		fmt.Fprintf(&b, "%s{check=%s,status=%s%s} %d\n", MetricCheck, label(c.ID), label(string(c.Status)), sim, v)
	}
	fmt.Fprintf(&b, "# HELP %s The image build the node was checked against and the version of dlami-node-check.\n", MetricInfo)
	fmt.Fprintf(&b, "# TYPE %s gauge\n", MetricInfo)
	fmt.Fprintf(&b, "%s{build=%s,plugin_version=%s,result=%s%s} 1\n", MetricInfo, label(n.BuildName), label(version), label(n.Result), sim)
	if e := n.Evidence; e != nil {
		fmt.Fprintf(&b, "# HELP %s Whether the last failing run kept its evidence bundle: step write (on the node) and, with evidence s3_uri, upload.\n", MetricEvidence)
		fmt.Fprintf(&b, "# TYPE %s gauge\n", MetricEvidence)
		fmt.Fprintf(&b, "%s{step=\"write\"%s} %d\n", MetricEvidence, sim, boolValue(e.Path != ""))
		if e.UploadTo != "" {
			fmt.Fprintf(&b, "%s{step=\"upload\"%s} %d\n", MetricEvidence, sim, boolValue(e.Uploaded != ""))
		}
	}
	if r := n.Replacement; r != nil {
		fmt.Fprintf(&b, "# HELP %s Whether the last failing run's replacement request was accepted by the engine that replaces the node (1), or not made or refused (0); state says why (requested, operator-hold, deferred, simulated, not-requested, failed).\n", MetricReplacement)
		fmt.Fprintf(&b, "# TYPE %s gauge\n", MetricReplacement)
		fmt.Fprintf(&b, "%s{engine=%s,state=%s%s} %d\n", MetricReplacement, label(r.Engine), label(r.Status), sim, boolValue(r.Requested))
	}
	fmt.Fprintf(&b, "# HELP %s When dlami-node-check last ran, in seconds since the epoch.\n", MetricLastRun)
	fmt.Fprintf(&b, "# TYPE %s gauge\n", MetricLastRun)
	fmt.Fprintf(&b, "%s %d\n", MetricLastRun, now.Unix())
	return b.String()
}

func boolValue(v bool) int {
	if v {
		return 1
	}
	return 0
}

// label quotes a label value as the exposition format escapes it: backslash, double quote
// and line feed.
func label(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(v) + `"`
}

// writeTextfile writes the textfile atomically (a temporary file in the same directory
// renamed into place): node_exporter must never read half of it.
func writeTextfile(path string, n report.Report, version string, now time.Time) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return report.WriteAtomic(path, []byte(Textfile(n, version, now)))
}

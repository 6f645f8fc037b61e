package engine

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
)

// The node check's JSON report is read here, not by the probe: a pass or fail report gives its
// verdict and checks, anything else stays unread with the reason.
func TestReadNodeCheckReport(t *testing.T) {
	const fail = `{"result": "fail", "failed_checks": ["gpu-memory"], "checks": [{"id": "gpu-memory", "status": "fail", "expected": "no pending remap", "actual": "GPU 3 remap pending"}]}`
	for _, tc := range []struct {
		name       string
		in         facts.NodeCheckRun
		result     string
		unreadable string
	}{
		{"a failing node", facts.NodeCheckRun{ExitCode: 1, Output: fail}, "fail", ""},
		{"not JSON", facts.NodeCheckRun{ExitCode: 0, Output: "dlami-node-check: pass"}, "", "invalid character"},
		{"no result", facts.NodeCheckRun{ExitCode: 0, Output: `{"checks": []}`}, "", "no result"},
		{"crashed", facts.NodeCheckRun{ExitCode: 2, Output: fail}, "", ""},
		{"timed out", facts.NodeCheckRun{ExitCode: 1, TimedOut: true, Output: fail}, "", ""},
		{"absent", facts.NodeCheckRun{Absent: true}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readNodeCheckReport(tc.in)
			if got.Result != tc.result || !strings.Contains(got.Unreadable, tc.unreadable) || (tc.unreadable == "") != (got.Unreadable == "") {
				t.Fatalf("result %q unreadable %q, want %q %q", got.Result, got.Unreadable, tc.result, tc.unreadable)
			}
			if tc.result == "fail" && (len(got.Checks) != 1 || got.Failed[0] != "gpu-memory" || !strings.Contains(got.Table, "GPU 3 remap pending")) {
				t.Errorf("checks %+v failed %v table %q", got.Checks, got.Failed, got.Table)
			}
		})
	}
}

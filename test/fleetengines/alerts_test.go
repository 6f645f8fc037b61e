package fleetengines

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/xid"
)

// The shipped alerting rules and their unit tests (deploy/prometheus).
const (
	rulesFile = "deploy/prometheus/dlami-alerts.yaml"
	rulesTest = "deploy/prometheus/dlami-alerts.test.yaml"
)

// TestAlertRules: Debian's real promtool checks the shipped rules and runs their unit tests
// (an Xid appearing on a GPU, a fatal one, a failing node check, a drill, an evidence upload
// that failed); and the same tests fail on rules that are wrong in the ways the seed's were:
// `increase()` over a gauge whose every Xid code is a series of its own, and an `xid` label
// dcgm-exporter never sets; and on a fatal list that lacks Xid 79.
func TestAlertRules(t *testing.T) {
	if _, err := os.Stat(promtool); err != nil {
		missing(t, "%s: %v (run test/fleetengines/install-deps as root)", promtool, err)
	}
	rules, err := os.ReadFile(filepath.Join(repoRoot(t), rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(repoRoot(t), rulesTest))
	if err != nil {
		t.Fatal(err)
	}
	if out, ok := runPromtool(t, string(rules), string(tests), "check", "rules", "dlami-alerts.yaml"); !ok || !strings.Contains(out, "SUCCESS: 7 rules found") {
		t.Errorf("promtool check rules:\n%s", out)
	}
	if out, ok := runPromtool(t, string(rules), string(tests), "test", "rules", "dlami-alerts.test.yaml"); !ok || !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules:\n%s", out)
	}
	for _, m := range []struct{ name, old, new, want string }{
		{"the seed's any-Xid rule", "expr: dlami:gpu_last_xid > 0 and (changes(dlami:gpu_last_xid[15m]) > 0 or (dlami:gpu_last_xid unless dlami:gpu_last_xid offset 15m))",
			"expr: increase(DCGM_FI_DEV_XID_ERRORS[5m]) > 0", "alertname: GpuXidError"},
		{"the seed's fatal rule (an xid label)", `expr: DCGM_FI_DEV_XID_ERRORS{err_code=~"` + fatalList(t, string(rules)) + `"}`,
			`expr: increase(DCGM_FI_DEV_XID_ERRORS{xid=~"48|63|64|74|79|92"}[1m]) > 0`, "alertname: GpuXidFatal"},
		{"a fatal list without 79", "|74|79|95|", "|74|95|", "alertname: GpuXidFatal"},
		{"a replacement withheld on purpose alerts as refused", `expr: dlami_node_check_replacement_requested{state=~"not-requested|failed"} == 0`,
			"expr: dlami_node_check_replacement_requested == 0", "alertname: DLAMINodeReplacementNotRequested"},
		{"a drill that does not say so", `'{{ if eq $labels.simulated "true" }}SIMULATED drill: {{ end }}dlami node check`, `'dlami node check`, "alertname: DLAMINodeCheckFailed"},
	} {
		t.Run(m.name, func(t *testing.T) {
			if !strings.Contains(string(rules), m.old) {
				t.Fatalf("the rules no longer hold %q", m.old)
			}
			wrong := strings.Replace(string(rules), m.old, m.new, 1)
			if out, ok := runPromtool(t, wrong, string(tests), "check", "rules", "dlami-alerts.yaml"); !ok {
				t.Fatalf("the wrong rules do not even load:\n%s", out)
			}
			out, ok := runPromtool(t, wrong, string(tests), "test", "rules", "dlami-alerts.test.yaml")
			if ok || !strings.Contains(out, m.want) {
				t.Errorf("promtool test rules passed rules that are wrong (%s), or failed elsewhere:\n%s", m.name, out)
			}
		})
	}
}

var fatalRE = regexp.MustCompile(`DCGM_FI_DEV_XID_ERRORS\{err_code=~"([0-9|]+)"\}`)

// fatalList is GpuXidFatal's err_code alternatives.
func fatalList(t *testing.T, rules string) string {
	t.Helper()
	m := fatalRE.FindStringSubmatch(rules)
	if m == nil {
		t.Fatal("no err_code list in GpuXidFatal")
	}
	return m[1]
}

// runPromtool runs promtool in a directory holding the rules and their tests.
func runPromtool(t *testing.T, rules, tests string, args ...string) (string, bool) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{"dlami-alerts.yaml": rules, "dlami-alerts.test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("promtool %s: %v", strings.Join(args, " "), ctx.Err())
	}
	return string(out), err == nil
}

// TestFatalXidsMatchTheCatalog: GpuXidFatal's err_code list is exactly the Xids the project's
// copy of NVIDIA's Xid catalog resolves by resetting the GPU or retiring the instance, so the
// alert and the node check's xid check never disagree on what needs a node replaced.
func TestFatalXidsMatchTheCatalog(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join(repoRoot(t), rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var listed []int
	for _, s := range strings.Split(fatalList(t, string(rules)), "|") {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, n)
	}
	var want []int
	for code := 1; code <= 1000; code++ {
		switch xid.Classify(xid.Event{Xid: code}).Action {
		case xid.ActionResetGPU, xid.ActionRetire:
			want = append(want, code)
		}
	}
	if !slices.Equal(listed, want) {
		t.Errorf("GpuXidFatal lists %v; the catalog's reset and retire Xids are %v", listed, want)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheck"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
)

// noNode answers no command and holds no file: enough for flags, config and exit statuses.
type noNode struct{}

func (noNode) Query(context.Context, []bundle.Command) (map[string]bundle.Section, error) {
	return map[string]bundle.Section{}, nil
}

func env(files map[string]string) nodecheck.Env {
	return nodecheck.Env{
		Runner: noNode{}, Now: time.Now, Hostname: func() (string, error) { return "node-1", nil },
		Command: func(_ context.Context, argv []string, _ []string) (string, int, error) {
			if len(argv) > 2 && argv[2] == "show" { // scontrol -o show node: an idle node
				return "NodeName=node-1 Arch=x86_64 State=IDLE ThreadsPerCore=1\n", 0, nil
			}
			return "", 0, nil
		},
		ReadFile: func(p string) ([]byte, error) {
			if s, ok := files[p]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		},
	}
}

func runCmd(t *testing.T, files map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb, env(files))
	return code, out.String(), errb.String()
}

func TestUsage(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		out  string
		err  string
	}{
		{[]string{"--mode", "bogus", "--out", dir}, 2, "", `--mode "bogus"`},
		{[]string{"--mode", "npd", "--timeout", "0s"}, nodecheck.NPDUnknown, "DLAMI node check could not run: bad flags\n", "--timeout 0s"},
		{[]string{"--config", "/etc/missing.json"}, 2, "", "--config /etc/missing.json"},
		{[]string{"--version"}, 0, "dlami-node-check ", ""},
		{[]string{"extra"}, 2, "", `unexpected argument "extra"`},
	} {
		code, out, errs := runCmd(t, nil, c.args...)
		if code != c.code || !strings.HasPrefix(out, c.out) || !strings.Contains(errs, c.err) {
			t.Errorf("%q: exit %d stdout %q stderr %q; want %d, %q, %q", c.args, code, out, errs, c.code, c.out, c.err)
		}
	}
}

// TestNoBOM: on a node without its bill of materials every mode fails closed, and --json
// prints a report that says why.
func TestNoBOM(t *testing.T) {
	dir := t.TempDir()
	code, out, _ := runCmd(t, nil, "--mode", "report", "--json", "--out", dir, "--timeout", "5s")
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json printed %q: %v", out, err)
	}
	if code != 1 || r.Result != "fail" || r.FailedChecks[0] != "stage:bill-of-materials" {
		t.Errorf("exit %d result %s failed %v", code, r.Result, r.FailedChecks)
	}
	code, out, _ = runCmd(t, nil, "--mode", "npd", "--out", dir, "--timeout", "5s")
	if code != nodecheck.NPDProblem || strings.Count(out, "\n") != 1 || len(out) > nodecheck.NPDMaxMessage+1 {
		t.Errorf("npd: exit %d out %q", code, out)
	}
}

// TestConfigFile: the installed config sets the defaults, flags override them, and a
// misspelt setting is refused.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	cfg := nodecheck.Config{Action: "drain", OutDir: dir, TimeoutSeconds: 5}
	files := map[string]string{nodecheck.ConfigPath: string(cfg.Encode())}
	code, _, errs := runCmd(t, files, "--mode", "boot")
	if code != 1 || !strings.Contains(errs, "drained Slurm node node-1") {
		t.Errorf("action from the config: exit %d stderr %q", code, errs)
	}
	code, _, errs = runCmd(t, files, "--mode", "boot", "--action", "block")
	if code != 1 || strings.Contains(errs, "drained") {
		t.Errorf("--action block over the config: exit %d stderr %q", code, errs)
	}
	files[nodecheck.ConfigPath] = `{"acton": "drain"}`
	if code, _, errs = runCmd(t, files, "--mode", "boot"); code != 2 || !strings.Contains(errs, `unknown field "acton"`) {
		t.Errorf("misspelt config: exit %d stderr %q", code, errs)
	}
}

// TestLocalRunnerKillsHungTools: a tool that never ends is killed with its whole process
// group when the bound ends, and the query returns at once.
func TestLocalRunnerKillsHungTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := localRunner{}.Query(ctx, []bundle.Command{{Name: "hang", Shell: "sleep 30", TimeoutSeconds: 30}})
	if err == nil || time.Since(start) > 4*time.Second {
		t.Fatalf("hung query: %v after %s", err, time.Since(start))
	}
	s, err := localRunner{}.Query(context.Background(), []bundle.Command{{Name: "ok", Shell: "echo hello; exit 3"}})
	if err != nil || s["ok"].Output != "hello" || s["ok"].ExitCode != 3 {
		t.Errorf("query: %+v %v", s, err)
	}
}

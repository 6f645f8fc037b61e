package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheck"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
)

// noNode answers no command and holds no file: enough for flags, config and exit statuses.
type noNode struct{}

func (noNode) Query(context.Context, []bundle.Command) (map[string]bundle.Section, error) {
	return map[string]bundle.Section{}, nil
}
func (noNode) Run(context.Context, host.Job) (int, error) { return 127, errors.New("no node") }
func (noNode) Kill(context.Context, host.Job) error       { return nil }
func (noNode) MakeDir(context.Context, string) error      { return nil }
func (noNode) MakeTempDir(_ context.Context, p, s string) (string, error) {
	return p + "/" + s + ".x", nil
}
func (noNode) Upload(context.Context, string, io.Reader) error { return nil }
func (noNode) Install(context.Context, []byte, string, fs.FileMode) error {
	return errors.New("no node")
}
func (noNode) ReadFile(context.Context, string) ([]byte, error) { return nil, fs.ErrNotExist }
func (noNode) RemoveAll(context.Context, string) error          { return nil }
func (noNode) Hold(context.Context, []string) error             { return errors.New("no node") }
func (noNode) BootID(context.Context) (string, error)           { return "", errors.New("no node") }
func (noNode) Reboot(context.Context) error                     { return errors.New("no node") }
func (noNode) Reconnect(context.Context) error                  { return nil }

func env(files map[string]string) nodecheck.Env {
	return nodecheck.Env{
		Host: noNode{}, Now: time.Now, Hostname: func() (string, error) { return "node-1", nil },
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
		{[]string{"--mode", "npd", "--timeout", "0s"}, nodeconf.NPDUnknown, "DLAMI node check could not run: bad flags\n", "--timeout 0s"},
		// One rule with node_check.timeout: a manual run is bounded like a boot.
		{[]string{"--timeout", "5s"}, 2, "", "--timeout 5s: use 10s to 1h"},
		{[]string{"--timeout", "2h"}, 2, "", "--timeout 2h0m0s: use 10s to 1h"},
		{[]string{"--textfile", "/tmp/x.txt"}, 2, "", `--textfile "/tmp/x.txt": an absolute path ending in .prom`},
		{[]string{"--action", "explode"}, 2, "", `--action "explode": use block, drain, report`},
		{[]string{"--config", "/etc/missing.json"}, 2, "", "--config /etc/missing.json"},
		{[]string{"--version"}, 0, "dlami-node-check ", ""},
		{[]string{"extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"--simulate-failure-replace"}, 2, "", "--simulate-failure-replace without --simulate-failure"},
		{[]string{"--mode", "npd", "--npd-condition", "AcceleratedHardwareReady", "--timeout", "8m"}, nodeconf.NPDUnknown, "DLAMI node check could not run: bad flags\n",
			`--timeout 8m0s together with --npd-condition = "AcceleratedHardwareReady"`},
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
	code, out, _ := runCmd(t, nil, "--mode", "report", "--json", "--out", dir, "--timeout", "10s", "--textfile", "none")
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json printed %q: %v", out, err)
	}
	if code != 1 || r.Result != "fail" || r.FailedChecks[0] != "stage:bill-of-materials" {
		t.Errorf("exit %d result %s failed %v", code, r.Result, r.FailedChecks)
	}
	code, out, _ = runCmd(t, nil, "--mode", "npd", "--out", dir, "--timeout", "10s", "--textfile", "none")
	if code != nodeconf.NPDProblem || strings.Count(out, "\n") != 1 || len(out) > nodeconf.NPDMaxMessage+1 {
		t.Errorf("npd: exit %d out %q", code, out)
	}
}

// TestConfigFile: the installed config sets the defaults, flags override them, and a
// misspelt setting is refused.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	cfg := nodeconf.Config{Action: "drain", OutDir: dir, Timeout: 10 * time.Second, Textfile: nodeconf.TextfileNone}
	files := map[string]string{nodeconf.ConfigPath: string(cfg.Encode())}
	code, _, errs := runCmd(t, files, "--mode", "boot")
	if code != 1 || !strings.Contains(errs, "drained Slurm node node-1") {
		t.Errorf("action from the config: exit %d stderr %q", code, errs)
	}
	code, _, errs = runCmd(t, files, "--mode", "boot", "--action", "block")
	if code != 1 || strings.Contains(errs, "drained") {
		t.Errorf("--action block over the config: exit %d stderr %q", code, errs)
	}
	files[nodeconf.ConfigPath] = `{"acton": "drain"}`
	if code, _, errs = runCmd(t, files, "--mode", "boot"); code != 2 || !strings.Contains(errs, `unknown field "acton"`) {
		t.Errorf("misspelt config: exit %d stderr %q", code, errs)
	}
}

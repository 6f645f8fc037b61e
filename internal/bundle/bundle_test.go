package bundle

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestScriptRunsAndParses(t *testing.T) {
	cmds := []Command{
		{Name: "ok", Shell: "echo hello; echo world", Timeout: 10 * time.Second},
		{Name: "fails", Shell: "echo oops >&2; exit 3", Timeout: 10 * time.Second},
		{Name: "quoted", Shell: `printf '%s\n' "it's $((1+1))"`, Timeout: 10 * time.Second},
		{Name: "noeol", Shell: "printf abc", Timeout: 10 * time.Second},
		{Name: "slow", Shell: "sleep 5", Timeout: 1 * time.Second},
	}
	script, err := Script(cmds)
	if err != nil {
		t.Fatal(err)
	}
	f := t.TempDir() + "/s.sh"
	if err := os.WriteFile(f, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", f)
	cmd.Env = append(os.Environ(), "SCRIPT="+f)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	got, err := Parse(string(out), cmds)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, out)
	}
	want := map[string]struct {
		out  string
		code int
		to   bool
	}{
		"ok":     {"hello\nworld", 0, false},
		"fails":  {"oops", 3, false},
		"quoted": {"it's 2", 0, false},
		"noeol":  {"abc", 0, false},
		"slow":   {"", 124, true},
	}
	for name, w := range want {
		s := got[name]
		if s.Output != w.out || s.ExitCode != w.code || s.TimedOut != w.to {
			t.Errorf("%s: got %+v, want output %q code %d timedout %v", name, s, w.out, w.code, w.to)
		}
	}
	if got["slow"].DurationMS < 900 {
		t.Errorf("slow: DurationMS = %d, want about 1000", got["slow"].DurationMS)
	}
}

func TestParseIncomplete(t *testing.T) {
	cmds := []Command{{Name: "a", Shell: "true", Timeout: 10 * time.Second}, {Name: "b", Shell: "true", Timeout: 10 * time.Second}}
	m := markerPrefix + "00@@"
	out := m + " BEGIN a\nx\n\n" + m + " END a 0 1\n" + m + " BEGIN b\npartial\n"
	_, err := Parse(out, cmds)
	if err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("want error naming section b, got %v", err)
	}
}

func TestScriptRejectsBadCommands(t *testing.T) {
	for _, c := range [][]Command{
		{{Name: "a b", Shell: "true", Timeout: 10 * time.Second}},
		{{Name: "", Shell: "true", Timeout: 10 * time.Second}},
		{{Name: "x", Shell: "true", Timeout: 10 * time.Second}, {Name: "x", Shell: "true", Timeout: 10 * time.Second}},
		// Every command is bounded: the caller owns the bound, the bundle has no default.
		{{Name: "unbounded", Shell: "true"}},
	} {
		if _, err := Script(c); err == nil {
			t.Errorf("Script(%+v): want error", c)
		}
	}
}

func FuzzParse(f *testing.F) {
	m := markerPrefix + "ab@@"
	f.Add(m + " BEGIN a\nx\n\n" + m + " END a 0 5\n")
	f.Add(m + " BEGIN a\n" + m + " END a zz\n")
	f.Add("garbage\n" + m + " END a 0\n")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = Parse(s, []Command{{Name: "a"}})
	})
}

// A command that learns the nonce and prints its own END marker must not get its section
// accepted with a forged exit status.
func TestForgedEndMarkerIsRejected(t *testing.T) {
	cmds := []Command{{Name: "forge", Shell: `grep -o "@@DLAMI-BUNDLE-[0-9a-f]*@@" "$SCRIPT" | head -1 | sed "s/$/ END forge 0/"; exit 7`, Timeout: 10 * time.Second}}
	script, err := Script(cmds)
	if err != nil {
		t.Fatal(err)
	}
	f := t.TempDir() + "/s.sh"
	if err := os.WriteFile(f, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", f)
	cmd.Env = append(os.Environ(), "SCRIPT="+f)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	if _, err := Parse(string(out), cmds); err == nil || !strings.Contains(err.Error(), "ended twice") {
		t.Fatalf("Parse accepted a forged marker: err=%v\n%s", err, out)
	}
}

func TestToolFoundAtAbsolutePathOrFailsClosed(t *testing.T) {
	dir := t.TempDir()
	tool := dir + "/opt/bin/mytool"
	if err := os.MkdirAll(dir+"/opt/bin", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho \"tool says $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmds := []Command{
		{Name: "found", Shell: `"$1" hello`, Tool: &Tool{Name: "mytool", Paths: []string{dir + "/missing/mytool", tool}}, Timeout: 10 * time.Second},
		{Name: "missing", Shell: `"$1" hello`, Tool: &Tool{Name: "no-such-tool-xyz", Paths: []string{dir + "/nope"}}, Timeout: 10 * time.Second},
		{Name: "optional", Shell: `if [ -n "$1" ]; then "$1"; else echo absent; fi`, Tool: &Tool{Name: "no-such-tool-xyz", Optional: true}, Timeout: 10 * time.Second},
	}
	script, err := Script(cmds)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	got, err := Parse(string(out), cmds)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, out)
	}
	if s := got["found"]; s.Tool != tool || s.Output != "tool says hello" || s.ExitCode != 0 {
		t.Errorf("found: %+v", s)
	}
	if s := got["missing"]; s.Tool != "" || s.ExitCode != 127 || !strings.Contains(s.Output, "no-such-tool-xyz: not found (looked in "+dir+"/nope, PATH)") {
		t.Errorf("missing: %+v", s)
	}
	if s := got["optional"]; s.Tool != "" || s.ExitCode != 0 || s.Output != "absent" {
		t.Errorf("optional: %+v", s)
	}
}

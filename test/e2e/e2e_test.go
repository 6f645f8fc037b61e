// Package e2e runs every scenario under scenarios/ through run-scenario: a
// real `packer build` against a freshly booted simulated DLAMI host, compared
// with the scenario's expect.json. See README.md for the contract.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// preconditionExit is run-scenario's exit status for a missing precondition.
const preconditionExit = 3

// expectation is a scenario's expect.json.
type expectation struct {
	Build          string    `json:"build"`            // "pass", "fail" or "cancelled"
	FailedChecks   *[]string `json:"failed_checks"`    // compared as a set with the report's; nil: not checked
	LogContains    []string  `json:"log_contains"`     // substrings packer.log or the UI output must contain
	LogNotContains []string  `json:"log_not_contains"` // substrings neither may contain
	// Result is the report's result when it is not the build's ("cancelled", "error").
	Result string `json:"result"`
	// ProcessesAbsent are names no process on the host may have once Packer has exited.
	ProcessesAbsent []string `json:"processes_absent"`
	// FilesAtEnd maps a host path to the content it must have once Packer has exited; null:
	// the host must not have it (run-scenario copies them before teardown).
	FilesAtEnd map[string]*string `json:"files_at_end"`
	// Checks maps a check ID to the status it must have ("warn", "pass", ...).
	Checks map[string]string `json:"checks"`
}

// report is the part of dlami-report.json the scenarios assert on.
type report struct {
	Result       string   `json:"result"`
	FailedChecks []string `json:"failed_checks"`
	Checks       []struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Basis   string `json:"basis"`
		Message string `json:"message"`
	} `json:"checks"`
}

// junitCounts is the part of dlami-report.junit.xml every failing scenario is checked for.
type junitCounts struct {
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
}

func TestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end scenarios boot a simulated host and run Packer; skipped with -short")
	}
	runner, err := filepath.Abs("run-scenario")
	if err != nil {
		t.Fatal(err)
	}
	if msg, ok := checkPreconditions(t, runner); !ok {
		missing(t, msg)
	}

	dirs, err := filepath.Glob(filepath.Join("scenarios", "*", "expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	var filter *regexp.Regexp
	if f := os.Getenv("DLAMI_E2E_SCENARIOS"); f != "" {
		if filter, err = regexp.Compile(f); err != nil {
			t.Fatalf("DLAMI_E2E_SCENARIOS=%q: %v", f, err)
		}
	}
	ran := 0
	for _, e := range dirs {
		dir := filepath.Dir(e)
		name := filepath.Base(dir)
		if filter != nil && !filter.MatchString(name) {
			continue
		}
		ran++
		t.Run(name, func(t *testing.T) { runScenario(t, runner, dir) })
	}
	if ran == 0 {
		t.Fatalf("no scenario matched (DLAMI_E2E_SCENARIOS=%q)", os.Getenv("DLAMI_E2E_SCENARIOS"))
	}
}

// missing skips outside CI and fails with CI=true, with run-scenario's message.
func missing(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("end-to-end precondition missing (CI=true): %s", msg)
	}
	t.Skipf("end-to-end precondition missing: %s", msg)
}

func checkPreconditions(t *testing.T, runner string) (string, bool) {
	t.Helper()
	out, err := exec.Command(runner, "--check").CombinedOutput()
	if err == nil {
		return "", true
	}
	msg := strings.TrimSpace(string(out))
	if msg == "" {
		msg = err.Error()
	}
	return msg, false
}

func runScenario(t *testing.T, runner, dir string) {
	exp, err := readExpectation(filepath.Join(dir, "expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if keep := os.Getenv("DLAMI_E2E_OUT"); keep != "" {
		out = filepath.Join(keep, filepath.Base(dir))
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	timeout := 25 * time.Minute
	if s := os.Getenv("DLAMI_E2E_SCENARIO_TIMEOUT"); s != "" {
		if timeout, err = time.ParseDuration(s); err != nil {
			t.Fatalf("DLAMI_E2E_SCENARIO_TIMEOUT=%q: %v", s, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, runner, dir, out)
	cmd.WaitDelay = time.Minute
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err = cmd.Run()
	t.Logf("%s: run-scenario took %s", filepath.Base(dir), time.Since(start).Round(time.Millisecond))
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == preconditionExit {
		missing(t, strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		t.Fatalf("run-scenario %s: %v\n%s\n%s", dir, err, stderr.String(), tail(filepath.Join(out, "packer.log"), 60))
	}

	problems := append(compare(exp, out), reportSchemaProblems(out)...)
	if len(problems) > 0 {
		t.Errorf("scenario %s (output in %s):\n  - %s\n--- packer UI output (tail):\n%s\n--- packer.log (tail):\n%s",
			filepath.Base(dir), out, strings.Join(problems, "\n  - "),
			tail(filepath.Join(out, "packer.out"), 40), tail(filepath.Join(out, "packer.log"), 80))
	}
}

func readExpectation(path string) (expectation, error) {
	var exp expectation
	b, err := os.ReadFile(path)
	if err != nil {
		return exp, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&exp); err != nil {
		return exp, fmt.Errorf("%s: %w", path, err)
	}
	if exp.Build != "pass" && exp.Build != "fail" && exp.Build != "cancelled" {
		return exp, fmt.Errorf("%s: build must be \"pass\", \"fail\" or \"cancelled\", got %q", path, exp.Build)
	}
	return exp, nil
}

// compare lists every way the scenario's outcome in out differs from exp.
func compare(exp expectation, out string) []string {
	var problems []string
	codeText, err := os.ReadFile(filepath.Join(out, "exit-code"))
	if err != nil {
		return []string{fmt.Sprintf("no exit-code: %v", err)}
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(codeText)))
	if err != nil {
		return []string{fmt.Sprintf("exit-code %q: %v", codeText, err)}
	}
	logText, _ := os.ReadFile(filepath.Join(out, "packer.log"))
	uiText, _ := os.ReadFile(filepath.Join(out, "packer.out"))
	all := string(logText) + "\n" + string(uiText)

	switch exp.Build {
	case "pass":
		if code != 0 {
			problems = append(problems, fmt.Sprintf("build should pass, packer exited %d", code))
		}
	case "fail":
		if code == 0 {
			problems = append(problems, "build should fail, packer exited 0")
		}
		if !strings.Contains(all, "errored") {
			problems = append(problems, "build should fail, but neither packer.log nor the UI output says the build errored")
		}
	case "cancelled":
		if code == 0 {
			problems = append(problems, "build should be cancelled, packer exited 0")
		}
	}
	for _, s := range exp.LogContains {
		if !strings.Contains(all, s) {
			problems = append(problems, fmt.Sprintf("log should contain %q", s))
		}
	}
	for _, s := range exp.LogNotContains {
		if strings.Contains(all, s) {
			problems = append(problems, fmt.Sprintf("log should not contain %q", s))
		}
	}
	if len(exp.ProcessesAbsent) > 0 {
		ps, err := os.ReadFile(filepath.Join(out, "simhost", "processes-at-end.txt"))
		if err != nil {
			problems = append(problems, fmt.Sprintf("no process list of the host: %v", err))
		}
		for _, name := range exp.ProcessesAbsent {
			if strings.Contains(string(ps), name) {
				problems = append(problems, fmt.Sprintf("%s still runs on the host after Packer exited:\n%s", name, ps))
			}
		}
	}
	for path, want := range exp.FilesAtEnd {
		got := filepath.Join(out, "simhost", "files-at-end", path)
		_, absentErr := os.Stat(got + ".absent")
		b, err := os.ReadFile(got)
		switch {
		case want == nil && absentErr != nil:
			problems = append(problems, fmt.Sprintf("%s is on the host after Packer exited (%q), want none", path, b))
		case want != nil && err != nil:
			problems = append(problems, fmt.Sprintf("%s after Packer exited: %v, want %q", path, err, *want))
		case want != nil && string(b) != *want:
			problems = append(problems, fmt.Sprintf("%s after Packer exited is %q, want %q", path, b, *want))
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "dlami-report.json"))
	if errors.Is(err, os.ErrNotExist) && exp.FailedChecks == nil && exp.Result == "" && len(exp.Checks) == 0 {
		return problems // a scenario without the dlami provisioner
	}
	if err != nil {
		return append(problems, fmt.Sprintf("no report: %v", err))
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		return append(problems, fmt.Sprintf("dlami-report.json: %v", err))
	}
	if exp.FailedChecks != nil {
		want, got := set(*exp.FailedChecks), set(r.FailedChecks)
		if !slices.Equal(want, got) {
			problems = append(problems, fmt.Sprintf("failed_checks = %v, want %v", got, want))
		}
	}
	wantResult := exp.Build
	if exp.Result != "" {
		wantResult = exp.Result
	}
	if r.Result != wantResult {
		problems = append(problems, fmt.Sprintf("report result = %q, want %q", r.Result, wantResult))
	}
	for id, want := range exp.Checks {
		got := "missing"
		for _, c := range r.Checks {
			if c.ID == id {
				got = c.Status
			}
		}
		if got != want {
			problems = append(problems, fmt.Sprintf("check %s = %s, want %s", id, got, want))
		}
	}
	// Every failing ending is machine-readable: a CI test reporter must never show it green.
	if r.Result != "pass" {
		if len(r.FailedChecks) == 0 {
			problems = append(problems, fmt.Sprintf("result %q with an empty failed_checks", r.Result))
		}
		ju, err := os.ReadFile(filepath.Join(out, "dlami-report.junit.xml"))
		var jc junitCounts
		if err == nil {
			err = xml.Unmarshal(ju, &jc)
		}
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("dlami-report.junit.xml: %v", err))
		case jc.Failures+jc.Errors == 0:
			problems = append(problems, fmt.Sprintf("result %q but the JUnit report has no failure and no error", r.Result))
		}
	}
	return problems
}

func set(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return slices.Compact(c)
}

// tail returns the last n lines of a file, or why it cannot.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompare checks the expect.json comparison itself (no host needed).
func TestCompare(t *testing.T) {
	checks := func(s ...string) *[]string { return &s }
	tests := []struct {
		name    string
		exp     expectation
		code    string
		log     string
		report  string // "" = no report file
		junit   string // "" = no JUnit file
		wantErr []string
	}{
		{name: "pass", exp: expectation{Build: "pass", FailedChecks: checks()}, code: "0",
			report: `{"result":"pass","failed_checks":[]}`},
		{name: "pass without report check", exp: expectation{Build: "pass"}, code: "0"},
		{name: "cancelled", exp: expectation{Build: "cancelled", FailedChecks: checks("bake:cancelled"), Checks: map[string]string{"gpu": "pass"}}, code: "1",
			report: `{"result":"cancelled","failed_checks":["bake:cancelled"],"checks":[{"id":"gpu","status":"pass"}]}`, junit: `<testsuites failures="0" errors="1"></testsuites>`},
		{name: "failure a CI reporter would show green", exp: expectation{Build: "fail"}, code: "1", log: "errored",
			report: `{"result":"fail","failed_checks":[]}`, junit: `<testsuites failures="0" errors="0"></testsuites>`,
			wantErr: []string{"empty failed_checks", "no failure and no error"}},
		{name: "check status", exp: expectation{Build: "pass", Checks: map[string]string{"holds": "warn"}}, code: "0",
			report: `{"result":"pass","failed_checks":[],"checks":[{"id":"holds","status":"pass"}]}`, wantErr: []string{"check holds = pass, want warn"}},
		{name: "pass but packer failed", exp: expectation{Build: "pass"}, code: "1", log: "Build 'null.dlami' errored",
			wantErr: []string{"should pass"}},
		{name: "fail as expected, order-insensitive", exp: expectation{Build: "fail", FailedChecks: checks("holds", "packages")}, code: "1",
			log: "Build 'null.dlami' errored", report: `{"result":"fail","failed_checks":["packages","holds"]}`, junit: `<testsuites failures="2" errors="0"></testsuites>`},
		{name: "fail but exit 0", exp: expectation{Build: "fail"}, code: "0", wantErr: []string{"exited 0", "errored"}},
		{name: "wrong check id", exp: expectation{Build: "fail", FailedChecks: checks("gpu")}, code: "1",
			log: "errored", report: `{"result":"fail","failed_checks":["gpu","memlock"]}`, junit: `<testsuites failures="2"></testsuites>`, wantErr: []string{"failed_checks"}},
		{name: "missing report", exp: expectation{Build: "fail", FailedChecks: checks("gpu")}, code: "1", log: "errored",
			wantErr: []string{"no report"}},
		{name: "log assertions", exp: expectation{Build: "fail", LogContains: []string{"careless"}, LogNotContains: []string{"RAN"}},
			code: "1", log: "errored LAYER-RAN", wantErr: []string{`contain "careless"`, `not contain "RAN"`}},
		{name: "garbage exit code", exp: expectation{Build: "pass"}, code: "x", wantErr: []string{"exit-code"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name, text string) {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("exit-code", tc.code+"\n")
			write("packer.log", tc.log)
			if tc.report != "" {
				write("dlami-report.json", tc.report)
			}
			if tc.junit != "" {
				write("dlami-report.junit.xml", tc.junit)
			}
			got := compare(tc.exp, dir)
			if len(got) != len(tc.wantErr) {
				t.Fatalf("compare = %q, want %d problems matching %q", got, len(tc.wantErr), tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(strings.Join(got, "\n"), w) {
					t.Errorf("compare = %q, want a problem mentioning %q", got, w)
				}
			}
		})
	}
}

// TestExpectFiles keeps every scenario's expect.json valid.
func TestExpectFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("scenarios", "*", "expect.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios found: %v", err)
	}
	for _, f := range files {
		exp, err := readExpectation(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if exp.Build == "fail" && exp.FailedChecks != nil && len(*exp.FailedChecks) == 0 {
			t.Errorf("%s: a failing scenario must name the checks it fails", f)
		}
	}
}

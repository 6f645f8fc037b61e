package settings

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckRemoteFolder(t *testing.T) {
	for _, tc := range []struct {
		v, want string // want: "" for accepted, else a part of the message
	}{
		{"/tmp", ""},
		{"/var/tmp/dlami-1.2_x", ""},
		{"/", ""},
		{"/tmp/x;id>/tmp/pwned;", "use only letters, digits"},
		{"/tmp/$(id)", "use only letters, digits"},
		{"/tmp/a b", "use only letters, digits"},
		{"/tmp/`id`", "use only letters, digits"},
		{"/tmp/'x'", "use only letters, digits"},
		{"/tmp/x\nid", "use only letters, digits"},
		{"/tmp/../etc", `must not contain ".."`},
		{"/tmp/..", `must not contain ".."`},
		{"/tmp/..x", ""},
		{"tmp", "must be an absolute path"},
		{"", "must be an absolute path"},
	} {
		err := CheckRemoteFolder("remote_folder", tc.v)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q refused: %v", tc.v, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "remote_folder ")):
			t.Errorf("%q: err %v, want one naming remote_folder and saying %q", tc.v, err, tc.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	if got := ReportDir(""); got != filepath.Join("dlami-reports", "build") {
		t.Errorf("ReportDir(\"\") = %s", got)
	}
	if got := BOMFile("golden"); got != filepath.Join("dlami-reports", "golden", "dlami-bom.json") {
		t.Errorf("BOMFile = %s", got)
	}
	if got := VerifyReportDir("golden"); got != filepath.Join("dlami-verify", "golden") {
		t.Errorf("VerifyReportDir = %s", got)
	}
}

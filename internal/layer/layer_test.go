package layer

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	exists := func(p string) bool { return p == "ok.gpg" || p == "ok.sh" || p == "ok.conf" }
	tests := []struct {
		name string
		spec Spec
		want string // substring of the error; "" means valid
	}{
		{"valid", Spec{Name: "slurm", AptPackages: []string{"slurmd", "munge=0.5.15-2", "libc6:amd64"}, AptKeys: []string{"ok.gpg"},
			Files: []File{{Source: "ok.conf", Destination: "/etc/x.conf", Mode: "0600"}}, Scripts: []string{"ok.sh"},
			Environment: map[string]string{"A_B": "x"}}, ""},
		{"no name", Spec{}, "name is required"},
		{"bad name", Spec{Name: "a b"}, "name may contain"},
		{"bad package", Spec{Name: "l", AptPackages: []string{"jq; rm -rf /"}}, "apt_packages[0]"},
		{"bad repo", Spec{Name: "l", AptRepositories: []string{"deb x\ndeb y"}}, "apt_repositories[0]"},
		{"missing key", Spec{Name: "l", AptKeys: []string{"nope.gpg"}}, "apt_keys[0]"},
		{"missing file", Spec{Name: "l", Files: []File{{Source: "nope", Destination: "/x"}}}, "file[0].source"},
		{"relative destination", Spec{Name: "l", Files: []File{{Source: "ok.conf", Destination: "x"}}}, "file[0].destination"},
		{"bad mode", Spec{Name: "l", Files: []File{{Source: "ok.conf", Destination: "/x", Mode: "rw"}}}, "file[0].mode"},
		{"missing script", Spec{Name: "l", Scripts: []string{"nope.sh"}}, "scripts[0]"},
		{"bad env key", Spec{Name: "l", Environment: map[string]string{"A-B": "x"}}, "environment key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.spec, exists)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want error containing %q, got %v", tt.want, err)
			}
		})
	}
}

// The plan is executed here by a real /bin/sh (uploads copied locally, no apt steps), so the
// test proves that template values arrive as data, not as shell code.
func TestBuildRunsWithHostileValues(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	local := filepath.Join(dir, "local.conf")
	if err := os.WriteFile(local, []byte("content\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostile := `it's "$(touch ` + dir + `/pwned)" ; $HOME` + "`id`"
	spec := Spec{
		Name:        "evil",
		Environment: map[string]string{"SECRET": hostile},
		Files:       []File{{Source: local, Destination: filepath.Join(dir, "dest dir", "it's.conf")}},
		Inline:      []string{`printf '%s' "$SECRET" > ` + out},
	}
	plan := Build(spec, filepath.Join(dir, "remote"))
	if err := os.MkdirAll(plan.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, u := range plan.Uploads {
		data := u.Content
		if data == nil {
			var err error
			if data, err = os.ReadFile(u.Local); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(u.Remote, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("/bin/sh", plan.ScriptPath)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("layer script failed: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != hostile {
		t.Errorf("environment value changed on the way: got %q, want %q", got, hostile)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("a value from the template was executed by the shell")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "dest dir", "it's.conf")); err != nil || string(b) != "content\n" {
		t.Errorf("file not installed at a destination with a quote and a space: %v %q", err, b)
	}
	script, _ := os.ReadFile(plan.ScriptPath)
	if strings.Contains(string(script), hostile) {
		t.Error("the secret value appears verbatim in a place other than its quoted export")
	}
}

func TestBuildAptStepsAreQuotedAndWaitForLock(t *testing.T) {
	plan := Build(Spec{Name: "rt", AptPackages: []string{"jq", "munge=0.5.15-2"}, AptRepositories: []string{"deb [trusted=yes] file:/opt/r ./"}}, "/tmp/x")
	var script string
	for _, u := range plan.Uploads {
		if u.Remote == plan.ScriptPath {
			script = string(u.Content)
		}
	}
	for _, want := range []string{
		"DPkg::Lock::Timeout=900",
		"apt_get install -y --no-install-recommends 'jq' 'munge=0.5.15-2'",
		"'/etc/apt/sources.list.d/dlami-rt.list'",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %q:\n%s", want, script)
		}
	}
	if strings.Contains(script, "allow-change-held-packages") || strings.Contains(script, "unhold") {
		t.Error("the layer script must never change holds")
	}
	if err := exec.Command("sh", "-n", "-c", script).Run(); err != nil {
		t.Errorf("script does not parse: %v", err)
	}
}

// A repository line with credentials is installed without them; the credentials go to an apt
// auth file readable by root only, and are secrets the reports redact.
func TestRepositoryCredentialsStayRootOnly(t *testing.T) {
	s := Spec{Name: "private", AptRepositories: []string{"deb [signed-by=/etc/apt/keyrings/k.gpg] https://ci:tok3n-xyz@repo.example.com/apt stable main"},
		Environment: map[string]string{"API_KEY": "k-123456"}}
	p := Build(s, "/tmp/d")
	var list, auth, script string
	for _, u := range p.Uploads {
		switch {
		case strings.HasSuffix(u.Remote, "/sources.list"):
			list = string(u.Content)
		case strings.HasSuffix(u.Remote, "/auth.conf"):
			auth = string(u.Content)
		case strings.HasSuffix(u.Remote, "/layer.sh"):
			script = string(u.Content)
		}
	}
	if strings.Contains(list, "tok3n-xyz") || !strings.Contains(list, "https://repo.example.com/apt stable main") {
		t.Errorf("sources.list: %q", list)
	}
	if auth != "machine repo.example.com/apt login ci password tok3n-xyz\n" {
		t.Errorf("auth.conf: %q", auth)
	}
	if !strings.Contains(script, "install -m 0600 -o root -g root") || !strings.Contains(script, "/etc/apt/auth.conf.d/dlami-private.conf") {
		t.Errorf("script does not install the auth file root-only:\n%s", script)
	}
	if got := s.Secrets(); !slices.Contains(got, "tok3n-xyz") || !slices.Contains(got, "k-123456") {
		t.Errorf("Secrets() = %q", got)
	}
}

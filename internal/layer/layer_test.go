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
		{"raw @ in a password", Spec{Name: "l", AptRepositories: []string{"deb https://ci:p@ss@repo.example.com/apt stable main"}},
			`layer "l": apt_repositories[0]: the credentials of https://<credentials>@repo.example.com/apt contain a raw '@': apt cannot tell them from the host; percent-encode '@' in a user name or password as %40`},
		{"raw / in a password", Spec{Name: "l", AptRepositories: []string{"deb https://ci:p/ss@repo.example.com/apt stable main"}},
			"apt_repositories[0]: https://ci:p/ss@repo.example.com/apt has a '/' before its '@': percent-encode '/' in a user name or password as %2F"},
		{"password without user", Spec{Name: "l", AptRepositories: []string{"deb https://:tok3n-xyz@repo.example.com/apt stable main"}},
			"has credentials and no user name"},
		{"bad percent-encoding", Spec{Name: "l", AptRepositories: []string{"deb https://ci:50%off@repo.example.com/apt stable main"}},
			"not valid percent-encoding"},
		{"space in a password", Spec{Name: "l", AptRepositories: []string{"deb https://ci:two%20words@repo.example.com/apt stable main"}},
			"white space"},
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
	list, auth, script := uploaded(p)
	if strings.Contains(list, "tok3n-xyz") || !strings.Contains(list, "https://repo.example.com/apt stable main") {
		t.Errorf("sources.list: %q", list)
	}
	if auth != "machine repo.example.com/apt login ci password tok3n-xyz\n" {
		t.Errorf("auth.conf: %q", auth)
	}
	if !strings.Contains(script, "install -m 0600 -o root -g root") || !strings.Contains(script, "/etc/apt/auth.conf.d/dlami-private.conf") {
		t.Errorf("script does not install the auth file root-only:\n%s", script)
	}
	if got := s.Secrets(); !slices.Contains(got, "tok3n-xyz") || !slices.Contains(got, "ci") || !slices.Contains(got, "k-123456") {
		t.Errorf("Secrets() = %q", got)
	}
}

// uploaded are the sources.list, auth.conf and layer script a plan uploads.
func uploaded(p Plan) (list, auth, script string) {
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
	return list, auth, script
}

// Every form of credentials in a repository URL leaves the world-readable sources.list and is
// registered as a secret: a token as the user with an empty password (packagecloud's
// https://TOKEN:@host), a token alone (https://TOKEN@host), a percent-encoded password (apt
// decodes it; the auth file carries it decoded), and a scheme other than https (written into
// the entry: apt matches an entry without one to https only).
func TestRepositoryCredentialForms(t *testing.T) {
	for _, tc := range []struct {
		name, repo, line, auth string
		secrets                []string
	}{
		{"token and empty password", "deb https://0123456789abcdef0123:@packagecloud.io/org/repo/ubuntu/ noble main",
			"deb https://packagecloud.io/org/repo/ubuntu/ noble main", "machine packagecloud.io/org/repo/ubuntu/ login 0123456789abcdef0123",
			[]string{"0123456789abcdef0123"}},
		{"token as user", "deb [arch=amd64] https://glpat-abcdef123456@gitlab.example.com/api/v4/projects/7/packages/debian stable main",
			"deb [arch=amd64] https://gitlab.example.com/api/v4/projects/7/packages/debian stable main",
			"machine gitlab.example.com/api/v4/projects/7/packages/debian login glpat-abcdef123456", []string{"glpat-abcdef123456"}},
		{"encoded password", "deb https://ci%40corp:p%40ss%2Fw0rd@repo.example.com:8443/apt stable main",
			"deb https://repo.example.com:8443/apt stable main", "machine repo.example.com:8443/apt login ci@corp password p@ss/w0rd",
			[]string{"ci@corp", "p@ss/w0rd", "ci%40corp", "p%40ss%2Fw0rd"}},
		{"http", "deb http://ci:tok3n-xyz@10.0.0.5/debian stable main", "deb http://10.0.0.5/debian stable main",
			"machine http://10.0.0.5/debian login ci password tok3n-xyz", []string{"ci", "tok3n-xyz"}},
		{"no credentials", "deb [signed-by=/etc/apt/keyrings/k.gpg] https://repo.example.com/apt stable main",
			"deb [signed-by=/etc/apt/keyrings/k.gpg] https://repo.example.com/apt stable main", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Spec{Name: "r", AptRepositories: []string{tc.repo}}
			if err := Validate(s, func(string) bool { return true }); err != nil {
				t.Fatal(err)
			}
			list, auth, _ := uploaded(Build(s, "/tmp/d"))
			if list != tc.line+"\n" {
				t.Errorf("sources.list %q, want %q", list, tc.line)
			}
			if want := tc.auth + "\n"; tc.auth != "" && auth != want || tc.auth == "" && auth != "" {
				t.Errorf("auth.conf %q, want %q", auth, tc.auth)
			}
			got := s.Secrets()
			for _, want := range tc.secrets {
				if !slices.Contains(got, want) {
					t.Errorf("Secrets() = %q: lacks %q", got, want)
				}
			}
			if len(tc.secrets) == 0 && len(got) != 0 {
				t.Errorf("Secrets() = %q, want none", got)
			}
		})
	}
}

// Only environment values that can be secret are: by their variable's name, inside a URL, or
// long enough to be a generated token; words such as "efa", "fail" or "INFO" and paths are not
// (they would blank out verdicts and evidence).
func TestEnvSecrets(t *testing.T) {
	env := map[string]string{
		"GITHUB_TOKEN":         "ghp_short",
		"API_KEY":              "k-123456",
		"DB_PASS":              "hunter22",
		"NPMAUTHTOKEN":         "npm-xyz",
		"HTTPS_PROXY":          "http://proxy-user:proxy-p%40ss@proxy.corp:3128",
		"SESSION_ID":           "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4",
		"FI_PROVIDER":          "efa",
		"NCCL_DEBUG":           "INFO",
		"EXPECTED_RESULT":      "fail",
		"LD_LIBRARY_PATH":      "/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib:/usr/local/cuda/lib64",
		"MIRROR":               "https://mirror.example.com/ubuntu-ports/pool",
		"MESSAGE":              "a sentence with spaces that is long",
		"KEYRING_DIR_CHANGED":  "no",
		"NCCL_SOCKET_IFNAME":   "^lo,docker",
		"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
	}
	got := EnvSecrets(env)
	for _, want := range []string{"ghp_short", "k-123456", "hunter22", "npm-xyz", "proxy-user", "proxy-p@ss", "proxy-p%40ss", "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4"} {
		if !slices.Contains(got, want) {
			t.Errorf("EnvSecrets lacks %q: %q", want, got)
		}
	}
	for _, not := range []string{"efa", "INFO", "fail", env["LD_LIBRARY_PATH"], env["MIRROR"], env["MESSAGE"], "^lo,docker", "0,1,2,3,4,5,6,7", env["HTTPS_PROXY"]} {
		if slices.Contains(got, not) {
			t.Errorf("EnvSecrets took %q for a secret: %q", not, got)
		}
	}
	// KEYRING_DIR_CHANGED: "KEY" is a part only as a word of its own.
	if slices.Contains(got, "no") {
		t.Errorf("a short value of a name that is not a credential's: %q", got)
	}
	// A URL whose credentials cannot be told apart is a secret whole.
	if got := EnvSecrets(map[string]string{"PROXY": "http://u:p@ss@proxy:3128"}); !slices.Equal(got, []string{"http://u:p@ss@proxy:3128"}) {
		t.Errorf("an unreadable URL: %q", got)
	}
}

// repoURLs is a parser of template text: it never panics, and a line it accepts loses its
// credentials in the sources.list and keeps them in auth entries of one line each.
func FuzzRepoURLs(f *testing.F) {
	for _, s := range []string{
		"deb https://ci:tok3n@repo.example.com/apt stable main", "deb https://TOKEN:@packagecloud.io/o/r/ubuntu/ noble main",
		"deb http://u%40x:p%2F@[::1]:8080/p s", "deb https://a:b@c@d/e f", "deb https://u:p/x@h/ s", "deb ://@", "deb a://:@",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		urls, err := repoURLs(line)
		if err != nil || strings.ContainsAny(line, "\n\r") {
			return
		}
		lines, auth := splitCredentials([]string{line})
		after, err := repoURLs(lines[0])
		if err != nil || len(after) != len(urls) {
			t.Fatalf("%q: the sources.list line %q: %d URLs, %v", line, lines[0], len(after), err)
		}
		for _, u := range after {
			if u.userinfo != "" {
				t.Errorf("%q: the sources.list line %q keeps credentials %q", line, lines[0], u.userinfo)
			}
		}
		for _, a := range auth {
			if strings.ContainsAny(a, "\n\r") || len(strings.Fields(a)) < 4 {
				t.Errorf("%q: auth entry %q", line, a)
			}
		}
	})
}

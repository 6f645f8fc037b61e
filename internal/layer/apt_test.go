package layer

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The credentials the layer moves out of sources.list are the ones real apt sends: apt-get
// update reads the layer's sources.list and auth file (as the layer script installs them) and
// fetches from a local repository that records each request's Authorization header. Each form
// the plan handles (a token with an empty password, a token alone, a percent-encoded password,
// a plain one) reaches the repository as apt would send it from the URL itself.
func TestRealAptSendsTheMovedCredentials(t *testing.T) {
	aptGet, err := exec.LookPath("apt-get")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("apt-get is not installed (test/simhost/install-deps installs it)")
		}
		t.Skip("apt-get is not installed")
	}
	var mu sync.Mutex
	seen := map[string]string{} // first path segment -> "user:password" sent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		repo, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		got := "(none)"
		if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Basic ") {
			b, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(h, "Basic "))
			got = string(b)
		}
		mu.Lock()
		seen[repo] = got
		mu.Unlock()
		http.NotFound(w, r)
	}))
	defer srv.Close()
	host := srv.Listener.Addr().(*net.TCPAddr).String()
	cases := []struct{ repo, userinfo, want string }{
		{"token-colon", "0123456789abcdef0123:", "0123456789abcdef0123:"},
		{"token-only", "glpat-abcdef123456", "glpat-abcdef123456:"},
		{"encoded", "ci%40corp:p%40ss%2Fw0rd", "ci@corp:p@ss/w0rd"},
		{"plain", "ci:tok3n-xyz", "ci:tok3n-xyz"},
	}
	s := Spec{Name: "r"}
	for _, c := range cases {
		s.AptRepositories = append(s.AptRepositories, fmt.Sprintf("deb [trusted=yes] http://%s@%s/%s stable main", c.userinfo, host, c.repo))
	}
	if err := Validate(s, func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	list, auth, _ := uploaded(Build(s, "/tmp/d"))
	for _, c := range cases {
		if strings.Contains(list, c.userinfo+"@") {
			t.Errorf("sources.list keeps %q:\n%s", c.userinfo, list)
		}
	}

	root := t.TempDir()
	for _, d := range []string{"etc/sources.list.d", "etc/auth.conf.d", "etc/apt.conf.d", "etc/preferences.d", "state/lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/sources.list"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/auth.conf.d/dlami-r.conf"), []byte(auth), 0o600); err != nil {
		t.Fatal(err)
	}
	me := "root"
	if u, err := user.Current(); err == nil {
		me = u.Username
	}
	cmd := exec.Command(aptGet, "-o", "Dir::Etc="+filepath.Join(root, "etc"), "-o", "Dir::State="+filepath.Join(root, "state"),
		"-o", "Dir::Cache="+filepath.Join(root, "cache"), "-o", "APT::Sandbox::User="+me, "-o", "Debug::NoLocking=1",
		"-o", "Acquire::Languages=none", "update")
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, _ := cmd.CombinedOutput() // every index answers 404: apt-get fails, after asking
	mu.Lock()
	defer mu.Unlock()
	for _, c := range cases {
		if got := seen[c.repo]; got != c.want {
			t.Errorf("%s: apt sent %q, want %q\nauth.conf:\n%s\napt-get:\n%s", c.repo, got, c.want, auth, out)
		}
	}
}

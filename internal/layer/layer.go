// Package layer turns one layer of a bake (apt repositories, keys, packages, files, scripts,
// inline commands) into a root shell script plus the files it needs uploaded beside it. It runs
// nothing: the provisioner uploads the plan and runs the script with sudo.
//
// Every value that comes from a template reaches the script as a single-quoted word or as a file
// uploaded beside it, never as shell text, except the inline commands and scripts, which are the
// user's own shell code and are run as files.
package layer

import (
	"fmt"
	"maps"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
)

// Spec is one layer as configured.
type Spec struct {
	Name            string
	AptRepositories []string
	AptKeys         []string
	AptPackages     []string
	Files           []File
	Scripts         []string
	Inline          []string
	Environment     map[string]string
	// Reboot: the bake reboots the host after the layer and waits for it.
	Reboot bool
	// ExpectReboot: the layer's own scripts reboot the host; the bake waits for it to come
	// back and goes on with the drift check instead of failing on the dropped connection.
	ExpectReboot bool
}

// File is a local file installed at Destination.
type File struct {
	Source      string
	Destination string
	Mode        string
}

// Upload is a local file to copy to Remote before the script runs.
type Upload struct {
	Local  string
	Remote string
	// Content, when not nil, is uploaded instead of reading Local.
	Content []byte
}

// Plan is what running a layer takes: uploads first, then `sudo -n /bin/sh Script`.
type Plan struct {
	Dir     string
	Uploads []Upload
	// ScriptPath is the remote path of the layer script, also listed in Uploads.
	ScriptPath string
}

var (
	nameRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	pkgRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]*(:[a-z0-9]+)?(=[A-Za-z0-9.+~:-]+)?$`)
	envKeyRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	modeRE    = regexp.MustCompile(`^0?[0-7]{3}$`)
	keyBaseRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

// Validate checks a layer's fields and names the offending one in its error. exists reports
// whether a local file exists (injected so tests need no files).
func Validate(s Spec, exists func(string) bool) error {
	where := fmt.Sprintf("layer %q", s.Name)
	if s.Name == "" {
		return fmt.Errorf("layer: name is required (letters, digits, '.', '_', '-')")
	}
	if !nameRE.MatchString(s.Name) {
		return fmt.Errorf("%s: name may contain only letters, digits, '.', '_' and '-'", where)
	}
	for i, p := range s.AptPackages {
		if !pkgRE.MatchString(p) {
			return fmt.Errorf("%s: apt_packages[%d] %q is not a Debian package name (name or name=version)", where, i, p)
		}
	}
	for i, r := range s.AptRepositories {
		if strings.ContainsAny(r, "\n\r") || !strings.HasPrefix(strings.TrimSpace(r), "deb") {
			return fmt.Errorf("%s: apt_repositories[%d] must be one sources.list line starting with \"deb\"", where, i)
		}
		if _, err := repoURLs(r); err != nil {
			return fmt.Errorf("%s: apt_repositories[%d]: %w", where, i, err)
		}
	}
	for i, k := range s.AptKeys {
		if !exists(k) {
			return fmt.Errorf("%s: apt_keys[%d]: local file %q not found", where, i, k)
		}
		if !keyBaseRE.MatchString(filepath.Base(k)) {
			return fmt.Errorf("%s: apt_keys[%d]: file name %q may contain only letters, digits, '.', '_' and '-'", where, i, filepath.Base(k))
		}
	}
	for i, f := range s.Files {
		if !exists(f.Source) {
			return fmt.Errorf("%s: file[%d].source: local file %q not found", where, i, f.Source)
		}
		if !path.IsAbs(f.Destination) || strings.ContainsAny(f.Destination, "\n\r") {
			return fmt.Errorf("%s: file[%d].destination %q must be an absolute remote path", where, i, f.Destination)
		}
		if f.Mode != "" && !modeRE.MatchString(f.Mode) {
			return fmt.Errorf("%s: file[%d].mode %q must be octal like \"0644\"", where, i, f.Mode)
		}
	}
	for i, sc := range s.Scripts {
		if !exists(sc) {
			return fmt.Errorf("%s: scripts[%d]: local file %q not found", where, i, sc)
		}
	}
	for k := range s.Environment {
		if !envKeyRE.MatchString(k) {
			return fmt.Errorf("%s: environment key %q must match [A-Za-z_][A-Za-z0-9_]*", where, k)
		}
	}
	return nil
}

// Build plans layer s in the remote directory dir. Validate s first.
func Build(s Spec, dir string) Plan {
	p := Plan{Dir: dir}
	add := func(name, local string, content []byte) string {
		remote := path.Join(dir, name)
		p.Uploads = append(p.Uploads, Upload{Local: local, Remote: remote, Content: content})
		return remote
	}
	q := bundle.Quote
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }

	w("#!/bin/sh")
	w("# layer %s, written by the dlami provisioner", q(s.Name))
	w("set -eu")
	w("export DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=a")
	w("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin; export PATH")
	for _, k := range slices.Sorted(maps.Keys(s.Environment)) {
		w("export %s=%s", k, q(s.Environment[k]))
	}
	w("apt_get() { apt-get -o DPkg::Lock::Timeout=%d -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \"$@\"; }", hosttools.AptLockTimeoutSeconds)
	w("step() { printf '==> [%%s] %%s\\n' %s \"$*\"; }", q(s.Name))
	// First boot on EC2: cloud-init may still be installing packages and holding dpkg.
	w("if command -v cloud-init >/dev/null 2>&1; then cloud-init status --wait >/dev/null 2>&1 || true; fi")

	if len(s.AptKeys) > 0 {
		w("install -d -m 0755 /etc/apt/keyrings")
		for i, k := range s.AptKeys {
			remote := add(fmt.Sprintf("key-%d", i), k, nil)
			w("step %s", q("apt key "+filepath.Base(k)))
			w("install -m 0644 %s %s", q(remote), q("/etc/apt/keyrings/"+filepath.Base(k)))
		}
	}
	if len(s.AptRepositories) > 0 {
		lines, auth := splitCredentials(s.AptRepositories)
		remote := add("sources.list", "", []byte(strings.Join(lines, "\n")+"\n"))
		w("step %s", q("apt repositories"))
		w("install -m 0644 %s %s", q(remote), q("/etc/apt/sources.list.d/dlami-"+s.Name+".list"))
		if len(auth) > 0 {
			// apt reads credentials from auth.conf.d (apt_auth.conf(5)); root-only, so a
			// repository token is never world-readable in the image.
			remote := add("auth.conf", "", []byte(strings.Join(auth, "\n")+"\n"))
			w("install -d -m 0755 /etc/apt/auth.conf.d")
			w("install -m 0600 -o root -g root %s %s", q(remote), q("/etc/apt/auth.conf.d/dlami-"+s.Name+".conf"))
		}
	}
	if len(s.AptPackages) > 0 {
		w("step 'apt-get update'")
		w("apt_get update")
		quoted := make([]string, len(s.AptPackages))
		for i, pk := range s.AptPackages {
			quoted[i] = q(pk)
		}
		w("step %s", q("apt-get install "+strings.Join(s.AptPackages, " ")))
		w("apt_get install -y --no-install-recommends %s", strings.Join(quoted, " "))
	}
	for i, f := range s.Files {
		remote := add(fmt.Sprintf("file-%d", i), f.Source, nil)
		mode := f.Mode
		if mode == "" {
			mode = "0644"
		}
		w("step %s", q("file "+f.Destination))
		w("install -D -m %s %s %s", q(mode), q(remote), q(f.Destination))
	}
	for i, sc := range s.Scripts {
		remote := add(fmt.Sprintf("script-%d", i), sc, nil)
		w("step %s", q("script "+filepath.Base(sc)))
		w("chmod 0700 %s", q(remote))
		w("( cd %s && %s </dev/null )", q(dir), q(remote))
	}
	if len(s.Inline) > 0 {
		remote := add("inline.sh", "", []byte("set -e\n"+strings.Join(s.Inline, "\n")+"\n"))
		w("step 'inline commands'")
		w("( cd %s && /bin/sh -e %s </dev/null )", q(dir), q(remote))
	}
	w("step done")
	p.ScriptPath = add("layer.sh", "", []byte(b.String()))
	return p
}

// repoURL is a repository URL of a sources.list line with its credentials taken apart: apt
// takes them from the URL's userinfo (percent-decoded) or from apt_auth.conf(5).
type repoURL struct {
	scheme string
	// hostPath is host[:port]/path, the URL without scheme and userinfo.
	hostPath string
	// userinfo is the credentials as written (percent-encoded); user and password decoded.
	// password is "" for "https://TOKEN@host" and "https://TOKEN:@host" (a token sent as the
	// user name with an empty password, as packagecloud documents).
	userinfo       string
	user, password string
	// written is the URL as the line has it.
	written string
}

// repoURLs finds every URL of a sources.list line and takes its credentials apart. It refuses
// a URL whose credentials apt could not tell from its host (a raw '@' or '/' in them), or that
// apt_auth.conf(5) cannot carry (white space), with a message that says what to write instead.
func repoURLs(line string) ([]repoURL, error) {
	var out []repoURL
	for _, tok := range strings.Fields(line) {
		i := strings.Index(tok, "://")
		if i <= 0 || !schemeRE.MatchString(tok[:i]) {
			continue
		}
		u := repoURL{scheme: tok[:i], written: tok}
		rest := tok[i+3:]
		end := strings.IndexByte(rest, '/')
		if end < 0 {
			end = len(rest)
		}
		authority, path := rest[:end], rest[end:]
		at := strings.LastIndexByte(authority, '@')
		host := authority[at+1:]
		if at >= 0 {
			u.userinfo = authority[:at]
			if strings.Contains(u.userinfo, "@") {
				return nil, fmt.Errorf("the credentials of %s contain a raw '@': apt cannot tell them from the host; percent-encode '@' in a user name or password as %%40", redactURL(u))
			}
		}
		if !hostPortRE.MatchString(host) {
			if strings.Contains(path, "@") {
				return nil, fmt.Errorf("%s has a '/' before its '@': percent-encode '/' in a user name or password as %%2F, and '@' as %%40", redactURL(u))
			}
			return nil, fmt.Errorf("%q is not a host[:port]", host)
		}
		u.hostPath = host + path
		if at >= 0 {
			rawUser, rawPass, _ := strings.Cut(u.userinfo, ":")
			var err error
			if u.user, err = url.PathUnescape(rawUser); err == nil {
				u.password, err = url.PathUnescape(rawPass)
			}
			switch {
			case host == "":
				return nil, fmt.Errorf("%s has credentials and no host", redactURL(u))
			case err != nil:
				return nil, fmt.Errorf("the credentials of %s are not valid percent-encoding: write a '%%' as %%25", redactURL(u))
			case u.user == "":
				return nil, fmt.Errorf("%s has credentials and no user name: write %s://USER:PASSWORD@%s, or USER alone for a token", redactURL(u), u.scheme, host)
			case strings.ContainsFunc(u.user+u.password, unicode.IsSpace):
				return nil, fmt.Errorf("the credentials of %s contain white space, which apt_auth.conf(5) cannot carry", redactURL(u))
			}
		}
		out = append(out, u)
	}
	return out, nil
}

var (
	schemeRE   = regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`)
	hostPortRE = regexp.MustCompile(`^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%-]*)(:[0-9]*)?$`)
)

// redactURL is u for an error message: its credentials replaced.
func redactURL(u repoURL) string {
	if u.userinfo == "" {
		return u.written
	}
	return strings.Replace(u.written, u.userinfo+"@", "<credentials>@", 1)
}

// authEntry is u's apt_auth.conf(5) entry: "machine [scheme://]host[:port]/path login USER
// [password PASSWORD]". apt matches an entry without a scheme to https and tor+https only
// (apt_auth.conf(5), apt ≥ 2.0), so any other scheme is written out; an empty password is
// left out, and apt sends the user name with an empty password.
func (u repoURL) authEntry() string {
	machine := u.hostPath
	if u.scheme != "https" && u.scheme != "tor+https" {
		machine = u.scheme + "://" + u.hostPath
	}
	e := fmt.Sprintf("machine %s login %s", machine, u.user)
	if u.password != "" {
		e += " password " + u.password
	}
	return e
}

// splitCredentials moves the credentials out of sources.list lines into apt_auth.conf(5)
// entries. The lines are validated (Validate): a line it cannot read is kept as it is.
func splitCredentials(repos []string) (lines, auth []string) {
	for _, r := range repos {
		urls, _ := repoURLs(r)
		for _, u := range urls {
			if u.userinfo == "" {
				continue
			}
			auth = append(auth, u.authEntry())
			r = strings.Replace(r, u.written, u.scheme+"://"+u.hostPath, 1)
		}
		lines = append(lines, r)
	}
	return lines, auth
}

// Secrets are the values of a layer that must never reach a log, the UI or a report: the user
// name and password of every repository URL, as written and decoded, and the environment
// values EnvSecrets picks.
func (s Spec) Secrets() []string {
	out := EnvSecrets(s.Environment)
	for _, r := range s.AptRepositories {
		urls, _ := repoURLs(r)
		for _, u := range urls {
			out = append(out, u.credentials()...)
		}
	}
	return out
}

// credentials are u's user name and password, decoded and as written.
func (u repoURL) credentials() []string {
	if u.userinfo == "" {
		return nil
	}
	rawUser, rawPass, _ := strings.Cut(u.userinfo, ":")
	return slices.DeleteFunc([]string{u.user, u.password, rawUser, rawPass}, func(v string) bool { return v == "" })
}

// secretKeyWords are words that say an environment variable holds a credential, matched in
// each '_'-separated part of its name (case-insensitive): as a part of its own (API_KEY,
// DB_PASS, GIT_AUTH, GH_PAT) or inside one (GITHUB_TOKEN, NPMTOKEN, DBPASSWORD).
var (
	secretKeyParts = []string{"KEY", "PASS", "AUTH", "PAT", "PSK", "PIN"}
	secretKeyWords = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "APIKEY", "PRIVATEKEY", "ACCESSKEY", "COOKIE"}
)

// LongSecret is the length from which an environment value is a secret whatever its name: a
// generated token, unless it is a path or a URL without credentials.
const LongSecret = 20

// EnvSecrets are the values of env (a layer's environment, nccl.env) that can be secret:
//   - a value whose variable's name says it holds a credential (TOKEN, SECRET, PASSWORD, KEY,
//     AUTH, ... in its name);
//   - the user name and password of a URL in a value (https://user:token@proxy:3128);
//   - a value of LongSecret characters or more with no white space, unless it is an absolute
//     path or a URL (a generated token looks like that; a library path does not).
//
// Other values (efa, INFO, 0, a path) are not: registering them would blank the same words
// wherever they appear, in evidence and in verdicts. Values shorter than
// secretfilter.MinLength are never secrets.
func EnvSecrets(env map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		urls, err := repoURLs(v)
		if err != nil {
			// A URL whose credentials cannot be told apart: the whole value.
			out = append(out, v)
		}
		for _, u := range urls {
			out = append(out, u.credentials()...)
		}
		switch {
		case secretName(k):
			out = append(out, v)
		case len(v) >= LongSecret && !strings.ContainsFunc(v, unicode.IsSpace) && !strings.HasPrefix(v, "/") && !strings.Contains(v, "://"):
			out = append(out, v)
		}
	}
	return out
}

// secretName reports whether an environment variable's name says it holds a credential.
func secretName(key string) bool {
	for _, part := range strings.Split(strings.ToUpper(key), "_") {
		if slices.Contains(secretKeyParts, part) {
			return true
		}
		for _, w := range secretKeyWords {
			if strings.Contains(part, w) {
				return true
			}
		}
	}
	return false
}

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
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
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

// AptLockTimeoutSeconds is how long apt waits for a dpkg lock held by cloud-init or
// unattended-upgrades at first boot, instead of failing at once.
const AptLockTimeoutSeconds = 900

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
	w("apt_get() { apt-get -o DPkg::Lock::Timeout=%d -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \"$@\"; }", AptLockTimeoutSeconds)
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

// repoCredentials matches a URL with credentials in a sources.list line:
// "https://user:token@host/path".
var repoCredentials = regexp.MustCompile(`\b([a-z][a-z0-9+.-]*)://([^/@\s:]+):([^/@\s]+)@([^/\s]+)(/\S*)?`)

// splitCredentials moves the credentials out of sources.list lines into apt_auth.conf(5)
// entries ("machine host/path login user password token").
func splitCredentials(repos []string) (lines, auth []string) {
	for _, r := range repos {
		lines = append(lines, repoCredentials.ReplaceAllStringFunc(r, func(u string) string {
			m := repoCredentials.FindStringSubmatch(u)
			auth = append(auth, fmt.Sprintf("machine %s%s login %s password %s", m[4], m[5], m[2], m[3]))
			return m[1] + "://" + m[4] + m[5]
		}))
	}
	return lines, auth
}

// Secrets are the values of a layer that must never reach a log or a report: its environment
// values and the passwords of its repositories.
func (s Spec) Secrets() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(s.Environment)) {
		out = append(out, s.Environment[k])
	}
	for _, r := range s.AptRepositories {
		for _, m := range repoCredentials.FindAllStringSubmatch(r, -1) {
			out = append(out, m[3])
		}
	}
	return out
}

package examples

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEnrootPyxisScript runs the real examples/golden-slurm/scripts/enroot-pyxis.sh with bash
// and holds what issue 31 asked of it: every download is checked against the SHA-256 the
// template pins before it is used, it never upgrades, and it removes exactly the build
// dependencies it added (the DLAMI's DKMS modules need the compiler the AMI shipped).
//
// The sandbox. The script writes to absolute paths (/etc/slurm, /usr/local via
// `make install prefix=/usr/local`). It runs under `unshare --mount` in a private mount
// namespace where the test folder is bound over /usr/local and over /etc/slurm, so those writes
// land in the test folder and the host never sees them. /etc/slurm need not exist on the host,
// and a bind needs a mount point, so /etc first gets a copy-on-write overlay whose upper layer
// lies on a tmpfs that dies with the namespace: the mount point is created there, never on the
// host. A chroot would need a whole minimal tree with bash, coreutils and their libraries; the
// namespace reuses the host's. /var/lib/dpkg gets an empty tmpfs too, so a real dpkg or apt
// could not change the host's package database even if one were reached.
//
// The tools. PATH holds only the stand-ins below and links to an allow-list of real tools
// (sha256sum, tar, comm, awk, xargs, …): a tool the script starts to call that is on neither
// list fails the test ("command not found") instead of reaching the host, the network or the
// package database. The stand-ins record every call, in order, in one log.
func TestEnrootPyxisScript(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("golden-slurm", "scripts", "enroot-pyxis.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		missing(t, "running enroot-pyxis.sh in a mount namespace needs root (uid %d)", os.Geteuid())
	}
	realTools := map[string]string{}
	for _, name := range sandboxRealTools {
		p, err := exec.LookPath(name)
		if err != nil {
			missing(t, "%s is not installed: %v", name, err)
		}
		realTools[name] = p
	}
	for _, name := range []string{"unshare", "mount"} {
		if _, err := exec.LookPath(name); err != nil {
			missing(t, "%s is not installed: %v", name, err)
		}
	}
	probe := newScriptSandbox(t, script, realTools, enrootPyxisFiles(t))
	if res := probe.runCommand(t, "bash", "-c", "exit 0"); res.exitCode != 0 {
		missing(t, "cannot build the mount-namespace sandbox (unshare --mount, overlay on /etc, binds): exit %d: %s", res.exitCode, res.stderr)
	}

	files := enrootPyxisFiles(t)
	good := map[string]string{
		"ENROOT_VERSION":         "3.5.0",
		"PYXIS_VERSION":          "0.20.0",
		"ENROOT_DEB_SHA256":      sha256Hex(files[enrootDebURL]),
		"ENROOT_CAPS_DEB_SHA256": sha256Hex(files[enrootCapsDebURL]),
		"PYXIS_TARBALL_SHA256":   sha256Hex(files[pyxisTarballURL]),
	}
	wrongSHA := strings.Repeat("0", 64)

	t.Run("installs and removes exactly its build dependencies", func(t *testing.T) {
		t.Parallel()
		sb := newScriptSandbox(t, script, realTools, files)
		res := sb.run(t, good)
		if res.exitCode != 0 {
			t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", res.exitCode, res.stdout, res.stderr)
		}
		calls := sb.calls(t)

		// The downloads, by the exact URLs of NVIDIA's release assets and GitHub's tag archive.
		if got, want := callArgs(calls, "curl"), []string{enrootDebURL, enrootCapsDebURL, pyxisTarballURL}; !slices.Equal(got, want) {
			t.Errorf("downloads = %q, want %q", got, want)
		}
		// enroot is installed from the two downloaded files, whose content is what was served.
		debInstall := "install -y --no-upgrade ./enroot_3.5.0-1_amd64.deb ./enroot+caps_3.5.0-1_amd64.deb"
		if !slices.Contains(callArgs(calls, "apt-get"), debInstall) {
			t.Errorf("apt-get calls %q lack %q", callArgs(calls, "apt-get"), debInstall)
		}
		wantDebs := []string{
			sha256Hex(files[enrootDebURL]) + "  ./enroot_3.5.0-1_amd64.deb",
			sha256Hex(files[enrootCapsDebURL]) + "  ./enroot+caps_3.5.0-1_amd64.deb",
		}
		if got := sb.lines(t, "installed-debs"); !slices.Equal(got, wantDebs) {
			t.Errorf("installed .debs = %q, want %q", got, wantDebs)
		}
		assertNeverUpgrades(t, calls)

		// The plugin is built and installed where the plugstack line points, and Slurm loads it.
		if got, want := callArgs(calls, "make"), []string{"-C pyxis-0.20.0 -j", "-C pyxis-0.20.0 install prefix=/usr/local"}; len(got) != 2 ||
			!regexp.MustCompile(`^-C pyxis-0\.20\.0 -j[1-9][0-9]*$`).MatchString(got[0]) || got[1] != want[1] {
			t.Errorf("make calls = %q, want %q (with -j<nproc>)", got, want)
		}
		sb.wantFile(t, "usr/local/lib/slurm/spank_pyxis.so", "spank_pyxis.so built from pyxis-0.20.0\n")
		sb.wantFile(t, "etc/slurm/plugstack.conf.d/pyxis.conf", "required /usr/local/lib/slurm/spank_pyxis.so\n")
		sb.wantFile(t, "etc/slurm/plugstack.conf", existingPlugstack+"include /etc/slurm/plugstack.conf.d/*\n")
		if got := callArgs(calls, "enroot"); !slices.Equal(got, []string{"version"}) {
			t.Errorf("enroot calls = %q, want [version]", got)
		}

		// Exactly the packages the build step added are purged, once, after the build.
		purges := callArgs(calls, "apt-get")
		purges = slices.DeleteFunc(purges, func(a string) bool { return !strings.HasPrefix(a, "purge ") })
		wantPurge := "purge -y " + strings.Join(buildAdds, " ")
		if !slices.Equal(purges, []string{wantPurge}) {
			t.Errorf("purges = %q, want [%q]", purges, wantPurge)
		}
		if i, j := indexOfCall(calls, "apt-get purge"), indexOfCall(calls, "make -C pyxis-0.20.0 install"); i < j {
			t.Errorf("purge at call %d comes before make install at call %d: %q", i, j, calls)
		}
		if !strings.Contains(res.stdout, "enroot-pyxis: removing the build dependencies: "+strings.Join(buildAdds, " ")) {
			t.Errorf("stdout does not say which build dependencies it removes:\n%s", res.stdout)
		}
		// What the DLAMI shipped (gcc-12 for DKMS, make, …), the runtime dependencies and enroot
		// stay; nothing else is left.
		want := slices.Concat(dlamiPackages, runtimeDeps, []string{"enroot", "enroot+caps"})
		slices.Sort(want)
		if got := sb.lines(t, "dpkg-status"); !slices.Equal(got, want) {
			t.Errorf("installed packages after the script = %q, want %q", got, want)
		}
		sb.wantNoLeftovers(t)
	})

	for _, tc := range []struct {
		name, variable, url string
	}{
		{"wrong enroot .deb SHA-256", "ENROOT_DEB_SHA256", enrootDebURL},
		{"wrong enroot+caps .deb SHA-256", "ENROOT_CAPS_DEB_SHA256", enrootCapsDebURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sb := newScriptSandbox(t, script, realTools, files)
			env := withVar(good, tc.variable, wrongSHA)
			res := sb.run(t, env)
			wantMessage := "enroot-pyxis: " + tc.url + " does not have the SHA-256 the template pins (" + wrongSHA + "): got " + sha256Hex(files[tc.url])
			if res.exitCode == 0 || !strings.Contains(res.stderr, wantMessage) {
				t.Fatalf("exit %d, want a failure saying %q\nstderr:\n%s", res.exitCode, wantMessage, res.stderr)
			}
			calls := sb.calls(t)
			for _, a := range callArgs(calls, "apt-get") {
				if strings.Contains(a, ".deb") {
					t.Errorf("apt-get installed a .deb after a checksum mismatch: %q", a)
				}
			}
			if got := sb.lines(t, "installed-debs"); len(got) != 0 {
				t.Errorf("installed .debs = %q, want none", got)
			}
			if got := callArgs(calls, "make"); len(got) != 0 {
				t.Errorf("make ran after a checksum mismatch: %q", got)
			}
			sb.wantNoLeftovers(t)
		})
	}

	t.Run("wrong pyxis tarball SHA-256", func(t *testing.T) {
		t.Parallel()
		sb := newScriptSandbox(t, script, realTools, files)
		res := sb.run(t, withVar(good, "PYXIS_TARBALL_SHA256", wrongSHA))
		wantMessage := "enroot-pyxis: " + pyxisTarballURL + " does not have the SHA-256 the template pins (" + wrongSHA + "): got " + sha256Hex(files[pyxisTarballURL])
		if res.exitCode == 0 || !strings.Contains(res.stderr, wantMessage) {
			t.Fatalf("exit %d, want a failure saying %q\nstderr:\n%s", res.exitCode, wantMessage, res.stderr)
		}
		if got := callArgs(sb.calls(t), "make"); len(got) != 0 {
			t.Errorf("make ran on a tarball with the wrong SHA-256: %q", got)
		}
		for _, rel := range []string{"usr/local/lib/slurm/spank_pyxis.so", "etc/slurm/plugstack.conf.d/pyxis.conf"} {
			if _, err := os.Stat(filepath.Join(sb.root, rel)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("/%s written after a checksum mismatch (stat: %v)", rel, err)
			}
		}
		sb.wantNoLeftovers(t)
	})

	for _, variable := range slices.Sorted(maps.Keys(good)) {
		for _, empty := range []bool{false, true} {
			name := "without " + variable
			if empty {
				name = "empty " + variable
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				sb := newScriptSandbox(t, script, realTools, files)
				env := withVar(good, variable, "")
				if !empty {
					delete(env, variable)
				}
				res := sb.run(t, env)
				// bash's own message for ${VAR:?}.
				wantMessage := variable + ": parameter null or not set"
				if res.exitCode == 0 || !strings.Contains(res.stderr, wantMessage) {
					t.Fatalf("exit %d, want a failure saying %q\nstderr:\n%s", res.exitCode, wantMessage, res.stderr)
				}
				if calls := sb.calls(t); len(calls) != 0 {
					t.Errorf("the script ran %q before noticing %s is missing", calls, variable)
				}
			})
		}
	}
}

// The release assets the script must fetch for ENROOT_VERSION 3.5.0 on amd64 and
// PYXIS_VERSION 0.20.0, written out rather than derived: NVIDIA's install instructions fetch
// https://github.com/NVIDIA/enroot/releases/download/v<ver>/enroot_<ver>-1_<arch>.deb and
// enroot+caps_<ver>-1_<arch>.deb (github.com/NVIDIA/enroot, doc/installation.md); GitHub serves a
// tag's source at /archive/refs/tags/<tag>.tar.gz, unpacking to <repo>-<tag without v>/.
const (
	enrootDebURL     = "https://github.com/NVIDIA/enroot/releases/download/v3.5.0/enroot_3.5.0-1_amd64.deb"
	enrootCapsDebURL = "https://github.com/NVIDIA/enroot/releases/download/v3.5.0/enroot+caps_3.5.0-1_amd64.deb"
	pyxisTarballURL  = "https://github.com/NVIDIA/pyxis/archive/refs/tags/v0.20.0.tar.gz"
)

// existingPlugstack is a plugstack.conf the site already has: the script appends its include
// line and keeps what was there.
const existingPlugstack = "# site SPANK plugins\noptional /usr/lib/x86_64-linux-gnu/slurm/site.so\n"

var (
	// dlamiPackages are installed before the script runs: what the DLAMI's DKMS modules build with
	// (gcc-12, make, libc6-dev) and the Slurm the earlier layer installed. None may be removed.
	dlamiPackages = []string{"dkms", "gcc", "gcc-12", "libc6-dev", "libslurm40t64", "make", "slurmd"}
	// runtimeDeps are what the script installs for enroot; they stay.
	runtimeDeps = []string{"ca-certificates", "curl", "fuse-overlayfs", "jq", "parallel", "pigz", "squashfs-tools", "squashfuse", "zstd"}
	// buildAdds are what `apt-get install build-essential libslurm-dev` adds on top of
	// dlamiPackages (build-essential pulls g++ and dpkg-dev; gcc, make and libc6-dev are there
	// already), sorted as the script's comm(1) output is.
	buildAdds = []string{"build-essential", "dpkg-dev", "g++", "g++-13", "gcc-13", "libslurm-dev", "libstdc++-13-dev"}
)

// sandboxRealTools are the real programs the script and the stand-ins may run; PATH holds
// nothing else besides the stand-ins.
var sandboxRealTools = []string{
	"awk", "basename", "bash", "cat", "comm", "cp", "cut", "grep", "gzip", "install", "mkdir",
	"mktemp", "mv", "nproc", "rm", "sha256sum", "sort", "tar", "tr", "xargs",
}

// standIns are the tools that would reach the network or the package database. Each records
// its call as one line "TOOL ARGS" in $FAKE/calls and refuses what it does not understand, so a
// change in how the script calls it fails the test rather than passing unjudged.
var standIns = map[string]string{
	// curl serves $FAKE/www/<URL without https://>; anything else is a 404, as with -f.
	"curl": `#!/bin/bash
set -euo pipefail
out='' url=''
while [ $# -gt 0 ]; do
  case $1 in
    -o) out=$2; shift 2 ;;
    --retry) shift 2 ;;
    -fsSL) shift ;;
    -*) echo "curl stand-in: unexpected option $1" >&2; exit 2 ;;
    *) url=$1; shift ;;
  esac
done
echo "curl $url" >>"$FAKE/calls"
src=$FAKE/www/${url#https://}
if [ -z "$out" ] || [ "$src" = "$FAKE/www/$url" ] || [ ! -f "$src" ]; then
  echo "curl: (22) The requested URL returned error: 404" >&2
  exit 22
fi
cp "$src" "$out"
`,
	// apt-get keeps the package database in $FAKE/dpkg-status (one name a line, sorted).
	// install adds the named packages and what they pull ($FAKE/pulls/<name>); a ./x.deb adds
	// the package its file name names and logs the file's SHA-256 in $FAKE/installed-debs.
	// purge removes. Upgrades are refused.
	"apt-get": `#!/bin/bash
set -euo pipefail
echo "apt-get $*" >>"$FAKE/calls"
db=$FAKE/dpkg-status
add() { echo "$1" >>"$db"; sort -u -o "$db" "$db"; }
cmd=${1:-}
shift || true
case $cmd in
  update) ;;
  install)
    for a in "$@"; do
      case $a in
        -y|--no-install-recommends|--no-upgrade) ;;
        -*) echo "apt-get stand-in: unexpected option $a" >&2; exit 100 ;;
        *.deb)
          case $a in ./*|/*) ;; *) echo "E: Unable to locate package $a" >&2; exit 100 ;; esac
          [ -f "$a" ] || { echo "E: Unsupported file $a given on commandline" >&2; exit 100; }
          sha256sum "$a" >>"$FAKE/installed-debs"
          name=$(basename "$a"); add "${name%%_*}" ;;
        *)
          add "$a"
          if [ -f "$FAKE/pulls/$a" ]; then
            while read -r dep; do add "$dep"; done <"$FAKE/pulls/$a"
          fi ;;
      esac
    done ;;
  purge|remove)
    for a in "$@"; do
      case $a in
        -y) ;;
        -*) echo "apt-get stand-in: unexpected option $a" >&2; exit 100 ;;
        *) awk -v p="$a" '$0 != p' "$db" >"$db.new"; mv "$db.new" "$db" ;;
      esac
    done ;;
  upgrade|dist-upgrade|full-upgrade)
    echo "apt-get stand-in: refusing $cmd: the script must never upgrade" >&2; exit 100 ;;
  *) echo "apt-get stand-in: unexpected command $cmd" >&2; exit 100 ;;
esac
`,
	// dpkg-query answers only the query the script makes.
	"dpkg-query": `#!/bin/bash
set -euo pipefail
echo "dpkg-query $*" >>"$FAKE/calls"
# shellcheck disable=SC2016 # the literal format the script passes
if [ $# -ne 2 ] || [ "$1" != -W ] || [ "$2" != '-f=${db:Status-Status} ${Package}\n' ]; then
  echo "dpkg-query stand-in: unexpected arguments: $*" >&2; exit 2
fi
awk '{ print "installed " $0 }' "$FAKE/dpkg-status"
`,
	"dpkg": `#!/bin/bash
set -euo pipefail
echo "dpkg $*" >>"$FAKE/calls"
[ "$*" = --print-architecture ] || { echo "dpkg stand-in: unexpected arguments: $*" >&2; exit 2; }
echo amd64
`,
	// make builds and installs as pyxis's Makefile does (github.com/NVIDIA/pyxis, Makefile:
	// install puts spank_pyxis.so in $(libdir)/slurm, libdir ?= $(prefix)/lib, and pyxis.conf in
	// $(prefix)/share/pyxis), and only once build-essential and libslurm-dev are installed.
	"make": `#!/bin/bash
set -euo pipefail
echo "make $*" >>"$FAKE/calls"
dir=. target=all prefix=/usr/local
while [ $# -gt 0 ]; do
  case $1 in
    -C) dir=$2; shift 2 ;;
    -j[1-9]*) shift ;;
    prefix=*) prefix=${1#prefix=}; shift ;;
    all|install) target=$1; shift ;;
    *) echo "make stand-in: unexpected argument $1" >&2; exit 2 ;;
  esac
done
[ -f "$dir/Makefile" ] || { echo "make: *** No targets specified and no makefile found.  Stop." >&2; exit 2; }
for dep in build-essential libslurm-dev; do
  grep -qx "$dep" "$FAKE/dpkg-status" || { echo "make stand-in: $dep is not installed" >&2; exit 2; }
done
[ -f "$dir/spank_pyxis.so" ] || echo "spank_pyxis.so built from $(basename "$dir")" >"$dir/spank_pyxis.so"
if [ "$target" = install ]; then
  install -d -m 755 "$prefix/lib/slurm" "$prefix/share/pyxis"
  install -m 644 "$dir/spank_pyxis.so" "$prefix/lib/slurm/"
  echo "required $prefix/lib/slurm/spank_pyxis.so" >"$prefix/share/pyxis/pyxis.conf"
fi
`,
	// enroot answers `version` once its package is installed.
	"enroot": `#!/bin/bash
set -euo pipefail
echo "enroot $*" >>"$FAKE/calls"
[ "$*" = version ] || { echo "enroot stand-in: unexpected arguments: $*" >&2; exit 2; }
grep -qx enroot "$FAKE/dpkg-status" || { echo "enroot: command not found" >&2; exit 127; }
echo 3.5.0
`,
}

// sandboxSetup runs as root inside the new mount namespace (see TestEnrootPyxisScript), then
// replaces itself with the command in "$@" under the stand-in PATH.
const sandboxSetup = `set -eu
mount -t tmpfs tmpfs "$FAKE/overlay"
mkdir "$FAKE/overlay/upper" "$FAKE/overlay/work"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$FAKE/overlay/upper,workdir=$FAKE/overlay/work" /etc
mkdir -p /etc/slurm
mount --bind "$FAKE/root/etc/slurm" /etc/slurm
mount --bind "$FAKE/root/usr/local" /usr/local
if [ -d /var/lib/dpkg ]; then mount -t tmpfs tmpfs /var/lib/dpkg; fi
PATH="$FAKE/bin:$FAKE/path"
exec "$@"
`

// scriptSandbox is one test folder: stand-ins, served files, the fake package database, and
// the directories bound over /etc/slurm and /usr/local.
type scriptSandbox struct {
	dir    string // $FAKE
	root   string // what the script sees as / for /etc/slurm and /usr/local
	script string
}

type scriptResult struct {
	exitCode       int
	stdout, stderr string
}

func newScriptSandbox(t *testing.T, script []byte, realTools map[string]string, served map[string][]byte) *scriptSandbox {
	t.Helper()
	sb := &scriptSandbox{dir: t.TempDir()}
	sb.root = filepath.Join(sb.dir, "root")
	// The script is copied into the test folder: the checkout could lie under /usr/local, which
	// the sandbox hides.
	sb.script = filepath.Join(sb.dir, "enroot-pyxis.sh")
	for _, d := range []string{"bin", "path", "www", "pulls", "overlay", "tmp", "home", "root/etc/slurm", "root/usr/local"} {
		mustMkdir(t, filepath.Join(sb.dir, d))
	}
	mustWrite(t, sb.script, script, 0o644)
	for name, body := range standIns {
		mustWrite(t, filepath.Join(sb.dir, "bin", name), []byte(body), 0o755)
	}
	for name, p := range realTools {
		if err := os.Symlink(p, filepath.Join(sb.dir, "path", name)); err != nil {
			t.Fatal(err)
		}
	}
	for url, body := range served {
		p := filepath.Join(sb.dir, "www", strings.TrimPrefix(url, "https://"))
		mustMkdir(t, filepath.Dir(p))
		mustWrite(t, p, body, 0o644)
	}
	db := slices.Clone(dlamiPackages)
	slices.Sort(db)
	mustWrite(t, filepath.Join(sb.dir, "dpkg-status"), []byte(strings.Join(db, "\n")+"\n"), 0o644)
	mustWrite(t, filepath.Join(sb.dir, "pulls", "build-essential"), []byte("g++\ng++-13\ngcc-13\nlibstdc++-13-dev\ndpkg-dev\ngcc\nmake\nlibc6-dev\n"), 0o644)
	mustWrite(t, filepath.Join(sb.dir, "pulls", "libslurm-dev"), []byte("libslurm40t64\n"), 0o644)
	mustWrite(t, filepath.Join(sb.root, "etc/slurm/plugstack.conf"), []byte(existingPlugstack), 0o644)
	return sb
}

// run runs the script with bash in the sandbox with exactly the variables in vars (plus PATH,
// HOME, TMPDIR and FAKE): nothing from the test's own environment reaches it.
func (sb *scriptSandbox) run(t *testing.T, vars map[string]string) scriptResult {
	t.Helper()
	env := []string{"FAKE=" + sb.dir, "HOME=" + filepath.Join(sb.dir, "home"), "TMPDIR=" + filepath.Join(sb.dir, "tmp")}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return sb.exec(t, env, "bash", sb.script)
}

func (sb *scriptSandbox) runCommand(t *testing.T, command ...string) scriptResult {
	t.Helper()
	return sb.exec(t, []string{"FAKE=" + sb.dir}, command...)
}

func (sb *scriptSandbox) exec(t *testing.T, env []string, command ...string) scriptResult {
	t.Helper()
	args := append([]string{"--mount", "--propagation", "private", "bash", "-c", sandboxSetup, "sandbox-setup"}, command...)
	cmd := exec.CommandContext(t.Context(), "unshare", args...)
	cmd.Env = append(env, "PATH="+os.Getenv("PATH"), "LC_ALL=C")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("running %q in the sandbox: %v", command, err)
	}
	return scriptResult{exitCode: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// calls are the stand-ins' calls in order, "TOOL ARGS" each.
func (sb *scriptSandbox) calls(t *testing.T) []string { return sb.lines(t, "calls") }

// lines reads a file of the test folder as lines; a missing file has none.
func (sb *scriptSandbox) lines(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sb.dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// wantFile says that the script left /rel with exactly this content.
func (sb *scriptSandbox) wantFile(t *testing.T, rel, want string) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(sb.root, rel))
	if err != nil {
		t.Errorf("/%s: %v", rel, err)
		return
	}
	if string(got) != want {
		t.Errorf("/%s = %q, want %q", rel, got, want)
	}
}

// wantNoLeftovers says that the script removed its work folder (its EXIT trap).
func (sb *scriptSandbox) wantNoLeftovers(t *testing.T) {
	t.Helper()
	left, err := os.ReadDir(filepath.Join(sb.dir, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the script left %d entries in TMPDIR (first %q)", len(left), left[0].Name())
	}
}

// assertNeverUpgrades: every apt-get install carries --no-upgrade and no upgrade is called.
func assertNeverUpgrades(t *testing.T, calls []string) {
	t.Helper()
	installs := 0
	for _, a := range callArgs(calls, "apt-get") {
		fields := strings.Fields(a)
		switch {
		case len(fields) > 0 && strings.Contains(fields[0], "upgrade"):
			t.Errorf("apt-get %s: the script must never upgrade", a)
		case len(fields) > 0 && fields[0] == "install":
			installs++
			if !slices.Contains(fields, "--no-upgrade") {
				t.Errorf("apt-get %s: an install without --no-upgrade may upgrade a held or kernel package", a)
			}
		}
	}
	if installs != 3 {
		t.Errorf("%d apt-get installs, want 3 (runtime dependencies, the enroot .debs, build dependencies): %q", installs, calls)
	}
}

// callArgs are the arguments of the calls to tool, in order.
func callArgs(calls []string, tool string) []string {
	var out []string
	for _, c := range calls {
		if args, ok := strings.CutPrefix(c, tool+" "); ok {
			out = append(out, args)
		}
	}
	return out
}

// indexOfCall is the index of the first call starting with prefix, or -1.
func indexOfCall(calls []string, prefix string) int {
	return slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

// withVar is a copy of vars with k set to v.
func withVar(vars map[string]string, k, v string) map[string]string {
	out := maps.Clone(vars)
	out[k] = v
	return out
}

// enrootPyxisFiles are what the stand-in curl serves: two .deb stand-ins (apt-get is a
// stand-in too, so their content only has to be distinct) and a real gzipped tarball laid out
// as GitHub's archive of the pyxis tag.
func enrootPyxisFiles(t *testing.T) map[string][]byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{
		{"pyxis-0.20.0/", ""},
		{"pyxis-0.20.0/Makefile", "prefix ?= /usr/local\nlibdir ?= $(prefix)/lib\n"},
		{"pyxis-0.20.0/pyxis_srun.c", "/* pyxis source stand-in */\n"},
	} {
		hdr := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}
		if strings.HasSuffix(f.name, "/") {
			hdr.Mode, hdr.Typeflag = 0o755, tar.TypeDir
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		enrootDebURL:     []byte("enroot 3.5.0 amd64 .deb stand-in\n"),
		enrootCapsDebURL: []byte("enroot+caps 3.5.0 amd64 .deb stand-in\n"),
		pyxisTarballURL:  buf.Bytes(),
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, name string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, b, mode); err != nil {
		t.Fatal(err)
	}
}

package engine

import (
	"context"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Hygiene is image_hygiene: the last step of a bake removes what must not be in every
// instance launched from the image, or must be unique to each: the build's SSH key, the SSH
// host keys, the machine id, cloud-init's instance state, logs and shell history.
type Hygiene struct {
	// LoginUser is the SSH user whose authorized_keys held the build key (Packer's User).
	LoginUser string
	// BuildKey is the public key Packer logged in with, "type base64" (authorized_keys
	// format); empty when it is not known (agent or password authentication), and then no
	// authorized_keys line is removed and the check warns.
	BuildKey string
}

// hygieneTimeout bounds the cleanup job (journal vacuuming is the slow part).
const hygieneTimeout = 5 * time.Minute

// Paths image hygiene removes and the check reads back. cloud-init's instance state is
// removed path by path, as amazon-eks-ami's cleanup does, rather than with `cloud-init clean`,
// which also removes /var/lib/cloud/scripts (the per-boot and per-instance scripts a DLAMI or
// a layer installs).
var (
	hygieneCloudState = []string{"/var/lib/cloud/instances", "/var/lib/cloud/instance", "/var/lib/cloud/data", "/var/lib/cloud/sem"}
	hygieneHistory    = []string{".bash_history", ".zsh_history", ".python_history", ".lesshst", ".viminfo"}
)

// hygienePrelude sets the login user, the build key's base64 blob and the users' home
// directories; every value is quoted.
func (h Hygiene) prelude() string {
	blob := ""
	if f := strings.Fields(h.BuildKey); len(f) >= 2 {
		blob = f[1]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "user=%s\nblob=%s\n", bundle.Quote(h.LoginUser), bundle.Quote(blob))
	b.WriteString(`home=
[ -n "$user" ] && home=$(getent passwd "$user" | cut -d: -f6)
roothome=$(getent passwd root | cut -d: -f6); roothome=${roothome:-/root}
homes=$roothome
[ -n "$home" ] && [ "$home" != "$roothome" ] && homes="$homes $home"
cloud=` + quoteAll(hygieneCloudState) + `
hist=` + quoteAll(hygieneHistory) + "\n")
	return b.String()
}

func quoteAll(vs []string) string {
	return bundle.Quote(strings.Join(vs, " "))
}

// hygieneScript is the cleanup, run as root. Each step says what it did; a step that fails
// makes the script exit 1 after the others ran.
func (h Hygiene) script() string {
	return "#!/bin/sh\nset -u\n" + h.prelude() + `rc=0
say() { echo "dlami-hygiene: $*"; }
# Only lines holding the key Packer logged in with go; every other key stays (a team's own
# keys, EC2 Instance Connect's). The file keeps its inode, owner and mode.
drop_key() {
  f=$1
  [ -f "$f" ] || { say "$f: absent"; return 0; }
  if [ -z "$blob" ]; then say "$f: kept as is (the key Packer logged in with is not known)"; return 0; fi
  t=$(mktemp) || return 1
  awk -v k="$blob" '{ for (i = 1; i <= NF; i++) if ($i == k) next; print }' "$f" >"$t" || { rm -f "$t"; return 1; }
  before=$(wc -l <"$f"); after=$(wc -l <"$t")
  cat "$t" >"$f" || { rm -f "$t"; return 1; }
  rm -f "$t"
  say "$f: removed $((before - after)) line(s) holding the build key, kept $after"
}
for d in $homes; do drop_key "$d/.ssh/authorized_keys" || rc=1; done
# Host keys: cloud-init (ssh_deletekeys, ssh_genkeytypes) makes new ones at an instance's
# first boot; sshd keeps the keys it loaded for the session this bake runs over.
rm -f /etc/ssh/ssh_host_* && say "removed /etc/ssh/ssh_host_*" || rc=1
# machine-id(5): an empty file makes systemd generate a new id at boot.
: >/etc/machine-id && say "emptied /etc/machine-id" || rc=1
if [ -L /var/lib/dbus/machine-id ] && [ "$(readlink /var/lib/dbus/machine-id)" = /etc/machine-id ]; then
  say "kept /var/lib/dbus/machine-id (a link to /etc/machine-id)"
elif [ -e /var/lib/dbus/machine-id ] || [ -L /var/lib/dbus/machine-id ]; then
  rm -f /var/lib/dbus/machine-id && say "removed /var/lib/dbus/machine-id" || rc=1
fi
for p in $cloud; do rm -rf -- "$p" || rc=1; done
say "removed cloud-init's instance state ($cloud)"
n=0
for f in /var/log/*.log /var/log/*/*.log /var/log/wtmp /var/log/btmp /var/log/lastlog; do
  [ -f "$f" ] && [ ! -L "$f" ] || continue
  : >"$f" && n=$((n + 1)) || rc=1
done
for f in /var/log/*.gz /var/log/*/*.gz /var/log/*.[0-9] /var/log/*/*.[0-9] /var/log/*.log.[0-9]* /var/log/*/*.log.[0-9]*; do
  [ -f "$f" ] && [ ! -L "$f" ] || continue
  rm -f -- "$f" || rc=1
done
say "emptied $n log file(s) under /var/log, removed rotated ones"
for j in /usr/bin/journalctl /bin/journalctl; do
  [ -x "$j" ] || continue
  "$j" --rotate >/dev/null 2>&1; "$j" --vacuum-time=1s >/dev/null 2>&1 && say "vacuumed the journal"
  break
done
for d in $homes; do for h in $hist; do
  [ -e "$d/$h" ] || [ -L "$d/$h" ] || continue
  rm -f -- "$d/$h" && say "removed $d/$h" || rc=1
done; done
exit $rc
`
}

// sectionHygiene is the read-only probe of what image hygiene removed.
const sectionHygiene = "hygiene.state"

// probe prints, as root, one line per fact the check judges:
//
//	keys FILE absent | keys FILE lines=N build=M
//	hostkeys N NAMES...
//	machine-id absent | machine-id size=N | machine-id notfile
//	dbus-machine-id absent | dbus-machine-id link=TARGET | dbus-machine-id size=N
//	cloud PATH present
//	history FILE size=N
//	logs nonempty=N
//
// and "done" last, so a cut-short answer is never mistaken for a clean image.
func (h Hygiene) probe() bundle.Command {
	script := "set -u\n" + h.prelude() + `for d in $homes; do
  f=$d/.ssh/authorized_keys
  if [ ! -e "$f" ]; then echo "keys $f absent"; continue; fi
  l=$(wc -l <"$f") || exit 2
  m=0
  [ -n "$blob" ] && { m=$(awk -v k="$blob" '{ for (i = 1; i <= NF; i++) if ($i == k) { n++; next } } END { print n + 0 }' "$f") || exit 2; }
  echo "keys $f lines=$l build=$m"
done
set -- /etc/ssh/ssh_host_*
if [ -e "$1" ] || [ -L "$1" ]; then echo "hostkeys $# $*"; else echo "hostkeys 0"; fi
if [ ! -e /etc/machine-id ]; then echo "machine-id absent"
elif [ -f /etc/machine-id ]; then echo "machine-id size=$(wc -c </etc/machine-id)"
else echo "machine-id notfile"; fi
if [ -L /var/lib/dbus/machine-id ]; then echo "dbus-machine-id link=$(readlink /var/lib/dbus/machine-id)"
elif [ -e /var/lib/dbus/machine-id ]; then echo "dbus-machine-id size=$(wc -c </var/lib/dbus/machine-id)"
else echo "dbus-machine-id absent"; fi
for p in $cloud; do if [ -e "$p" ] || [ -L "$p" ]; then echo "cloud $p present"; fi; done
for d in $homes; do for x in $hist; do
  if [ -e "$d/$x" ]; then echo "history $d/$x size=$(wc -c <"$d/$x")"; fi
done; done
n=0
for f in /var/log/*.log /var/log/*/*.log; do [ -s "$f" ] && n=$((n + 1)); done
echo "logs nonempty=$n"
echo done
`
	return bundle.Command{Name: sectionHygiene, Shell: "sudo -n /bin/sh -c " + bundle.Quote(script) + " dlami-hygiene-probe"}
}

// imageHygiene is image_hygiene, the bake's last step: the cleanup job, then the check judged
// from a read-only probe of the same paths. A failed check fails the bake.
func (b *Bake) imageHygiene(ctx context.Context) error {
	h := b.opt.ImageHygiene
	if h == nil {
		return nil
	}
	b.stage("image hygiene (the build's SSH key, host keys, machine id, cloud-init state, logs, history)")
	start := b.now()
	script := path.Join(b.workDir, "image-hygiene.sh")
	if err := b.host.Upload(ctx, script, strings.NewReader(h.script())); err != nil {
		return fmt.Errorf("image hygiene: uploading its script: %w", err)
	}
	out := newTailWriter(4000)
	job := host.Job{Name: "image hygiene", Script: script, AsRoot: true, PIDFile: path.Join(b.workDir, "image-hygiene.pid"), Output: out}
	jctx, cancel := context.WithTimeout(ctx, hygieneTimeout)
	code, err := b.host.Run(jctx, job)
	cancel()
	if ctx.Err() != nil {
		b.stopLater = append(b.stopLater, job)
		return ctx.Err()
	}
	if err != nil {
		b.kill(ctx, job)
		return fmt.Errorf("image hygiene: %w", err)
	}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if l != "" {
			b.ui.Message(l)
		}
	}
	sections, err := b.host.Query(ctx, []bundle.Command{h.probe()})
	var c result.Check
	if err != nil {
		c = result.Check{ID: result.ImageHygiene, Status: result.Fail, Expected: hygieneExpected, Actual: "unreadable",
			Message: "the image's state after image hygiene could not be read, so it is not known to be clean: " + err.Error()}
	} else {
		c = judgeHygiene(sections[sectionHygiene], *h)
	}
	if code != 0 && !c.Status.Failing() {
		c.Status, c.Actual = result.Fail, fmt.Sprintf("cleanup exit %d", code)
		c.Message = "the image hygiene script failed (exit " + strconv.Itoa(code) + "): " + textcut.Tail(out.String(), 500)
	}
	c.Evidence = strings.TrimSpace(out.String() + "\n--- read back:\n" + sections[sectionHygiene].Output)
	c.DurationMS = b.now().Sub(start).Milliseconds()
	b.record(c)
	if c.Status.Failing() {
		return verdict("image hygiene failed: %s", c.Message)
	}
	if c.Status == result.Warn {
		b.ui.Error("dlami: image-hygiene warn: " + c.Message)
	}
	b.ui.Say("dlami: image hygiene done: the build's SSH access is gone from the image; no later provisioner can log in with a new connection")
	return nil
}

const hygieneExpected = "no build key in authorized_keys, no SSH host keys, an empty /etc/machine-id, no cloud-init instance state, no shell history"

// hygieneFields is how many fields each kind of the probe's lines has, at least and at most
// (probe); a line of another kind, or shape, is unreadable.
var hygieneFields = map[string][2]int{
	"keys": {3, 4}, "hostkeys": {2, math.MaxInt}, "machine-id": {2, 2}, "dbus-machine-id": {2, 2},
	"cloud": {3, 3}, "history": {3, 3}, "logs": {2, 2},
}

// judgeHygiene judges the probe's answer. Anything it cannot read, or an answer without its
// last line, fails: an image is only clean when every fact says so.
func judgeHygiene(s bundle.Section, h Hygiene) result.Check {
	c := result.Check{ID: result.ImageHygiene, Basis: checks.BasisRule, Expected: hygieneExpected}
	lines := strings.Split(strings.TrimSpace(s.Output), "\n")
	if s.TimedOut || s.ExitCode != 0 || len(lines) == 0 || lines[len(lines)-1] != "done" {
		c.Status, c.Actual = result.Fail, "unreadable"
		c.Message = fmt.Sprintf("reading the image's state as root (sudo -n) failed (exit %d): %s", s.ExitCode, textcut.Head(s.Output, 300))
		return c
	}
	var bad []string
	saw := map[string]bool{}
	for _, l := range lines[:len(lines)-1] {
		f := strings.Fields(l)
		kind := ""
		if len(f) > 0 {
			kind = f[0]
		}
		if n, ok := hygieneFields[kind]; !ok || len(f) < n[0] || len(f) > n[1] {
			bad = append(bad, "unreadable line "+strconv.Quote(l))
			continue
		}
		saw[f[0]] = true
		switch f[0] {
		case "keys":
			if len(f) == 4 && f[3] != "build=0" {
				bad = append(bad, f[1]+" still holds the build key ("+strings.TrimPrefix(f[3], "build=")+" line(s))")
			}
		case "hostkeys":
			if f[1] != "0" {
				bad = append(bad, "SSH host keys left: "+strings.Join(f[2:], " "))
			}
		case "machine-id":
			switch f[1] {
			case "size=0":
			case "absent":
				bad = append(bad, "/etc/machine-id is missing (it must be an empty file: machine-id(5))")
			default:
				bad = append(bad, "/etc/machine-id is not empty ("+f[1]+"): every instance would share its id")
			}
		case "dbus-machine-id":
			if f[1] != "absent" && f[1] != "link=/etc/machine-id" {
				bad = append(bad, "/var/lib/dbus/machine-id is left ("+f[1]+")")
			}
		case "cloud":
			bad = append(bad, "cloud-init instance state left: "+f[1])
		case "history":
			if f[2] != "size=0" {
				bad = append(bad, "shell history left: "+f[1])
			}
		}
	}
	for _, k := range []string{"hostkeys", "machine-id", "dbus-machine-id", "logs"} {
		if !saw[k] {
			bad = append(bad, "no answer for "+k)
		}
	}
	if len(bad) > 0 {
		c.Status, c.Actual = result.Fail, "left: "+textcut.Head(strings.Join(bad, "; "), 200)
		c.Message = strings.Join(bad, "; ")
		return c
	}
	if len(strings.Fields(h.BuildKey)) < 2 {
		c.Status, c.Actual = result.Warn, "clean; authorized_keys not judged"
		c.Message = "the key Packer logged in with is not known (ssh_agent_auth, a password, or an encrypted private key), so no authorized_keys line was removed: remove the build's key yourself, or log in with ssh_private_key_file or the builder's temporary key"
		return c
	}
	c.Status, c.Actual = result.Pass, "clean"
	return c
}

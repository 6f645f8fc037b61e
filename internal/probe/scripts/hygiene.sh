#!/bin/sh
# Image hygiene, run as root (packer-plugin-dlami, image_hygiene = true): removes the build's SSH
# key, the SSH host keys, the machine id, cloud-init's instance state, logs and shell history.
# Each step says what it did; a step that fails makes the script exit 1 after the others ran.
# The plugin sets, before this body: user (the SSH user Packer logged in as), blob (the base64
# part of the public key Packer logged in with, or empty), cloud (cloud-init's instance state
# paths) and hist (the shell history file names).
set -u
home=
[ -n "$user" ] && home=$(getent passwd "$user" | cut -d: -f6)
roothome=$(getent passwd root | cut -d: -f6); roothome=${roothome:-/root}
homes=$roothome
[ -n "$home" ] && [ "$home" != "$roothome" ] && homes="$homes $home"
rc=0
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
  if [ ! -f "$f" ] || [ -L "$f" ]; then continue; fi
  : >"$f" && n=$((n + 1)) || rc=1
done
for f in /var/log/*.gz /var/log/*/*.gz /var/log/*.[0-9] /var/log/*/*.[0-9] /var/log/*.log.[0-9]* /var/log/*/*.log.[0-9]*; do
  if [ ! -f "$f" ] || [ -L "$f" ]; then continue; fi
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

#!/bin/sh
# What image hygiene removed, read back as root (packer-plugin-dlami): one line per fact the
# image-hygiene check judges, and "done" last, so a cut-short answer is never mistaken for a
# clean image:
#   keys FILE absent | keys FILE lines=N build=M
#   hostkeys N NAMES...
#   machine-id absent | machine-id size=N | machine-id notfile
#   dbus-machine-id absent | dbus-machine-id link=TARGET | dbus-machine-id size=N
#   cloud PATH present
#   history FILE size=N
#   logs nonempty=N
#   imex-nodes-config FILE absent | imex-nodes-config FILE present N ADDR... (the lines that are
#   an IPv4 address other than the placeholder 0.0.0.0, the first 8 listed)
# The plugin sets, before this body: user (the SSH user Packer logged in as), blob (the base64
# part of the public key Packer logged in with, or empty), cloud (cloud-init's instance state
# paths) and hist (the shell history file names).
set -u
home=
[ -n "$user" ] && home=$(getent passwd "$user" | cut -d: -f6)
roothome=$(getent passwd root | cut -d: -f6); roothome=${roothome:-/root}
homes=$roothome
[ -n "$home" ] && [ "$home" != "$roothome" ] && homes="$homes $home"
for d in $homes; do
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
# IMEX's node list (grace-blackwell.md section 1.5): every node's list must match, so a list of
# real addresses baked into the image blocks the nodes it does not name.
f=/etc/nvidia-imex/nodes_config.cfg
if [ ! -e "$f" ]; then echo "imex-nodes-config $f absent"
else
  real=$(imex_real_addresses "$f") || exit 2
  echo "imex-nodes-config $f present $real"
fi
echo "done"

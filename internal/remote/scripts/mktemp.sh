#!/bin/sh
# Creates $1 if missing and a new folder in it with mktemp -d (mode 0700 whatever the umask, the
# login user's), and prints the new folder's path. $2 is the prefix (packer-plugin-dlami,
# internal/remote: SSH.MakeTempDir).
mkdir -p -- "$1" || exit 1
d=$(mktemp -d "${1%/}/$2.XXXXXXXXXX") || exit 1
chmod 0700 -- "$d" || exit 1
printf '%s\n' "$d"

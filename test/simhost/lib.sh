# shellcheck shell=bash
# Shared helpers for the simulated DLAMI host scripts. Sourced, never executed.

SIMHOST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2034 # used by the scripts that source this file
SIM_CACHE=${DLAMI_SIM_CACHE:-/var/cache/dlami-simhost}
SIM_SUITE=bookworm

die() { echo "simhost: $*" >&2; exit 1; }
log() { echo "simhost: $*" >&2; }

# sim_mirror prints the Debian mirror the machine's apt already uses for
# $SIM_SUITE, so no mirror host name is written into the repository.
sim_mirror() {
	if [ -n "${DLAMI_SIM_MIRROR:-}" ]; then echo "$DLAMI_SIM_MIRROR"; return; fi
	local f uri
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		# deb822: one stanza per blank-line separated block.
		uri=$(awk -v suite="$SIM_SUITE" '
			BEGIN { RS=""; FS="\n" }
			{
				u=""; s=""; t=""
				for (i = 1; i <= NF; i++) {
					if ($i ~ /^URIs:/)   { u=$i; sub(/^URIs:[ \t]*/, "", u) }
					if ($i ~ /^Suites:/) { s=" " $i " "; sub(/^ Suites:/, " ", s) }
					if ($i ~ /^Types:/)  { t=$i }
				}
				if (t ~ /deb( |$)/ && s ~ (" " suite " ")) { split(u, a, " "); print a[1]; exit }
			}' "$f")
		if [ -n "$uri" ]; then echo "${uri%/}"; return; fi
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		uri=$(awk -v suite="$SIM_SUITE" '
			$1 == "deb" {
				i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
				if ($(i+1) == suite) { print $i; exit }
			}' "$f")
		if [ -n "$uri" ]; then echo "${uri%/}"; return; fi
	done
	return 1
}

# sim_hash prints a short content hash of the given files/directories.
sim_hash() {
	find "$@" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sed "s|  $SIMHOST_DIR/|  |" | sha256sum | cut -c1-16
}

sim_need_root() { [ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot, mount); run with sudo"; }

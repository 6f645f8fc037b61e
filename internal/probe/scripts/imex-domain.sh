#!/bin/sh
# The bake's one-node IMEX domain (packer-plugin-dlami; grace-blackwell.md section 1.5): a
# GB200 tray's nvidia-imex forms a domain of the addresses in /etc/nvidia-imex/nodes_config.cfg,
# and a one-node domain of the tray's own private address comes up UP with the node READY. The
# script, as root and bounded by timeout_s: saves nodes_config.cfg (or notes it absent) and
# whether nvidia-imex was active; writes the address of the default route's interface as the
# file's only line; restarts nvidia-imex (as ParallelCluster's prolog does); polls
# `nvidia-imex-ctl -N -j` until the domain is UP or the bound; prints the last answer between
# "$M BEGIN" and "$M END <status>"; then, whatever happened (a trap on exit), puts the file back
# byte for byte (or removes it) and the service in its previous state, printing "$M RESTORED"
# or "$M RESTORE-FAILED <why>" ("$M UNCHANGED" when it stopped before changing anything): the
# image must not keep the temporary file. The plugin sets,
# before this body: M, timeout_s, systemctl_paths, ctl_paths, ip_paths.
# shellcheck disable=SC2086 # the path lists are words by design (paths without spaces)
no_login_env
# early ERROR STATUS: stops before anything was changed.
early() {
	echo "$M ERROR $1"
	echo "$M UNCHANGED"
	exit "$2"
}
sc=$(find_tool systemctl $systemctl_paths)
ctl=$(find_tool nvidia-imex-ctl $ctl_paths)
ipt=$(find_tool ip $ip_paths)
for t in "systemctl:$sc" "nvidia-imex-ctl:$ctl" "ip:$ipt"; do
	[ -n "${t#*:}" ] || early "${t%%:*} is not installed" 127
done
dir=/etc/nvidia-imex
cfg=$dir/nodes_config.cfg
was=$("$sc" is-active nvidia-imex 2>/dev/null)
echo "$M WAS ${was:-unknown}"
backup=$(mktemp) || early "mktemp failed" 1
had=0 madedir=0
if [ -e "$cfg" ]; then
	if ! cp -p "$cfg" "$backup"; then
		rm -f "$backup"
		early "could not save $cfg" 1
	fi
	had=1
	echo "$M CONFIG present"
	# The real addresses the image's list holds (an IPv4 address other than the placeholder
	# 0.0.0.0): a baked list blocks every node it does not name.
	echo "$M BAKED $(imex_real_addresses "$backup")"
else
	echo "$M CONFIG absent"
fi
restore() {
	why=""
	if [ $had = 1 ]; then
		cp -p "$backup" "$cfg" && cmp -s "$backup" "$cfg" || why="$cfg could not be put back"
	else
		rm -f "$cfg"
		[ ! -e "$cfg" ] || why="the temporary $cfg could not be removed"
		[ $madedir = 0 ] || rmdir "$dir" 2>/dev/null || true
	fi
	rm -f "$backup"
	if [ "$was" = active ]; then
		"$sc" restart nvidia-imex >/dev/null 2>&1 || why="${why:+$why; }nvidia-imex could not be restarted as it was (active)"
	else
		"$sc" stop nvidia-imex >/dev/null 2>&1 || why="${why:+$why; }nvidia-imex could not be stopped as it was (${was:-unknown})"
	fi
	if [ -n "$why" ]; then
		echo "$M RESTORE-FAILED $why"
	else
		echo "$M RESTORED"
	fi
}
trap restore EXIT
trap 'exit 143' TERM INT HUP
# The tray's own private address: the source address of the default route (EC2's primary ENI),
# else, on a host without a default route, its first global IPv4 address.
addr=$("$ipt" -4 route get 1.1.1.1 2>&1 | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -n 1)
[ -n "$addr" ] || addr=$("$ipt" -4 -o addr show scope global 2>&1 | sed -n 's/.* inet \([0-9.]*\)\/.*/\1/p' | head -n 1)
case $addr in
'' | *[!0-9.]*)
	echo "$M ERROR no private IPv4 address: neither \`$ipt -4 route get 1.1.1.1\` nor \`$ipt -4 -o addr show scope global\` names one"
	exit 1
	;;
esac
echo "$M ADDRESS $addr"
if [ ! -d "$dir" ]; then
	mkdir -p "$dir" && madedir=1
fi
if ! printf '%s\n' "$addr" >"$cfg"; then
	echo "$M ERROR could not write $cfg"
	exit 1
fi
imex_restart "$sc" || true
end=$(($(date +%s) + timeout_s))
while :; do
	doc=$("$ctl" -N -j 2>&1)
	rc=$?
	if [ $rc = 0 ] && printf '%s' "$doc" | grep -Eq '"status"[[:space:]]*:[[:space:]]*"UP"'; then
		break
	fi
	[ "$(date +%s)" -lt "$end" ] || break
	# A unit that failed does not come up by waiting.
	[ "$("$sc" is-active nvidia-imex 2>/dev/null)" != failed ] || break
	sleep 2
done
state=$("$sc" is-active nvidia-imex 2>/dev/null)
echo "$M ACTIVE ${state:-unknown}"
echo "$M BEGIN"
printf '%s\n' "$doc"
echo "$M END $rc"
exit 0

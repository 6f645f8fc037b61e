#!/bin/sh
# The EFA traffic test (packer-plugin-dlami): for every EFA device, an RDM fi_pingpong between a
# server and a client on that device with FI_EFA_ENABLE_SHM_TRANSFER=0 (same-host traffic
# otherwise goes through libfabric's shared-memory path and never crosses the device). Devices
# run concurrently in groups, each pair bounded in time; each device's client output is printed
# between "$M BEGIN <device>" and "$M END <device> <client status> <server status> <client tries>".
# The plugin sets, before this body: M (the marker), timeout_s (one pair's bound), iterations,
# size, concurrency, base_port, pingpong_paths (the tool's real paths), and the positional
# parameters: the devices.
# shellcheck disable=SC2086 # the path list is words by design (paths without spaces)
ping=$(find_tool fi_pingpong $pingpong_paths)
if [ -z "$ping" ]; then
	echo "$M ERROR fi_pingpong is not installed at $pingpong_paths"
	exit 127
fi
FI_EFA_ENABLE_SHM_TRANSFER=0
export FI_EFA_ENABLE_SHM_TRANSFER
dir=$(mktemp -d) || exit 1
# pair DEVICE PORT: a server and its client on DEVICE, both within the pair's bound. The client
# can come before its server listens (a group of pairs at once, libfabric opening every device
# on a loaded host): a refused connect is tried again every quarter second while the server
# runs and the bound lasts. A connect still refused at the bound, or once the server has gone,
# stays the client's failure; the server that never got its client is stopped then.
pair() {
	end=$(($(date +%s) + timeout_s))
	timeout -k 2 "$timeout_s" "$ping" -p efa -e rdm -d "$1-rdm" -B "$2" -I "$iterations" -S "$size" >"$dir/$1.server" 2>&1 &
	s=$!
	tries=0
	sleep 0.2
	while :; do
		left=$((end - $(date +%s)))
		[ "$left" -ge 1 ] || left=1
		timeout -k 2 "$left" "$ping" -p efa -e rdm -d "$1-rdm" -P "$2" -I "$iterations" -S "$size" 127.0.0.1 >"$dir/$1.client" 2>&1
		rc=$?
		tries=$((tries + 1))
		refused=0
		[ "$rc" -ne 0 ] && grep -q "Connection refused" "$dir/$1.client" && refused=1
		if [ "$refused" -eq 0 ] || ! kill -0 "$s" 2>/dev/null || [ "$(date +%s)" -ge "$end" ]; then
			break
		fi
		sleep 0.25
	done
	if [ "$refused" -eq 1 ]; then
		kill "$s" 2>/dev/null
	fi
	echo "$rc" >"$dir/$1.rc"
	echo "$tries" >"$dir/$1.tries"
	wait "$s"
	echo $? >"$dir/$1.src"
}
i=0
for d in "$@"; do
	pair "$d" $((base_port + i)) &
	i=$((i + 1))
	if [ $((i % concurrency)) -eq 0 ] || [ "$i" -eq $# ]; then
		wait
	fi
done
for d in "$@"; do
	echo "$M BEGIN $d"
	cat "$dir/$d.client"
	echo
	echo "$M END $d $(cat "$dir/$d.rc") $(cat "$dir/$d.src") $(cat "$dir/$d.tries")"
done
rm -rf "$dir"
exit 0

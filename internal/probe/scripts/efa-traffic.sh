#!/bin/sh
# The EFA traffic test (packer-plugin-dlami): for every EFA device, an RDM fi_pingpong between a
# server and a client on that device with FI_EFA_ENABLE_SHM_TRANSFER=0 (same-host traffic
# otherwise goes through libfabric's shared-memory path and never crosses the device). Devices
# run concurrently in groups, each pair bounded in time; each device's client output is printed
# between "$M BEGIN <device>" and "$M END <device> <client status> <server status>".
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
pair() {
	timeout -k 2 "$timeout_s" "$ping" -p efa -e rdm -d "$1-rdm" -B "$2" -I "$iterations" -S "$size" >"$dir/$1.server" 2>&1 &
	s=$!
	sleep 0.5
	timeout -k 2 "$timeout_s" "$ping" -p efa -e rdm -d "$1-rdm" -P "$2" -I "$iterations" -S "$size" 127.0.0.1 >"$dir/$1.client" 2>&1
	echo $? >"$dir/$1.rc"
	wait $s
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
	echo "$M END $d $(cat "$dir/$d.rc") $(cat "$dir/$d.src")"
done
rm -rf "$dir"
exit 0

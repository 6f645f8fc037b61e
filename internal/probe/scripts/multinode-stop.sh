#!/bin/sh
# Stops what a multi-node NCCL test left on a node (packer-plugin-dlami): every process of the
# login user whose command line names all_reduce_perf or Open MPI's orted is killed, then
# counted again. The plugin sets M (the marker of the script's own lines), pkill_paths and
# pgrep_paths. A killed mpirun leaves the other nodes' ranks running (a stalled collective
# waits forever), so this runs on every node. The patterns are written "[a]ll_reduce_perf" so
# that they never match this script's own shell. It prints "$M LEFT <n>", the processes
# still found.
no_login_env
# shellcheck disable=SC2086 # the path lists are words by design (paths without spaces)
pkill=$(find_tool pkill $pkill_paths)
# shellcheck disable=SC2086
pgrep=$(find_tool pgrep $pgrep_paths)
if [ -z "$pkill" ] || [ -z "$pgrep" ]; then
	echo "$M ERROR pkill or pgrep not found at $pkill_paths $pgrep_paths (procps)"
	exit 1
fi
me=$(id -u)
"$pkill" -KILL -U "$me" -f '[a]ll_reduce_perf'
"$pkill" -KILL -U "$me" -f '[o]rted'
# A killed process is gone once its parent reaps it: look again for a few seconds.
i=0
while :; do
	left=$("$pgrep" -U "$me" -f '[a]ll_reduce_perf|[o]rted' | wc -l)
	[ "$left" -eq 0 ] || [ "$i" -ge 10 ] && break
	sleep 1
	i=$((i + 1))
done
echo "$M LEFT $left"

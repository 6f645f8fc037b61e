#!/bin/sh
# DCGM's diagnostics, `dcgmi diag -r LEVEL -j` (packer-plugin-dlami), starting DCGM's host
# engine when none answers and stopping the one it started. The plugin sets, before this body:
# M (the marker of the script's own lines), level, parameters (dcgmi diag's -p value, "" for
# DCGM's defaults), dcgmi_paths and hostengine_paths (the tools' real paths). dcgmi's stderr is
# kept apart so the JSON document stays whole; the script prints "$M EXIT <dcgmi's status>"
# (the judge reads it: 226 is a failed test even when the document lost it), then "$M STDERR"
# and dcgmi's stderr.
# shellcheck disable=SC2086 # the path lists are words by design (paths without spaces)
dcgmi=$(find_tool dcgmi $dcgmi_paths)
if [ -z "$dcgmi" ]; then
	echo "$M MISSING dcgmi is not installed at $dcgmi_paths"
	exit 127
fi
started=
if ! "$dcgmi" discovery -l >/dev/null 2>&1; then
	# shellcheck disable=SC2086
	he=$(find_tool nv-hostengine $hostengine_paths)
	if [ -z "$he" ]; then
		echo "$M MISSING no DCGM host engine answers and nv-hostengine is not installed at $hostengine_paths"
		exit 127
	fi
	as_root "$he" >/dev/null 2>&1 || {
		echo "$M ERROR could not start $he"
		exit 127
	}
	started=1
	echo "$M STARTED nv-hostengine"
	i=0
	while ! "$dcgmi" discovery -l >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -ge 30 ] && break
		sleep 1
	done
fi
err=$(mktemp) || exit 1
if [ -n "$parameters" ]; then
	"$dcgmi" diag -r "$level" -p "$parameters" -j 2>"$err"
else
	"$dcgmi" diag -r "$level" -j 2>"$err"
fi
rc=$?
echo
echo "$M EXIT $rc"
echo "$M STDERR"
cat "$err"
rm -f "$err"
if [ -n "$started" ]; then
	as_root "$he" --term >/dev/null 2>&1
	echo "$M STOPPED nv-hostengine"
fi
exit $rc

#!/bin/sh
# The verification's IMEX domain across trays (packer-plugin-dlami; grace-blackwell.md section
# 1.5), on every node, as root: writes the nodes' private addresses as
# /etc/nvidia-imex/nodes_config.cfg, one per line and in the same order on every node (every
# node's list must match, or IMEX blocks the nodes it does not agree with), and restarts
# nvidia-imex, as ParallelCluster's and PCS's job prolog does; prints "$M RESTART <status>"
# (followed by the start of what a failed restart printed) and "$M ACTIVE <is-active>", or
# "$M ERROR <why>" when it could not get that far. The engine then reads every node's view of
# the domain until it is healthy. The nodes are the verification's own instances, terminated
# after it, so the file stays (the bake's one-node domain, imex-domain.sh, puts it back because
# the bake's disk becomes the image). The plugin sets, before this body: M, addresses (IPv4
# addresses, space-separated), systemctl_paths.
# shellcheck disable=SC2086 # the lists are words by design (addresses and paths without spaces)
no_login_env
sc=$(find_tool systemctl $systemctl_paths)
if [ -z "$sc" ]; then
	echo "$M ERROR systemctl is not installed"
	exit 127
fi
dir=/etc/nvidia-imex
if ! mkdir -p "$dir" || ! printf '%s\n' $addresses >"$dir/nodes_config.cfg"; then
	echo "$M ERROR could not write $dir/nodes_config.cfg"
	exit 1
fi
imex_restart "$sc" || true
echo "$M ACTIVE $("$sc" is-active nvidia-imex 2>/dev/null)"

#!/bin/sh
# Enables the node check in the image (packer-plugin-dlami, node_check): reloads systemd,
# enables the unit (its [Install] section makes it WantedBy multi-user.target and, with action
# block, RequiredBy the units it runs before) and runs the installed binary once, by absolute
# paths only. The plugin sets, before this body: systemctl_paths, unit and binary.
set -eu
# shellcheck disable=SC2086 # the path list is words by design (paths without spaces)
systemctl=$(find_tool systemctl $systemctl_paths) || systemctl=
if [ -z "$systemctl" ]; then
	echo 'systemctl not found: the node check needs systemd'
	exit 1
fi
"$systemctl" daemon-reload
"$systemctl" enable "$unit"
"$binary" --version

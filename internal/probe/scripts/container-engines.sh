#!/bin/sh
# The container engines on the host, for the container-gpu check (run as root: the engines'
# sockets are root's). One line per fact, "ENGINE KEY VALUE": present, enabled (the unit's
# `systemctl is-enabled` word), version, runtimes (space-separated), default-runtime, cdi
# (true/false), and error lines ("ENGINE error TEXT") for a query that failed. Nothing here
# pulls, starts or changes anything. Set by the plugin: systemctl (its path).
: "${systemctl:?set by the plugin}"
# oneline: the rest of the input on one line, bounded.
oneline() { tr '\n\r\t' '   ' | cut -c1-400; }
unit_word() { "$systemctl" is-enabled "$1" 2>/dev/null | head -n1; }

if [ -x /usr/bin/docker ]; then
	echo "docker present yes"
	echo "docker enabled $(unit_word docker.service)"
	if v=$(/usr/bin/docker version --format '{{.Server.Version}}' 2>&1); then
		echo "docker version $v"
	else
		echo "docker error version: $(printf '%s' "$v" | oneline)"
	fi
	if r=$(/usr/bin/docker info --format '{{range $k, $v := .Runtimes}}{{$k}} {{end}}' 2>&1); then
		echo "docker runtimes $r"
		echo "docker default-runtime $(/usr/bin/docker info --format '{{.DefaultRuntime}}' 2>/dev/null)"
		# CDISpecDirs is empty (or absent, before Docker 27) when CDI is off.
		d=$(/usr/bin/docker info --format '{{json .CDISpecDirs}}' 2>/dev/null)
		case $d in *'"/'*) echo "docker cdi true" ;; *) echo "docker cdi false" ;; esac
	else
		echo "docker error info: $(printf '%s' "$r" | oneline)"
	fi
else
	echo "docker present no"
fi

if [ -x /usr/bin/ctr ]; then
	echo "containerd present yes"
	echo "containerd enabled $(unit_word containerd.service)"
	if v=$(/usr/bin/ctr version 2>&1); then
		echo "containerd version $(printf '%s\n' "$v" | awk '/^Server:/ { s = 1 } s && $1 == "Version:" { print $2; exit }')"
	else
		echo "containerd error version: $(printf '%s' "$v" | oneline)"
	fi
	# The CRI plugin's runtimes and CDI as containerd reads them (its config with every import
	# merged): what kubelet's pods get.
	if [ -x /usr/bin/containerd ] && c=$(/usr/bin/containerd config dump 2>&1); then
		echo "containerd runtimes $(printf '%s\n' "$c" | sed -n "s/^ *\[.*\.runtimes\.[\"']\{0,1\}\([A-Za-z0-9_-]*\)[\"']\{0,1\}\] *$/\1/p" | sort -u | oneline)"
		echo "containerd default-runtime $(printf '%s\n' "$c" | sed -n "s/^ *default_runtime_name *= *[\"']\([^\"']*\)[\"'].*/\1/p" | head -n1)"
		if printf '%s\n' "$c" | grep -Eq '^ *enable_cdi *= *true'; then echo "containerd cdi true"; else echo "containerd cdi false"; fi
	else
		echo "containerd error config: $(printf '%s' "${c:-no /usr/bin/containerd}" | oneline)"
	fi
else
	echo "containerd present no"
fi

if [ -x /usr/bin/podman ]; then
	echo "podman present yes"
	if v=$(/usr/bin/podman version --format '{{.Client.Version}}' 2>&1); then
		echo "podman version $v"
	else
		echo "podman error version: $(printf '%s' "$v" | oneline)"
	fi
	# Podman resolves CDI devices natively (since 4.1).
	echo "podman cdi true"
else
	echo "podman present no"
fi
echo "done"

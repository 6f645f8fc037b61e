# shellcheck shell=bash
# Shared by the dlami-sim stand-ins. Knobs are files under /etc/dlami-sim/
# (one value, first line used); a missing file means the validated
# P6-B200.48xlarge default. See test/e2e/README.md for the list.
# Pure bash where it matters: the checks run these often, forks are slow.
SIM_ETC=/etc/dlami-sim
SIM_VAR=/var/lib/dlami-sim
shopt -s globstar nullglob

# kv NAME DEFAULT: sets REPLY to the knob's value.
kv() {
	REPLY=""
	if [ -f "$SIM_ETC/$1" ]; then
		IFS= read -r REPLY <"$SIM_ETC/$1" || true
		REPLY=${REPLY%$'\r'}
		REPLY=${REPLY#"${REPLY%%[![:space:]]*}"}
		REPLY=${REPLY%"${REPLY##*[![:space:]]}"}
	fi
	[ -n "$REPLY" ] || REPLY=$2
}
knob() { kv "$1" "$2"; printf '%s\n' "$REPLY"; }

# rk: sets RK to the simulated running kernel.
rk() {
	RK=""
	[ -f "$SIM_VAR/running-kernel" ] && IFS= read -r RK <"$SIM_VAR/running-kernel"
	[ -n "$RK" ] || RK=7.0.0-1014-aws
}
running_kernel() { rk; printf '%s\n' "$RK"; }

# mf NAME [KERNEL]: sets MF to the fake .ko's path for KERNEL (default: the
# running one), searching updates/ before the rest as depmod does; '-' and
# '_' are equivalent. Returns 1 when there is none.
mf() {
	local name=${1//-/_} alt=${1//_/-} k=${2:-} f
	[ -n "$k" ] || { rk; k=$RK; }
	MF=""
	for f in "/lib/modules/$k/updates/"**/{"$name","$alt"}.ko "/lib/modules/$k/"**/{"$name","$alt"}.ko; do
		[ -f "$f" ] && { MF=$f; return 0; }
	done
	return 1
}
module_file() { mf "$@" && printf '%s\n' "$MF"; }

gpu_count() { knob gpu-count 8; }
GPU_BUSES=(51 52 62 63 75 76 86 87 97 98 a7 a8 b7 b8 c7 c8)
gpu_bus() { printf '%s\n' "${GPU_BUSES[$1]:-d$1}"; }
nvidia_loaded() { mf nvidia; }

# shellcheck shell=bash
# Shared by the dlami-sim stand-ins. Knobs are files under /etc/dlami-sim/
# (one value, first line used); a missing file means the default of the
# instance type's layout (layout below; P6-B200.48xlarge when unknown). See
# test/e2e/README.md for the list and the public sources of every figure.
# Pure bash where it matters: the checks run these often, forks are slow.
# DLAMI_SIM_PREFIX: unit tests only (test/simhost/*_test.go): a directory that stands for / so
# the stand-ins run outside a host, without root, against a temporary knob and state tree.
# Nothing sets it on a simulated host.
SIM_ROOT=${DLAMI_SIM_PREFIX:-}
SIM_ETC=$SIM_ROOT/etc/dlami-sim
SIM_VAR=$SIM_ROOT/var/lib/dlami-sim
SIM_RUN=$SIM_ROOT/run/dlami-sim
# SIM_STATE: what the stand-ins share while the host runs (world-writable, made by boot-hook):
# the NCCL stand-in's running markers and run count, the traffic fi_pingpong moved per EFA
# device, the ping-pong rendezvous, nv-hostengine's pid file and the DCGM start/stop log.
SIM_STATE=$SIM_RUN/state
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

# layout: sets the L_* defaults of the instance type named by the
# product-name knob. Individual knobs override each value. An instance type
# missing here keeps the P6-B200 hardware (L_KNOWN=0): scenarios describe an
# unprofiled type by its knobs.
#   L_GPUS L_GPU_NAME L_GPU_DEV   GPU count, nvidia-smi name, PCI device id
#   L_GPU_MEM L_CC                memory.total (MiB), compute capability
#   L_NVSW L_NVSW_DEV             NVSwitch functions on the PCI bus, device id
#   L_EFA L_EFA_DEV               the type's EFA maximum (the devices of a host whose launch
#                                 attached all; knob efa-cards names the launch's), device id
#   L_CX7 L_NVME                  DOWN ConnectX-7 functions, local NVMe drives
#   L_FM                          Fabric Manager unit: active | absent
#   L_NET L_NVLS L_P2P            NCCL network, NVLS, intra-node channel path
#   L_BUSBW L_TOPO                1 GiB busbw (GB/s), aws-ofi-nccl topology file
#   L_CPU                         1 on a CPU instance type (c/m/r families): no GPU, no EFA
#   L_ARCH L_PCIE_GEN             nvidia-smi -q architecture, PCIe generation max (x16)
#   L_PCIE_SLOT                   the GPUs' slot width (pcie.link.width.current; the max stays
#                                 the GPU's x16): x8 on the single-GPU G6 sizes
#   L_NVL L_NVL_GBPS L_NVL_FMT    NVLinks per GPU, nvlink -s speed, nvlink -e counter names
#                                 (legacy: Replay/Recovery/CRC; blackwell: the R575+ set)
#   L_FABRIC                      1: GPUs register with an NVSwitch fabric (-q Fabric State)
#   L_MNNVL                       1: the fabric spans trays (an UltraServer tray, GB200): a
#                                 registered GPU prints a non-zero CliqueId and ClusterUUID and a
#                                 Health Summary (knobs fabric-clique, fabric-cluster-uuid,
#                                 fabric-health); 0: CliqueId 0 and a zero ClusterUUID, healthy on
#                                 an HGX board (shared/docs/grace-blackwell.md 1.4)
#   L_MACH                        what `uname -m` prints ("": the machine's own); knob machine
#   L_NETBW                       busbw (GB/s) of a run forced onto the network (EFA/GPU)
#   L_MNBW                        busbw (GB/s) of a 2-node all-reduce at large sizes with every
#                                 EFA device attached and GPUDirect RDMA (nccl-facts.sh): p5 480
#                                 (2 × p5.48xlarge, 483-487 GB/s at 16 GiB: awsome-distributed-
#                                 training's nccl-tests READMEs, internal/parse/nccltests/testdata
#                                 p5-*-16G), p4d/p4de 78 (2 × p4de, 78.3 GB/s at 2 GiB, the same
#                                 README); p5en and p6-b200 480, p6-b300 960 UNSOURCED (the
#                                 types' EFA bandwidth: 3200 Gbps like p5; 6400 Gbps)
# layout sets the L_* variables for the stand-ins that source this file; many are read only there.
# shellcheck disable=SC2034
layout() {
	[ -n "${L_TYPE:-}" ] && return 0
	kv product-name p6-b200.48xlarge
	L_TYPE=$REPLY L_KNOWN=1
	L_GPUS=8 L_GPU_NAME="NVIDIA B200" L_GPU_DEV=0x2901 L_GPU_MEM=183359 L_CC=10.0
	# HGX B200/B300 expose no NVSwitch function; Fabric Manager and NVLSM reach the switches
	# through ConnectX-7 InfiniBand controllers (link DOWN for IP), and ParallelCluster enables
	# Fabric Manager when more than one is present (aws-parallelcluster-cookbook nvidia.rb).
	L_NVSW=0 L_NVSW_DEV=0x22a3 L_EFA=8 L_EFA_DEV=0xefa3 L_CX7=2 L_NVME=8
	L_FM=active L_NET=libfabric L_NVLS=1 L_P2P=P2P/CUMEM/read L_BUSBW=711 L_TOPO=p6-b200.48xl-topo.xml
	# NVLink 5: 18 links at 53.125 GB/s (a B300's nvidia-smi nvlink --status, and a B200 test fixture).
	L_ARCH=Blackwell L_PCIE_GEN=5 L_PCIE_SLOT=16 L_NVL=18 L_NVL_GBPS=53.125 L_NVL_FMT=blackwell L_FABRIC=1 L_NETBW=45 L_MNBW=480
	L_MNNVL=0 L_MACH=""
	case $L_TYPE in
	p6-b200.48xlarge) ;;
	p6-b300.48xlarge)
		# 16 EFA: 17 network cards, card 0 ENA-only (aws-parallelcluster#7143).
		L_GPU_NAME="NVIDIA B300 SXM6 AC" L_GPU_DEV=0x3182 L_GPU_MEM=275040 L_CC=10.3 L_EFA=16 L_BUSBW=720 L_TOPO="" L_MNBW=960 ;;
	p5.48xlarge)
		L_GPU_NAME="NVIDIA H100 80GB HBM3" L_GPU_DEV=0x2330 L_GPU_MEM=81559 L_CC=9.0
		L_NVSW=4 L_EFA=32 L_EFA_DEV=0xefa2 L_CX7=0 L_BUSBW=480 L_TOPO=p5.48xl-topo.xml
		L_ARCH=Hopper L_NVL_GBPS=26.562 L_NVL_FMT=legacy ;;
	p5e.48xlarge)
		# A p5.48xlarge with H200 GPUs: the same 32 EFA cards (ec2-gpu-network-facts "P5 / P5e");
		# its EFA device id as p5's is UNSOURCED.
		L_GPU_NAME="NVIDIA H200" L_GPU_DEV=0x2335 L_GPU_MEM=143771 L_CC=9.0
		L_NVSW=4 L_EFA=32 L_EFA_DEV=0xefa2 L_CX7=0 L_BUSBW=480 L_TOPO=p5.48xl-topo.xml
		L_ARCH=Hopper L_NVL_GBPS=26.562 L_NVL_FMT=legacy ;;
	p5en.48xlarge)
		L_GPU_NAME="NVIDIA H200" L_GPU_DEV=0x2335 L_GPU_MEM=143771 L_CC=9.0
		L_NVSW=4 L_EFA=16 L_EFA_DEV=0xefa3 L_CX7=0 L_BUSBW=480 L_TOPO=p5en.48xl-topo.xml
		L_ARCH=Hopper L_NVL_GBPS=26.562 L_NVL_FMT=legacy ;;
	p6e-gb200.36xlarge)
		# One Grace-Blackwell tray of an UltraServer (shared/docs/grace-blackwell.md 1.1, 1.3):
		# arm64 (uname -m aarch64), 4 "NVIDIA GB200" (10de:2941, compute capability 10.0), 18
		# NVLinks each at 53.125 GB/s; its NVLink switches sit in other trays: no NVSwitch
		# function, no ConnectX-7 bridge, no Fabric Manager unit; the GPUs register with the
		# rack's fabric (L_MNNVL). 3 instance-store drives (EKS user guide). 4 EFA: EKS's
		# example layout (one efa-only per NCI group); the EFA device id is UNSOURCED (0xefa3 as
		# p6). memory.total 189471 MiB (192 GiB HBM less the reserve), the 1-node busbw and the
		# multi-node figure are UNSOURCED (no public 1-node GB200 figure: 1.1). NVLS off: NCCL's
		# intra-tray path is P2P (MNNVL and NVLS across trays are issue 35's later items).
		L_GPUS=4 L_GPU_NAME="NVIDIA GB200" L_GPU_DEV=0x2941 L_GPU_MEM=189471 L_CC=10.0
		L_NVSW=0 L_EFA=4 L_EFA_DEV=0xefa3 L_CX7=0 L_NVME=3 L_FM=absent L_NVLS=0 L_BUSBW=680 L_TOPO="" L_MNBW=180
		L_MNNVL=1 L_MACH=aarch64 ;;
	p4d.24xlarge | p4de.24xlarge)
		L_GPU_NAME="NVIDIA A100-SXM4-40GB" L_GPU_DEV=0x20b0 L_GPU_MEM=40960 L_CC=8.0
		[ "$L_TYPE" = p4de.24xlarge ] && L_GPU_NAME="NVIDIA A100-SXM4-80GB" L_GPU_DEV=0x20b2 L_GPU_MEM=81920
		L_NVSW=6 L_NVSW_DEV=0x1af1 L_EFA=4 L_EFA_DEV=0xefa1 L_CX7=0 L_NVLS=0 L_BUSBW=230 L_TOPO=p4d-24xl-topo.xml
		L_ARCH=Ampere L_PCIE_GEN=4 L_NVL=12 L_NVL_GBPS=25 L_NVL_FMT=legacy L_FABRIC=0 L_NETBW=5.6 L_MNBW=78 ;;
	g5.xlarge | g6.xlarge | g6e.xlarge)
		case $L_TYPE in
		g5.*) L_GPU_NAME="NVIDIA A10G" L_GPU_DEV=0x2237 L_GPU_MEM=23028 L_CC=8.6 ;;
		g6.*) L_GPU_NAME="NVIDIA L4" L_GPU_DEV=0x27b8 L_GPU_MEM=23034 L_CC=8.9 ;;
		g6e.*) L_GPU_NAME="NVIDIA L40S" L_GPU_DEV=0x26b9 L_GPU_MEM=46068 L_CC=8.9 ;;
		esac
		L_GPUS=1 L_EFA=0 L_CX7=0 L_NVME=1 L_FM=absent L_NET=socket L_NVLS=0 L_P2P=SHM/direct/direct L_BUSBW=0 L_TOPO=""
		L_ARCH=Ampere L_PCIE_GEN=4 L_NVL=0 L_NVL_FMT=legacy L_FABRIC=0 L_NETBW=0 L_MNBW=0
		[ "${L_TYPE%%.*}" = g5 ] || L_ARCH="Ada Lovelace"
		# The single-GPU G6 sizes wire the L4 (an x16 card) to an x8 slot: nvidia-smi reports
		# x8 of x16 (internal/profile srcL4x8; the L4 capture in internal/parse/gpuhealth/testdata).
		if [ "$L_TYPE" = g6.xlarge ]; then L_PCIE_SLOT=8; fi ;;
	c[5-8]*.* | m[5-8]*.* | r[5-8]*.*)
		# A CPU instance started from the same DLAMI (the build instance of a two-phase bake,
		# issue 21): no NVIDIA GPU, no EFA, NVSwitch or ConnectX-7, no local NVMe (EBS only).
		# The image's packages, module files and holds are the DLAMI's all the same; boot-hook
		# loads no NVIDIA, gdrdrv or EFA module (they find no device).
		L_CPU=1 L_GPUS=0 L_NVSW=0 L_EFA=0 L_CX7=0 L_NVME=0 L_FM=absent L_NET=socket L_NVLS=0 L_P2P=SHM/direct/direct L_BUSBW=0 L_TOPO=""
		L_ARCH="" L_PCIE_GEN=0 L_NVL=0 L_NVL_FMT=legacy L_FABRIC=0 L_NETBW=0 L_MNBW=0
		# Graviton sizes (a "g" after the generation: c8g, m7g, r8g...) are arm64: the build
		# instance of an arm64 DLAMI's two-phase bake (examples/gb200-slurm).
		case ${L_TYPE%%.*} in [cmr][5-8]g | [cmr][5-8]g[dn]*) L_MACH=aarch64 ;; esac ;;
	*) L_KNOWN=0 L_TOPO="" ;;
	esac
}

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

# field FILE NAME: sets REPLY to a "name: value" field of a fake .ko.
field() {
	local line
	REPLY=""
	while IFS= read -r line; do
		if [[ $line == "$2:"* ]]; then
			REPLY=${line#"$2:"}
			REPLY=${REPLY#"${REPLY%%[![:space:]]*}"}
			return 0
		fi
	done <"$1"
	return 1
}

# loaded NAME: true when the boot loaded the module (/sys/module/NAME, written
# by boot-hook from the module files the running kernel had at boot). A module
# installed or removed later does not change what is loaded, as on a real host.
loaded() { [ -d "$SIM_ROOT/sys/module/${1//-/_}" ]; }
# loaded_version NAME: sets REPLY to the loaded module's version ("" if none).
loaded_version() {
	REPLY=""
	[ -f "$SIM_ROOT/sys/module/${1//-/_}/version" ] && IFS= read -r REPLY <"$SIM_ROOT/sys/module/${1//-/_}/version"
	[ -n "$REPLY" ]
}

gpu_count() { layout; knob gpu-count "$L_GPUS"; }
# gpu_uuid I: sets UUID to GPU I's UUID (nvidia-smi, nvlink headers, DCGM discovery).
# shellcheck disable=SC2034 # UUID is read by the stand-ins that source this file
gpu_uuid() { printf -v UUID 'GPU-%08x-%04x-%04x-%04x-%012x' $((0x3ba54f66 + $1)) $((0x1add + $1)) $((0x0c35 + $1)) $((0x8a7e + $1)) $((0x18400a7ecabe + $1)); }

# gkl NAME GPU: sets GKL (an array) to the values the per-GPU knob NAME gives GPU. The knob
# holds entries "GPU[:VALUE]" separated by commas or newlines; GPU is an index or "all";
# VALUE (everything after the first ":") defaults to "on". "3:8" = GPU 3 gets 8; "2:5,2:7"
# = GPU 2 gets 5 and 7 (two links); "all:In Progress" = every GPU.
gkl() {
	local line e g
	local -a es
	GKL=()
	[ -f "$SIM_ETC/$1" ] || return 0
	while IFS= read -r line || [ -n "$line" ]; do
		IFS=, read -r -a es <<<"${line%$'\r'}"
		for e in "${es[@]}"; do
			e=${e#"${e%%[![:space:]]*}"}; e=${e%"${e##*[![:space:]]}"}
			[ -n "$e" ] || continue
			g=${e%%:*}; g=${g%"${g##*[![:space:]]}"}
			[ "$g" = "$2" ] || [ "$g" = all ] || continue
			if [[ $e == *:* ]]; then e=${e#*:}; e=${e#"${e%%[![:space:]]*}"}; GKL+=("$e"); else GKL+=(on); fi
		done
	done <"$SIM_ETC/$1"
}
# gk NAME GPU DEFAULT: sets REPLY to the last value per-GPU knob NAME gives GPU, else DEFAULT.
gk() { gkl "$1" "$2"; if [ ${#GKL[@]} -gt 0 ]; then REPLY=${GKL[-1]}; else REPLY=$3; fi; }

# state_dir: makes sure SIM_STATE exists (boot-hook creates it world-writable on a host).
# Only SIM_STATE itself must be world-writable: a parent mkdir -p makes (SIM_RUN) keeps the default mode.
# shellcheck disable=SC2174
state_dir() { [ -d "$SIM_STATE" ] || mkdir -p -m 1777 "$SIM_STATE" 2>/dev/null || mkdir -p "$SIM_STATE"; }
# nccl_running: true while an all_reduce_perf stand-in runs (its marker names a live pid).
nccl_running() {
	local f
	for f in "$SIM_STATE"/nccl-running.*; do
		[ -d "/proc/${f##*.}" ] && return 0
	done
	return 1
}
# nccl_runs: sets REPLY to how many all_reduce_perf runs have started since boot.
nccl_runs() {
	local -a l=()
	[ -f "$SIM_STATE/nccl-runs" ] && mapfile -t l <"$SIM_STATE/nccl-runs"
	REPLY=${#l[@]}
}
GPU_BUSES=(51 52 62 63 75 76 86 87 97 98 a7 a8 b7 b8 c7 c8)
gpu_bus() { printf '%s\n' "${GPU_BUSES[$1]:-d$1}"; }
nvidia_loaded() { loaded nvidia; }

# nvml_library_version: sets REPLY to the version of the installed NVML
# library (libnvidia-ml.so.<version>, shipped by libnvidia-compute* or the
# .run installer); "" when none is installed.
nvml_library_version() {
	local f v best=""
	for f in "$SIM_ROOT"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.[0-9]*.*; do
		v=${f##*/libnvidia-ml.so.}
		[[ $v =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]] || continue
		best=$v
	done
	REPLY=$best
}

# uptime_now: sets REPLY to the simulated seconds since boot ("S.UUUUUU"),
# never below the last kernel log line's timestamp, so the log stays ordered.
uptime_now() {
	local boot now last=0 line
	IFS= read -r boot <"$SIM_RUN/boot-time" 2>/dev/null || boot=${EPOCHSECONDS}
	now=${EPOCHREALTIME/./}
	now=$((now - boot * 1000000))
	if [ -f "$SIM_RUN/kmsg-last" ]; then IFS= read -r last <"$SIM_RUN/kmsg-last" || last=0; fi
	[ "$now" -gt "$last" ] || now=$((last + 137))
	printf -v REPLY '%d.%06d' $((now / 1000000)) $((now % 1000000))
	KMSG_US=$now
}

# kmsg_append LINE...: appends kernel log lines stamped with the current
# simulated uptime (the lines dmesg prints until the next reboot), and, as
# journald reads every record as it is logged, to the journal's copy
# (journal-kmsg, which dmesg -c leaves alone; absent when the knob
# journal-storage is none).
kmsg_append() {
	local l us recs=""
	uptime_now
	us=$KMSG_US
	for l in "$@"; do
		printf -v l '[%5d.%06d] %s\n' $((us / 1000000)) $((us % 1000000)) "$l"
		recs+=$l
		us=$((us + 7))
	done
	printf '%s' "$recs" >>"$SIM_RUN/kmsg"
	[ -f "$SIM_RUN/journal-kmsg" ] && printf '%s' "$recs" >>"$SIM_RUN/journal-kmsg"
	echo "$us" >"$SIM_RUN/kmsg-last" 2>/dev/null || true
}

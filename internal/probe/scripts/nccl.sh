#!/bin/sh
# The 1-node NCCL all_reduce_perf test over the DLAMI's nccl-tests (packer-plugin-dlami). The
# plugin sets, before this body: M (the marker of the script's own lines), want (a CUDA
# version, or empty for the newest), ranks (or empty to count the GPUs), timeout_s, env_count
# and, for each i from 1, env_key_i and env_value_i (exported: passed to every rank; apart from
# the script's own variables, so that no setting can change them), mpirun_paths and
# nvsmi_paths (the tools' real paths), and the positional parameters: all_reduce_perf's
# arguments, where @@BINARY@@ stands for the binary this script chooses.
# It prints "$M BINARY <path>" and "$M RANKS <n>" first, then the test's output; its exit
# status is mpirun's (124 or 137 when the timeout stopped it), or 127 with a "$M ERROR" line
# when there is no binary, no mpirun or no GPU to run on.

# Packer's commands get no login profile and sudo's secure_path varies: the system directories
# are added to PATH for the coreutils and grep called by name.
PATH=${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
no_test=127
# Open MPI refuses to start as root unless told so with its documented switches: the node
# check runs as root.
if [ "$(id -u)" = 0 ]; then
	OMPI_ALLOW_RUN_AS_ROOT=1
	OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
if [ -n "$want" ]; then
	cuda=/usr/local/cuda-$want
	bin=$cuda/efa/test-cuda-$want/all_reduce_perf
	if [ ! -x "$bin" ]; then
		echo "$M ERROR no nccl-tests binary for CUDA $want: $bin is missing or not executable; installed: $(for f in /usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf; do [ -e "$f" ] && printf '%s ' "$f"; done)"
		exit $no_test
	fi
else
	# Newest CUDA first by numeric version (13.10 > 13.9), whatever the locale.
	best=$(for f in /usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf; do
		[ -x "$f" ] || continue
		v=${f#/usr/local/cuda-}
		v=${v%%/*}
		case $v in '' | *[!0-9.]*) continue ;; esac
		echo "$v $f"
	done | sort -t. -k1,1n -k2,2n | tail -n 1)
	if [ -z "$best" ]; then
		echo "$M ERROR no nccl-tests binary: nothing matches /usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf (is this the Deep Learning Base OSS DLAMI?)"
		exit $no_test
	fi
	cuda=/usr/local/cuda-${best%% *}
	bin=${best#* }
fi
# shellcheck disable=SC2086 # the path lists are words by design (paths without spaces)
mpirun=$(find_tool mpirun $mpirun_paths)
if [ -z "$mpirun" ]; then
	echo "$M ERROR mpirun not found at $mpirun_paths: Open MPI from the EFA installer is missing"
	exit $no_test
fi
if [ -z "$ranks" ]; then
	# shellcheck disable=SC2086
	nvsmi=$(find_tool nvidia-smi $nvsmi_paths)
	ranks=$("${nvsmi:-nvidia-smi}" -L 2>/dev/null | grep -c '^GPU ')
	if [ "${ranks:-0}" -lt 1 ]; then
		echo "$M ERROR nvidia-smi lists no GPU: cannot choose the number of ranks"
		exit $no_test
	fi
fi
echo "$M BINARY $bin"
echo "$M RANKS $ranks"
# Every rank gets the settings' variables as -x NAME=VALUE, in order, before the binary and its
# arguments; the binary takes the placeholder's place.
n=$#
i=1
while [ "$i" -le "$env_count" ]; do
	set -- "$@" -x "$(printenv "env_key_$i")=$(printenv "env_value_$i")"
	i=$((i + 1))
done
i=0
while [ "$i" -lt "$n" ]; do
	a=$1
	shift
	[ "$a" = @@BINARY@@ ] && a=$bin
	set -- "$@" "$a"
	i=$((i + 1))
done
# ${LD_LIBRARY_PATH:+:...} rather than host-layer.md's plain :$LD_LIBRARY_PATH: an unset
# variable would leave a trailing ':', which puts the working directory on the search path.
timeout -k 10 "$timeout_s" "$mpirun" -n "$ranks" --bind-to none \
	-x "LD_LIBRARY_PATH=$cuda/lib:$cuda/lib64:/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	-x NCCL_DEBUG=INFO \
	"$@" </dev/null 2>&1
exit $?

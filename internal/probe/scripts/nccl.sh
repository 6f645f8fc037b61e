#!/bin/sh
# The NCCL all_reduce_perf test over the DLAMI's nccl-tests, on one node or across nodes
# (packer-plugin-dlami). The
# plugin sets, before this body: M (the marker of the script's own lines), want (a CUDA
# version, or empty for the newest), ranks (or empty to count the GPUs), timeout_s, env_count
# and, for each i from 1, env_key_i and env_value_i (exported: passed to every rank; apart from
# the script's own variables, so that no setting can change them), mpirun_paths and
# nvsmi_paths (the tools' real paths), and the positional parameters: all_reduce_perf's
# arguments, where @@BINARY@@ stands for the binary this script chooses.
# For a test across nodes the plugin also sets hosts (the nodes' private addresses, this node
# first), keydir (a folder of the login user's holding the test's own SSH key id_ed25519 and
# the nodes' host keys in known_hosts) and ssh_paths; ranks is then per node, and the script
# prints "$M NODES <n>" too. With hosts empty it is the 1-node test.
# It prints "$M BINARY <path>" and "$M RANKS <n>" first, then the test's output; its exit
# status is mpirun's (124 or 137 when the timeout stopped it), or 127 with a "$M ERROR" line
# when there is no binary, no mpirun or no GPU to run on.

no_login_env
no_test=127
# Open MPI refuses to start as root unless told so with its documented switches: the node
# check runs as root.
if [ "$(id -u)" = 0 ]; then
	OMPI_ALLOW_RUN_AS_ROOT=1
	OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
nccl_binary "$want" "$M" || exit $no_test
# shellcheck disable=SC2086 # the path lists are words by design (paths without spaces)
mpirun=$(find_tool mpirun $mpirun_paths)
if [ -z "$mpirun" ]; then
	echo "$M ERROR mpirun not found at $mpirun_paths: Open MPI from the EFA installer is missing"
	exit $no_test
fi
if [ -z "$ranks" ]; then
	# shellcheck disable=SC2086
	ranks=$(gpu_count $nvsmi_paths)
	if [ "${ranks:-0}" -lt 1 ]; then
		echo "$M ERROR nvidia-smi lists no GPU: cannot choose the number of ranks"
		exit $no_test
	fi
fi
echo "$M BINARY $bin"
echo "$M RANKS $ranks"
# Every rank gets the settings' variables as -x NAME, in order, before the binary and its
# arguments; the binary takes the placeholder's place. Their values reach mpirun through its
# environment (with_env), never its command line, which ps shows every user of the host; this
# script itself sits in a folder only its user can read.
n=$#
i=1
while [ "$i" -le "$env_count" ]; do
	set -- "$@" -x "$(printenv "env_key_$i")"
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
# with_env runs its arguments with the settings' variables exported, in a subshell, after every
# word of the command was expanded: no setting can change the script's own variables, nor
# which timeout runs (its path is resolved before).
with_env() {
	(
		set -- @@ENV_END@@ "$@"
		j=$env_count
		while [ "$j" -ge 1 ]; do
			set -- "$(printenv "env_key_$j")=$(printenv "env_value_$j")" "$@"
			j=$((j - 1))
		done
		# Each NAME=VALUE is never the end mark (it holds '='); export is the shell's own, so the
		# value appears in no process's command line, and the loop reads no variable a setting
		# could have just set.
		while [ "$1" != @@ENV_END@@ ]; do
			export "${1?}"
			shift
		done
		shift
		exec "$@"
	)
}
timeout=$(command -v timeout) || {
	echo "$M ERROR timeout not found: coreutils is missing"
	exit $no_test
}
# ${LD_LIBRARY_PATH:+:...} rather than host-layer.md's plain :$LD_LIBRARY_PATH: an unset
# variable would leave a trailing ':', which puts the working directory on the search path.
libs=$cuda/lib:$cuda/lib64:/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -z "$hosts" ]; then
	with_env "$timeout" -k 10 "$timeout_s" "$mpirun" -n "$ranks" --bind-to none \
		-x "LD_LIBRARY_PATH=$libs" \
		-x NCCL_DEBUG=INFO \
		"$@" </dev/null 2>&1
	exit $?
fi
# Across nodes: $ranks on each of $hosts (this node first), Open MPI starting the other
# nodes' ranks over SSH with the test's own key and the nodes' host keys, nothing else (no
# agent, no prompt, no unknown host accepted).
# shellcheck disable=SC2086
ssh=$(find_tool ssh $ssh_paths)
if [ -z "$ssh" ]; then
	echo "$M ERROR ssh not found at $ssh_paths: Open MPI cannot start the other nodes' ranks"
	exit $no_test
fi
if ! chmod 600 "$keydir/id_ed25519"; then
	echo "$M ERROR cannot protect the test's key $keydir/id_ed25519 (ssh refuses a key others can read)"
	exit $no_test
fi
nodes=0
: >"$keydir/hostfile"
for a in $hosts; do
	echo "$a slots=$ranks" >>"$keydir/hostfile"
	nodes=$((nodes + 1))
done
echo "$M NODES $nodes"
with_env "$timeout" -k 10 "$timeout_s" "$mpirun" --prefix "${mpirun%/bin/mpirun}" -n $((nodes * ranks)) -N "$ranks" \
	--hostfile "$keydir/hostfile" --bind-to none --tag-output \
	--mca plm_rsh_agent "$ssh" \
	--mca plm_rsh_args "-i $keydir/id_ed25519 -o IdentitiesOnly=yes -o BatchMode=yes -o UserKnownHostsFile=$keydir/known_hosts -o StrictHostKeyChecking=yes -o ConnectTimeout=20" \
	-x "LD_LIBRARY_PATH=$libs" \
	-x NCCL_DEBUG=INFO \
	-x FI_PROVIDER=efa \
	"$@" </dev/null 2>&1
exit $?

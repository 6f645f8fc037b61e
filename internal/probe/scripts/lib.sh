# Helpers every job script of the probe starts with (packer-plugin-dlami).
# find_tool NAME PATH...: prints the first executable PATH, else NAME's place on PATH.
find_tool() {
	_name=$1
	shift
	for _p in "$@"; do
		if [ -x "$_p" ]; then
			echo "$_p"
			return 0
		fi
	done
	command -v "$_name" 2>/dev/null
}
# as_root CMD...: runs CMD as root: directly when already root (sudo would only add its own
# warnings, such as "unable to resolve host", to the output), else through sudo -n, which
# never prompts.
as_root() {
	if [ "$(id -u)" = 0 ]; then
		"$@"
	else
		sudo -n "$@"
	fi
}
# nccl_binary WANT MARKER: sets cuda and bin to the nccl-tests all_reduce_perf of CUDA WANT, or
# of the newest CUDA that has one when WANT is empty; prints "MARKER ERROR ..." and returns 1
# when there is none.
nccl_binary() {
	if [ -n "$1" ]; then
		cuda=/usr/local/cuda-$1
		bin=$cuda/efa/test-cuda-$1/all_reduce_perf
		if [ ! -x "$bin" ]; then
			echo "$2 ERROR no nccl-tests binary for CUDA $1: $bin is missing or not executable; installed: $(for f in /usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf; do [ -e "$f" ] && printf '%s ' "$f"; done)"
			return 1
		fi
		return 0
	fi
	# Newest CUDA first by numeric version (13.10 > 13.9), whatever the locale.
	_best=$(for f in /usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf; do
		[ -x "$f" ] || continue
		v=${f#/usr/local/cuda-}
		v=${v%%/*}
		case $v in '' | *[!0-9.]*) continue ;; esac
		echo "$v $f"
	done | sort -t. -k1,1n -k2,2n | tail -n 1)
	if [ -z "$_best" ]; then
		echo "$2 ERROR no nccl-tests binary: nothing matches /usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf (is this the Deep Learning Base OSS DLAMI?)"
		return 1
	fi
	cuda=/usr/local/cuda-${_best%% *}
	bin=${_best#* }
}
# gpu_count NVSMI_PATHS...: prints how many GPUs nvidia-smi -L lists (0 when none or no tool).
gpu_count() {
	_nvsmi=$(find_tool nvidia-smi "$@")
	"${_nvsmi:-nvidia-smi}" -L 2>/dev/null | grep -c '^GPU '
}
# no_login_env: Packer's commands get no login profile and sudo's secure_path varies: the
# system directories are added to PATH for the coreutils and grep called by name.
no_login_env() {
	PATH=${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	export PATH
}
# imex_real_addresses FILE: prints how many lines of IMEX's node list FILE are a real address
# (an IPv4 address other than the placeholder 0.0.0.0, comments and blanks ignored), then the
# first 8 of them: "N ADDR...". Every node's list must match, so a list of real addresses
# baked into an image blocks the nodes it does not name (grace-blackwell.md section 1.5).
imex_real_addresses() {
	awk '{ sub(/#.*/, ""); gsub(/[[:space:]]/, "") }
		/^[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$/ && $0 != "0.0.0.0" { n++; if (n <= 8) a = a " " $0 }
		END { print n + 0 a }' "$1"
}

# imex_restart SYSTEMCTL: restarts nvidia-imex (a node list is read only at start), printing
# "$M RESTART <status>" and, when it failed, the start of what systemctl said; returns the status.
imex_restart() {
	imex_out=$("$1" restart nvidia-imex 2>&1)
	imex_rc=$?
	echo "$M RESTART $imex_rc"
	[ "$imex_rc" = 0 ] || printf '%s\n' "$imex_out" | head -n 5
	return "$imex_rc"
}

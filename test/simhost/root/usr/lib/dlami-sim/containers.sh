# shellcheck shell=bash
# Shared by the container engine stand-ins (docker, ctr, podman): a local image store (no
# registry: a pull fails as on a host without a route out) and a container that runs
# nvidia-smi -L with all GPUs through the NVIDIA container toolkit, failing as the real stack
# does (../shared/docs/container-gpu.md 2.2). Knobs:
#   container-failure       the known failure the GPU container hits: no-device-driver,
#                           nvidia-driver-unconfigured, driver-not-loaded, driver-error,
#                           file-exists, imex-channel, app-profiles-ro, bpf-device-rules
#   container-gpus-hidden   how many of the host's GPUs (the last ones) a container misses
# A container also fails on its own when the nvidia module is not loaded (driver not loaded)
# and, for docker, when the toolkit's hook is not installed (no device driver).
# shellcheck source=sim.sh
. "${DLAMI_SIM_PREFIX:-}/usr/lib/dlami-sim/sim.sh"
IMAGES=$SIM_ROOT/var/lib/dlami-sim/images

# image_file ENGINE NS REF: sets REPLY to the store file of REF.
image_file() { REPLY=$IMAGES/$1/$2/${3//[\/:@]/_}; }
# image_load ENGINE NS FILE: registers the image a "tarball" names (first line
# "dlami-sim image REF"), as docker load / ctr image import do; prints REF.
image_load() {
	local line ref
	IFS= read -r line <"$3" || true
	ref=${line#dlami-sim image }
	if [ "$line" = "$ref" ] || [ -z "$ref" ]; then
		echo "unrecognized image format" >&2
		return 1
	fi
	image_file "$1" "$2" "$ref"
	mkdir -p "${REPLY%/*}"
	printf '%s\n' "$ref" >"$REPLY"
	printf '%s\n' "$ref"
}
image_has() { image_file "$1" "$2" "$3"; [ -f "$REPLY" ]; }
image_list() { local f; for f in "$IMAGES/$1/$2"/*; do [ -f "$f" ] && cat "$f"; done; return 0; }

# hook_error MSG: the OCI runtime's error when the toolkit's prestart hook fails.
hook_error() {
	printf '%s\n' "OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'" "$1"
}

# gpu_container ENGINE: prints what a container with all GPUs running nvidia-smi -L prints
# (the host's nvidia-smi, which the toolkit injects) and returns its status, or the engine's
# error (status 125 for docker, 1 otherwise) when the toolkit fails.
gpu_container() {
	local engine=$1 failure msg="" hidden n
	failure=$(knob container-failure "")
	if [ -z "$failure" ] && ! nvidia_loaded; then failure=driver-not-loaded; fi
	if [ -z "$failure" ] && [ "$engine" = docker ] && [ ! -x "$SIM_ROOT/usr/bin/nvidia-container-runtime-hook" ]; then failure=no-device-driver; fi
	case $failure in
	"") ;;
	no-device-driver) msg='could not select device driver "" with capabilities: [[gpu]].' ;;
	nvidia-driver-unconfigured) msg='could not select device driver "nvidia" with capabilities: [[gpu]].' ;;
	driver-not-loaded) msg=$(hook_error "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown.") ;;
	driver-error) msg=$(hook_error "nvidia-container-cli: initialization error: driver error: failed to process request: unknown.") ;;
	file-exists) msg=$(hook_error "nvidia-container-cli: mount error: file creation failed: /var/lib/containers/rootfs/usr/bin/nvidia-smi: file exists: unknown.") ;;
	imex-channel) msg=$(hook_error "nvidia-container-cli: error parsing IMEX info: unsupported IMEX channel value: all: unknown.") ;;
	app-profiles-ro) msg="OCI runtime create failed: could not apply required modification to OCI specification: error modifying OCI spec: createContainer hook #6: exit status 1, stdout: , stderr: time=\"2025-09-18T10:00:00Z\" level=error msg=\"failed to create application profiles directory: mkdirat etc/nvidia/nvidia-application-profiles-rc.d: read-only file system\": unknown" ;;
	bpf-device-rules) msg=$(hook_error "nvidia-container-cli: mount error: failed to add device rules: unable to find any existing device filters attached to the cgroup: bpf_prog_query(BPF_CGROUP_DEVICE) failed: operation not permitted: unknown.") ;;
	*) echo "dlami-sim: knob container-failure: unknown value $failure" >&2; return 2 ;;
	esac
	if [ -n "$msg" ]; then
		case $engine in
		docker) echo "docker: Error response from daemon: $msg" >&2; return 125 ;;
		podman) echo "Error: $msg" >&2; return 126 ;;
		*) echo "ctr: $msg" >&2; return 1 ;;
		esac
	fi
	hidden=$(knob container-gpus-hidden 0)
	n=$("$SIM_ROOT/usr/bin/nvidia-smi" -L | wc -l)
	"$SIM_ROOT/usr/bin/nvidia-smi" -L | head -n $((n - hidden))
}

# imex_container ENGINE: what a container started as gpu_container's lists of
# /dev/nvidia-caps-imex-channels. The driver creates channel 0 at load when a modprobe.d file
# sets NVreg_CreateImexChannel0=1 (NVIDIA's IMEX guide, imexchannels.html), and the toolkit's
# CDI spec then carries it into containers (grace-blackwell.md 1.5). Knob
# container-imex-channels: "none" gives the container no channel all the same (a CDI spec
# written before the channel existed; the legacy runtime without NVIDIA_IMEX_CHANNELS).
imex_container() {
	local engine=$1 rc
	gpu_container "$engine" >/dev/null
	rc=$?
	[ "$rc" = 0 ] || return "$rc"
	if [ "$(knob container-imex-channels "")" != none ] &&
		grep -qs '^[[:space:]]*options[[:space:]]\{1,\}nvidia[[:space:]].*NVreg_CreateImexChannel0=1' "$SIM_ROOT"/etc/modprobe.d/*.conf; then
		echo channel0
		return 0
	fi
	echo "ls: cannot access '/dev/nvidia-caps-imex-channels': No such file or directory" >&2
	return 2
}


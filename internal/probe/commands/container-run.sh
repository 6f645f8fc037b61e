#!/bin/sh
# shellcheck disable=SC2154 # set by the plugin before the body
# One GPU container of the container-gpu check (packer-plugin-dlami, probe.containerRunCommand):
# engine (docker, containerd or podman), image, or for containerd rootfs, namespace
# (containerd's), gpu_flags (ctr's GPU flags, a word list), in_container (what the container
# runs, a word list: nvidia-smi -L, or the IMEX channels' listing) and missing_word, printed
# when the image is not in the engine's local store: the check never pulls.
case $engine in
docker)
	if ! /usr/bin/docker image inspect "$image" >/dev/null 2>&1; then echo "$missing_word"; exit 0; fi
	# shellcheck disable=SC2086 # in_container is a word list
	exec /usr/bin/docker run --rm --pull=never --gpus all "$image" $in_container
	;;
containerd)
	id="dlami-container-gpu-$$"
	if [ -n "$rootfs" ]; then
		# shellcheck disable=SC2086 # gpu_flags and in_container are word lists
		exec /usr/bin/ctr -n "$namespace" run --rm --rootfs "$rootfs" $gpu_flags "$id" $in_container
	fi
	if ! /usr/bin/ctr -n "$namespace" images ls -q 2>/dev/null | grep -qxF -- "$image"; then echo "$missing_word"; exit 0; fi
	# shellcheck disable=SC2086 # gpu_flags and in_container are word lists
	exec /usr/bin/ctr -n "$namespace" run --rm $gpu_flags "$image" "$id" $in_container
	;;
podman)
	if ! /usr/bin/podman image exists "$image"; then echo "$missing_word"; exit 0; fi
	# shellcheck disable=SC2086 # in_container is a word list
	exec /usr/bin/podman run --rm --pull=never --device nvidia.com/gpu=all "$image" $in_container
	;;
esac
echo "container-run.sh: unknown engine $engine" >&2
exit 2

#!/bin/sh
# Puts the packages "$@" on apt hold (packer-plugin-dlami, internal/remote: SSH.Hold), waiting
# as the layers do while cloud-init or unattended-upgrades hold the dpkg lock at first boot,
# instead of failing at once. The plugin sets, before this body: apt_mark (the apt-mark command,
# words: "sudo -n /usr/bin/apt-mark"), lock_timeout (seconds apt waits for the lock, and this
# loop in all) and retry_every (seconds between tries).
: "${apt_mark:?}" "${lock_timeout:?}" "${retry_every:?}"
end=$(( $(date +%s) + lock_timeout ))
while :; do
  # shellcheck disable=SC2086 # apt_mark is a command and its arguments, split on purpose
  out=$($apt_mark -o DPkg::Lock::Timeout="$lock_timeout" hold -- "$@" 2>&1) && { printf '%s\n' "$out"; exit 0; }
  case $out in *lock*) if [ "$(date +%s)" -lt "$end" ]; then sleep "$retry_every"; continue; fi ;; esac
  printf '%s\n' "$out"; exit 1
done

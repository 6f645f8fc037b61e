#!/bin/sh
# shellcheck disable=SC2154 # set by the plugin before the body
# Prints the files the globs name, every line prefixed with "| " under a "==> PATH" header
# (pamlimits.ParseFiles). A file that cannot be read fails the section: pam_limits would refuse
# the login, and the probe must not guess. The plugin sets globs (paths without spaces).
# shellcheck disable=SC2086 # the globs expand here
for f in $globs; do
  [ -f "$f" ] || continue
  printf '==> %s\n' "$f"
  sed 's/^/| /' "$f" || exit 1
done

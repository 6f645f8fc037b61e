#!/bin/sh
# shellcheck disable=SC2154 # set by the plugin before the body
# Only the default-entry lines of grub.cfg's header and its first linux line matter; awk stops
# there so a long grub.cfg is not shipped back. The word absent when there is no grub.cfg
# (packer-plugin-dlami, the guard's snapshot). The plugin sets absent.
f=/boot/grub/grub.cfg
if [ -e "$f" ]; then
  awk '/^[ \t]*set[ \t]+default=/ { print; next }
       /^[ \t]*(linux|linuxefi|linux16)[ \t]/ { print; exit }' "$f"
else
  echo "$absent"
fi

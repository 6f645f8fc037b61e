#!/bin/sh
# shellcheck disable=SC2154 # set by the plugin before the body
# The login user's name, uid, gid, gids and group names as a new session gets them from the
# group database (packer-plugin-dlami, facts.LoginMemlock). The plugin sets user (empty: the
# probe's own user).
if [ -n "$user" ]; then u=$user; else u=$(id -un) || exit 1; fi
printf '%s\n' "$u" && id -u "$u" && id -g "$u" && id -G "$u" && id -Gn "$u"

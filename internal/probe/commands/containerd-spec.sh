#!/bin/sh
# shellcheck disable=SC2154 # set by the plugin before the body
# The base runtime spec containerd's config names: spec_word, its path, then the file;
# no_spec_word when the config names none, absent_word without a config (packer-plugin-dlami,
# facts.JobMemlock). The plugin sets config (containerd's config.toml) and the three words.
c=$config
if [ ! -e "$c" ]; then echo "$absent_word"; exit 0; fi
p=$(sed -n 's/^[[:space:]]*base_runtime_spec[[:space:]]*=[[:space:]]*["'"'"']\([^"'"'"']*\)["'"'"'].*/\1/p' "$c" | head -n 1)
if [ -z "$p" ]; then echo "$no_spec_word"; exit 0; fi
echo "$spec_word $p"
cat "$p"

#!/bin/sh
# Adds or removes the multi-node test's own SSH key in the login user's authorized_keys
# (packer-plugin-dlami). The plugin sets: M (the marker of the script's own lines), action
# ("add" or "remove"), key_line (the public key line, its comment the tag) and tag (the
# comment that marks the key's lines). The key lets the first node's Open MPI start ranks on
# the others for the test only: "remove" takes out every line with the tag and nothing else,
# keeping the file's owner and mode. It prints "$M KEYS <n>", the tagged lines left.
no_login_env
keys=$HOME/.ssh/authorized_keys
case $action in
add)
	if ! { mkdir -p "$HOME/.ssh" && chmod 700 "$HOME/.ssh"; }; then
		echo "$M ERROR cannot create $HOME/.ssh"
		exit 1
	fi
	if [ ! -e "$keys" ] && ! { : >"$keys" && chmod 600 "$keys"; }; then
		echo "$M ERROR cannot create $keys"
		exit 1
	fi
	printf '%s\n' "$key_line" >>"$keys" || {
		echo "$M ERROR cannot append to $keys"
		exit 1
	}
	;;
remove)
	if [ -e "$keys" ]; then
		# Rewritten in place (cat >), so the file keeps its owner, mode and inode.
		kept=$(grep -vF -- "$tag" "$keys")
		rc=$?
		if [ "$rc" -gt 1 ]; then
			echo "$M ERROR cannot read $keys"
			exit 1
		fi
		if [ -n "$kept" ]; then printf '%s\n' "$kept"; fi >"$keys" || {
			echo "$M ERROR cannot rewrite $keys"
			exit 1
		}
	fi
	;;
*)
	echo "$M ERROR unknown action $action"
	exit 1
	;;
esac
n=0
[ -e "$keys" ] && n=$(grep -cF -- "$tag" "$keys")
echo "$M KEYS ${n:-0}"

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

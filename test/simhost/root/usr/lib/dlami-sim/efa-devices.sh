# shellcheck shell=bash
# efa_device I: the I-th EFA device name (rdmap<bus>s0), P5/P6 style.
efa_device() {
	local buses=(79 80 81 82 96 97 98 99 113 114 115 116 130 131 132 133 147 148 149 150 164 165 166 167 181 182 183 184 198 199 200 201)
	EFA_DEV="rdmap${buses[$1]:-$((210 + $1))}s0"
	[ -n "${2:-}" ] || printf '%s\n' "$EFA_DEV"
}

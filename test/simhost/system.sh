# shellcheck shell=bash
# Boot/shutdown of one simulated host; sourced by boot, supervisor, teardown.
# State directory layout (STATE):
#   upper/ work/ merged/   the per-scenario overlay; merged/ is the host's /
#   scenario-rootfs/       copy of SCENARIO_DIR/rootfs (re-applied at boot)
#   id_ed25519[.pub]       the ubuntu user's key pair
#   env                    ssh_host= ssh_port= ssh_private_key_file=
#   addr                   the loopback address sshd listens on (boot's DLAMI_SIM_ADDR)
#   port sshd.pid supervisor.pid sshd.log supervisor.log boot_id
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

sim_knob() { # sim_knob MERGED NAME DEFAULT
	chroot "$1" /usr/lib/dlami-sim/knob "$2" "$3"
}

# chroot_pids MERGED: every process whose root is MERGED.
chroot_pids() {
	local m
	m=$(readlink -f "$1")
	find /proc -mindepth 2 -maxdepth 2 -path '/proc/[0-9]*/root' -lname "$m" 2>/dev/null | cut -d/ -f3
}

kill_chroot() { # kill_chroot MERGED: SIGKILL all processes inside, wait until gone
	local pids
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		pids=$(chroot_pids "$1")
		[ -z "$pids" ] && return 0
		# shellcheck disable=SC2086 # $pids: one word per process, split on purpose
		kill -9 $pids 2>/dev/null || true
		sleep 0.1
	done
	log "warning: processes still inside $1: $(chroot_pids "$1" | tr '\n' ' ')"
}

# mounts_under DIR: mount points strictly below DIR, deepest first.
mounts_under() {
	local d
	d=$(readlink -f "$1")
	awk -v d="$d/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | awk '{ print length, $0 }' | sort -rn | cut -d' ' -f2-
}

umount_under() {
	local m
	for m in $(mounts_under "$1"); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
}

# apply_scenario STATE [SUBTREE...]: copy the scenario rootfs (or only the
# given subtrees of it) over merged/.
apply_scenario() {
	local st=$1 src=$1/scenario-rootfs t
	shift
	[ -d "$src" ] || return 0
	if [ $# -eq 0 ]; then cp -a "$src/." "$st/merged/"; return; fi
	for t in "$@"; do
		[ -e "$src/$t" ] || continue
		mkdir -p "$st/merged/$t"
		cp -a "$src/$t/." "$st/merged/$t/"
	done
}

# ns_up STATE: starts the host's own PID and UTS namespaces for this boot: their pid 1
# (/usr/lib/dlami-sim/pid1, chrooted, reaping orphans as init does) mounts the namespace's
# /proc at merged/proc, so every process of the host sees only its host's processes there, as
# on an instance: ps, pgrep and pkill on one host never list or reach another host's (they
# all share this machine's kernel). The namespace's host name is /etc/hostname's. Writes
# STATE/ns.pid (pid 1's pid on this machine); in_host enters it.
ns_up() {
	local st=$1 m=$1/merged u p1="" root
	root=$(readlink -f "$m")
	# shellcheck disable=SC2016 # $1 and $2 are the inner sh's arguments
	setsid unshare --uts --pid --fork -- /bin/sh -c 'hostname "$1" && mount -t proc proc "$2/proc" && exec chroot "$2" /usr/lib/dlami-sim/pid1' \
		sh "$(cat "$m/etc/hostname")" "$m" </dev/null >>"$st/units.log" 2>&1 &
	u=$!
	for _ in $(seq 1 100); do
		# (The kernel ends the list with a space, no newline: read's status says nothing.)
		p1=""
		read -r p1 _ <"/proc/$u/task/$u/children" 2>/dev/null || true
		[ -n "$p1" ] && [ "$(readlink "/proc/$p1/root" 2>/dev/null)" = "$root" ] && [ -e "$m/proc/1" ] && break
		p1=""
		sleep 0.05
	done
	[ -n "$p1" ] || { log "the host's PID namespace did not start (see $st/units.log)"; return 1; }
	echo "$p1" >"$st/ns.pid"
}

# host_cmd STATE: sets HOST_CMD to the words that run a command chrooted into the host,
# inside its namespaces (nsenter forks: the command is in the namespace, nsenter waits for it).
host_cmd() { HOST_CMD=(nsenter --target "$(cat "$1/ns.pid")" --pid --uts -- chroot "$1/merged"); }
# in_host STATE CMD...: runs CMD in the host (host_cmd).
in_host() {
	local HOST_CMD
	host_cmd "$1"
	"${HOST_CMD[@]}" "${@:2}"
}

# system_up STATE [PREPARE]: mount the pseudo filesystems, run the boot hook,
# the optional prepare script, start sshd. Used at first boot and reboots.
system_up() {
	local st=$1 prepare=${2:-} m=$1/merged port ml addr=127.0.0.1
	ns_up "$st" || return 1
	mount -t tmpfs -o mode=755,size=64m,nosuid dev "$m/dev"
	mknod -m 666 "$m/dev/null" c 1 3
	mknod -m 666 "$m/dev/zero" c 1 5
	mknod -m 666 "$m/dev/full" c 1 7
	mknod -m 666 "$m/dev/random" c 1 8
	mknod -m 666 "$m/dev/urandom" c 1 9
	mknod -m 666 "$m/dev/tty" c 5 0
	ln -s /proc/self/fd "$m/dev/fd"
	ln -s /proc/self/fd/0 "$m/dev/stdin"
	ln -s /proc/self/fd/1 "$m/dev/stdout"
	ln -s /proc/self/fd/2 "$m/dev/stderr"
	mkdir -p "$m/dev/pts" "$m/dev/shm"
	mount -t devpts -o newinstance,ptmxmode=0666,mode=620,gid=5 devpts "$m/dev/pts"
	ln -s pts/ptmx "$m/dev/ptmx"
	mount -t tmpfs -o mode=1777,nosuid,nodev shm "$m/dev/shm"
	mount -t tmpfs -o mode=755,size=16m sysfs-sim "$m/sys"
	mount -t tmpfs -o mode=755,nosuid,nodev,size=256m run "$m/run"
	cat /proc/sys/kernel/random/uuid >"$st/boot_id"
	mount --bind "$st/boot_id" "$m/proc/sys/kernel/random/boot_id"
	# NVMe instance store as the DLAMI has it: ext4 on /dev/mapper/vg.01-lv_ephemeral.
	# A sparse image in the state dir (created once, ~28T apparent; bigalloc keeps
	# mkfs and the image tiny) on a loop device whose node is named like the LVM
	# volume inside the host; mounted from inside the chroot, so findmnt's SOURCE
	# is that name. losetup -d right after the mount makes the loop device go away
	# with the mount. A reboot keeps the mount (instance storage survives it) and
	# only recreates the node. Without loop devices: tmpfs, and sshd.log says why.
	(
		set +e
		img=$st/nvme.img node=$m/dev/mapper/vg.01-lv_ephemeral
		if mountpoint -q "$m/opt/dlami/nvme"; then
			dev=$(awk -v t="$(readlink -f "$m/opt/dlami/nvme")" '$5 == t { print $3; exit }' /proc/self/mountinfo)
			case $dev in 7:*) mkdir -p "$m/dev/mapper" && mknod -m 660 "$node" b "${dev%:*}" "${dev#*:}" ;; esac
			exit 0
		fi
		[ "$(sim_knob "$m" nvme mounted)" = mounted ] || exit 0
		mkdir -p "$m/opt/dlami/nvme" "$m/dev/mapper"
		why="" loop=""
		if [ ! -s "$img" ]; then
			# ext4 hosts cap a file at 16 TiB: then the volume is that large.
			{ truncate -s 28T "$img" 2>/dev/null || truncate -s $((16 * 1024 ** 4 - 4096)) "$img"; } &&
				mkfs.ext4 -q -F -m 0 -O ^resize_inode,sparse_super2,bigalloc -C 1M -T huge -J size=64 \
					-E lazy_itable_init=1,lazy_journal_init=1,nodiscard "$img" >/dev/null 2>&1 ||
				{ why="creating the ext4 image $img failed (truncate/mkfs.ext4)"; rm -f "$img"; }
		fi
		if [ -z "$why" ]; then loop=$(losetup -f --show "$img" 2>&1) || { why="losetup: $loop"; loop=""; }; fi
		if [ -n "$loop" ]; then
			mm=$(stat -c '%t %T' "$loop")
			mknod -m 660 "$node" b $((16#${mm% *})) $((16#${mm#* })) &&
				in_host "$st" mount --no-canonicalize -t ext4 /dev/mapper/vg.01-lv_ephemeral /opt/dlami/nvme 2>/dev/null ||
				why="mounting $loop as ext4 failed"
			losetup -d "$loop" 2>/dev/null
		fi
		if [ -n "$why" ]; then
			rm -f "$node"
			echo "nvme: no ext4 volume on this machine ($why); /opt/dlami/nvme is a tmpfs" >>"$st/sshd.log"
			# tmpfs size is a limit, not an allocation: report the ~28 TB of the LVM volume.
			mount -t tmpfs -o size=28T,mode=1777 /dev/mapper/vg.01-lv_ephemeral "$m/opt/dlami/nvme"
		else
			chmod 1777 "$m/opt/dlami/nvme"
		fi
	)
	cp /etc/resolv.conf "$m/etc/resolv.conf" 2>/dev/null || true
	in_host "$st" /usr/lib/dlami-sim/boot-hook
	apply_scenario "$st" sys dev run opt/dlami/nvme
	if [ -n "$prepare" ]; then
		install -m 755 "$prepare" "$m/var/lib/dlami-sim/prepare"
		LC_ALL=C DEBIAN_FRONTEND=noninteractive in_host "$st" /var/lib/dlami-sim/prepare >>"$st/prepare.log" 2>&1 ||
			{ log "prepare script failed:"; tail -n 15 "$st/prepare.log" >&2; return 1; }
		rm -f "$m/var/lib/dlami-sim/prepare"
	fi
	port=$(cat "$st/port")
	[ -s "$st/addr" ] && addr=$(cat "$st/addr")
	ml=$(sim_knob "$m" memlock unlimited)
	[ "$ml" = unlimited ] || ml=$((ml * 1024))
	# ulimit -l is sshd's real limit; only where this machine cannot raise it
	# (no CAP_SYS_RESOURCE, e.g. a container) the preload shim reports the knob.
	local limits=(--memlock="$ml:$ml")
	sed -i '\|/usr/lib/dlami-sim/libdlami-memlock.so|d' "$m/etc/ld.so.preload" 2>/dev/null || true
	if ! prlimit "${limits[@]}" true 2>/dev/null; then
		limits=()
		echo "$ml" >"$m/run/dlami-sim/memlock"
		echo /usr/lib/dlami-sim/libdlami-memlock.so >>"$m/etc/ld.so.preload"
		echo "memlock: cannot set $ml here (no CAP_SYS_RESOURCE); simulated through the preload shim" >>"$st/sshd.log"
	fi
	[ -s "$m/etc/ld.so.preload" ] || rm -f "$m/etc/ld.so.preload"
	# systemd's part of the boot that the simulation models (enabled oneshots, then slurmd and
	# kubelet by their Requires=): in the host's namespaces and memlock, before sshd.
	local HOST_CMD
	host_cmd "$st"
	prlimit "${limits[@]}" "${HOST_CMD[@]}" /usr/lib/dlami-sim/systemd-boot </dev/null >>"$st/units.log" 2>&1 || log "systemd-boot failed (see $st/units.log)"
	# In the host's namespaces: its name is the instance's, not this machine's.
	local rc
	for _ in 1 2 3 4 5; do
		setsid prlimit "${limits[@]}" "${HOST_CMD[@]}" /usr/sbin/sshd -D -e -p "$port" -o ListenAddress="$addr" </dev/null >>"$st/sshd.log" 2>&1 &
		echo $! >"$st/sshd.pid"
		rc=0
		wait_ssh "$addr" "$port" 90 "$(cat "$st/sshd.pid")" || rc=$?
		[ $rc = 0 ] && return 0
		# sshd exited: most likely the port was taken between choosing and binding it.
		# A first boot may move to another port; a reboot must keep its port and retries.
		if [ $rc = 2 ] && [ "${SIM_FIRST_BOOT:-0}" = 1 ] && [ -z "${DLAMI_SIM_PORT:-}" ]; then
			port=$(free_port) && echo "$port" >"$st/port"
		fi
		[ $rc = 2 ] || break
		sleep 1
	done
	log "sshd did not accept on $addr:$port; sshd.log:"
	tail -n 15 "$st/sshd.log" >&2
	return 1
}

# system_down STATE: what a reboot does to the running system: every process
# dies (every SSH connection drops), /run and the fake /sys and /dev vanish.
# The NVMe mount survives, as instance storage survives a reboot.
system_down() {
	local m=$1/merged
	kill_chroot "$m"
	local t
	for t in proc/sys/kernel/random/boot_id dev/shm dev/pts dev sys run proc; do
		mountpoint -q "$m/$t" 2>/dev/null && { umount "$m/$t" 2>/dev/null || umount -l "$m/$t"; }
	done
	# Anything a bake mounted under run/ etc. goes too.
	for t in $(mounts_under "$m"); do
		case $t in "$m/opt/dlami/nvme") ;; *) umount -l "$t" 2>/dev/null || true ;; esac
	done
}

wait_ssh() { # wait_ssh ADDR PORT SECONDS [PID]: until sshd answers with its banner; 2 if PID died
	local addr=$1 port=$2 deadline=$((SECONDS + $3)) pid=${4:-} banner
	while [ $SECONDS -lt $deadline ]; do
		if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then return 2; fi
		if { exec 3<>"/dev/tcp/$addr/$port"; } 2>/dev/null; then
			banner=$(timeout 2 head -c 7 <&3 2>/dev/null || true)
			exec 3<&- 3>&-
			[ "$banner" = "SSH-2.0" ] && return 0
		fi
		sleep 0.1
	done
	return 1
}

free_port() {
	local p used
	used=$(ss -Htln 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }')
	for _ in $(seq 1 200); do
		p=$((20000 + RANDOM % 40000))
		grep -qx "$p" <<<"$used" || { echo "$p"; return 0; }
	done
	return 1
}

# listeners_blocking ADDR PORT: the TCP listeners that keep a new socket from
# binding ADDR:PORT (the address itself, or a wildcard), one per line; empty
# when the bind can succeed. A wildcard listener (the machine's own sshd on
# 0.0.0.0:22) would also answer wait_ssh in the host's place.
listeners_blocking() {
	ss -Htln 2>/dev/null | awk -v a="$1" -v p="$2" '{
		n = split($4, f, ":"); if (f[n] != p) next
		h = substr($4, 1, length($4) - length(p) - 1)
		if (h == a || h == "0.0.0.0" || h == "*" || h == "[::]") print $4
	}'
}

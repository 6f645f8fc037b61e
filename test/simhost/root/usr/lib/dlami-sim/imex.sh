# shellcheck shell=bash
# The simulated IMEX daemon (the nvidia-imex service's process), shared by the systemctl
# stand-in (start, stop, restart) and the nvidia-imex-ctl stand-in. Sourced after sim.sh.
#
# Facts (../shared/docs/grace-blackwell.md 1.5): the daemons of a domain talk TCP to each other
# on SERVER_PORT of /etc/nvidia-imex/config.cfg (default 50000); /etc/nvidia-imex/
# nodes_config.cfg lists one private IP per line, every node's list must match, and it is read
# when the daemon starts (a change needs a restart); nvidia-imex-ctl -N shows a node whose
# version differs as !V! (VERSION_MISMATCH) and a node whose list differs as !M!
# (NODE_MAP_MISMATCH).
#
# The stand-in daemon: with knob private-ip set (EC2's private IPv4 of the instance; the fleet
# sets it on every boot, test/simfleet), a start runs a perl program (imex_daemon_start, detached
# with setsid, named nvidia-imex):
# a real TCP listener on <private-ip>:SERVER_PORT, that address only, which answers each
# connection with one line, IMEX_LINE below:
#   IMEX version=<its version> nodes=<its node list, comma-separated>
# and nothing while this host's knob efa-traffic is blocked (the security group's
# self-referencing all-traffic rule that EFA needs also carries IMEX's port). Its pid and line
# are kept in SIM_STATE (imex-daemon.pid, imex-daemon.line). Without knob private-ip (a single
# host booted by test/simhost/boot, whose address is the machine's own) no daemon runs. Every
# process of a host dies at its teardown and reboot (kill_chroot, system.sh); the daemon also
# leaves on its own once its pid file no longer names it.
IMEX_DIR=$SIM_ROOT/etc/nvidia-imex
IMEX_PID=$SIM_STATE/imex-daemon.pid
IMEX_LINE=$SIM_STATE/imex-daemon.line

# imex_port: sets REPLY to SERVER_PORT of config.cfg (50000 when absent).
imex_port() {
	local l
	REPLY=50000
	[ -f "$IMEX_DIR/config.cfg" ] || return 0
	while IFS= read -r l || [ -n "$l" ]; do
		l=${l%$'\r'}
		[[ $l =~ ^[[:space:]]*SERVER_PORT[[:space:]]*=[[:space:]]*([0-9]+)[[:space:]]*$ ]] && REPLY=${BASH_REMATCH[1]}
	done <"$IMEX_DIR/config.cfg"
}

# imex_nodes: sets IMEX_NODES (an array) to the addresses of nodes_config.cfg, in order, with
# comments, blanks and blank lines stripped.
imex_nodes() {
	IMEX_NODES=()
	[ -f "$IMEX_DIR/nodes_config.cfg" ] || return 0
	mapfile -t IMEX_NODES < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$IMEX_DIR/nodes_config.cfg")
}

# imex_version: sets REPLY to this host's IMEX version: what the installed nvidia-imex binary
# reports (the package's upstream version, "IMEX version 595.91.07" from the stand-in package),
# else 570.172.08, the figure of the nvidia-imex-ctl stand-in's canned domains (ParallelCluster's
# example).
imex_version() {
	REPLY=""
	[ -x "$SIM_ROOT/usr/bin/nvidia-imex" ] && REPLY=$("$SIM_ROOT/usr/bin/nvidia-imex" --version 2>/dev/null)
	REPLY=${REPLY##* }
	[[ $REPLY =~ ^[0-9]+(\.[0-9]+)+$ ]] || REPLY=570.172.08
}

# live PID: true while process PID runs (a zombie no longer does: a detached daemon's parent is
# whatever reaps orphans, which may take its time or never do it).
live() {
	local s=""
	[ -r "/proc/$1/stat" ] && read -r s <"/proc/$1/stat" 2>/dev/null
	s=${s##*) }
	[ -n "$s" ] && [ "${s%% *}" != Z ] && [ "${s%% *}" != X ]
}

# imex_daemon_alive: true while the daemon runs (its pid file names a live process).
imex_daemon_alive() {
	local p=""
	[ -f "$IMEX_PID" ] && read -r p <"$IMEX_PID"
	[[ $p =~ ^[0-9]+$ ]] && live "$p"
}

# imex_unit_state: sets REPLY to the nvidia-imex unit's state as systemctl keeps it
# (/run/dlami-sim/units, after a start, stop or restart; else knob service-nvidia-imex,
# inactive): active, inactive or failed. An active unit whose daemon was started and is gone
# (killed: pkill -9 nvidia-imex) is failed, as systemd marks a service whose main process died.
imex_unit_state() {
	local f=$SIM_RUN/units/nvidia-imex.service
	REPLY=""
	if [ -f "$f" ]; then
		read -r REPLY <"$f"
		if [ "$REPLY" = active ] && [ -f "$IMEX_PID" ] && ! imex_daemon_alive; then REPLY=failed; fi
	else
		kv service-nvidia-imex inactive
	fi
}

# imex_daemon_stop: kills the daemon, waits until it is gone (its port is free again).
imex_daemon_stop() {
	local p="" i
	[ -f "$IMEX_PID" ] && read -r p <"$IMEX_PID"
	rm -f "$IMEX_PID" "$IMEX_LINE"
	[[ $p =~ ^[0-9]+$ ]] || return 0
	kill "$p" 2>/dev/null || return 0
	for ((i = 0; i < 40; i++)); do
		live "$p" || return 0
		sleep 0.05
	done
	kill -9 "$p" 2>/dev/null || true
}

# imex_daemon_start: (re)starts the daemon on knob private-ip with this host's version and the
# node list nodes_config.cfg holds now; nothing without the knob. Returns 1 with a message on
# stderr when it cannot listen (an address that is not one IPv4 host address, the port taken).
imex_daemon_start() {
	local ip port line nodes pid i
	imex_daemon_stop
	kv private-ip ""; ip=$REPLY
	[ -n "$ip" ] || return 0
	# Only the host's own address: never a wildcard (0.0.0.0) or a broadcast address.
	if ! [[ $ip =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || [ "$ip" = 0.0.0.0 ] || [[ $ip == *.255 ]]; then
		echo "nvidia-imex (dlami-sim): knob private-ip '$ip' is not an IPv4 host address" >&2
		return 1
	fi
	imex_port; port=$REPLY
	imex_nodes
	nodes=$(IFS=,; printf '%s' "${IMEX_NODES[*]}")
	imex_version
	line="IMEX version=$REPLY nodes=$nodes"
	state_dir
	printf '%s\n' "$line" >"$IMEX_LINE"
	# The daemon (perl reads its program from stdin, then stdin is at its end): arguments ADDR
	# PORT LINE PIDFILE TRAFFIC. It listens on ADDR:PORT (that address only), writes its pid to
	# PIDFILE once it listens, and answers every connection with LINE, unless the file TRAFFIC
	# (the host's efa-traffic knob) says "blocked": then it closes the connection unanswered.
	# It exits when PIDFILE no longer names it (a stop, a restart, the state removed under it).
	(cd / && exec setsid perl - "$ip" "$port" "$line" "$IMEX_PID" "$SIM_ETC/efa-traffic") <<'PERL' >/dev/null 2>"$SIM_STATE/imex-daemon.err" &
use strict;
use warnings;
use IO::Select;
use IO::Socket::INET;

my ($addr, $port, $line, $pidfile, $traffic) = @ARGV;
die "nvidia-imex (dlami-sim): usage: ADDR PORT LINE PIDFILE TRAFFIC\n" unless defined $traffic;
die "nvidia-imex (dlami-sim): '$addr' is not an IPv4 host address\n"
	unless $addr =~ /^\d{1,3}(\.\d{1,3}){3}$/ && $addr ne '0.0.0.0';
$0 = 'nvidia-imex';
$SIG{PIPE} = 'IGNORE';
my $srv = IO::Socket::INET->new(LocalAddr => $addr, LocalPort => $port, Proto => 'tcp',
	Listen => 16, ReuseAddr => 1)
	or die "nvidia-imex (dlami-sim): cannot listen on $addr:$port: $@\n";
open(my $fh, '>', "$pidfile.tmp") or die "nvidia-imex (dlami-sim): $pidfile.tmp: $!\n";
print $fh "$$\n";
close($fh);
rename("$pidfile.tmp", $pidfile) or die "nvidia-imex (dlami-sim): $pidfile: $!\n";

sub mine {
	open(my $f, '<', $pidfile) or return 0;
	my $p = <$f> // '';
	close($f);
	$p =~ s/\s+//g;
	return $p eq "$$";
}

sub blocked {
	open(my $f, '<', $traffic) or return 0;
	my $v = <$f> // '';
	close($f);
	$v =~ s/^\s+|\s+$//g;
	return $v eq 'blocked';
}

my $sel = IO::Select->new($srv);
while (mine()) {
	next unless $sel->can_read(1);
	my $c = $srv->accept or next;
	print $c "$line\n" unless blocked();
	close($c);
}
exit 0;
PERL
	pid=$!
	# It writes its pid file once it listens.
	for ((i = 0; i < 100; i++)); do
		imex_daemon_alive && return 0
		# Gone with a message: it could not listen.
		kill -0 "$pid" 2>/dev/null || [ ! -s "$SIM_STATE/imex-daemon.err" ] || break
		sleep 0.05
	done
	imex_daemon_alive && return 0
	kill -9 "$pid" 2>/dev/null
	rm -f "$IMEX_PID" "$IMEX_LINE"
	cat "$SIM_STATE/imex-daemon.err" >&2 2>/dev/null
	return 1
}

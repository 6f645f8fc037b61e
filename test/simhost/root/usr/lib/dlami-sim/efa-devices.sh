# shellcheck shell=bash
# EFA devices of this host. EC2 gives an instance one EFA device per network interface launched
# with InterfaceType efa or efa-only, and none for a plain interface, on any type
# (../shared/docs/efa-launch.md). Knob efa-cards, written by the simulated fleet from the
# launch, lists the network card of each such interface in card order ("none": no EFA device,
# e.g. amazon-ebs's one default interface). Without the knob (a host booted by hand or a
# scenario) the host has the layout's full set, cards 0..L_EFA-1, as a launch that attached
# every EFA would. Knobs rdmap-count, pci-efa-count and fi-domain-count still override the
# counts for failure scenarios.

# efa_device CARD: the EFA device name (rdmap<bus>s0) of the interface on network card CARD,
# P5/P6 style: the card decides the PCI bus, so a launch that skips a card skips its device.
efa_device() {
	local buses=(79 80 81 82 96 97 98 99 113 114 115 116 130 131 132 133 147 148 149 150 164 165 166 167 181 182 183 184 198 199 200 201)
	EFA_DEV="rdmap${buses[$1]:-$((210 + $1))}s0"
	[ -n "${2:-}" ] || printf '%s\n' "$EFA_DEV"
}

# efa_cards: sets EFA_CARDS (the card of each attached EFA, in order) and EFA_N (their number).
# A malformed knob counts as no EFA and says so on stderr: a stand-in must not invent devices.
efa_cards() {
	local c
	EFA_CARDS=()
	layout
	if [ -f "$SIM_ETC/efa-cards" ]; then
		kv efa-cards none
		if [ "$REPLY" != none ]; then
			IFS=, read -r -a EFA_CARDS <<<"$REPLY"
			for c in "${EFA_CARDS[@]}"; do
				[[ $c =~ ^[0-9]{1,2}$ ]] && continue
				echo "dlami-sim: knob efa-cards '$REPLY' is not a list of network card indexes (e.g. 0,1,2 or none)" >&2
				EFA_CARDS=()
				break
			done
		fi
	else
		for ((c = 0; c < L_EFA; c++)); do EFA_CARDS+=("$c"); done
	fi
	EFA_N=${#EFA_CARDS[@]}
}

# efa_dev_at I: sets EFA_DEV to the I-th EFA device's name, in card order. Past the attached
# ones (a count knob that claims more devices than the launch gave), the next cards' names.
efa_dev_at() {
	[ -n "${EFA_N:-}" ] || efa_cards
	if [ "$1" -lt "$EFA_N" ]; then
		efa_device "${EFA_CARDS[$1]}" quiet
	elif [ "$EFA_N" -gt 0 ]; then
		efa_device $((EFA_CARDS[EFA_N - 1] + 1 + $1 - EFA_N)) quiet
	else
		efa_device "$1" quiet
	fi
}

# efa_traffic_blocked: true when the instance's security groups do not let EFA traffic through
# (knob efa-traffic, set by the fleet from the groups' rules and updated when they change).
# EFA OS-bypass traffic then never arrives: the tools stall until their caller's timeout, with
# no message of their own, as on EC2 (EC2 User Guide, "Get started with EFA", step 1).
efa_traffic_blocked() { kv efa-traffic allowed; [ "$REPLY" = blocked ]; }

# efa_port_attr KNOB DEV: sets REPLY to what /sys/class/infiniband/DEV/ports/1/state (knob
# efa-port-state) or phys_state (knob efa-phys-state) holds, in the kernel's "%d: %s" form
# (drivers/infiniband/core/sysfs.c state_show, phys_state_show). The knobs list DEV:NAME
# entries ("rdmap98s0:DOWN", "rdmap131s0:Polling"), NAME one of the kernel's words, any case:
# state NOP DOWN INIT ARMED ACTIVE ACTIVE_DEFER; phys_state Sleep Polling Disabled
# PortConfigurationTraining LinkUp LinkErrorRecovery "Phy Test" (PhyTest). A device not listed
# reads "4: ACTIVE" / "5: LinkUp". An entry the kernel could not print fails (non-zero): the
# boot fails rather than show a state no kernel writes.
efa_port_attr() {
	local knob=$1 dev=$2 e name="" i
	local -a es names
	if [ "$knob" = efa-port-state ]; then
		names=(NOP DOWN INIT ARMED ACTIVE ACTIVE_DEFER) REPLY="4: ACTIVE"
	else
		names=("<unknown>" Sleep Polling Disabled PortConfigurationTraining LinkUp LinkErrorRecovery "Phy Test") REPLY="5: LinkUp"
	fi
	[ -f "$SIM_ETC/$knob" ] || return 0
	kv "$knob" ""
	IFS=', ' read -r -a es <<<"$REPLY"
	[ "$knob" = efa-port-state ] && REPLY="4: ACTIVE" || REPLY="5: LinkUp"
	for e in "${es[@]}"; do
		[ "${e%%:*}" = "$dev" ] && [[ $e == *:* ]] && name=${e#*:}
	done
	[ -n "$name" ] || return 0
	for i in "${!names[@]}"; do
		local w=${names[$i]// /}
		if [ "${w,,}" = "${name,,}" ]; then
			REPLY="$i: ${names[$i]}"
			return 0
		fi
	done
	echo "dlami-sim: knob $knob: '$name' is not a port state the kernel names (${names[*]})" >&2
	return 1
}

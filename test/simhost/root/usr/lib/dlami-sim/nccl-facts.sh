# shellcheck shell=bash
# What one node publishes to the others before a multi-node NCCL test starts. On a real cluster
# the ranks exchange it themselves (PMIx's modex at MPI_Init, then NCCL's bootstrap allgather of
# every rank's host, bus id, network and GPUDirect RDMA support); the simulated node runs one
# process for all its ranks, so the simulated orted gathers it once per node and mpirun hands
# every node's record to every node's process (DLAMI_SIM_MPI_NODE_<i>, see mpirun). Sourced
# after sim.sh and efa-devices.sh.
#
# nccl_node_facts: sets REPLY to this node's record, "key=value" pairs joined by ';' (no value
# holds ';' or a newline):
#   host     the host name NCCL prints ("host:pid:tid [dev] NCCL INFO ...")
#   type     the instance type (knob product-name)
#   gpu      the GPU name of the device lines (knob gpu-name)
#   efa      EFA devices attached (knob efa-cards; rdmap-count overrides)
#   nics     what aws-ofi-nccl reports as "(found N nics)" (knob nccl-nics, else fi-domain-count)
#   net      libfabric | aws-libfabric | socket (knob nccl-net; socket whenever no EFA device:
#            aws-ofi-nccl finds no provider and NCCL falls back to its socket transport)
#   gdr      on | off: GPUDirect RDMA (knob gdrdma; off on sockets)
#   traffic  allowed | blocked (knob efa-traffic: the security groups' self rules)
#   nvls     1 | 0 (knob nccl-nvls, layout; the job's NCCL_NVLS_ENABLE=0 still turns it off)
#   p2p      the intra-node channel path (knob nccl-p2p, layout)
#   bw       this node's share of a 2-node all-reduce's bus bandwidth at large sizes (GB/s): the
#            type's figure with every EFA device attached (knob nccl-multinode-busbw, layout
#            L_MNBW) scaled by the devices attached over the type's count, halved without
#            GPUDirect RDMA; knob nccl-socket-busbw (default 3) on sockets. The run's bus
#            bandwidth is the slowest node's.
#   mnnvl    the NVLink fabric clique all of this node's GPUs registered in, "<ClusterUUID>/<CliqueId>"
#            (the fields NCCL's ncclMnnvlCheck compares, NVIDIA/nccl src/mnnvl.cc), or 0: not a
#            multi-node NVLink tray (layout L_MNNVL), or a GPU whose fabric is not Completed with
#            Status Success (knobs fabric-state, fabric-status), Unhealthy (fabric-health), or
#            GPUs in different cliques (fabric-clique, fabric-cluster-uuid). See nvidia-smi.
nccl_node_facts() {
	local nefa net nics gdr traffic nvls p2p bw gname mnnvl
	layout
	efa_cards
	kv rdmap-count "$EFA_N"; nefa=$REPLY
	kv nccl-net "$L_NET"; net=$REPLY
	[ "$nefa" -gt 0 ] 2>/dev/null || net=socket
	kv fi-domain-count "$nefa"; kv nccl-nics "$REPLY"; nics=$REPLY
	kv gdrdma on; gdr=$REPLY
	[ "$gdr" = off ] || gdr=on
	[ "$net" = socket ] && gdr=off
	traffic=allowed
	efa_traffic_blocked && traffic=blocked
	kv nccl-nvls "$L_NVLS"; nvls=$REPLY
	kv nccl-p2p "$L_P2P"; p2p=$REPLY
	kv gpu-name "$L_GPU_NAME"; gname=$REPLY
	if [ "$net" = socket ]; then
		kv nccl-socket-busbw 3; bw=$REPLY
	else
		kv nccl-multinode-busbw "$L_MNBW"
		bw=$(awk -v b="$REPLY" -v n="$nefa" -v full="$L_EFA" -v g="$gdr" 'BEGIN {
			if (full > 0 && n < full) b = b * n / full
			if (g != "on") b = b / 2
			printf "%.1f", b }')
	fi
	nccl_node_clique; mnnvl=$REPLY
	REPLY="host=${HOSTNAME:-$(hostname)};type=$L_TYPE;gpu=$gname;efa=$nefa;nics=$nics;net=$net;gdr=$gdr;traffic=$traffic;nvls=$nvls;p2p=$p2p;bw=$bw;mnnvl=$mnnvl"
	REPLY=${REPLY//$'\n'/ }
}

# nccl_node_clique: sets REPLY to this node's mnnvl fact (above), from the knobs nvidia-smi -q
# prints the Fabric section from (the same defaults).
nccl_node_clique() {
	local i n one="" c
	REPLY=0
	[ "${L_MNNVL:-0}" = 1 ] && [ "${L_FABRIC:-0}" = 1 ] || return 0
	kv gpu-count "$L_GPUS"; n=$REPLY
	for ((i = 0; i < n; i++)); do
		gk fabric-state "$i" Completed; [ "$REPLY" = Completed ] || { REPLY=0; return 0; }
		gk fabric-status "$i" Success; [ "$REPLY" = Success ] || { REPLY=0; return 0; }
		gk fabric-health "$i" Healthy; [ "$REPLY" != Unhealthy ] || { REPLY=0; return 0; }
		gk fabric-cluster-uuid "$i" 9c6f5af3-5b2e-4c1d-a8f7-31e0b6d4c2a9; c=$REPLY
		gk fabric-clique "$i" 4026; c+=/$REPLY
		[ -z "$one" ] || [ "$one" = "$c" ] || { REPLY=0; return 0; }
		one=$c
	done
	REPLY=${one:-0}
}

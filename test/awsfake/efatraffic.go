package awsfake

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// EFA OS-bypass traffic needs a security group that allows all inbound and all outbound
// traffic to and from the group itself; without it the traffic does not arrive and tests stall
// until their timeout (EC2 User Guide, "Get started with EFA", step 1; efa-launch.md). An
// outbound rule to 0.0.0.0/0 does not count: EFA addresses are neither IPv4 nor IPv6, so only a
// rule naming a security group matches them (awslabs/awsome-distributed-ai#546,
// gardener-extension-provider-aws#1832: "Error 4126: Unresponsive receiver" until the
// self-referencing egress rule was added, although egress 0.0.0.0/0 was there). Only protocol
// -1 ("All traffic") carries it: EFA's SRD is neither TCP nor UDP.

// efaTraffic reports whether EFA traffic flows between every pair of the instance's EFA
// interfaces (a device to itself included), and when it does not, why. An instance without EFA
// interfaces has no EFA traffic to block. Runs under s.mu.
func efaTraffic(rd *regionData, r *instanceRec) (bool, string) {
	var efas []*NetworkInterface
	for _, e := range instanceInterfaces(rd, r) {
		if isEFAType(e.InterfaceType) {
			efas = append(efas, e)
		}
	}
	for _, from := range efas {
		for _, to := range efas {
			if !groupsAllow(rd, from.SecurityGroupIDs, to.SecurityGroupIDs, true) {
				return false, fmt.Sprintf("no outbound rule of %s allows all traffic to %s (EFA traffic needs a rule naming the group itself; 0.0.0.0/0 does not carry EFA)",
					strings.Join(from.SecurityGroupIDs, ","), strings.Join(to.SecurityGroupIDs, ","))
			}
			if !groupsAllow(rd, to.SecurityGroupIDs, from.SecurityGroupIDs, false) {
				return false, fmt.Sprintf("no inbound rule of %s allows all traffic from %s", strings.Join(to.SecurityGroupIDs, ","), strings.Join(from.SecurityGroupIDs, ","))
			}
		}
	}
	return true, ""
}

// groupsAllow reports whether one of the groups has an all-traffic rule (outbound with egress,
// inbound otherwise) naming one of the peer groups.
func groupsAllow(rd *regionData, groups, peers []string, egress bool) bool {
	for _, id := range groups {
		g := rd.groups[id]
		if g == nil {
			continue
		}
		for _, p := range *rulesOf(g, egress) {
			if normProtocol(p.Protocol) != "-1" {
				continue
			}
			for _, peer := range p.GroupIDs {
				if slices.Contains(peers, peer) {
					return true
				}
			}
		}
	}
	return false
}

// machineNetwork is what the instance's host must show of its network: the EFA devices of its
// launch and whether their traffic flows. Runs under s.mu.
func machineNetwork(rd *regionData, r *instanceRec) MachineNetwork {
	ok, why := efaTraffic(rd, r)
	return MachineNetwork{EFACards: efaCards(rd, r), EFATraffic: ok, EFATrafficBlockedBy: why}
}

// securityGroupsChanged tells the hosts of instances with EFA interfaces when a rule change
// turned their EFA traffic on or off, as on EC2, where rule changes apply to running instances
// at once. Runs under s.mu.
func (s *Server) securityGroupsChanged(rd *regionData) {
	for _, r := range instancesInLaunchOrder(rd) {
		if r.State == StateTerminated || r.State == StateShuttingDown || len(efaCards(rd, r)) == 0 {
			continue
		}
		n := machineNetwork(rd, r)
		if n.EFATraffic == r.network.EFATraffic {
			continue
		}
		r.network = n
		r.EFATraffic = n.EFATraffic // what the state dump shows
		if s.machines == nil || r.Stuck {
			continue
		}
		m, id := s.machines, r.ID
		s.background(r.machineMu, &work{}, func(ctx context.Context) error {
			if err := m.SetNetwork(ctx, id, n); err != nil {
				return fmt.Errorf("updating the network of %s: %w", id, err)
			}
			return nil
		}, nil)
	}
}

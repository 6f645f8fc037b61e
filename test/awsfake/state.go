package awsfake

import (
	"fmt"
	"hash/fnv"
	"io"
	"sort"
)

type regionData struct {
	images    map[string]*Image
	params    map[string]*Parameter
	instances map[string]*instanceRec
	keyPairs  map[string]*KeyPair // by name
	groups    map[string]*SecurityGroup
	snapshots map[string]*Snapshot
	volumes   map[string]*Volume
	// interfaces (by eni- id), addresses (Elastic IPs, by eipalloc- id) and placementGroups
	// (by pg- id): see netifaces.go, elasticips.go, placementgroups.go.
	interfaces      map[string]*NetworkInterface
	addresses       map[string]*ElasticIP
	placementGroups map[string]*PlacementGroup
	// privateIPs are the subnet addresses interfaces other than the primaries hold.
	privateIPs map[string]bool
	vpc        Vpc
	subnet     Subnet
	// imageSettle/snapshotSettle hold the images and snapshots still pending.
	imageSettle    map[string]*settle
	snapshotSettle map[string]*settle
	// deregistered holds images deregistered lately: EC2 still answers a lookup by id with
	// them, in state "deregistered", for a short interval (DescribeImages reference).
	deregistered map[string]deregisteredImage
}

func newRegionData(region, account string) *regionData {
	rd := &regionData{
		images: map[string]*Image{}, params: map[string]*Parameter{}, instances: map[string]*instanceRec{},
		keyPairs: map[string]*KeyPair{}, groups: map[string]*SecurityGroup{}, snapshots: map[string]*Snapshot{},
		volumes: map[string]*Volume{}, imageSettle: map[string]*settle{}, snapshotSettle: map[string]*settle{},
		deregistered: map[string]deregisteredImage{}, interfaces: map[string]*NetworkInterface{}, addresses: map[string]*ElasticIP{},
		placementGroups: map[string]*PlacementGroup{}, privateIPs: map[string]bool{},
	}
	rd.vpc = Vpc{ID: fmt.Sprintf("vpc-0%016x", regionHash(region, "vpc")), CIDRBlock: "172.31.0.0/16", IsDefault: true}
	rd.subnet = Subnet{ID: fmt.Sprintf("subnet-0%016x", regionHash(region, "subnet")), VpcID: rd.vpc.ID,
		AvailabilityZone: region + "a", CIDRBlock: "172.31.0.0/20", DefaultForAz: true}
	// A VPC's default group lets in all traffic from its own members and lets out all traffic
	// to anywhere (VPC User Guide, "Default security groups for your VPCs"); it has no outbound
	// rule to itself, so EFA traffic does not pass it (see efaTraffic).
	sgID := fmt.Sprintf("sg-0%016x", regionHash(region, "default-sg"))
	sg := &SecurityGroup{ID: sgID, Name: "default", Description: "default VPC security group", VpcID: rd.vpc.ID, OwnerID: account,
		Ingress: []Permission{{Protocol: "-1", FromPort: -1, ToPort: -1, GroupIDs: []string{sgID}}}, Egress: allowAllOutbound()}
	rd.groups[sg.ID] = sg
	return rd
}

// regionHash derives stable per-region ids for the default network.
func regionHash(region, what string) uint64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, region+"|"+what)
	return h.Sum64()
}

// newID returns a fresh, deterministic, real-looking id: prefix, dash, 17
// hex digits. It runs under s.mu.
func (s *Server) newID(prefix string) string {
	for {
		s.idSeq++
		// splitmix64 scatters the sequence so ids look like EC2's.
		z := s.idSeq + 0x9e3779b97f4a7c15
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		id := fmt.Sprintf("%s-0%016x", prefix, z)
		if !s.idTaken(id) {
			return id
		}
	}
}

func (s *Server) idTaken(id string) bool {
	for _, rd := range s.regions {
		if rd.images[id] != nil || rd.instances[id] != nil || rd.snapshots[id] != nil || rd.volumes[id] != nil || rd.groups[id] != nil ||
			rd.interfaces[id] != nil || rd.addresses[id] != nil || rd.placementGroups[id] != nil {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

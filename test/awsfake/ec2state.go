package awsfake

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"
)

// Instance states, as EC2 names them, and their numeric codes.
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
	StateStopping     = "stopping"
	StateStopped      = "stopped"
)

var stateCodes = map[string]int{
	StatePending: 0, StateRunning: 16, StateShuttingDown: 32, StateTerminated: 48, StateStopping: 64, StateStopped: 80,
}

// InstanceVolume is one EBS volume attached to an instance.
type InstanceVolume struct {
	DeviceName          string `json:"device_name"`
	VolumeID            string `json:"volume_id"`
	DeleteOnTermination bool   `json:"delete_on_termination"`
}

// Instance is one EC2 instance as the fake reports it.
type Instance struct {
	ID                    string            `json:"id"`
	Region                string            `json:"region"`
	ImageID               string            `json:"image_id"`
	InstanceType          string            `json:"instance_type"`
	KeyName               string            `json:"key_name,omitempty"`
	VpcID                 string            `json:"vpc_id"`
	SubnetID              string            `json:"subnet_id"`
	AvailabilityZone      string            `json:"availability_zone"`
	SecurityGroupIDs      []string          `json:"security_group_ids,omitempty"`
	Address               string            `json:"address,omitempty"` // public = private IP; empty once terminated
	State                 string            `json:"state"`
	StateReasonCode       string            `json:"state_reason_code,omitempty"`
	StateReasonMessage    string            `json:"state_reason_message,omitempty"`
	StateTransitionReason string            `json:"state_transition_reason,omitempty"`
	LaunchTime            string            `json:"launch_time"`
	Architecture          string            `json:"architecture"`
	RootDeviceName        string            `json:"root_device_name"`
	Volumes               []InstanceVolume  `json:"volumes,omitempty"`
	Layers                []string          `json:"layers,omitempty"` // the AMI's layers the host booted from
	Tags                  map[string]string `json:"tags,omitempty"`
	ClientToken           string            `json:"client_token,omitempty"`
	// Stuck marks an instance the stuck-pending fault keeps in pending.
	Stuck bool `json:"stuck,omitempty"`
}

// KeyPair is one key pair. The private key is handed out once, by
// CreateKeyPair, and never stored.
type KeyPair struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Type        string            `json:"type"`
	Fingerprint string            `json:"fingerprint"`
	PublicKey   string            `json:"public_key"` // OpenSSH authorized_keys line
	CreateTime  string            `json:"create_time"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// SecurityGroup is one security group.
type SecurityGroup struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	VpcID       string            `json:"vpc_id"`
	OwnerID     string            `json:"owner_id"`
	Ingress     []Permission      `json:"ingress,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// Snapshot is one EBS snapshot.
type Snapshot struct {
	ID                string            `json:"id"`
	VolumeID          string            `json:"volume_id"`
	State             string            `json:"state"` // pending, completed, error
	StateMessage      string            `json:"state_message,omitempty"`
	OwnerID           string            `json:"owner_id"`
	Description       string            `json:"description,omitempty"`
	VolumeSize        int               `json:"volume_size"`
	StartTime         string            `json:"start_time"`
	Encrypted         bool              `json:"encrypted,omitempty"`
	CreateVolumeUsers []string          `json:"create_volume_users,omitempty"`
	Tags              map[string]string `json:"tags,omitempty"`
}

// Volume is one EBS volume.
type Volume struct {
	ID                  string            `json:"id"`
	State               string            `json:"state"` // in-use, available
	InstanceID          string            `json:"instance_id,omitempty"`
	DeviceName          string            `json:"device_name,omitempty"`
	SnapshotID          string            `json:"snapshot_id,omitempty"`
	AvailabilityZone    string            `json:"availability_zone"`
	Size                int               `json:"size"`
	VolumeType          string            `json:"volume_type"`
	DeleteOnTermination bool              `json:"delete_on_termination"`
	CreateTime          string            `json:"create_time"`
	Tags                map[string]string `json:"tags,omitempty"`
}

// Vpc is a region's default VPC; Subnet its default subnet.
type Vpc struct {
	ID        string `json:"id"`
	CIDRBlock string `json:"cidr_block"`
	IsDefault bool   `json:"is_default"`
}

// Subnet is one subnet of a VPC.
type Subnet struct {
	ID               string `json:"id"`
	VpcID            string `json:"vpc_id"`
	AvailabilityZone string `json:"availability_zone"`
	CIDRBlock        string `json:"cidr_block"`
	DefaultForAz     bool   `json:"default_for_az"`
}

// work is a machine call running in the background. done and err are
// guarded by Server.mu.
type work struct {
	done bool
	err  error
}

// doneWork is the work of a transition that needs no machine call.
func doneWork() *work { return &work{done: true} }

// settle tracks a resource in a transitional state: it moves on once its
// work is done and it has been reported in the transitional state polls times.
type settle struct {
	work  *work
	polls int
}

type instanceRec struct {
	Instance
	userData      []byte
	authorizedKey string
	settle        settle
	// machineMu serialises this instance's machine calls (a terminate
	// issued while the boot runs waits for the boot).
	machineMu     *sync.Mutex
	seq           uint64 // launch order
	reservationID string
}

type regionData struct {
	images    map[string]*Image
	params    map[string]*Parameter
	instances map[string]*instanceRec
	keyPairs  map[string]*KeyPair // by name
	groups    map[string]*SecurityGroup
	snapshots map[string]*Snapshot
	volumes   map[string]*Volume
	vpc       Vpc
	subnet    Subnet
	// imageSettle/snapshotSettle hold the images and snapshots still pending.
	imageSettle    map[string]*settle
	snapshotSettle map[string]*settle
	// deregistered holds images deregistered lately: EC2 still answers a lookup by id with
	// them, in state "deregistered", for a short interval (DescribeImages reference).
	deregistered map[string]deregisteredImage
}

// deregisteredImage is an image as it was deregistered, and when.
type deregisteredImage struct {
	img Image
	at  time.Time
}

// DeregisteredVisible is how long a deregistered image still answers DescribeImages by id.
// EC2 documents "a short interval" and no figure; a minute covers the calls a client makes
// right after deregistering (amazon-ebs's artifact cleanup describes the image again).
const DeregisteredVisible = time.Minute

// regionHash derives stable per-region ids for the default network.
func regionHash(region, what string) uint64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, region+"|"+what)
	return h.Sum64()
}

func newRegionData(region, account string) *regionData {
	rd := &regionData{
		images: map[string]*Image{}, params: map[string]*Parameter{}, instances: map[string]*instanceRec{},
		keyPairs: map[string]*KeyPair{}, groups: map[string]*SecurityGroup{}, snapshots: map[string]*Snapshot{},
		volumes: map[string]*Volume{}, imageSettle: map[string]*settle{}, snapshotSettle: map[string]*settle{},
		deregistered: map[string]deregisteredImage{},
	}
	rd.vpc = Vpc{ID: fmt.Sprintf("vpc-0%016x", regionHash(region, "vpc")), CIDRBlock: "172.31.0.0/16", IsDefault: true}
	rd.subnet = Subnet{ID: fmt.Sprintf("subnet-0%016x", regionHash(region, "subnet")), VpcID: rd.vpc.ID,
		AvailabilityZone: region + "a", CIDRBlock: "172.31.0.0/20", DefaultForAz: true}
	sg := &SecurityGroup{ID: fmt.Sprintf("sg-0%016x", regionHash(region, "default-sg")), Name: "default",
		Description: "default VPC security group", VpcID: rd.vpc.ID, OwnerID: account}
	rd.groups[sg.ID] = sg
	return rd
}

// resourceTypeOf maps an id to the EC2 resource type CreateTags accepts.
func resourceTypeOf(id string) (string, bool) {
	prefix, _, ok := strings.Cut(id, "-")
	if !ok || !idShape.MatchString(id) {
		return "", false
	}
	switch prefix {
	case "i":
		return "instance", true
	case "ami":
		return "image", true
	case "snap":
		return "snapshot", true
	case "vol":
		return "volume", true
	case "sg":
		return "security-group", true
	case "key":
		return "key-pair", true
	case "vpc":
		return "vpc", true
	case "subnet":
		return "subnet", true
	}
	return "", false
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
		if rd.images[id] != nil || rd.instances[id] != nil || rd.snapshots[id] != nil || rd.volumes[id] != nil || rd.groups[id] != nil {
			return true
		}
	}
	return false
}

// First and last loopback addresses handed to instances: 127.0.0.1 is the
// host's own, and the simulated hosts' sshd each bind one of these.
var (
	firstInstanceAddr = netip.MustParseAddr("127.0.0.2")
	lastInstanceAddr  = netip.MustParseAddr("127.0.255.254")
)

// allocAddress returns the lowest free loopback address. It runs under s.mu.
func (s *Server) allocAddress(instanceID string) (string, bool) {
	for a := firstInstanceAddr; a.Compare(lastInstanceAddr) <= 0; a = a.Next() {
		b := a.As4()
		if b[3] == 0 || b[3] == 255 {
			continue
		}
		if _, used := s.addresses[a.String()]; used {
			continue
		}
		// With simulated hosts, an address where something already answers
		// on port 22 (another fake's host, a test's sshd) is not free.
		if s.machines != nil && s.addrBusy(a.String()) {
			continue
		}
		s.addresses[a.String()] = instanceID
		return a.String(), true
	}
	return "", false
}

// sshListening reports whether something accepts TCP on addr:22.
func sshListening(addr string) bool { return listening(addr, "22") }

func listening(addr, port string) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, port), 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func (s *Server) releaseAddress(addr string) {
	if addr != "" {
		delete(s.addresses, addr)
	}
}

// ec2Time formats t as EC2 does in XML timestamps.
func ec2Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// machineTimeout bounds one machine call, so a wedged boot cannot keep an
// instance pending forever.
const machineTimeout = 20 * time.Minute

// background runs op (a machine call) off the request path, serialised per
// instance by lock, then records its outcome in w and calls after (both
// under s.mu). It runs under s.mu.
func (s *Server) background(lock *sync.Mutex, w *work, op func(ctx context.Context) error, after func(error)) {
	if s.closed {
		w.done, w.err = true, fmt.Errorf("the fake is shutting down")
		if after != nil {
			after(w.err)
		}
		return
	}
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		lock.Lock()
		ctx, cancel := context.WithTimeout(s.bgCtx, machineTimeout)
		err := op(ctx)
		cancel()
		lock.Unlock()
		s.mu.Lock()
		w.done, w.err = true, err
		if after != nil {
			after(err)
		}
		s.mu.Unlock()
		if err != nil {
			s.logf("machine call failed: %v", err)
		}
	}()
}

// advance moves a transitional resource on when it may: its work is done
// and it has been seen in the transitional state TransitionPolls times. It
// reports whether the caller should apply the next state. Runs under s.mu.
func (s *Server) advance(st *settle) bool {
	if st.work == nil || !st.work.done {
		return false
	}
	if st.polls < s.transitionPolls {
		st.polls++
		return false
	}
	return true
}

// observeInstance is called for every instance a DescribeInstances (or
// DescribeInstanceStatus) answer includes, before rendering it.
func (s *Server) observeInstance(rd *regionData, r *instanceRec) {
	switch r.State {
	case StatePending, StateStopping, StateShuttingDown:
	default:
		return
	}
	if r.Stuck || !s.advance(&r.settle) {
		return
	}
	err := r.settle.work.err
	r.settle = settle{}
	now := s.now().UTC().Format("2006-01-02 15:04:05 GMT")
	switch r.State {
	case StatePending:
		if err != nil {
			// EC2 moves a launch that fails inside the service to terminated
			// with Server.InternalError; the host was torn down by the boot
			// goroutine.
			s.finishTerminate(rd, r)
			r.StateReasonCode = "Server.InternalError"
			r.StateReasonMessage = "Server.InternalError: Internal error on launch: " + err.Error()
			r.StateTransitionReason = fmt.Sprintf("Server.InternalError (%s)", now)
			return
		}
		r.State = StateRunning
	case StateStopping:
		if err != nil {
			// The host did not stop; say so instead of pretending.
			r.State = StateRunning
			r.StateReasonCode = "Server.InternalError"
			r.StateReasonMessage = "Server.InternalError: stop failed: " + err.Error()
			return
		}
		r.State = StateStopped
		r.StateReasonCode = "Client.UserInitiatedShutdown"
		r.StateReasonMessage = "Client.UserInitiatedShutdown: User initiated shutdown"
		r.StateTransitionReason = fmt.Sprintf("User initiated (%s)", now)
	case StateShuttingDown:
		s.finishTerminate(rd, r)
		if err != nil {
			r.StateReasonMessage += " (teardown reported: " + err.Error() + ")"
		}
	}
}

// finishTerminate moves an instance to terminated: its address goes back to
// the pool and its delete-on-termination volumes go away. Runs under s.mu.
func (s *Server) finishTerminate(rd *regionData, r *instanceRec) {
	r.State = StateTerminated
	s.releaseAddress(r.Address)
	r.Address = ""
	for _, v := range r.Volumes {
		vol := rd.volumes[v.VolumeID]
		if vol == nil {
			continue
		}
		if vol.DeleteOnTermination {
			delete(rd.volumes, v.VolumeID)
			continue
		}
		vol.State, vol.InstanceID = "available", ""
	}
}

// observeImage settles a pending image (and is a no-op for others).
func (s *Server) observeImage(rd *regionData, img *Image) {
	st := rd.imageSettle[img.ID]
	if st == nil || img.State != "pending" || !s.advance(st) {
		return
	}
	delete(rd.imageSettle, img.ID)
	err := st.work.err
	if err != nil {
		img.State = "failed"
		img.StateReasonCode = "Server.InternalError"
		img.StateReasonMessage = "Server.InternalError: capturing the instance's disk failed: " + err.Error()
	} else {
		img.State = "available"
	}
	// An image is available only once its snapshots are complete, whether
	// or not anyone polled them.
	for _, bd := range img.BlockDevices {
		sn := rd.snapshots[bd.SnapshotID]
		if sn == nil || sn.State != "pending" {
			continue
		}
		delete(rd.snapshotSettle, sn.ID)
		if err != nil {
			sn.State, sn.StateMessage = "error", err.Error()
		} else {
			sn.State = "completed"
		}
	}
}

// observeSnapshot settles a pending snapshot.
func (s *Server) observeSnapshot(rd *regionData, sn *Snapshot) {
	st := rd.snapshotSettle[sn.ID]
	if st == nil || sn.State != "pending" || !s.advance(st) {
		return
	}
	delete(rd.snapshotSettle, sn.ID)
	if err := st.work.err; err != nil {
		sn.State, sn.StateMessage = "error", err.Error()
		return
	}
	sn.State = "completed"
}

// copyTags returns a copy of m (nil stays nil).
func copyTags(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// applyTags merges tags into *m, creating the map when needed.
func applyTags(m *map[string]string, tags []Tag) {
	if len(tags) == 0 {
		return
	}
	if *m == nil {
		*m = map[string]string{}
	}
	for _, t := range tags {
		(*m)[t.Key] = t.Value
	}
}

// tagsFor collects the tags of the specs for one resource type.
func tagsFor(specs []TagSpecification, resourceType string) []Tag {
	var out []Tag
	for _, s := range specs {
		if s.ResourceType == resourceType {
			out = append(out, s.Tags...)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

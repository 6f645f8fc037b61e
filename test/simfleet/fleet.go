// Package simfleet runs the simulated DLAMI hosts behind the fake EC2 endpoint's instances
// (awsfake.Machines): each instance is a test/simhost host booted from its AMI's root
// filesystem layers on its own loopback address with sshd on port 22; stopping it powers it
// off and keeps its disk, a snapshot captures that disk as a new read-only layer, and
// terminating it deletes everything. Nothing a host mounted or started outlives Terminate or
// Close.
//
// On disk, under Options.StateRoot:
//
//	instances/<instance-id>/   one host's test/simhost state (upper/ is its disk)
//	layers/<n>-<instance-id>/  read-only layers captured by Snapshot
package simfleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// SSHPort is where every simulated instance's sshd listens, as on EC2: templates need no
// ssh_port.
const SSHPort = 22

// Options configures a Fleet.
type Options struct {
	// SimhostDir is test/simhost of this checkout: boot, teardown, build-rootfs.
	SimhostDir string
	// StateRoot holds the instances' disks and the captured layers; created if missing.
	// Keep it short: every layer path of an AMI goes into one overlayfs mount option.
	StateRoot string
	// Log receives one line per machine event; nil discards them.
	Log io.Writer
}

// Fleet implements awsfake.Machines with simulated DLAMI hosts. Its methods are safe for
// concurrent use; operations on one instance run one at a time.
type Fleet struct {
	simhost  string
	root     string
	procRoot string
	sysRoot  string
	log      io.Writer

	baseOnce sync.Mutex // held while the base rootfs is resolved (build-rootfs may take minutes)
	base     string     // the lowest layer of every host: StateRoot/base, or the cache's tree
	basePin  *os.File   // shared flock on the cache's tree when base could not be a private link copy

	mu        sync.Mutex
	instances map[string]*instance
	layers    map[string]bool // layers this fleet captured: the only ones Start stacks
	layerSeq  int
	closed    bool
}

var _ awsfake.Machines = (*Fleet)(nil)

type machineState int

const (
	booting machineState = iota
	running
	stopped
)

func (s machineState) String() string {
	return [...]string{"booting", "running", "stopped"}[s]
}

type instance struct {
	mu      sync.Mutex // serializes operations on this instance; held by a boot in progress
	id      string
	address string
	dir     string
	// state and gone are written under mu and f.mu both, so either lock suffices to read them.
	state machineState
	gone  bool // terminated: the entry is being removed
}

// New checks the options and prepares the state root. It starts nothing: the base root
// filesystem is resolved (and built if missing) by the first Start.
func New(o Options) (*Fleet, error) {
	if o.SimhostDir == "" {
		return nil, errors.New("simfleet: Options.SimhostDir is empty: pass the checkout's test/simhost directory")
	}
	simhost, err := filepath.Abs(o.SimhostDir)
	if err != nil {
		return nil, fmt.Errorf("simfleet: Options.SimhostDir %q: %w", o.SimhostDir, err)
	}
	for _, script := range []string{"boot", "teardown", "build-rootfs"} {
		if st, err := os.Stat(filepath.Join(simhost, script)); err != nil || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("simfleet: Options.SimhostDir %s has no executable %s: pass the checkout's test/simhost directory", simhost, script)
		}
	}
	if o.StateRoot == "" {
		return nil, errors.New("simfleet: Options.StateRoot is empty: pass a directory for the instances' disks (e.g. a mktemp -d under /tmp)")
	}
	root, err := filepath.Abs(o.StateRoot)
	if err != nil {
		return nil, fmt.Errorf("simfleet: Options.StateRoot %q: %w", o.StateRoot, err)
	}
	for _, d := range []string{root, filepath.Join(root, "instances"), filepath.Join(root, "layers")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("simfleet: Options.StateRoot: %w", err)
		}
	}
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	return &Fleet{
		simhost: simhost, root: root, procRoot: "/proc", sysRoot: "/sys", log: log,
		instances: map[string]*instance{}, layers: map[string]bool{},
	}, nil
}

// LocateSimhost finds test/simhost of the checkout that contains dir (or one of its parents),
// so that `go run ./test/cmd/dlami-fake-aws --simhost` works from anywhere inside the repository.
func LocateSimhost(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		candidate := filepath.Join(d, "test", "simhost")
		if st, err := os.Stat(filepath.Join(candidate, "boot")); err == nil && st.Mode().IsRegular() {
			return candidate, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("no test/simhost/boot in %s or any parent: run from the packer-plugin-dlami checkout", abs)
		}
	}
}

// StateRoot is the directory holding the fleet's instances and layers.
func (f *Fleet) StateRoot() string { return f.root }

func (f *Fleet) logf(format string, args ...any) {
	fmt.Fprintf(f.log, "simfleet: "+format+"\n", args...)
}

var (
	instanceIDPattern   = regexp.MustCompile(`^i-[0-9a-f]{8,17}$`)
	instanceTypePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)
)

// validateSpec checks a launch before anything is created; the error names the field.
func (f *Fleet) validateSpec(m awsfake.MachineSpec) error {
	if !instanceIDPattern.MatchString(m.InstanceID) {
		return fmt.Errorf("MachineSpec.InstanceID %q is not an EC2 instance ID (i- and 8 to 17 hex digits)", m.InstanceID)
	}
	if !instanceTypePattern.MatchString(m.InstanceType) {
		return fmt.Errorf("MachineSpec.InstanceType %q is not an instance type (e.g. p6-b200.48xlarge)", m.InstanceType)
	}
	ip := net.ParseIP(m.Address)
	if ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		return fmt.Errorf("MachineSpec.Address %q is not an IPv4 loopback address (127.0.0.2, 127.0.0.3, …)", m.Address)
	}
	if m.AuthorizedKey != "" {
		if _, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(m.AuthorizedKey)); err != nil {
			return fmt.Errorf("MachineSpec.AuthorizedKey is not an OpenSSH public key line: %w", err)
		} else if len(bytes.TrimSpace(rest)) > 0 {
			return errors.New("MachineSpec.AuthorizedKey holds more than one line: pass the key pair's public key only")
		}
	}
	for i, l := range m.Layers {
		if !f.layers[l] {
			return fmt.Errorf("MachineSpec.Layers[%d] %q is not a layer this fleet captured (Snapshot returns them)", i, l)
		}
	}
	return validateNetwork(m.Network)
}

// maxNetworkCard bounds MachineSpec.Network.EFACards: the simulated host names an EFA device
// after its card (test/simhost efa-devices.sh), and no EC2 type has more than 32 cards.
const maxNetworkCard = 63

// validateNetwork checks the EFA cards: each once, in card order, within 0..maxNetworkCard.
func validateNetwork(n awsfake.MachineNetwork) error {
	for i, c := range n.EFACards {
		if c < 0 || c > maxNetworkCard {
			return fmt.Errorf("MachineSpec.Network.EFACards[%d] = %d is not a network card index (0-%d)", i, c, maxNetworkCard)
		}
		if i > 0 && c <= n.EFACards[i-1] {
			return fmt.Errorf("MachineSpec.Network.EFACards %v: want each card once, in card order (one EFA per network card)", n.EFACards)
		}
	}
	return nil
}

// networkKnobs are the simulated host's knobs for its instance's network (test/simhost
// sim.sh): efa-cards, the card of each EFA device the launch attached ("none": no EFA device,
// whatever the type), and efa-traffic, whether the security groups let EFA traffic through
// ("blocked": it stalls). Every boot writes both, so an AMI's captured knobs never decide.
func networkKnobs(n awsfake.MachineNetwork) []string {
	cards := "none"
	if len(n.EFACards) > 0 {
		s := make([]string, len(n.EFACards))
		for i, c := range n.EFACards {
			s[i] = strconv.Itoa(c)
		}
		cards = strings.Join(s, ",")
	}
	return []string{"efa-cards=" + cards, "efa-traffic=" + efaTrafficKnob(n.EFATraffic)}
}

func efaTrafficKnob(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "blocked"
}

// EC2HostName is the host name EC2 gives an instance with this private IPv4 address in a
// subnet of hostname type ip-name, the default (ip-10-1-42-17 for 10.1.42.17; EC2 User Guide,
// "Amazon EC2 instance hostname types"), which cloud-init sets as the guest's name when a new
// instance first boots; every simulated instance gets the one of its loopback address. An
// address that is not IPv4 gives "" (validateSpec refuses it before any boot).
func EC2HostName(address string) string {
	ip := net.ParseIP(address).To4()
	if ip == nil {
		return ""
	}
	return fmt.Sprintf("ip-%d-%d-%d-%d", ip[0], ip[1], ip[2], ip[3])
}

// Start boots the host of a new instance and returns once its sshd accepts connections on
// m.Address:22. On any failure nothing of the host is left.
func (f *Fleet) Start(ctx context.Context, m awsfake.MachineSpec) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return fmt.Errorf("simfleet: start %s: the fleet is closed", m.InstanceID)
	}
	if err := f.validateSpec(m); err != nil {
		f.mu.Unlock()
		return fmt.Errorf("simfleet: start %s: %w", m.InstanceID, err)
	}
	if _, ok := f.instances[m.InstanceID]; ok {
		f.mu.Unlock()
		return fmt.Errorf("simfleet: start %s: an instance with this ID already exists", m.InstanceID)
	}
	for id, other := range f.instances {
		// A stopped host listens nowhere; only a booting or running one holds its address.
		if other.address == m.Address && other.state != stopped {
			f.mu.Unlock()
			return fmt.Errorf("simfleet: start %s: address %s is still used by %s", m.InstanceID, m.Address, id)
		}
	}
	inst := &instance{id: m.InstanceID, address: m.Address, dir: filepath.Join(f.root, "instances", m.InstanceID), state: booting}
	inst.mu.Lock()
	defer inst.mu.Unlock()
	f.instances[m.InstanceID] = inst
	f.mu.Unlock()

	err := f.boot(ctx, inst, m)
	if err == nil {
		f.setState(inst, running)
		return nil
	}
	// Leave nothing behind, even when ctx is what failed.
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if terr := f.destroy(cleanup, inst); terr != nil {
		err = errors.Join(err, terr)
	} else {
		f.forget(inst)
	}
	return fmt.Errorf("simfleet: start %s: %w", m.InstanceID, err)
}

func (f *Fleet) boot(ctx context.Context, inst *instance, m awsfake.MachineSpec) error {
	base, err := f.baseRootfs(ctx)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(inst.dir); err != nil {
		return fmt.Errorf("clearing %s: %w", inst.dir, err)
	}
	if err := os.MkdirAll(inst.dir, 0o755); err != nil {
		return err
	}
	env := []string{
		"DLAMI_SIM_ROOTFS=" + base,
		"DLAMI_SIM_ADDR=" + m.Address,
		"DLAMI_SIM_PORT=" + strconv.Itoa(SSHPort),
		"DLAMI_SIM_LAYERS=" + strings.Join(m.Layers, ":"),
		"DLAMI_SIM_HOSTNAME=" + EC2HostName(m.Address),
		// private-ip: the instance's private IPv4 address as EC2 gives it (the loopback
		// address the host listens on), which the IMEX stand-ins bind and name the node by.
		"DLAMI_SIM_KNOBS=" + strings.Join(append([]string{"product-name=" + m.InstanceType, "instance-id=" + m.InstanceID, "private-ip=" + m.Address}, networkKnobs(m.Network)...), " "),
	}
	if m.AuthorizedKey != "" {
		keys := filepath.Join(inst.dir, "authorized_keys.launch")
		if err := os.WriteFile(keys, []byte(strings.TrimSpace(m.AuthorizedKey)+"\n"), 0o600); err != nil {
			return err
		}
		env = append(env, "DLAMI_SIM_AUTHORIZED_KEYS="+keys)
	}
	if len(m.UserData) > 0 {
		// Kept for inspection: the simulated host has no cloud-init to run it.
		if err := os.WriteFile(filepath.Join(inst.dir, "user-data"), m.UserData, 0o600); err != nil {
			return err
		}
		f.logf("%s: user data (%d bytes) saved to %s/user-data; the simulated host does not run it", m.InstanceID, len(m.UserData), inst.dir)
	}
	start := time.Now()
	if err := f.script(ctx, inst.dir, "boot.log", env, "boot", inst.dir); err != nil {
		return err
	}
	f.logf("%s: %s booted on %s:%d in %s (%d AMI layers over %s; %d EFA devices, EFA traffic %s)", m.InstanceID, m.InstanceType, m.Address, SSHPort,
		time.Since(start).Round(time.Millisecond), len(m.Layers), filepath.Base(base), len(m.Network.EFACards), efaTrafficKnob(m.Network.EFATraffic))
	return nil
}

// SetNetwork applies a security group change to the host: its efa-traffic knob follows
// n.EFATraffic at once (a running host's stand-ins read it on every run; a stopped host's disk
// keeps it). EFA devices cannot change: an EFA is attached at launch only (EC2 User Guide,
// "Create and attach an EFA"), so n.EFACards must be what the host booted with.
func (f *Fleet) SetNetwork(ctx context.Context, id string, n awsfake.MachineNetwork) error {
	if err := validateNetwork(n); err != nil {
		return fmt.Errorf("simfleet: set network of %s: %w", id, err)
	}
	inst, err := f.lookup(id)
	if err != nil {
		return fmt.Errorf("simfleet: set network: %w", err)
	}
	defer inst.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("simfleet: set network of %s: %w", id, err)
	}
	// A running host's root is the overlay (merged/); a stopped host's disk is upper/.
	root := filepath.Join(inst.dir, "merged")
	if inst.state == stopped {
		root = filepath.Join(inst.dir, "upper")
	}
	knobs := filepath.Join(root, "etc", "dlami-sim")
	booted, err := os.ReadFile(filepath.Join(knobs, "efa-cards"))
	if err != nil {
		return fmt.Errorf("simfleet: set network of %s: reading the host's efa-cards knob: %w", id, err)
	}
	if want := strings.TrimPrefix(networkKnobs(n)[0], "efa-cards="); strings.TrimSpace(string(booted)) != want {
		return fmt.Errorf("simfleet: set network of %s: the host booted with EFA cards %q, the update says %q: EFA devices are attached at launch only", id, strings.TrimSpace(string(booted)), want)
	}
	if err := writeFileAtomic(filepath.Join(knobs, "efa-traffic"), efaTrafficKnob(n.EFATraffic)+"\n"); err != nil {
		return fmt.Errorf("simfleet: set network of %s: %w", id, err)
	}
	why := ""
	if !n.EFATraffic && n.EFATrafficBlockedBy != "" {
		why = ": " + n.EFATrafficBlockedBy
	}
	f.logf("%s: EFA traffic %s (security groups changed%s)", id, efaTrafficKnob(n.EFATraffic), why)
	return nil
}

// writeFileAtomic replaces path with content through a rename, so a stand-in never reads half a knob.
func writeFileAtomic(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".knob-*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// baseRootfs resolves the cached DLAMI root filesystem once per fleet and pins it: every
// layer this fleet captures is a diff against it, so it must not change or vanish under the
// fleet, while build-rootfs replaces (and prunes) cached trees whenever test/simhost changes.
// The fleet's own hard-linked copy (StateRoot/base, ~0.4 s, no data copied) survives that;
// where hard links cannot be made (another filesystem) it holds a shared flock on the cached
// tree instead, which a pruning build-rootfs may honour.
func (f *Fleet) baseRootfs(ctx context.Context) (string, error) {
	f.baseOnce.Lock()
	defer f.baseOnce.Unlock()
	if f.base != "" {
		return f.base, nil
	}
	cached := os.Getenv("DLAMI_SIM_ROOTFS")
	if cached == "" {
		var out, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, filepath.Join(f.simhost, "build-rootfs"))
		cmd.Env = launchEnv(nil)
		cmd.Stdout, cmd.Stderr = &out, &stderr
		f.logf("resolving the simulated DLAMI root filesystem (test/simhost/build-rootfs; a cold build takes minutes)")
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("test/simhost/build-rootfs: %w: %s", err, lastLines(stderr.String(), 10))
		}
		cached = strings.TrimSpace(out.String())
	}
	if st, err := os.Stat(filepath.Join(cached, "etc")); err != nil || !st.IsDir() {
		return "", fmt.Errorf("the simulated DLAMI rootfs %q has no etc/ (DLAMI_SIM_ROOTFS or build-rootfs output)", cached)
	}
	own := filepath.Join(f.root, "base")
	if err := os.RemoveAll(own + ".partial"); err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cp := exec.CommandContext(ctx, "cp", "-al", cached, own+".partial")
	cp.Stderr = &stderr
	if err := cp.Run(); err == nil {
		if err := os.Rename(own+".partial", own); err != nil {
			return "", fmt.Errorf("publishing the fleet's rootfs %s: %w", own, err)
		}
		f.base = own
		f.logf("base root filesystem: %s (hard links to %s)", own, cached)
		return own, nil
	}
	_ = os.RemoveAll(own + ".partial")
	f.logf("warning: cannot hard-link %s into %s (%s); using it in place, pinned with a shared flock", cached, own, strings.TrimSpace(stderr.String()))
	pin, err := os.Open(cached)
	if err != nil {
		return "", fmt.Errorf("pinning the rootfs %s: %w", cached, err)
	}
	if err := syscall.Flock(int(pin.Fd()), syscall.LOCK_SH); err != nil {
		pin.Close()
		return "", fmt.Errorf("pinning the rootfs %s: flock: %w", cached, err)
	}
	f.base, f.basePin = cached, pin
	return cached, nil
}

// launchEnv is this process's environment without the launch settings of test/simhost/boot
// (a caller's DLAMI_SIM_LAYERS must never leak into a host), plus extra.
func launchEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "DLAMI_SIM_ROOTFS", "DLAMI_SIM_ADDR", "DLAMI_SIM_PORT", "DLAMI_SIM_LAYERS",
			"DLAMI_SIM_AUTHORIZED_KEYS", "DLAMI_SIM_KNOBS", "DLAMI_SIM_HOSTNAME", "DLAMI_SIM_STATE":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// script runs test/simhost/<name> args… with its output appended to dir/logName, in its own
// process group so that a cancelled ctx kills everything it started that is not a host yet.
func (f *Fleet) script(ctx context.Context, dir, logName string, env []string, name string, args ...string) error {
	logPath := filepath.Join(dir, logName)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, filepath.Join(f.simhost, name), args...)
	cmd.Env = launchEnv(env)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(logPath)
		return fmt.Errorf("test/simhost/%s %s: %w\n%s", name, strings.Join(args, " "), err, lastLines(string(b), 15))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lookup returns the instance, locked. Unknown IDs are an error naming the ID.
func (f *Fleet) lookup(id string) (*instance, error) {
	f.mu.Lock()
	inst, ok := f.instances[id]
	f.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no simulated instance %q in this fleet", id)
	}
	inst.mu.Lock()
	if inst.gone {
		inst.mu.Unlock()
		return nil, fmt.Errorf("simulated instance %q is terminated", id)
	}
	return inst, nil
}

// Stop powers the host off: every process of it is killed and everything it mounted,
// the overlay included, is unmounted; its disk (upper/) stays. Stopping a stopped instance
// does nothing.
func (f *Fleet) Stop(ctx context.Context, id string) error {
	inst, err := f.lookup(id)
	if err != nil {
		return fmt.Errorf("simfleet: stop: %w", err)
	}
	defer inst.mu.Unlock()
	if inst.state == stopped {
		return nil
	}
	if err := f.powerOff(ctx, inst); err != nil {
		return fmt.Errorf("simfleet: stop %s: %w", id, err)
	}
	f.setState(inst, stopped)
	f.logf("%s: stopped (disk kept in %s/upper)", id, inst.dir)
	return nil
}

// powerOff runs teardown and then proves the host is gone: no mount and no process left.
func (f *Fleet) powerOff(ctx context.Context, inst *instance) error {
	if _, err := os.Stat(inst.dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := f.script(ctx, inst.dir, "teardown.log", nil, "teardown", inst.dir); err != nil {
		return err
	}
	return f.checkGone(inst.dir)
}

// checkGone fails when anything under dir is still mounted, running or attached.
func (f *Fleet) checkGone(dir string) error {
	mounts, err := f.mountsUnder(dir)
	if err != nil {
		return err
	}
	procs, err := ProcessesUsing(f.procRoot, dir, f.simhost)
	if err != nil {
		return err
	}
	loops, err := LoopDevicesUsing(f.sysRoot, dir)
	if err != nil {
		return err
	}
	var problems []string
	if len(mounts) > 0 {
		problems = append(problems, "still mounted: "+strings.Join(mounts, ", "))
	}
	for _, p := range procs {
		problems = append(problems, "still running: "+p.String())
	}
	if len(loops) > 0 {
		problems = append(problems, "loop devices still attached: "+strings.Join(loops, ", "))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s is not shut down: %s", dir, strings.Join(problems, "; "))
	}
	return nil
}

func (f *Fleet) mountsUnder(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(f.procRoot, "self", "mountinfo"))
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	mounts, err := ParseMountinfo(string(b))
	if err != nil {
		return nil, err
	}
	return MountsUnder(mounts, dir), nil
}

// Snapshot captures the stopped instance's disk (its overlay upper directory: the changes
// against the layers it booted from) as a new read-only layer and returns its path.
func (f *Fleet) Snapshot(ctx context.Context, id string) (string, error) {
	inst, err := f.lookup(id)
	if err != nil {
		return "", fmt.Errorf("simfleet: snapshot: %w", err)
	}
	defer inst.mu.Unlock()
	if inst.state != stopped {
		return "", fmt.Errorf("simfleet: snapshot %s: the instance is %s; stop it first (its disk is still changing)", id, inst.state)
	}
	// A mounted overlay would mean the disk is still in use: fail rather than copy a torn disk.
	if err := f.checkGone(inst.dir); err != nil {
		return "", fmt.Errorf("simfleet: snapshot %s: %w", id, err)
	}
	f.mu.Lock()
	f.layerSeq++
	layer := filepath.Join(f.root, "layers", fmt.Sprintf("%d-%s", f.layerSeq, id))
	f.mu.Unlock()
	start := time.Now()
	if err := copyLayer(ctx, filepath.Join(inst.dir, "upper"), layer); err != nil {
		return "", fmt.Errorf("simfleet: snapshot %s: %w", id, err)
	}
	f.mu.Lock()
	f.layers[layer] = true
	f.mu.Unlock()
	f.logf("%s: disk captured as layer %s in %s", id, layer, time.Since(start).Round(time.Millisecond))
	return layer, nil
}

// Terminate tears the host down and deletes its disk. Unknown or already terminated
// instances are not an error.
func (f *Fleet) Terminate(ctx context.Context, id string) error {
	f.mu.Lock()
	inst, ok := f.instances[id]
	f.mu.Unlock()
	if !ok {
		return nil
	}
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if inst.gone {
		return nil
	}
	if err := f.destroy(ctx, inst); err != nil {
		return fmt.Errorf("simfleet: terminate %s: %w", id, err)
	}
	f.forget(inst)
	f.logf("%s: terminated", id)
	return nil
}

// destroy powers the host off and deletes its state directory, never while anything is
// mounted below it (a recursive delete would reach into the mounts).
func (f *Fleet) destroy(ctx context.Context, inst *instance) error {
	if err := f.powerOff(ctx, inst); err != nil {
		return err
	}
	if err := os.RemoveAll(inst.dir); err != nil {
		return fmt.Errorf("deleting %s: %w", inst.dir, err)
	}
	return nil
}

func (f *Fleet) forget(inst *instance) {
	f.mu.Lock()
	inst.gone = true
	delete(f.instances, inst.id)
	f.mu.Unlock()
}

// setState records a state change; the caller holds inst.mu.
func (f *Fleet) setState(inst *instance, s machineState) {
	f.mu.Lock()
	inst.state = s
	f.mu.Unlock()
}

// Close terminates every instance, deletes the captured layers and releases the rootfs,
// then proves nothing of the fleet is mounted or running. It is what the fake's SIGTERM
// path calls; a second Close does nothing more.
func (f *Fleet) Close(ctx context.Context) error {
	f.mu.Lock()
	f.closed = true
	ids := make([]string, 0, len(f.instances))
	for id := range f.instances {
		ids = append(ids, id)
	}
	f.mu.Unlock()

	var errs []error
	for _, id := range ids {
		if err := f.Terminate(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	if err := f.checkGone(f.root); err != nil {
		errs = append(errs, err)
	} else {
		f.mu.Lock()
		f.layers = map[string]bool{}
		f.mu.Unlock()
		// base/ is only ever the fleet's hard-linked copy: deleting it leaves the cache alone.
		for _, d := range []string{"layers", "instances", "base"} {
			if err := os.RemoveAll(filepath.Join(f.root, d)); err != nil {
				errs = append(errs, err)
			}
		}
		_ = os.Remove(f.root) // only when empty: the caller may keep other files there
	}
	f.baseOnce.Lock()
	if f.basePin != nil {
		f.basePin.Close()
		f.basePin = nil
	}
	f.baseOnce.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("simfleet: close: %w", errors.Join(errs...))
	}
	f.logf("closed: every instance terminated, nothing mounted or running under %s", f.root)
	return nil
}

package simfleet

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"golang.org/x/crypto/ssh"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/fiinfo"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/rdmastat"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// Addresses of this package's hosts: far above those the fake EC2 endpoint hands out from
// 127.0.0.2 up, so an end-to-end run on the same machine never collides with these tests.
const (
	addrA = "127.0.200.1"
	addrB = "127.0.200.2"
	addrC = "127.0.200.3"
)

// hostFleet returns a fleet over this checkout's test/simhost, or skips/fails (CI=true)
// with what is missing.
func hostFleet(t *testing.T) *Fleet {
	t.Helper()
	if testing.Short() {
		t.Skip("boots simulated hosts; skipped with -short")
	}
	if os.Getuid() != 0 {
		needRoot(t, "booting simulated hosts (mount, chroot, mknod)")
	}
	fs, err := os.ReadFile("/proc/filesystems")
	if err != nil || !bytes.Contains(fs, []byte("overlay")) {
		missing(t, "overlayfs is not available in this kernel (modprobe overlay)")
	}
	for _, tool := range []string{"debootstrap", "dpkg-deb", "dpkg-scanpackages", "ssh-keygen", "ss", "flock", "prlimit", "gcc", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(t, "%s not found: run test/simhost/install-deps", tool)
		}
	}
	if out, err := exec.Command("ss", "-Htln", "sport = :22").Output(); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(line); len(f) >= 4 && (strings.HasPrefix(f[3], "0.0.0.0:") || strings.HasPrefix(f[3], "*:") || strings.HasPrefix(f[3], "[::]:")) {
				missing(t, "something listens on all addresses on port 22 (%s), so no simulated instance can: make this machine's sshd listen on a specific address (ListenAddress)", f[3])
			}
		}
	}
	simhost, err := filepath.Abs("../../test/simhost")
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	f, err := New(Options{SimhostDir: simhost, StateRoot: shortTempDir(t), Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := f.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		t.Logf("fleet log:\n%s", log.String())
	})
	return f
}

// shortTempDir is a state root with a short path: layer paths end up in one mount option.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fleet-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	return dir
}

type keyPair struct {
	line   string
	signer ssh.Signer
}

func newKeyPair(t *testing.T) keyPair {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{line: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " packer_test", signer: signer}
}

// run executes a command as ubuntu on addr:22 with the key and returns its output.
func (k keyPair) run(t *testing.T, addr, command string) string {
	t.Helper()
	return k.runStdin(t, addr, command, "")
}

// runStdin runs a command as ubuntu on addr:22 with stdin and returns its output.
func (k keyPair) runStdin(t *testing.T, addr, command, stdin string) string {
	t.Helper()
	client, err := ssh.Dial("tcp", net.JoinHostPort(addr, "22"), &ssh.ClientConfig{
		User: "ubuntu", Auth: []ssh.AuthMethod{ssh.PublicKeys(k.signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // a fresh simulated host: nothing to pin
		Timeout:         10 * time.Second,
	})
	if err != nil {
		t.Fatalf("ssh ubuntu@%s: %v", addr, err)
	}
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	sess.Stdin = strings.NewReader(stdin)
	out, err := sess.CombinedOutput(command)
	if err != nil {
		t.Fatalf("ssh ubuntu@%s %q: %v\n%s", addr, command, err, out)
	}
	return string(out)
}

// assertGone fails when anything under dir is mounted or running.
func assertGone(t *testing.T, f *Fleet, dir string) {
	t.Helper()
	if err := f.checkGone(dir); err != nil {
		t.Error(err)
	}
}

// TestFleetBakeCycle is one amazon-ebs bake as the fake EC2 endpoint drives it, twice: launch
// a DLAMI instance, change its disk over SSH, stop, snapshot, then launch a second instance
// from the captured layer (golden on golden) and check it sees exactly the changes.
func TestFleetBakeCycle(t *testing.T) {
	f := hostFleet(t)
	ctx := context.Background()
	key := newKeyPair(t)

	start := time.Now()
	err := f.Start(ctx, awsfake.MachineSpec{
		InstanceID: "i-0aaaaaaaaaaaaaaa1", InstanceType: "p5.48xlarge", Address: addrA, AuthorizedKey: key.line,
		UserData: []byte("#cloud-config\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot of a base DLAMI instance: %s", time.Since(start).Round(time.Millisecond))
	got := key.run(t, addrA, "cat /sys/devices/virtual/dmi/id/product_name /sys/devices/virtual/dmi/id/board_asset_tag")
	if got != "p5.48xlarge\ni-0aaaaaaaaaaaaaaa1\n" {
		t.Errorf("product name and instance ID = %q, want the launch's", got)
	}
	if err := f.Start(ctx, awsfake.MachineSpec{InstanceID: "i-0aaaaaaaaaaaaaaa2", InstanceType: "p5.48xlarge", Address: addrA}); err == nil ||
		!strings.Contains(err.Error(), "still used by i-0aaaaaaaaaaaaaaa1") {
		t.Errorf("a second instance on a running instance's address: err = %v", err)
	}
	// A bake's changes of all three kinds an overlay records: a new file, a deleted file
	// (whiteout) and a directory replaced wholesale (opaque).
	key.run(t, addrA, "sudo sh -c 'echo baked > /etc/golden && rm /etc/issue.net && rm -rf /usr/share/doc/gpg && mkdir /usr/share/doc/gpg && echo new > /usr/share/doc/gpg/NEW'")

	if _, err := f.Snapshot(ctx, "i-0aaaaaaaaaaaaaaa1"); err == nil || !strings.Contains(err.Error(), "stop it first") {
		t.Errorf("snapshot of a running instance: err = %v", err)
	}
	if err := f.Stop(ctx, "i-0aaaaaaaaaaaaaaa1"); err != nil {
		t.Fatal(err)
	}
	inst1 := filepath.Join(f.StateRoot(), "instances", "i-0aaaaaaaaaaaaaaa1")
	assertGone(t, f, inst1)
	if _, err := os.Stat(filepath.Join(inst1, "upper", "etc", "golden")); err != nil {
		t.Errorf("stop lost the disk: %v", err)
	}
	if err := f.Stop(ctx, "i-0aaaaaaaaaaaaaaa1"); err != nil {
		t.Errorf("stopping a stopped instance: %v", err)
	}
	layer, err := f.Snapshot(ctx, "i-0aaaaaaaaaaaaaaa1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(layer, filepath.Join(f.StateRoot(), "layers")+"/") {
		t.Errorf("layer %s is outside the fleet's layers/", layer)
	}
	if err := f.Terminate(ctx, "i-0aaaaaaaaaaaaaaa1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(inst1); !os.IsNotExist(err) {
		t.Errorf("terminate left %s: %v", inst1, err)
	}
	if err := f.Terminate(ctx, "i-0aaaaaaaaaaaaaaa1"); err != nil {
		t.Errorf("terminate is idempotent, got %v", err)
	}

	// The AMI outlives its instance: a new instance boots from it on the same address.
	key2 := newKeyPair(t)
	start = time.Now()
	if err := f.Start(ctx, awsfake.MachineSpec{
		InstanceID: "i-0bbbbbbbbbbbbbbb1", InstanceType: "p6-b200.48xlarge", Address: addrA, AuthorizedKey: key2.line, Layers: []string{layer},
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("boot of an instance from a one-layer AMI: %s", time.Since(start).Round(time.Millisecond))
	got = key2.run(t, addrA, "cat /etc/golden; ls /usr/share/doc/gpg; test -e /etc/issue.net && echo issue.net-present; cat /sys/devices/virtual/dmi/id/product_name")
	if want := "baked\nNEW\np6-b200.48xlarge\n"; got != want {
		t.Errorf("instance from the layer sees %q, want %q (new file, opaque dir, whiteout, its own instance type)", got, want)
	}
	if err := f.Stop(ctx, "i-0bbbbbbbbbbbbbbb1"); err != nil {
		t.Fatal(err)
	}
	assertGone(t, f, f.StateRoot())
}

// TestFleetCloseTerminatesEverything is the fake's SIGTERM path: running, stopped and
// half-started instances all go, and nothing of them is mounted or running afterwards.
func TestFleetCloseTerminatesEverything(t *testing.T) {
	f := hostFleet(t)
	ctx := context.Background()
	key := newKeyPair(t)
	for i, addr := range []string{addrB, addrC} {
		if err := f.Start(ctx, awsfake.MachineSpec{
			InstanceID: fmt.Sprintf("i-0ccccccccccccccc%d", i), InstanceType: "p6-b200.48xlarge", Address: addr, AuthorizedKey: key.line,
		}); err != nil {
			t.Fatal(err)
		}
	}
	// A session left open, with a process inside the host, as Packer leaves one when killed.
	client, err := ssh.Dial("tcp", addrB+":22", &ssh.ClientConfig{
		User: "ubuntu", Auth: []ssh.AuthMethod{ssh.PublicKeys(key.signer)}, HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Start("sleep 600"); err != nil {
		t.Fatal(err)
	}
	if err := f.Stop(ctx, "i-0ccccccccccccccc1"); err != nil {
		t.Fatal(err)
	}
	procs, err := ProcessesUsing("/proc", f.StateRoot(), f.simhost)
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) == 0 {
		t.Fatal("no process found inside the running host: the check below would prove nothing")
	}
	root := f.StateRoot()
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := ParseMountinfo(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if left := MountsUnder(mounts, root); len(left) > 0 {
		t.Errorf("still mounted after Close: %q", left)
	}
	if left, err := ProcessesUsing("/proc", root, f.simhost); err != nil || len(left) > 0 {
		t.Errorf("still running after Close: %v %v", left, err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("Close left %s: %v", root, err)
	}
	if err := f.Close(ctx); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// TestFleetStartFailsCleanly: a launch that cannot boot (the address's port 22 is taken)
// fails with the reason and leaves nothing behind; so does a launch whose context ends.
func TestFleetStartFailsCleanly(t *testing.T) {
	f := hostFleet(t)
	ln, err := net.Listen("tcp", addrC+":22")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = f.Start(context.Background(), awsfake.MachineSpec{InstanceID: "i-0ddddddddddddddd1", InstanceType: "p5.48xlarge", Address: addrC})
	if err == nil || !strings.Contains(err.Error(), "already taken by "+addrC+":22") {
		t.Errorf("err = %v, want the taken address named", err)
	}
	assertGone(t, f, f.StateRoot())
	if _, err := os.Stat(filepath.Join(f.StateRoot(), "instances", "i-0ddddddddddddddd1")); !os.IsNotExist(err) {
		t.Errorf("a failed launch left its state: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = f.Start(ctx, awsfake.MachineSpec{InstanceID: "i-0ddddddddddddddd2", InstanceType: "p5.48xlarge", Address: addrB})
	if err == nil {
		t.Error("a launch with a cancelled context succeeded")
	}
	assertGone(t, f, f.StateRoot())
	if _, err := os.Stat(filepath.Join(f.StateRoot(), "instances", "i-0ddddddddddddddd2")); !os.IsNotExist(err) {
		t.Errorf("a cancelled launch left its state: %v", err)
	}
}

// TestFleetPinsRootfs: the fleet boots from its own hard-linked copy of the cached rootfs, so
// a build-rootfs that replaces and prunes the cached tree (any change under test/simhost)
// cannot pull the lowest layer from under its hosts and images.
func TestFleetPinsRootfs(t *testing.T) {
	f := hostFleet(t)
	base, err := f.baseRootfs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if base != filepath.Join(f.StateRoot(), "base") {
		t.Fatalf("base rootfs %s, want the fleet's own copy under %s", base, f.StateRoot())
	}
	out, err := exec.Command(filepath.Join(f.simhost, "build-rootfs")).Output()
	if err != nil {
		t.Fatal(err)
	}
	cached := strings.TrimSpace(string(out))
	var a, b syscall.Stat_t
	if err := syscall.Stat(filepath.Join(base, "etc", "os-release"), &a); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(filepath.Join(cached, "etc", "os-release"), &b); err != nil {
		t.Fatal(err)
	}
	if a.Ino != b.Ino || a.Dev != b.Dev {
		t.Errorf("base/etc/os-release is inode %d/%d, the cache's %d/%d: want a hard link, not a copy", a.Dev, a.Ino, b.Dev, b.Ino)
	}
}

// TestFleetEFADevicesFollowTheLaunch boots a p5.48xlarge whose launch attached its 32 EFA
// interfaces and a p6-b200.48xlarge launched with one default interface (amazon-ebs's launch),
// then reads them as the plugin's parsers do: the first has exactly 32 EFA PCI functions,
// rdmap devices, fi_info domains and rdma links, in card order; the second has none although
// its type has 8. EFA traffic flows only while the launch's security groups allow it: a
// SetNetwork (a rule revoked) makes the next ping-pong stall until its timeout, silently.
func TestFleetEFADevicesFollowTheLaunch(t *testing.T) {
	f := hostFleet(t)
	ctx := context.Background()
	key := newKeyPair(t)
	var all []int
	for c := 0; c < 32; c++ {
		all = append(all, c)
	}
	if err := f.Start(ctx, awsfake.MachineSpec{InstanceID: "i-0eeeeeeeeeeeeeee1", InstanceType: "p5.48xlarge", Address: addrA, AuthorizedKey: key.line,
		Network: awsfake.MachineNetwork{EFACards: all, EFATraffic: true}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx, awsfake.MachineSpec{InstanceID: "i-0eeeeeeeeeeeeeee2", InstanceType: "p6-b200.48xlarge", Address: addrB, AuthorizedKey: key.line,
		Network: awsfake.MachineNetwork{EFATraffic: true}}); err != nil {
		t.Fatal(err)
	}
	const probe = `for d in /sys/bus/pci/devices/*; do printf '%s %s %s %s\n' "${d##*/}" "$(cat $d/vendor)" "$(cat $d/device)" "$(cat $d/class)"; done
echo ==; ls -1 /sys/class/infiniband; echo ==; /opt/amazon/efa/bin/fi_info -p efa -t FI_EP_RDM 2>&1; echo ==; rdma statistic show`
	type efaView struct{ pci, ib, fi, links []string }
	look := func(addr string) efaView {
		t.Helper()
		parts := strings.Split(key.run(t, addr, probe), "==\n")
		if len(parts) != 4 {
			t.Fatalf("probe output in %d parts", len(parts))
		}
		var v efaView
		inv, err := pci.Parse(parts[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range inv.EFA {
			v.pci = append(v.pci, d.Address)
		}
		for _, n := range strings.Fields(parts[1]) {
			if strings.HasPrefix(n, "rdmap") {
				v.ib = append(v.ib, n)
			}
		}
		if !strings.Contains(parts[2], "No data available") {
			doms, err := fiinfo.ParseDomains(parts[2])
			if err != nil {
				t.Fatalf("fi_info: %v\n%s", err, parts[2])
			}
			for _, d := range doms {
				v.fi = append(v.fi, fiinfo.DeviceName(d))
			}
		}
		if strings.TrimSpace(parts[3]) != "" {
			links, err := rdmastat.Parse(parts[3])
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range links {
				v.links = append(v.links, l.Device)
			}
		}
		return v
	}
	p5 := look(addrA)
	// ls sorts by name; fi_info and rdma list the devices in card order, as the driver
	// registers them: the same set, and card order is ascending PCI bus here.
	sortedFI := slices.Clone(p5.fi)
	slices.Sort(sortedFI)
	if len(p5.pci) != 32 || len(p5.ib) != 32 || strings.Join(sortedFI, " ") != strings.Join(p5.ib, " ") || strings.Join(p5.links, " ") != strings.Join(p5.fi, " ") {
		t.Errorf("p5.48xlarge with 32 EFA attached: %d PCI functions, devices %v, fi_info %v, rdma %v", len(p5.pci), p5.ib, p5.fi, p5.links)
	}
	if !slices.IsSortedFunc(p5.fi, func(a, b string) int { return busOf(a) - busOf(b) }) {
		t.Errorf("fi_info's devices are not in card order: %v", p5.fi)
	}
	// Each device's PCI function sits on the bus its name carries (rdmap<bus>s0, as udev names it).
	for _, name := range p5.fi {
		bus := busOf(name)
		if !slices.ContainsFunc(p5.pci, func(a string) bool { return strings.HasPrefix(a, fmt.Sprintf("0000:%02x:", bus)) }) {
			t.Errorf("device %s (bus %d) has no EFA PCI function on that bus: %v", name, bus, p5.pci)
		}
	}
	if len(p5.fi) > 0 && p5.fi[0] != "rdmap79s0" {
		t.Errorf("first EFA %s, want card 0's rdmap79s0", p5.fi[0])
	}
	if b200 := look(addrB); len(b200.pci)+len(b200.ib)+len(b200.fi)+len(b200.links) != 0 {
		t.Errorf("p6-b200.48xlarge launched with one default interface shows EFA: %+v", b200)
	}

	pingpong := func(port int) string {
		t.Helper()
		return strings.TrimSpace(key.run(t, addrA, fmt.Sprintf(`export FI_EFA_ENABLE_SHM_TRANSFER=0; P=/opt/amazon/efa/bin/fi_pingpong
$P -p efa -e rdm -d rdmap79s0-rdm -B %[1]d -I 10 -S 1024 >/dev/null 2>&1 &
for i in $(seq 50); do [ -e /run/dlami-sim/state/pingpong/%[1]d ] && break; sleep 0.1; done
timeout 4 $P -p efa -e rdm -d rdmap80s0-rdm -P %[1]d -I 10 -S 1024 127.0.0.1 >/dev/null 2>&1; rc=$?; kill %%1 2>/dev/null; echo rc=$rc`, port)))
	}
	if got := pingpong(20300); got != "rc=0" {
		t.Errorf("ping-pong between two EFA devices with the self rules: %s", got)
	}
	if err := f.SetNetwork(ctx, "i-0eeeeeeeeeeeeeee1", awsfake.MachineNetwork{EFACards: all, EFATraffic: false, EFATrafficBlockedBy: "the test revoked it"}); err != nil {
		t.Fatal(err)
	}
	if got := pingpong(20301); got != "rc=124" {
		t.Errorf("ping-pong with the self rule revoked: %s, want the timeout's 124", got)
	}
	if err := f.SetNetwork(ctx, "i-0eeeeeeeeeeeeeee1", awsfake.MachineNetwork{EFACards: all, EFATraffic: true}); err != nil {
		t.Fatal(err)
	}
	if got := pingpong(20302); got != "rc=0" {
		t.Errorf("ping-pong once the rule is back: %s", got)
	}
}

// TestFleetBehindTheFake drives the whole chain as the plugin will: the real AWS SDK asks the
// fake EC2 for a p6-b200.48xlarge with the User Guide's 8-EFA layout in a security group with
// the all-traffic self rules; the fleet boots a host with those 8 devices; revoking the
// outbound self rule through EC2 reaches the running host, and EFA traffic stalls.
func TestFleetBehindTheFake(t *testing.T) {
	f := hostFleet(t)
	fake := awsfake.NewSeeded("us-east-1")
	fake.SetMachines(f)
	srv := fake.Start()
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := fake.Close(ctx); err != nil {
			t.Errorf("closing the fake: %v", err)
		}
	})
	c := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKEFAKEFAKE0001", "fakeSecret", "")})
	ctx := context.Background()
	kp, err := c.CreateKeyPair(ctx, &ec2.CreateKeyPairInput{KeyName: aws.String("efa"), KeyType: ec2types.KeyTypeEd25519})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey([]byte(aws.ToString(kp.KeyMaterial)))
	if err != nil {
		t.Fatal(err)
	}
	key := keyPair{signer: signer}
	sg, err := c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("efa"), Description: aws.String("EFA self rules")})
	if err != nil {
		t.Fatal(err)
	}
	self := []ec2types.IpPermission{{IpProtocol: aws.String("-1"), UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: sg.GroupId}}}}
	if _, err := c.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: sg.GroupId, IpPermissions: self}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AuthorizeSecurityGroupEgress(ctx, &ec2.AuthorizeSecurityGroupEgressInput{GroupId: sg.GroupId, IpPermissions: self}); err != nil {
		t.Fatal(err)
	}
	// P6-B200 use case 1 (UG-EFA): 0/0 interface, 0/1 efa-only, cards 1-7 device 0 efa-only.
	var nis []ec2types.InstanceNetworkInterfaceSpecification
	add := func(card, dev int32, typ string) {
		nis = append(nis, ec2types.InstanceNetworkInterfaceSpecification{NetworkCardIndex: aws.Int32(card), DeviceIndex: aws.Int32(dev),
			InterfaceType: aws.String(typ), Groups: []string{aws.ToString(sg.GroupId)}, DeleteOnTermination: aws.Bool(true)})
	}
	add(0, 0, "interface")
	add(0, 1, "efa-only")
	for card := int32(1); card < 8; card++ {
		add(card, 0, "efa-only")
	}
	ami := awsfake.SeedAMIID("us-east-1", awsfake.SeedName("x86_64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", "20261002"))
	out, err := c.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(ami), InstanceType: "p6-b200.48xlarge", MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		KeyName: aws.String("efa"), NetworkInterfaces: nis})
	if err != nil {
		t.Fatal(err)
	}
	id, addr := aws.ToString(out.Instances[0].InstanceId), aws.ToString(out.Instances[0].PrivateIpAddress)
	defer func() {
		_, _ = c.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	}()
	waitState := func(want ec2types.InstanceStateName) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			d, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
			if err != nil {
				t.Fatal(err)
			}
			if d.Reservations[0].Instances[0].State.Name == want {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("%s never became %s", id, want)
	}
	waitState(ec2types.InstanceStateNameRunning)
	if got := strings.TrimSpace(key.run(t, addr, "/opt/amazon/efa/bin/fi_info -p efa -t FI_EP_RDM | grep -c 'domain: rdmap'; ls /sys/class/infiniband | grep -c rdmap")); got != "8\n8" {
		t.Fatalf("EFA domains and devices: %q, want 8 and 8", got)
	}
	pingpong := func(port int) string {
		t.Helper()
		return strings.TrimSpace(key.run(t, addr, fmt.Sprintf(`export FI_EFA_ENABLE_SHM_TRANSFER=0; P=/opt/amazon/efa/bin/fi_pingpong
$P -p efa -e rdm -d rdmap79s0-rdm -B %[1]d -I 10 -S 1024 >/dev/null 2>&1 &
for i in $(seq 50); do [ -e /run/dlami-sim/state/pingpong/%[1]d ] && break; sleep 0.1; done
timeout 4 $P -p efa -e rdm -d rdmap99s0-rdm -P %[1]d -I 10 -S 1024 127.0.0.1 >/dev/null 2>&1; rc=$?; kill %%1 2>/dev/null; echo rc=$rc`, port)))
	}
	if got := pingpong(20400); got != "rc=0" {
		t.Errorf("EFA ping-pong in a group with the self rules: %s", got)
	}
	if _, err := c.RevokeSecurityGroupEgress(ctx, &ec2.RevokeSecurityGroupEgressInput{GroupId: sg.GroupId, IpPermissions: self}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for key.run(t, addr, "cat /etc/dlami-sim/efa-traffic") != "blocked\n" {
		if time.Now().After(deadline) {
			t.Fatal("the revoked rule never reached the host's efa-traffic knob")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := pingpong(20401); got != "rc=124" {
		t.Errorf("EFA ping-pong after the outbound self rule was revoked: %s, want the timeout's 124", got)
	}
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	waitState(ec2types.InstanceStateNameTerminated)
	if st := fake.State("us-east-1", true).Regions["us-east-1"]; len(st.NetworkInterfaces) != 0 {
		t.Errorf("interfaces left after termination: %+v", st.NetworkInterfaces)
	}
}

// busOf is the PCI bus an EFA device's name carries (rdmap<bus>s0), -1 when it carries none.
func busOf(name string) int {
	bus, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "rdmap"), "s0"))
	if err != nil {
		return -1
	}
	return bus
}

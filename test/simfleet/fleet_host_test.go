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
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

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
	client, err := ssh.Dial("tcp", net.JoinHostPort(addr, "22"), &ssh.ClientConfig{
		User:            "ubuntu",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(k.signer)},
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

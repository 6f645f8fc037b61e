package simfleet

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// needRoot skips outside CI and fails with CI=true: a missing prerequisite never passes. Under
// -short it skips even with CI=true: the short run is the unit run (the release hook's, on a
// non-root runner where CI=true too), and `make test` runs these as root.
func needRoot(t *testing.T, what string) {
	t.Helper()
	if skip, why := rootlessShort(testing.Short(), what); skip {
		t.Skip(why)
	}
	missing(t, "needs root for %s; run the tests as root (sudo)", what)
}

// needProcRoot: Close, and ProcessesUsing on this machine's /proc, read every process's
// /proc/<pid>/root, which only root may (a non-root runner gets EACCES for root's processes).
func needProcRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		needRoot(t, "reading every process's /proc/<pid>/root (the fleet's Close looks for its hosts' processes)")
	}
}

// rootlessShort says whether a test that needs root and does not have it is skipped because
// of -short, and why.
func rootlessShort(short bool, what string) (bool, string) {
	if !short {
		return false, ""
	}
	return true, "needs root for " + what + ": skipped with -short, the unit run (make test runs it as root)"
}

func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("precondition (CI=true): "+format, args...)
	}
	t.Skipf("precondition: "+format+" (with CI=true this fails)", args...)
}

// The release hook runs `go test -short ./...` as a non-root user with CI=true (GitHub sets it):
// a root-only test must skip there, naming why, and still fail in CI's full run.
func TestNeedRootSkipsUnderShortEvenInCI(t *testing.T) {
	t.Setenv("CI", "true")
	skip, why := rootlessShort(true, "mknod")
	if !skip || !strings.Contains(why, "needs root for mknod") || !strings.Contains(why, "-short") {
		t.Errorf("-short: skip %v %q, want a skip naming root and -short", skip, why)
	}
	if skip, _ := rootlessShort(false, "mknod"); skip {
		t.Error("without -short the root-only test was skipped: with CI=true it must fail")
	}
}

// fakeSimhost is a directory with executable boot, teardown and build-rootfs that do
// nothing: enough for New and for the checks that come before any script runs.
func fakeSimhost(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, s := range []string{"boot", "teardown", "build-rootfs"} {
		if err := os.WriteFile(filepath.Join(dir, s), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func publicKeyLine(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " packer_temp"
}

func TestNewChecksOptions(t *testing.T) {
	needProcRoot(t)
	sim := fakeSimhost(t)
	noTeardown := t.TempDir()
	if err := os.WriteFile(filepath.Join(noTeardown, "boot"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"no simhost", Options{StateRoot: t.TempDir()}, "Options.SimhostDir is empty"},
		{"simhost without scripts", Options{SimhostDir: noTeardown, StateRoot: t.TempDir()}, "no executable teardown"},
		{"no state root", Options{SimhostDir: sim}, "Options.StateRoot is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
	root := filepath.Join(t.TempDir(), "fleet")
	f, err := New(Options{SimhostDir: sim, StateRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"instances", "layers"} {
		if st, err := os.Stat(filepath.Join(root, d)); err != nil || !st.IsDir() {
			t.Errorf("%s/%s not created: %v", root, d, err)
		}
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("Close left the state root it emptied: %v", err)
	}
}

func TestStartRejectsBadSpecs(t *testing.T) {
	f, err := New(Options{SimhostDir: fakeSimhost(t), StateRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	good := awsfake.MachineSpec{InstanceID: "i-0123456789abcdef0", InstanceType: "p6-b200.48xlarge", Address: "127.0.0.2", AuthorizedKey: publicKeyLine(t)}
	key := publicKeyLine(t)
	tests := []struct {
		name   string
		mutate func(*awsfake.MachineSpec)
		want   string
	}{
		{"instance ID", func(m *awsfake.MachineSpec) { m.InstanceID = "../../etc" }, "MachineSpec.InstanceID"},
		{"empty instance type", func(m *awsfake.MachineSpec) { m.InstanceType = "" }, "MachineSpec.InstanceType"},
		{"instance type with a slash", func(m *awsfake.MachineSpec) { m.InstanceType = "p5/48xlarge" }, "MachineSpec.InstanceType"},
		{"routable address", func(m *awsfake.MachineSpec) { m.Address = "10.0.0.7" }, "MachineSpec.Address"},
		{"IPv6 loopback", func(m *awsfake.MachineSpec) { m.Address = "::1" }, "MachineSpec.Address"},
		{"no address", func(m *awsfake.MachineSpec) { m.Address = "" }, "MachineSpec.Address"},
		{"key", func(m *awsfake.MachineSpec) { m.AuthorizedKey = "ssh-ed25519 not-base64" }, "MachineSpec.AuthorizedKey"},
		{"two keys", func(m *awsfake.MachineSpec) { m.AuthorizedKey = key + "\n" + key }, "more than one line"},
		{"foreign layer", func(m *awsfake.MachineSpec) { m.Layers = []string{"/"} }, "not a layer this fleet captured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := good
			tt.mutate(&m)
			err := f.Start(context.Background(), m)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
			if entries, _ := os.ReadDir(filepath.Join(f.StateRoot(), "instances")); len(entries) != 0 {
				t.Errorf("a rejected launch left %d entries under instances/", len(entries))
			}
		})
	}
}

func TestOperationsOnUnknownInstances(t *testing.T) {
	needProcRoot(t)
	f, err := New(Options{SimhostDir: fakeSimhost(t), StateRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := f.Stop(ctx, "i-0123456789abcdef0"); err == nil || !strings.Contains(err.Error(), `no simulated instance "i-0123456789abcdef0"`) {
		t.Errorf("Stop: err = %v", err)
	}
	if _, err := f.Snapshot(ctx, "i-0123456789abcdef0"); err == nil || !strings.Contains(err.Error(), "no simulated instance") {
		t.Errorf("Snapshot: err = %v", err)
	}
	if err := f.Terminate(ctx, "i-0123456789abcdef0"); err != nil {
		t.Errorf("Terminate of an unknown instance must be a no-op (idempotent), got %v", err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	err = f.Start(ctx, awsfake.MachineSpec{InstanceID: "i-0123456789abcdef0", InstanceType: "p5.48xlarge", Address: "127.0.0.2"})
	if err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Start after Close: err = %v", err)
	}
}

func TestLaunchEnvDropsInheritedLaunchSettings(t *testing.T) {
	t.Setenv("DLAMI_SIM_LAYERS", "/etc")
	t.Setenv("DLAMI_SIM_PORT", "2222")
	t.Setenv("DLAMI_SIM_HOSTNAME", "inherited")
	t.Setenv("DLAMI_SIM_MIRROR", "http://mirror.example")
	env := launchEnv([]string{"DLAMI_SIM_PORT=22"})
	joined := "\n" + strings.Join(env, "\n") + "\n"
	if strings.Contains(joined, "\nDLAMI_SIM_LAYERS=") || strings.Contains(joined, "\nDLAMI_SIM_PORT=2222\n") || strings.Contains(joined, "\nDLAMI_SIM_HOSTNAME=") {
		t.Errorf("inherited launch settings leak into a host: %q", env)
	}
	if !strings.Contains(joined, "\nDLAMI_SIM_PORT=22\n") || !strings.Contains(joined, "\nDLAMI_SIM_MIRROR=http://mirror.example\n") {
		t.Errorf("launchEnv lost the fleet's own settings or the mirror: %q", env)
	}
}

func TestLocateSimhost(t *testing.T) {
	want, err := filepath.Abs("../../test/simhost")
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{".", "testdata", "../../test/e2e"} {
		got, err := LocateSimhost(from)
		if err != nil || got != want {
			t.Errorf("LocateSimhost(%q) = %q, %v; want %q", from, got, err, want)
		}
	}
	if _, err := LocateSimhost(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no test/simhost/boot") {
		t.Errorf("outside a checkout: err = %v", err)
	}
}

// recordingSimhost is a fake test/simhost whose boot writes the launch's knobs where the real
// one does (STATE/merged/etc/dlami-sim/NAME) and keeps DLAMI_SIM_KNOBS in STATE/knobs.
func recordingSimhost(t *testing.T) string {
	t.Helper()
	dir := fakeSimhost(t)
	boot := `#!/bin/bash
set -eu
printf '%s\n' "$DLAMI_SIM_KNOBS" >"$1/knobs"
printf '%s\n' "$DLAMI_SIM_HOSTNAME" >"$1/hostname"
mkdir -p "$1/merged/etc/dlami-sim"
for kv in $DLAMI_SIM_KNOBS; do printf '%s\n' "${kv#*=}" >"$1/merged/etc/dlami-sim/${kv%%=*}"; done
`
	if err := os.WriteFile(filepath.Join(dir, "boot"), []byte(boot), 0o755); err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(filepath.Join(rootfs, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "build-rootfs"), []byte("#!/bin/sh\necho "+rootfs+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The launch's network reaches the host as knobs on every boot (efa-cards in card order, or
// "none"; efa-traffic), and a security group change updates efa-traffic on the running or
// stopped host, never its EFA devices.
func TestNetworkKnobs(t *testing.T) {
	needProcRoot(t)
	f, err := New(Options{SimhostDir: recordingSimhost(t), StateRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	ctx := context.Background()
	eight := []int{0, 1, 2, 3, 4, 5, 6, 7}
	if err := f.Start(ctx, awsfake.MachineSpec{InstanceID: "i-0eeeeeeeeeeeeeee1", InstanceType: "p6-b200.48xlarge", Address: "127.0.0.2",
		Network: awsfake.MachineNetwork{EFACards: eight}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx, awsfake.MachineSpec{InstanceID: "i-0eeeeeeeeeeeeeee2", InstanceType: "p5.48xlarge", Address: "127.0.0.3",
		Network: awsfake.MachineNetwork{EFATraffic: true}}); err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(f.StateRoot(), "instances", rel))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read("i-0eeeeeeeeeeeeeee1/knobs"); !strings.HasSuffix(got, " efa-cards=0,1,2,3,4,5,6,7 efa-traffic=blocked") {
		t.Errorf("DLAMI_SIM_KNOBS of an 8-EFA launch without the self rules: %q", got)
	}
	if got := read("i-0eeeeeeeeeeeeeee2/knobs"); !strings.HasSuffix(got, " efa-cards=none efa-traffic=allowed") {
		t.Errorf("DLAMI_SIM_KNOBS of a default launch: %q", got)
	}
	// EC2's private IPv4 address of each instance: the address it listens on.
	if a, b := read("i-0eeeeeeeeeeeeeee1/merged/etc/dlami-sim/private-ip"), read("i-0eeeeeeeeeeeeeee2/merged/etc/dlami-sim/private-ip"); a != "127.0.0.2" || b != "127.0.0.3" {
		t.Errorf("private-ip knobs of the instances on 127.0.0.2 and 127.0.0.3: %q, %q", a, b)
	}
	// Each instance is named after its own private address, as EC2 names it.
	if a, b := read("i-0eeeeeeeeeeeeeee1/hostname"), read("i-0eeeeeeeeeeeeeee2/hostname"); a != "ip-127-0-0-2" || b != "ip-127-0-0-3" {
		t.Errorf("DLAMI_SIM_HOSTNAME of the instances on 127.0.0.2 and 127.0.0.3: %q, %q", a, b)
	}
	if err := f.SetNetwork(ctx, "i-0eeeeeeeeeeeeeee1", awsfake.MachineNetwork{EFACards: eight, EFATraffic: true}); err != nil {
		t.Fatal(err)
	}
	if got := read("i-0eeeeeeeeeeeeeee1/merged/etc/dlami-sim/efa-traffic"); got != "allowed" {
		t.Errorf("running host's efa-traffic after the rules came: %q", got)
	}
	if err := f.SetNetwork(ctx, "i-0eeeeeeeeeeeeeee1", awsfake.MachineNetwork{EFACards: []int{0}, EFATraffic: true}); err == nil ||
		!strings.Contains(err.Error(), "EFA devices are attached at launch only") {
		t.Errorf("changing the EFA devices of a running host: %v", err)
	}
	if err := f.SetNetwork(ctx, "i-0ffffffffffffffff", awsfake.MachineNetwork{}); err == nil || !strings.Contains(err.Error(), "no simulated instance") {
		t.Errorf("an unknown instance: %v", err)
	}
	// A stopped host's disk keeps the knob.
	if err := os.MkdirAll(filepath.Join(f.StateRoot(), "instances/i-0eeeeeeeeeeeeeee1/upper/etc/dlami-sim"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.StateRoot(), "instances/i-0eeeeeeeeeeeeeee1/upper/etc/dlami-sim/efa-cards"), []byte("0,1,2,3,4,5,6,7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Stop(ctx, "i-0eeeeeeeeeeeeeee1"); err != nil {
		t.Fatal(err)
	}
	if err := f.SetNetwork(ctx, "i-0eeeeeeeeeeeeeee1", awsfake.MachineNetwork{EFACards: eight}); err != nil {
		t.Fatal(err)
	}
	if got := read("i-0eeeeeeeeeeeeeee1/upper/etc/dlami-sim/efa-traffic"); got != "blocked" {
		t.Errorf("stopped host's efa-traffic: %q", got)
	}
}

func TestEC2HostName(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.5":   "ip-127-0-0-5",
		"10.1.42.17":  "ip-10-1-42-17",
		"127.0.200.1": "ip-127-0-200-1",
		"::1":         "",
		"localhost":   "",
		"":            "",
	} {
		if got := EC2HostName(addr); got != want {
			t.Errorf("EC2HostName(%q) = %q, want %q", addr, got, want)
		}
	}
}

func TestStartRejectsBadNetworks(t *testing.T) {
	f, err := New(Options{SimhostDir: fakeSimhost(t), StateRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cards []int
		want  string
	}{
		{[]int{3, 1}, "in card order"},
		{[]int{2, 2}, "each card once"},
		{[]int{64}, "is not a network card index"},
		{[]int{-1}, "is not a network card index"},
	} {
		err := f.Start(context.Background(), awsfake.MachineSpec{InstanceID: "i-0123456789abcdef0", InstanceType: "p5.48xlarge", Address: "127.0.0.2",
			Network: awsfake.MachineNetwork{EFACards: tc.cards}})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "MachineSpec.Network.EFACards") {
			t.Errorf("EFA cards %v: err = %v, want %q", tc.cards, err, tc.want)
		}
	}
}

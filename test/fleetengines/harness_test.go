// Package fleetengines tests dlami-node-check against the real engines of a fleet, none of them
// written by this project: Debian's slurmctld, slurmd and munge (Slurm 22.05), Debian's
// prometheus-node-exporter with its textfile collector and promtool, and systemd's own
// systemd-analyze and systemctl on every unit the plugin renders.
//
// The node is the simulated DLAMI host (test/simhost) booted inside namespaces of its own
// (./node): a network namespace with loopback only, so the Slurm daemons never touch the
// machine's network, a mount namespace and a PID namespace, so that nothing they start
// outlives the test. The node check that runs there is the real binary (go build of
// ./cmd/dlami-node-check) with the real scontrol; only the GPU tools are the simulation's
// stand-ins (a CPU machine cannot pass the host suite otherwise).
//
// Prerequisites: root, Linux with overlayfs and namespaces, unshare and nsenter, the simulated
// host's (test/simhost/install-deps) and the engines' packages (test/fleetengines/install-deps).
// A missing one skips the test, or fails it with CI=true; -short skips.
package fleetengines

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// missing skips outside CI and fails with CI=true.
func missing(t *testing.T, format string, a ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, a...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("precondition missing (CI=true): %s", msg)
	}
	t.Skipf("precondition missing: %s", msg)
}

// needEngines checks what every test here needs, and the given programs (absolute paths:
// the Debian packages' own).
func needEngines(t *testing.T, programs ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("tests against the real fleet engines boot a simulated host; skipped with -short")
	}
	if os.Geteuid() != 0 {
		missing(t, "must run as root (namespaces, overlayfs, chroot): run with sudo")
	}
	for _, p := range append([]string{"/usr/bin/unshare", "/usr/bin/nsenter", "/usr/sbin/ip"}, programs...) {
		if _, err := os.Stat(p); err != nil {
			missing(t, "%s: %v (run test/fleetengines/install-deps as root)", p, err)
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// script runs one of the harness's scripts (outside any namespace) and returns its last line
// of output (a path).
func script(t *testing.T, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot(t), name), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		missing(t, "%s: %v\n%s", name, err, tail(stderr.String(), 2000))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return lines[len(lines)-1]
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// TestMain removes the node check binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// nodeCheckBinary builds dlami-node-check as `make node-check` does (static, trimmed), once.
func nodeCheckBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fleetengines-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "dlami-node-check")
		cmd := exec.Command("go", "build", "-trimpath", "-o", binPath, "./cmd/dlami-node-check")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/dlami-node-check: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// imageLayer is the part of an image the dlami provisioner's node_check installs (binary,
// config, Slurm wrapper), as one read-only layer over the simulated host.
func imageLayer(t *testing.T, cfg nodeconf.Config) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "image-layer")
	bin, err := os.ReadFile(nodeCheckBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{nodeconf.BinaryPath, bin, 0o755},
		{nodeconf.ConfigPath, cfg.Encode(), 0o644},
		{nodeconf.SlurmWrapperPath, []byte(nodeconf.SlurmWrapper()), 0o755},
	} {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// host is a simulated DLAMI host booted by ./node in namespaces of its own.
type host struct {
	t      *testing.T
	state  string
	pid    int // the namespaces' first process, as this machine numbers it
	merged string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	done   chan error
}

// bootTimeout bounds a boot (the rootfs is cached by then: rootfs() built it).
const bootTimeout = 3 * time.Minute

// rootfs builds (or reuses) the simulated host's rootfs outside the namespaces: a cold build
// needs the Debian mirror, which the namespaces cannot reach.
func rootfs(t *testing.T) string {
	t.Helper()
	return script(t, 30*time.Minute, "test/simhost/build-rootfs")
}

// bootHost boots a simulated host with the layers stacked over its rootfs (lowest first) and
// tears it down when the test ends, checking that nothing of it is left mounted.
func bootHost(t *testing.T, layers ...string) *host {
	t.Helper()
	base := rootfs(t)
	state, err := os.MkdirTemp("", "fleetengines-node-")
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(state, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	h := &host{t: t, state: state, merged: filepath.Join(state, "host", "merged"), done: make(chan error, 1)}
	args := append([]string{"--net", "--pid", "--mount", "--uts", "--ipc", "--fork", "--kill-child",
		filepath.Join(repoRoot(t), "test/fleetengines/node"), state}, layers...)
	h.cmd = exec.Command("/usr/bin/unshare", args...)
	h.cmd.Env = append(os.Environ(), "DLAMI_SIM_ROOTFS="+base)
	h.cmd.Stdout, h.cmd.Stderr = logf, logf
	// ./node waits for this pipe to close: the namespaces end with the test, even a killed one.
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		missing(t, "unshare: %v", err)
	}
	go func() { h.done <- h.cmd.Wait(); logf.Close() }()
	t.Cleanup(h.teardown)
	deadline := time.Now().Add(bootTimeout)
	for {
		if _, err := os.Stat(filepath.Join(state, "ready")); err == nil {
			break
		}
		select {
		case err := <-h.done:
			h.done <- err
			t.Fatalf("the simulated host did not boot (%v):\n%s", err, tail(readFile(filepath.Join(state, "node.log")), 3000))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the simulated host did not boot within %s:\n%s", bootTimeout, tail(readFile(filepath.Join(state, "node.log")), 3000))
		}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(filepath.Join(state, "init.pid"))))
	if err != nil {
		t.Fatalf("init.pid: %v", err)
	}
	h.pid = pid
	return h
}

// teardown closes the pipe ./node waits on and waits for the namespaces to end (killing them
// after a bound), then checks that no mount of the host is left.
func (h *host) teardown() {
	h.stdin.Close()
	select {
	case <-h.done:
	case <-time.After(time.Minute):
		h.t.Errorf("the simulated host did not stop within a minute: killing its namespaces")
		_ = exec.Command("/bin/kill", "-KILL", strconv.Itoa(h.pid)).Run()
		_ = h.cmd.Process.Kill()
		<-h.done
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), h.state) {
		h.t.Errorf("still mounted after the teardown: %s", grepLines(string(mounts), h.state))
		return
	}
	if h.t.Failed() && os.Getenv("DLAMI_FLEET_KEEP") != "" {
		h.t.Logf("kept the host's state in %s", h.state)
		return
	}
	_ = os.RemoveAll(h.state)
}

// path is p inside the host, as this process reaches it: through the namespaces' first
// process's root (the overlay is mounted in their mount namespace only).
func (h *host) path(p string) string {
	return fmt.Sprintf("/proc/%d/root%s", h.pid, filepath.Join(h.merged, p))
}

func (h *host) writeFile(p string, data []byte, mode os.FileMode) {
	h.t.Helper()
	if err := os.MkdirAll(filepath.Dir(h.path(p)), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(h.path(p), data, mode); err != nil {
		h.t.Fatal(err)
	}
}

func (h *host) readFile(p string) string {
	h.t.Helper()
	b, err := os.ReadFile(h.path(p))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

// result is one command's outcome.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, tail(r.stdout, 3000), tail(r.stderr, 3000))
}

// exec runs argv in the node's namespaces; chrooted, it runs on the host, in the host's own
// PID and UTS namespaces (test/simhost's ns_up: its /proc is that namespace's, so /proc/self
// and /dev/fd resolve only inside it), with exactly env as its environment (slurmd gives its
// HealthCheckProgram nothing but SLURMD_NODENAME).
func (h *host) exec(ctx context.Context, chroot bool, env []string, stdin string, argv ...string) (result, error) {
	full := []string{"-t", strconv.Itoa(h.pid), "-m", "-u", "-n", "-p", "-i", "--"}
	if chroot {
		// The host's pid 1 as the node sees it; a reboot starts a new one.
		ns, err := os.ReadFile(filepath.Join(filepath.Dir(h.merged), "ns.pid"))
		if err != nil {
			return result{}, fmt.Errorf("the host's PID namespace: %w", err)
		}
		full = append(full, "/usr/bin/nsenter", "-t", strings.TrimSpace(string(ns)), "-p", "-u", "--",
			"/usr/sbin/chroot", h.merged, "/usr/bin/env", "-i")
		full = append(full, env...)
	}
	full = append(full, argv...)
	cmd := exec.CommandContext(ctx, "/usr/bin/nsenter", full...)
	if !chroot {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &stdout, &stderr, strings.NewReader(stdin)
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	var exit *exec.ExitError
	if errors.As(err, &exit) && ctx.Err() == nil {
		err = nil
	}
	return r, err
}

// must runs argv on the host (chrooted) and fails the test unless it exits 0.
func (h *host) must(argv ...string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := h.exec(ctx, true, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, "", argv...)
	if err != nil || r.code != 0 {
		h.t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, r)
	}
	return r.stdout
}

// Query is probe.Runner on the host: the probe's bundle run by /bin/sh there.
func (h *host) Query(ctx context.Context, cmds []bundle.Command) (map[string]bundle.Section, error) {
	s, err := bundle.Script(cmds)
	if err != nil {
		return nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, bundle.Budget(cmds))
	defer cancel()
	r, err := h.exec(bctx, true, nil, "", "/bin/sh", "-c", s)
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		return nil, fmt.Errorf("the bundle exited %d: %s", r.code, tail(r.stdout+r.stderr, 2000))
	}
	return bundle.Parse(r.stdout, cmds)
}

// writeBOM writes the bill of materials a bake of this host would have written: the running
// kernel and every package the default guard policy guards, as they are now (probe.Snapshot
// and guard.Guarded, the bake's own code), so a healthy host passes against it.
func (h *host) writeBOM() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	snap, err := probe.Snapshot(ctx, h)
	if err != nil {
		h.t.Fatalf("reading the host's packages for its bill of materials: %v", err)
	}
	doc := bom.BOM{GeneratedAt: time.Now().UTC(), PluginVersion: "fleetengines", BuildName: "fleetengines",
		Kernel: snap.RunningKernel, NextBootKernel: snap.NextBootKernel, Guarded: map[string]bom.Package{},
		GuardPolicy: &settings.GuardPolicy{}}
	for _, n := range guard.Guarded(snap, settings.GuardPolicy{}) {
		p := snap.Packages[n]
		doc.Guarded[n] = bom.Package{Version: p.Version, Held: p.Held}
	}
	data, err := doc.Encode()
	if err != nil {
		h.t.Fatal(err)
	}
	h.writeFile(bom.DefaultPath, data, 0o644)
}

// knob sets a simulation knob (test/simhost: /etc/dlami-sim/NAME); "" removes it.
func (h *host) knob(name, value string) {
	h.t.Helper()
	p := h.path("/etc/dlami-sim/" + name)
	if value == "" {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			h.t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(p, []byte(value+"\n"), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

package simhost_test

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/imexctl"
)

// The nvidia-imex-ctl stand-in prints what the imexctl parser reads, in both forms, and the
// JSON it prints is ParallelCluster's, as the parser's fixtures hold it.
func TestIMEXCtlStandIn(t *testing.T) {
	h := newHost(t, "p6-b200.48xlarge", nil)
	const ctl = "pkgs/files/nvidia-imex-ctl"
	fixture := func(name string) imexctl.Domain {
		b, err := os.ReadFile(filepath.Join(h.dir, "../../internal/parse/imexctl/testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		d, err := imexctl.ParseJSON(string(b))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	// By default the service does not run: nothing answers.
	if _, errs, code := h.runErr(nil, ctl, "-N", "-j"); code != 1 || !strings.Contains(errs, "failed to connect to all addresses") {
		t.Errorf("default: exit %d %q", code, errs)
	}
	// The service running: a healthy domain, as ParallelCluster's example.
	h.knob("service-nvidia-imex", "active")
	d, err := imexctl.ParseJSON(h.run(nil, ctl, "-N", "-j"))
	if err != nil || !d.Healthy() || !reflect.DeepEqual(d, fixture("healthy-2node.json")) {
		t.Errorf("healthy: %v %+v", err, d)
	}
	text, err := imexctl.ParseText(h.run(nil, ctl, "-N"))
	if err != nil || !text.Healthy() || len(text.Nodes) != 2 || text.Nodes[1].Host != "192.168.107.187" || text.Nodes[1].Version != "570.172.08" {
		t.Errorf("healthy text: %v %+v", err, text)
	}
	// The placeholder configuration.
	h.knob("imex-ctl", "unconfigured")
	d, err = imexctl.ParseJSON(h.run(nil, ctl, "-N", "-j"))
	if err != nil || d.Healthy() || !d.Unconfigured() || !reflect.DeepEqual(d, fixture("not-configured.json")) {
		t.Errorf("unconfigured: %v %+v", err, d)
	}
	text, err = imexctl.ParseText(h.run(nil, ctl, "-N"))
	if err != nil || text.Status != imexctl.DomainDown || text.Nodes[0].Connections[0].Status != imexctl.ConnInvalid {
		t.Errorf("unconfigured text: %v %+v", err, text)
	}
	// The knob wins over the service.
	h.knob("imex-ctl", "unreachable")
	if _, _, code := h.runErr(nil, ctl, "-N", "-j"); code != 1 {
		t.Errorf("unreachable: exit %d", code)
	}
	h.knob("imex-ctl", "bogus")
	if _, errs, code := h.runErr(nil, ctl, "-N", "-j"); code != 2 || !strings.Contains(errs, "knob imex-ctl=bogus") {
		t.Errorf("bad knob: exit %d %q", code, errs)
	}
}

// The bake's one-node domain on the simulated host: systemctl restarts nvidia-imex (its state
// kept where is-active and nvidia-imex-ctl read it), and a nodes_config.cfg holding only the
// host's own address gives a healthy 1-node domain of that address; knobs break it.
func TestIMEXOneNodeStandIn(t *testing.T) {
	// The private address is a loopback one, as the fleet's: the restart starts the daemon's
	// listener on it.
	h := newHost(t, "p6e-gb200.36xlarge", map[string]string{"service-nvidia-imex": "inactive", "private-ip": "127.0.9.17"})
	h.stopIMEXAtCleanup()
	const ctl, sc = "pkgs/files/nvidia-imex-ctl", "root/usr/bin/systemctl"
	cfg := filepath.Join(h.prefix, "etc/nvidia-imex/nodes_config.cfg")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("127.0.9.17\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, code := h.runErr(nil, ctl, "-N", "-j"); code != 1 {
		t.Errorf("before the restart: exit %d, want 1 (nothing answers)", code)
	}
	h.run(nil, sc, "restart", "nvidia-imex")
	if st, _, _ := h.runErr(nil, sc, "is-active", "nvidia-imex"); strings.TrimSpace(st) != "active" {
		t.Errorf("after the restart: %q", st)
	}
	d, err := imexctl.ParseJSON(h.run(nil, ctl, "-N", "-j"))
	if err != nil || !d.Healthy() || len(d.Nodes) != 1 || d.Nodes[0].Host != "127.0.9.17" {
		t.Errorf("one-node: %v %+v", err, d)
	}
	// Another address in the file: not the one-node domain, once the daemon reads it.
	if err := os.WriteFile(cfg, []byte("10.9.8.7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, err := imexctl.ParseJSON(h.run(nil, ctl, "-N", "-j")); err != nil || !d.Healthy() || len(d.Nodes) != 1 || d.Nodes[0].Host != "127.0.9.17" {
		t.Errorf("the running daemon keeps the list it started with: %v %+v", err, d)
	}
	h.run(nil, sc, "restart", "nvidia-imex")
	if d, err := imexctl.ParseJSON(h.run(nil, ctl, "-N", "-j")); err != nil || len(d.Nodes) == 1 {
		t.Errorf("another address: %v %+v", err, d)
	}
	h.knob("imex-ctl", "down")
	if d, err := imexctl.ParseJSON(h.run(nil, ctl, "-N", "-j")); err != nil || d.Status != imexctl.DomainDown || d.Nodes[0].Status != imexctl.NodeUnavailable {
		t.Errorf("down: %v %+v", err, d)
	}
	h.knob("imex-ctl", "version-mismatch")
	if d, err := imexctl.ParseText(h.run(nil, ctl, "-N")); err != nil || d.Healthy() || d.Nodes[0].Connections[0].Status != imexctl.ConnVersionMismat {
		t.Errorf("version mismatch (text): %v %+v", err, d)
	}
	if d, err := imexctl.ParseJSON(h.run(nil, ctl, "-N", "-j")); err != nil || d.Nodes[0].Connections[0].Status != imexctl.ConnVersionMismat {
		t.Errorf("version mismatch: %v %+v", err, d)
	}
	h.knob("imex-ctl", "")
	h.run(nil, sc, "stop", "nvidia-imex")
	if _, _, code := h.runErr(nil, ctl, "-N", "-j"); code != 1 {
		t.Errorf("stopped: exit %d, want 1", code)
	}
	h.knob("imex-start", "failed")
	if _, errs, code := h.runErr(nil, sc, "restart", "nvidia-imex"); code != 1 || !strings.Contains(errs, "nvidia-imex.service failed") {
		t.Errorf("failed start: exit %d %q", code, errs)
	}
	if st, _, _ := h.runErr(nil, sc, "is-active", "nvidia-imex"); strings.TrimSpace(st) != "failed" {
		t.Errorf("after a failed start: %q", st)
	}
}

// stopIMEXAtCleanup stops the host's IMEX daemon when the test ends: its listener must not
// outlive the test (it also leaves on its own once its pid file is gone with the test's tree).
func (h *host) stopIMEXAtCleanup() {
	h.t.Cleanup(func() {
		h.runErr(nil, "root/usr/bin/systemctl", "stop", "nvidia-imex")
		if b, err := os.ReadFile(filepath.Join(h.prefix, "run/dlami-sim/state/imex-daemon.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// newIMEXHost is a GB200 tray of a fleet: knob private-ip (as the fleet sets it), the
// nvidia-imex unit installed and stopped.
func newIMEXHost(t *testing.T, ip string, knobs map[string]string) *host {
	t.Helper()
	k := map[string]string{"service-nvidia-imex": "inactive", "private-ip": ip}
	for n, v := range knobs {
		k[n] = v
	}
	h := newHost(t, "p6e-gb200.36xlarge", k)
	h.stopIMEXAtCleanup()
	return h
}

// writeFile writes a file of the host's tree (rel: relative to its /).
func (h *host) writeFile(rel, content string) {
	h.t.Helper()
	p := filepath.Join(h.prefix, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		h.t.Fatal(err)
	}
}

// imexView is the host's nvidia-imex-ctl -N -j, parsed by the plugin's parser; the text form
// (-N) must parse to the same states.
func (h *host) imexView() imexctl.Domain {
	h.t.Helper()
	const ctl = "pkgs/files/nvidia-imex-ctl"
	d, err := imexctl.ParseJSON(h.run(nil, ctl, "-N", "-j"))
	if err != nil {
		h.t.Fatal(err)
	}
	text, err := imexctl.ParseText(h.run(nil, ctl, "-N"))
	if err != nil {
		h.t.Fatal(err)
	}
	if text.Status != d.Status || len(text.Nodes) != len(d.Nodes) {
		h.t.Fatalf("the text form says %s with %d nodes, the JSON %s with %d", text.Status, len(text.Nodes), d.Status, len(d.Nodes))
	}
	for i, n := range d.Nodes {
		tn := text.Nodes[i]
		if tn.Host != n.Host || tn.Status != n.Status || tn.Version != n.Version || len(tn.Connections) != len(n.Connections) {
			h.t.Fatalf("node %d: text %+v, JSON %+v", i, tn, n)
		}
		for k, c := range n.Connections {
			if tn.Connections[k].Status != c.Status || tn.Connections[k].Host != c.Host {
				h.t.Fatalf("node %d connection %d: text %+v, JSON %+v", i, k, tn.Connections[k], c)
			}
		}
	}
	return d
}

func connStatus(d imexctl.Domain, from, to int) string {
	if from >= len(d.Nodes) {
		return "no node"
	}
	for _, c := range d.Nodes[from].Connections {
		if c.To == to {
			return c.Status
		}
	}
	return "no connection"
}

// imexAnswer connects to an IMEX daemon's port as a peer daemon does and returns its line.
func imexAnswer(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(c)
	return strings.TrimSpace(string(b)), err
}

// Two trays of a fleet, each running the IMEX daemon's stand-in on its private address, form
// a domain whose state each tray's nvidia-imex-ctl computes by asking the other: UP with both
// READY and every pair CONNECTED when both run with the same list and version; a peer that
// does not answer (its start failed, its daemon killed, the security group without the self
// rule) UNAVAILABLE and NEVER_CONNECTED; a different version VERSION_MISMATCH, a different list
// NODE_MAP_MISMATCH.
func TestIMEXDomainStandIn(t *testing.T) {
	const sc = "root/usr/bin/systemctl"
	const port = "50917"
	a, b := newIMEXHost(t, "127.0.9.1", nil), newIMEXHost(t, "127.0.9.2", nil)
	for _, h := range []*host{a, b} {
		h.writeFile("etc/nvidia-imex/config.cfg", "IMEX_CMD_PORT=50005\nSERVER_PORT="+port+"\n")
	}
	// The same list, spelt differently: comments and blanks do not count.
	a.writeFile("etc/nvidia-imex/nodes_config.cfg", "# the domain\n127.0.9.1\n\n127.0.9.2\n")
	b.writeFile("etc/nvidia-imex/nodes_config.cfg", "127.0.9.1\n 127.0.9.2  # tray 2\n")
	restart := func(h *host) {
		t.Helper()
		h.run(nil, sc, "restart", "nvidia-imex")
	}
	healthy := func(when string) {
		t.Helper()
		for i, h := range []*host{a, b} {
			d := h.imexView()
			if !d.Healthy() || len(d.Nodes) != 2 || d.Nodes[0].Host != "127.0.9.1" || d.Nodes[1].Host != "127.0.9.2" ||
				d.Nodes[0].Version != "570.172.08" || d.Nodes[1].Version != "570.172.08" {
				t.Errorf("%s: tray %d's view: %v %+v", when, i+1, d.Problems(), d)
			}
		}
	}
	notUp := func(when string, h *host, from, to int, want string) imexctl.Domain {
		t.Helper()
		d := h.imexView()
		if d.Status == imexctl.DomainUp || d.Healthy() {
			t.Errorf("%s: the domain is %s: %+v", when, d.Status, d)
		}
		if got := connStatus(d, from, to); got != want {
			t.Errorf("%s: connection %d -> %d is %s, want %s: %+v", when, from, to, got, want, d)
		}
		return d
	}
	restart(a)
	restart(b)
	healthy("both started")

	// The listener: the daemon's line on the tray's own address, nothing on another.
	if line, err := imexAnswer("127.0.9.1:" + port); err != nil || line != "IMEX version=570.172.08 nodes=127.0.9.1,127.0.9.2" {
		t.Errorf("tray 1's daemon answers %q, %v", line, err)
	}
	if _, err := net.DialTimeout("tcp", "127.0.9.3:"+port, time.Second); err == nil {
		t.Errorf("something listens on 127.0.9.3:%s: the daemons must bind their own address only", port)
	}
	// A start of the running unit changes nothing; a changed list counts only after a restart.
	a.writeFile("etc/nvidia-imex/nodes_config.cfg", "127.0.9.1\n")
	a.run(nil, sc, "start", "nvidia-imex")
	healthy("list changed, no restart")
	a.writeFile("etc/nvidia-imex/nodes_config.cfg", "127.0.9.1\n127.0.9.2\n")

	// Tray 2 upgraded its IMEX package only: VERSION_MISMATCH.
	b.writeFile("usr/bin/nvidia-imex", "#!/bin/sh\necho \"IMEX version 595.99.01\"\n")
	restart(b)
	d := notUp("another version", a, 0, 1, imexctl.ConnVersionMismat)
	if d.Nodes[1].Version != "595.99.01" || d.Nodes[1].Status != imexctl.NodeReady {
		t.Errorf("tray 2 in tray 1's view: %+v", d.Nodes[1])
	}
	notUp("another version, tray 2's view", b, 1, 0, imexctl.ConnVersionMismat)
	if err := os.Remove(filepath.Join(b.prefix, "usr/bin/nvidia-imex")); err != nil {
		t.Fatal(err)
	}
	restart(b)
	healthy("the same version again")

	// Tray 2 lists a third node: NODE_MAP_MISMATCH; the third never answers.
	b.writeFile("etc/nvidia-imex/nodes_config.cfg", "127.0.9.1\n127.0.9.2\n127.0.9.3\n")
	restart(b)
	notUp("another list", a, 0, 1, imexctl.ConnNodeMapMismat)
	d = notUp("another list, tray 2's view", b, 1, 0, imexctl.ConnNodeMapMismat)
	if len(d.Nodes) != 3 || d.Nodes[2].Status != imexctl.NodeUnavailable || connStatus(d, 1, 2) != imexctl.ConnNeverConnected || d.Status != imexctl.DomainDown {
		t.Errorf("tray 2's view of 3 nodes: %+v", d)
	}
	b.writeFile("etc/nvidia-imex/nodes_config.cfg", "127.0.9.1\n127.0.9.2\n")
	restart(b)
	healthy("the same list again")

	// Tray 1's security group without the self rule: nothing connects, either way.
	a.knob("efa-traffic", "blocked")
	d = notUp("EFA traffic blocked on tray 1", a, 0, 1, imexctl.ConnNeverConnected)
	if d.Nodes[1].Status != imexctl.NodeUnavailable {
		t.Errorf("tray 2 in blocked tray 1's view: %+v", d.Nodes[1])
	}
	notUp("EFA traffic blocked on tray 1, tray 2's view", b, 1, 0, imexctl.ConnNeverConnected)
	a.knob("efa-traffic", "allowed")
	healthy("EFA traffic allowed again")

	// Tray 2's start fails: its unit failed, its listener gone, tray 1 sees it UNAVAILABLE.
	b.knob("imex-start", "failed")
	if _, _, code := b.runErr(nil, sc, "restart", "nvidia-imex"); code != 1 {
		t.Errorf("failed restart: exit %d", code)
	}
	if _, err := net.DialTimeout("tcp", "127.0.9.2:"+port, time.Second); err == nil {
		t.Errorf("tray 2's listener outlived its failed start")
	}
	d = notUp("tray 2's start failed", a, 0, 1, imexctl.ConnNeverConnected)
	if d.Nodes[1].Status != imexctl.NodeUnavailable || d.Nodes[0].Status != imexctl.NodeReady || d.Status != imexctl.DomainDown {
		t.Errorf("tray 1's view with tray 2 failed: %+v", d)
	}
	b.knob("imex-start", "ok")
	restart(b)
	healthy("tray 2 restarted")

	// Tray 2's daemon killed (pkill -9 nvidia-imex): its unit failed, tray 1 sees it gone.
	pid, err := os.ReadFile(filepath.Join(b.prefix, "run/dlami-sim/state/imex-daemon.pid"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50 && syscall.Kill(p, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if st, _, _ := b.runErr(nil, sc, "is-active", "nvidia-imex"); strings.TrimSpace(st) != "failed" {
		t.Errorf("tray 2 with its daemon killed: %q", st)
	}
	notUp("tray 2's daemon killed", a, 0, 1, imexctl.ConnNeverConnected)

	// A stop ends the listener.
	a.run(nil, sc, "stop", "nvidia-imex")
	if _, err := net.DialTimeout("tcp", "127.0.9.1:"+port, time.Second); err == nil {
		t.Errorf("tray 1's listener outlived its stop")
	}
}

// The one-node domain is the host's own address either way the host knows it: knob
// private-ip, or the source address of the default route (the bake's script); without knob
// private-ip (a single host, not a fleet's) no daemon listens.
func TestIMEXOneNodeByRouteAddress(t *testing.T) {
	out, err := exec.Command("ip", "-4", "route", "get", "1.1.1.1").Output()
	m := regexp.MustCompile(` src ([0-9.]+)`).FindStringSubmatch(string(out))
	if err != nil || m == nil {
		t.Skipf("no default route here (%v): nothing to compare with", err)
	}
	src := m[1]
	const sc = "root/usr/bin/systemctl"
	for _, pip := range []string{"127.0.9.19", ""} {
		knobs := map[string]string{"service-nvidia-imex": "inactive"}
		if pip != "" {
			knobs["private-ip"] = pip
		}
		h := newHost(t, "p6e-gb200.36xlarge", knobs)
		h.stopIMEXAtCleanup()
		h.writeFile("etc/nvidia-imex/nodes_config.cfg", src+"\n")
		h.run(nil, sc, "restart", "nvidia-imex")
		if d := h.imexView(); !d.Healthy() || len(d.Nodes) != 1 || d.Nodes[0].Host != src {
			t.Errorf("private-ip %q, the list holding the route's source %s: %v %+v", pip, src, d.Problems(), d)
		}
		_, err := os.Stat(filepath.Join(h.prefix, "run/dlami-sim/state/imex-daemon.pid"))
		if running := err == nil; running != (pip != "") {
			t.Errorf("private-ip %q: a daemon runs: %v", pip, running)
		}
	}
}

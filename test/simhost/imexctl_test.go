package simhost_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
	h := newHost(t, "p6e-gb200.36xlarge", map[string]string{"service-nvidia-imex": "inactive", "private-ip": "10.1.42.17"})
	const ctl, sc = "pkgs/files/nvidia-imex-ctl", "root/usr/bin/systemctl"
	cfg := filepath.Join(h.prefix, "etc/nvidia-imex/nodes_config.cfg")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("10.1.42.17\n"), 0o644); err != nil {
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
	if err != nil || !d.Healthy() || len(d.Nodes) != 1 || d.Nodes[0].Host != "10.1.42.17" {
		t.Errorf("one-node: %v %+v", err, d)
	}
	// Another address in the file: not the one-node domain.
	if err := os.WriteFile(cfg, []byte("10.9.8.7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
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

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

package checks

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dpkg"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/imexctl"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// gbDomain is a healthy domain of the given node addresses, every pair CONNECTED (the shape of
// ParallelCluster's healthy example, internal/parse/imexctl/testdata/healthy-2node.json).
func gbDomain(status string, hosts ...string) imexctl.Domain {
	d := imexctl.Domain{Status: status}
	for i, h := range hosts {
		n := imexctl.Node{Index: i, Host: h, Status: imexctl.NodeReady, Version: "570.172.08"}
		for j, o := range hosts {
			n.Connections = append(n.Connections, imexctl.Connection{To: j, Host: o, Status: imexctl.ConnConnected})
		}
		d.Nodes = append(d.Nodes, n)
	}
	return d
}

// gbHost is a p6e-gb200 tray with driver 570.172.08 and IMEX as the host owns it: the
// matching package, the unit enabled and running, channel 0 from modprobe.d, a healthy
// 2-node domain.
func gbHost() facts.Host {
	var gpus []nvsmi.GPU
	for i := range 4 {
		gpus = append(gpus, nvsmi.GPU{Index: i, Name: "NVIDIA GB200", DriverVersion: "570.172.08"})
	}
	return facts.Host{
		Instance: facts.Instance{Type: "p6e-gb200.36xlarge", Source: "imds"},
		GPUs:     facts.Read(gpus, ""),
		IMEX: facts.IMEX{
			Packages: facts.Read([]dpkg.Package{{Name: "nvidia-imex-570", Version: "570.172.08-1", Status: "ii ", Installed: true}}, "ii nvidia-imex-570"),
			Enabled:  facts.Read("enabled", "enabled"),
			Active:   facts.Read("active", "active"),
			Channel:  facts.Read(facts.IMEXChannel{Options: []string{"/etc/modprobe.d/nvidia-imex.conf: options nvidia NVreg_CreateImexChannel0=1"}}, ""),
			Domain:   facts.Read(gbDomain(imexctl.DomainUp, "192.168.103.159", "192.168.107.187"), "{...}"),
		},
	}
}

func gbTarget(mode settings.IMEX, typ string) Target {
	t := Target{Checks: settings.Checks{IMEX: mode}, InstanceType: typ}
	if p, ok := profile.Lookup(typ); ok {
		t.Profile = &p
	}
	return t
}

func TestIMEXHost(t *testing.T) {
	const gb = "p6e-gb200.36xlarge"
	for _, tc := range []struct {
		name   string
		tweak  func(*facts.Host)
		mode   settings.IMEX
		status result.Status
		msg    string
	}{
		{"healthy by default on GB200", nil, settings.IMEXUnset, result.Pass, ""},
		{"healthy, set", nil, settings.IMEXHost, result.Pass, ""},
		{"package of another driver", func(h *facts.Host) {
			h.IMEX.Packages.Value[0].Version = "570.133.20-1"
		}, settings.IMEXUnset, result.Fail, "nvidia-imex-570 570.133.20-1 does not match the loaded driver 570.172.08"},
		{"Ubuntu revision matches", func(h *facts.Host) {
			h.IMEX.Packages.Value[0].Version = "1:570.172.08-0ubuntu0.24.04.1"
		}, settings.IMEXUnset, result.Pass, ""},
		{"no package", func(h *facts.Host) { h.IMEX.Packages = facts.Read([]dpkg.Package{}, "") }, settings.IMEXUnset, result.Fail, "no nvidia-imex package is installed"},
		{"packages unreadable", func(h *facts.Host) {
			h.IMEX.Packages = facts.Unread[[]dpkg.Package]("host.imex_packages: command not found (exit 127)", "")
		}, settings.IMEXUnset, result.Fail, "the IMEX packages could not be read: host.imex_packages: command not found"},
		{"driver unknown", func(h *facts.Host) { h.GPUs = facts.Unread[[]nvsmi.GPU]("host.nvidia_smi: exited 9", "") },
			settings.IMEXUnset, result.Fail, "cannot be compared with the loaded driver: the loaded driver version is unknown: host.nvidia_smi: exited 9"},
		{"unit disabled", func(h *facts.Host) { h.IMEX.Enabled.Value = "disabled" }, settings.IMEXUnset, result.Fail, "nvidia-imex is disabled, not enabled"},
		{"unit masked", func(h *facts.Host) { h.IMEX.Enabled.Value = "masked" }, settings.IMEXUnset, result.Fail, "systemctl unmask nvidia-imex"},
		{"unit missing", func(h *facts.Host) { h.IMEX.Enabled.Value = "not-found" }, settings.IMEXUnset, result.Fail, "the nvidia-imex unit does not exist"},
		{"is-enabled unreadable", func(h *facts.Host) { h.IMEX.Enabled = facts.Unread[string]("host.imex_enabled: timed out", "") },
			settings.IMEXUnset, result.Fail, "whether nvidia-imex is enabled could not be read"},
		{"no channel", func(h *facts.Host) { h.IMEX.Channel.Value = facts.IMEXChannel{} }, settings.IMEXUnset, result.Fail, "CUDA_ERROR_NOT_PERMITTED"},
		{"channel device without the option", func(h *facts.Host) { h.IMEX.Channel.Value = facts.IMEXChannel{Device: true} }, settings.IMEXUnset, result.Pass, ""},
		{"channel unreadable", func(h *facts.Host) {
			h.IMEX.Channel = facts.Unread[facts.IMEXChannel]("modprobe configuration /etc/modprobe.d/x.conf could not be read", "")
		}, settings.IMEXUnset, result.Fail, "how IMEX channel 0 is created could not be read"},
		{"service failed", func(h *facts.Host) { h.IMEX.Active.Value = "failed" }, settings.IMEXUnset, result.Fail, "nvidia-imex failed"},
		{"service inactive: domain not judged", func(h *facts.Host) { h.IMEX.Active.Value = "inactive" }, settings.IMEXUnset, result.Warn, "the IMEX domain is not judged: nvidia-imex is inactive"},
		{"ctl missing while running", func(h *facts.Host) {
			h.IMEX.Domain = facts.Unread[imexctl.Domain]("host.imex_ctl: command not found (exit 127): nvidia-imex-ctl: not found (looked in /usr/bin/nvidia-imex-ctl)", "")
		}, settings.IMEXUnset, result.Fail, "its domain could not be read: host.imex_ctl: command not found"},
		{"placeholder domain", func(h *facts.Host) {
			d := gbDomain(imexctl.DomainDown, "0.0.0.0")
			d.Nodes[0].Status, d.Nodes[0].Connections[0].Status = imexctl.NodeUnavailable, imexctl.ConnInvalid
			h.IMEX.Domain.Value = d
		}, settings.IMEXUnset, result.Warn, "only the placeholder address 0.0.0.0"},
		{"domain DOWN", func(h *facts.Host) { h.IMEX.Domain.Value.Status = imexctl.DomainDown }, settings.IMEXUnset, result.Fail, "the IMEX domain is not healthy: domain state DOWN, not UP"},
		{"pair not connected", func(h *facts.Host) {
			h.IMEX.Domain.Value.Nodes[1].Connections[0].Status = imexctl.ConnNeverConnected
		}, settings.IMEXUnset, result.Fail, "node #1 (192.168.107.187) to node #0 (192.168.103.159): NEVER_CONNECTED"},
		{"failures and warnings together", func(h *facts.Host) {
			h.IMEX.Enabled.Value, h.IMEX.Active.Value = "disabled", "inactive"
		}, settings.IMEXUnset, result.Fail, "not enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := gbHost()
			if tc.tweak != nil {
				tc.tweak(&h)
			}
			c := judgeIMEX(facts.Run{Host: h}, gbTarget(tc.mode, gb))
			if c.Status != tc.status || !strings.Contains(c.Message, tc.msg) {
				t.Fatalf("%s %q, want %s %q (actual %q)", c.Status, c.Message, tc.status, tc.msg, c.Actual)
			}
			if c.Status.Failing() && c.Evidence == "" {
				t.Error("a failure without evidence")
			}
			if tc.mode == settings.IMEXUnset && c.Basis != "profile "+gb || tc.mode != settings.IMEXUnset && c.Basis != BasisSetting {
				t.Errorf("basis %q", c.Basis)
			}
		})
	}
}

func TestIMEXDRA(t *testing.T) {
	for _, tc := range []struct {
		enabled, active string
		status          result.Status
		msg             string
	}{
		{"masked", "inactive", result.Pass, "masked"},
		{"not-found", "inactive", result.Pass, "no host nvidia-imex unit"},
		{"enabled", "active", result.Fail, "NV_ERR_IN_USE"},
		{"enabled", "inactive", result.Fail, "the host's nvidia-imex is enabled: it starts at boot"},
		{"masked", "active", result.Fail, "the host's nvidia-imex is active"},
		{"static", "inactive", result.Fail, "is static"},
		{"disabled", "inactive", result.Warn, "disabled but not masked"},
		{"masked-runtime", "inactive", result.Warn, "until the next boot"},
	} {
		h := gbHost()
		h.IMEX.Enabled.Value, h.IMEX.Active.Value = tc.enabled, tc.active
		c := judgeIMEX(facts.Run{Host: h}, gbTarget(settings.IMEXDRA, "p6e-gb200.36xlarge"))
		if c.Status != tc.status || !strings.Contains(c.Message, tc.msg) {
			t.Errorf("%s/%s: %s %q, want %s %q", tc.enabled, tc.active, c.Status, c.Message, tc.status, tc.msg)
		}
	}
	// DRA never asks for the package or the channel: a host without either passes when masked.
	h := gbHost()
	h.IMEX.Enabled.Value, h.IMEX.Active.Value = "masked", "inactive"
	h.IMEX.Packages, h.IMEX.Channel = facts.Read([]dpkg.Package{}, ""), facts.Unread[facts.IMEXChannel]("x", "")
	if c := judgeIMEX(facts.Run{Host: h}, gbTarget(settings.IMEXDRA, "p6e-gb200.36xlarge")); c.Status != result.Pass {
		t.Errorf("dra without package: %s %q", c.Status, c.Message)
	}
	// Unreadable unit state fails closed.
	h = gbHost()
	h.IMEX.Enabled = facts.Unread[string]("host.imex_enabled: command not found (exit 127)", "")
	if c := judgeIMEX(facts.Run{Host: h}, gbTarget(settings.IMEXDRA, "p6e-gb200.36xlarge")); c.Status != result.Fail || !strings.Contains(c.Message, "could not be read") {
		t.Errorf("dra unreadable: %s %q", c.Status, c.Message)
	}
	h = gbHost()
	h.IMEX.Enabled.Value = "masked"
	h.IMEX.Active = facts.Unread[string]("host.imex_active: timed out", "")
	if c := judgeIMEX(facts.Run{Host: h}, gbTarget(settings.IMEXDRA, "p6e-gb200.36xlarge")); c.Status != result.Fail || !strings.Contains(c.Message, "whether nvidia-imex runs could not be read") {
		t.Errorf("dra active unreadable: %s %q", c.Status, c.Message)
	}
}

func TestIMEXNotApplicable(t *testing.T) {
	broken := gbHost()
	broken.IMEX = facts.IMEX{} // nothing read at all: must not matter where IMEX is not judged
	for _, tc := range []struct {
		name, typ string
		mode      settings.IMEX
		msg       string
	}{
		{"p5 default", "p5.48xlarge", settings.IMEXUnset, "instance type p5.48xlarge has no multi-node NVLink domain"},
		{"p6-b200 default", "p6-b200.48xlarge", settings.IMEXUnset, "has no multi-node NVLink domain"},
		{"unprofiled type", "p7-future.48xlarge", settings.IMEXUnset, "p7-future.48xlarge has no multi-node NVLink"},
		{"off on GB200", "p6e-gb200.36xlarge", settings.IMEXOff, `skipped: imex = "off"`},
	} {
		c := judgeIMEX(facts.Run{Host: broken}, gbTarget(tc.mode, tc.typ))
		if c.Status != result.Skip || !strings.Contains(c.Message, tc.msg) {
			t.Errorf("%s: %s %q", tc.name, c.Status, c.Message)
		}
	}
	// host set on a type without multi-node NVLink judges (and fails on nothing read).
	c := judgeIMEX(facts.Run{Host: broken}, gbTarget(settings.IMEXHost, "p5.48xlarge"))
	if c.Status != result.Fail || c.Basis != BasisSetting {
		t.Errorf("imex = host on p5 with nothing read: %s %q", c.Status, c.Message)
	}
}

// oneNode is a bake's one-node domain of 10.1.42.17 that came up: UP, READY, connected to
// itself, everything put back.
func oneNode() *facts.IMEXOneNode {
	return &facts.IMEXOneNode{Ran: true, WasActive: "inactive", Address: "10.1.42.17", ActiveAfter: "active",
		Domain: facts.Read(gbDomain(imexctl.DomainUp, "10.1.42.17"), `{"nodes":{...}}`)}
}

// The bake's one-node domain: judged instead of the running service's domain (an image ships
// nvidia-imex stopped or with placeholders), and the file's restore judged too.
func TestIMEXOneNode(t *testing.T) {
	const gb = "p6e-gb200.36xlarge"
	for _, tc := range []struct {
		name   string
		tweak  func(*facts.IMEXOneNode)
		status result.Status
		msg    string
	}{
		{"up and ready", nil, result.Pass, ""},
		{"domain down, unit failed", func(o *facts.IMEXOneNode) {
			o.Domain.Value.Status, o.Domain.Value.Nodes[0].Status = imexctl.DomainDown, imexctl.NodeUnavailable
			o.ActiveAfter, o.RestartExit = "failed", 1
		}, result.Fail, "the one-node IMEX domain of 10.1.42.17 did not come up within the bake's wait: domain state DOWN, not UP; node #0 (10.1.42.17) UNAVAILABLE, not READY (`systemctl restart nvidia-imex` exited 1; nvidia-imex failed"},
		{"version mismatch", func(o *facts.IMEXOneNode) {
			o.Domain.Value.Status = imexctl.DomainDegraded
			o.Domain.Value.Nodes[0].Connections[0].Status = imexctl.ConnVersionMismat
		}, result.Fail, "version mismatch (!V!)"},
		{"another address", func(o *facts.IMEXOneNode) { o.Address = "10.1.42.18" }, result.Fail, "node #0 is 10.1.42.17, not the tray's own address 10.1.42.18"},
		{"no answer", func(o *facts.IMEXOneNode) {
			o.Domain = facts.Unread[imexctl.Domain]("the script was stopped at its bound before reading the domain", "out")
		}, result.Fail, "did not answer: the script was stopped at its bound"},
		{"the image's list holds real addresses", func(o *facts.IMEXOneNode) {
			o.HadConfig, o.BakedCount, o.BakedAddresses = true, 1, []string{"10.9.8.7"}
		}, result.Fail, "the image's /etc/nvidia-imex/nodes_config.cfg holds 1 real address(es) (10.9.8.7)"},
		{"the image's list is the placeholder", func(o *facts.IMEXOneNode) { o.HadConfig = true }, result.Pass, ""},
		{"unit failed, nothing answers", func(o *facts.IMEXOneNode) {
			o.Domain = facts.Unread[imexctl.Domain]("nvidia-imex-ctl -N -j: not JSON", "Query Status returned error code: 14")
			o.ActiveAfter, o.RestartExit = "failed", 1
		}, result.Fail, "the one-node IMEX domain of 10.1.42.17 never came up: `systemctl restart nvidia-imex` exited 1; nvidia-imex failed"},
		{"not brought up", func(o *facts.IMEXOneNode) { o.Problem = "ip is not installed" }, result.Fail, "could not be brought up: ip is not installed"},
		{"restore failed while up", func(o *facts.IMEXOneNode) {
			o.RestoreProblem = "/etc/nvidia-imex/nodes_config.cfg could not be put back"
		}, result.Fail, "the image must not keep a list of addresses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := gbHost()
			h.IMEX.Active = facts.Read("inactive", "inactive") // as an image ships it
			h.IMEX.Domain = facts.Unread[imexctl.Domain]("nvidia-imex-ctl not run: nvidia-imex is not active", "")
			h.IMEX.OneNode = oneNode()
			if tc.tweak != nil {
				tc.tweak(h.IMEX.OneNode)
			}
			c := judgeIMEX(facts.Run{Host: h}, gbTarget(settings.IMEXUnset, gb))
			if c.Status != tc.status || !strings.Contains(c.Message, tc.msg) {
				t.Fatalf("%s %q, want %s %q (actual %q)", c.Status, c.Message, tc.status, tc.msg, c.Actual)
			}
			if c.Status.Failing() && c.Evidence == "" {
				t.Error("a failure without evidence")
			}
		})
	}
	// Not run (a verification, a node check): the service's state is judged as before.
	h := gbHost()
	h.IMEX.Active.Value = "inactive"
	if c := judgeIMEX(facts.Run{Host: h}, gbTarget(settings.IMEXUnset, gb)); c.Status != result.Warn {
		t.Errorf("without a one-node domain: %s %q, want warn", c.Status, c.Message)
	}
}

// Only a multi-node NVLink host with imex resolved to host brings up a one-node domain.
func TestHostIMEXDomain(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		mode settings.IMEX
		want bool
	}{
		{"p6e-gb200.36xlarge", settings.IMEXUnset, true},
		{"p6e-gb200.36xlarge", settings.IMEXHost, true},
		{"p6e-gb200.36xlarge", settings.IMEXDRA, false},
		{"p6e-gb200.36xlarge", settings.IMEXOff, false},
		{"p6-b200.48xlarge", settings.IMEXHost, false},
		{"p5.48xlarge", settings.IMEXUnset, false},
	} {
		if got, why := gbTarget(tc.mode, tc.typ).HostIMEXDomain(); got != tc.want || !got && why == "" {
			t.Errorf("%s imex %q: %v (%q), want %v", tc.typ, tc.mode, got, why, tc.want)
		}
	}
}

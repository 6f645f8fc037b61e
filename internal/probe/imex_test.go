package probe

import (
	"slices"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	judge "github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// The healthy p6-b200 host reads its IMEX facts, and the check does not apply there.
func TestIMEXFactsOfTheHealthyHost(t *testing.T) {
	h := ParseHost(healthySections(t))
	x := h.IMEX
	if !x.Packages.OK() || len(x.Packages.Value) != 1 || x.Packages.Value[0].Name != "nvidia-imex" || x.Packages.Value[0].Version != "595.91.07-1" {
		t.Errorf("packages %+v", x.Packages)
	}
	if x.Enabled.Value != "enabled" || x.Active.Value != "inactive" || !x.Channel.OK() || x.Channel.Value.AtBoot() || x.Channel.Value.Device {
		t.Errorf("enabled %+v active %+v channel %+v", x.Enabled, x.Active, x.Channel)
	}
	if x.Domain.OK() || !strings.Contains(x.Domain.Problem, "command not found") {
		t.Errorf("domain %+v", x.Domain)
	}
	// hostChecks leaves imex out of the fault tables: it is judged here.
	c := judge.JudgePhase(judge.PhaseHost, facts.Run{Host: h}, judge.Resolve(h, settings.Checks{}, ""))
	i := slices.IndexFunc(c, func(c result.Check) bool { return c.ID == result.IMEX })
	if i < 0 || c[i].Status != result.Skip {
		t.Fatalf("imex on p6-b200: %+v", c)
	}
}

func TestIMEXCommands(t *testing.T) {
	var names []string
	for _, c := range hostCommands(Options{NVMePath: "/opt/dlami/nvme", CheckTimeout: settings.DefaultCheckTimeout}) {
		switch c.Name {
		case sectionIMEXCtl:
			if c.Tool == nil || !slices.Equal(c.Tool.Paths, []string{"/usr/bin/nvidia-imex-ctl"}) || !strings.HasSuffix(c.Shell, `exec "$1" -N -j`) ||
				!strings.Contains(c.Shell, `"$s" is-active -q nvidia-imex`) || !strings.Contains(c.Shell, "/usr/bin/systemctl /bin/systemctl") {
				t.Errorf("ctl command %+v", c)
			}
		case sectionIMEXPackages:
			if c.Tool == nil || c.Tool.Paths[0] != "/usr/bin/dpkg-query" || !strings.Contains(c.Shell, `'nvidia-imex*'`) {
				t.Errorf("packages command %+v", c)
			}
		}
		names = append(names, c.Name)
	}
	for _, n := range []string{sectionIMEXPackages, sectionIMEXEnabled, sectionIMEXActive, sectionIMEXChannel, sectionIMEXCtl} {
		if !slices.Contains(names, n) {
			t.Errorf("host bundle lacks %s", n)
		}
	}
}

func TestParseIMEXSections(t *testing.T) {
	base := func() map[string]bundle.Section {
		s := map[string]bundle.Section{}
		set(s, sectionIMEXPackages, "ii \tnvidia-imex-570\t570.172.08-1\tarm64\nrc \tnvidia-imex\t570.133.20-1\tarm64\n", 0)
		set(s, sectionIMEXEnabled, "enabled", 0)
		set(s, sectionIMEXActive, "active", 0)
		set(s, sectionIMEXChannel, "/etc/modprobe.d/nvidia.conf:options nvidia NVreg_EnableGpuFirmware=0\n/etc/modprobe.d/nvidia-imex.conf:options nvidia NVreg_CreateImexChannel0=1\nchannel0: character device\n", 0)
		// ParallelCluster's healthy example (internal/parse/imexctl/testdata/healthy-2node.json), one line.
		set(s, sectionIMEXCtl, `{"nodes":{"0":{"status":"READY","host":"192.168.103.159","connections":{"0":{"host":"192.168.103.159","status":"CONNECTED","changed":true}},"changed":true,"version":"570.172.08"}},"timestamp":"8/8/2025 17:38:02.641","status":"UP"}`, 0)
		return s
	}
	x := parseIMEX(base())
	if len(x.Packages.Value) != 1 || x.Packages.Value[0].Name != "nvidia-imex-570" {
		t.Errorf("only installed packages are kept: %+v", x.Packages)
	}
	if x.Enabled.Value != "enabled" || x.Active.Value != "active" {
		t.Errorf("unit %+v %+v", x.Enabled, x.Active)
	}
	if !slices.Equal(x.Channel.Value.Options, []string{"/etc/modprobe.d/nvidia-imex.conf: options nvidia NVreg_CreateImexChannel0=1"}) || !x.Channel.Value.Device {
		t.Errorf("channel %+v", x.Channel)
	}
	if !x.Domain.OK() || !x.Domain.Value.Healthy() {
		t.Errorf("domain %+v", x.Domain)
	}

	for _, tc := range []struct {
		name  string
		tweak func(map[string]bundle.Section)
		check func(facts.IMEX) bool
	}{
		{"no package known", func(s map[string]bundle.Section) {
			set(s, sectionIMEXPackages, "dpkg-query: no packages found matching nvidia-imex*", 1)
		}, func(x facts.IMEX) bool { return x.Packages.OK() && len(x.Packages.Value) == 0 }},
		{"dpkg-query missing fails closed", func(s map[string]bundle.Section) {
			set(s, sectionIMEXPackages, "dpkg-query: not found (looked in /usr/bin/dpkg-query)", 127)
		}, func(x facts.IMEX) bool { return !x.Packages.OK() }},
		{"garbled dpkg output", func(s map[string]bundle.Section) { set(s, sectionIMEXPackages, "garbage", 0) },
			func(x facts.IMEX) bool { return !x.Packages.OK() }},
		{"is-enabled disabled (exit 1)", func(s map[string]bundle.Section) { set(s, sectionIMEXEnabled, "disabled", 1) },
			func(x facts.IMEX) bool { return x.Enabled.Value == "disabled" }},
		{"is-enabled masked", func(s map[string]bundle.Section) { set(s, sectionIMEXEnabled, "masked", 1) },
			func(x facts.IMEX) bool { return x.Enabled.Value == "masked" }},
		{"is-enabled of a missing unit, systemd 255", func(s map[string]bundle.Section) { set(s, sectionIMEXEnabled, "not-found", 4) },
			func(x facts.IMEX) bool { return x.Enabled.Value == "not-found" }},
		{"is-enabled of a missing unit, older words", func(s map[string]bundle.Section) {
			set(s, sectionIMEXEnabled, "Failed to get unit file state for nvidia-imex.service: No such file or directory", 1)
		}, func(x facts.IMEX) bool { return x.Enabled.Value == "not-found" }},
		{"is-enabled timed out", func(s map[string]bundle.Section) { set(s, sectionIMEXEnabled, "", 124) },
			func(x facts.IMEX) bool { return !x.Enabled.OK() }},
		{"is-enabled says something else", func(s map[string]bundle.Section) { set(s, sectionIMEXEnabled, "Access denied", 1) },
			func(x facts.IMEX) bool { return !x.Enabled.OK() }},
		{"no option, no device", func(s map[string]bundle.Section) {
			set(s, sectionIMEXChannel, "channel0: absent\n", 0)
		}, func(x facts.IMEX) bool { return x.Channel.OK() && !x.Channel.Value.AtBoot() && !x.Channel.Value.Device }},
		{"option with another value", func(s map[string]bundle.Section) {
			set(s, sectionIMEXChannel, "/etc/modprobe.d/a.conf:options nvidia NVreg_CreateImexChannel0=0\nchannel0: absent\n", 0)
		}, func(x facts.IMEX) bool { return x.Channel.OK() && !x.Channel.Value.AtBoot() }},
		{"unreadable modprobe file fails closed", func(s map[string]bundle.Section) {
			set(s, sectionIMEXChannel, "unreadable: /etc/modprobe.d/secret.conf\nchannel0: absent\n", 0)
		}, func(x facts.IMEX) bool { return !x.Channel.OK() && strings.Contains(x.Channel.Problem, "secret.conf") }},
		{"cut channel output fails closed", func(s map[string]bundle.Section) {
			set(s, sectionIMEXChannel, "/etc/modprobe.d/nvidia-imex.conf:options nvidia NVreg_CreateImexChannel0=1\n", 0)
		}, func(x facts.IMEX) bool { return !x.Channel.OK() }},
		{"ctl cannot reach the daemon", func(s map[string]bundle.Section) {
			set(s, sectionIMEXCtl, "Query Status returned error code: 14 - failed to connect to all addresses", 1)
		}, func(x facts.IMEX) bool { return !x.Domain.OK() && strings.Contains(x.Domain.Problem, "exited 1") }},
		{"ctl not run: the service is not active", func(s map[string]bundle.Section) { set(s, sectionIMEXCtl, imexCtlNotRun, 3) },
			func(x facts.IMEX) bool { return !x.Domain.OK() && strings.Contains(x.Domain.Problem, "exited 3") }},
		{"ctl prints text, not JSON", func(s map[string]bundle.Section) { set(s, sectionIMEXCtl, "Nodes:\nDomain State: UP\n", 0) },
			func(x facts.IMEX) bool { return !x.Domain.OK() }},
	} {
		s := base()
		tc.tweak(s)
		if x := parseIMEX(s); !tc.check(x) {
			t.Errorf("%s: %+v", tc.name, x)
		}
	}
}

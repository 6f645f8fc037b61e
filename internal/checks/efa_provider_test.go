package checks

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/fiinfo"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/lsmod"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// libfabric's own answer that the EFA provider has nothing here (fi_getinfo -61) reads as the
// provider missing, with its likely causes and what the host shows of each, never as "exited
// 1"; the real p4d listing (4 EFA domains) passes.
func TestEFADevicesProviderMissing(t *testing.T) {
	p4d, _ := profile.Lookup("p4d.24xlarge")
	devs := []string{"efa_0", "efa_1", "efa_2", "efa_3"}
	host := func(t *testing.T, fiInfoFile string, modules string, devices []string) facts.Host {
		t.Helper()
		inv, err := pciParse(strings.Repeat("0000:51:00.0 0x10de 0x20b0 0x030200\n", 8) + strings.Repeat("0000:82:00.0 0x1d0f 0xefa1 0x020000\n", len(devices)))
		if err != nil {
			t.Fatal(err)
		}
		loaded, err := lsmod.Parse("Module                  Size  Used by\n" + modules)
		if err != nil {
			t.Fatal(err)
		}
		h := facts.Host{PCI: facts.Read(inv, ""), RDMA: facts.Read(facts.RDMADevices{EFA: devices}, ""), RDMAPorts: upPorts(t, devices),
			Loaded: facts.Read(loaded, ""), EFAModule: facts.Read("2.1.1g", "")}
		d, err := fiinfo.ParseDomains(fixture.Read(t, fiInfoFile))
		var none *fiinfo.NoProviderError
		switch {
		case errors.As(err, &none):
			h.Domains, h.EFAProviderMissing = facts.Unread[[]string]("host.fi_info: libfabric has no EFA provider on this host: "+none.Line, ""), none.Line
		case err != nil:
			t.Fatal(err)
		default:
			h.Domains = facts.Read(d, "")
		}
		return h
	}
	tests := []struct {
		name         string
		h            facts.Host
		want         result.Status
		says, absent []string
	}{
		{name: "the real p4d listing: 4 domains", h: host(t, "fiinfo-p4d-4nics-awsdoc.txt", "efa 167936 0\n", devs), want: result.Pass},
		{name: "provider missing, 4 devices, efa loaded", h: host(t, "fiinfo-no-efa-nodata.txt", "efa 167936 0\n", devs), want: result.Fail,
			says: []string{"libfabric's EFA provider is missing", `answered "fi_getinfo: -61 (No data available)"`, `no "provider: efa"`,
				"EFA installer was not run for the running kernel", "no EFA device is attached", "(the efa module is loaded)"},
			absent: []string{"exited 1", "lsmod does not list efa"}},
		{name: "provider missing, efa not loaded", h: host(t, "fiinfo-no-efa-nodata.txt", "ena 159744 0\n", devs), want: result.Fail,
			says: []string{"libfabric's EFA provider is missing", "the efa kernel module is not loaded (modprobe efa; dmesg | grep efa): lsmod does not list efa here"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv := tc.h.PCI.Value
			c := judgeEFADevices(facts.Run{Host: tc.h}, Target{InstanceType: "p4d.24xlarge", Profile: &p4d, PCI: &inv})
			if c.Status != tc.want {
				t.Errorf("status %s, want %s: %s", c.Status, tc.want, c.Message)
			}
			for _, s := range tc.says {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message lacks %q: %s", s, c.Message)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(c.Message, s) {
					t.Errorf("message has %q: %s", s, c.Message)
				}
			}
		})
	}
}

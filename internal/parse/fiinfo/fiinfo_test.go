package fiinfo

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

func TestParseDomainsTestdata(t *testing.T) {
	tests := []struct {
		file    string
		entries int
		domains []string
	}{
		{"fi_info-p-efa-t-FI_EP_RDM-p4d-4nics-awsdoc.txt", 4, []string{"efa_0", "efa_1", "efa_2", "efa_3"}},
		{"fi_info-p-efa-dlami-p3dn-old-efa_0-with-rxd.txt", 3, []string{"efa_0"}},
		{"fi_info-p-efa-t-FI_EP_RDM-p6-b200-8nics-synth.txt", 8, []string{
			"rdmap82s0", "rdmap83s0", "rdmap99s0", "rdmap100s0", "rdmap118s0", "rdmap119s0", "rdmap135s0", "rdmap136s0"}},
		{"fi_info-p-efa-no-filter-rdm-and-dgrm-synth.txt", 4, []string{"rdmap82s0", "rdmap83s0"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			text := fixture.Read(t, tt.file)
			entries, err := Parse(text)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != tt.entries {
				t.Errorf("got %d entries, want %d", len(entries), tt.entries)
			}
			if entries[0].Provider != "efa" || entries[0].Type != "FI_EP_RDM" {
				t.Errorf("first entry = %+v", entries[0])
			}
			d, err := ParseDomains(text)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d, tt.domains) {
				t.Errorf("domains = %v, want %v", d, tt.domains)
			}
		})
	}
}

func TestParseKeepsFabricWithColons(t *testing.T) {
	e, err := Parse(fixture.Read(t, "fi_info-p-efa-dlami-p3dn-old-efa_0-with-rxd.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if e[0].Fabric != "EFA-fe80::e5:56ff:fe34:56a8" || e[2].Provider != "efa;ofi_rxd" || e[2].Protocol != "FI_PROTO_RXD" {
		t.Errorf("entries = %+v", e)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, in, mention string }{
		{"empty", "", "empty"},
		{"no data", fixture.Read(t, "fi_info-no-efa-nodata.txt"), "No data available"},
		{"not found", "sh: 1: fi_info: not found\n", "not found"},
		{"no domain", "provider: efa\n    fabric: efa\n", "no \"domain:\""},
	}
	for _, tt := range tests {
		_, err := ParseDomains(tt.in)
		if err == nil {
			t.Errorf("%s: ParseDomains succeeded, want an error", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("%s: error %q does not mention %q", tt.name, err, tt.mention)
		}
	}
}

// libfabric's own -61 answer is a typed error naming its line, in both forms; other output
// without a provider block is not.
func TestParseNoProvider(t *testing.T) {
	for _, tt := range []struct {
		in, line string
	}{
		{fixture.Read(t, "fi_info-no-efa-nodata.txt"), "fi_getinfo: -61 (No data available)"},
		{fixture.Read(t, "fi_info-no-efa-nodata-fabtests-form.txt"), "fi_getinfo(): util/info.c:333, ret=-61 (No data available)"},
		{"libfabric:1234:core:core:ofi_reg_dl_prov():675<warn> dlopen(libefa-fi.so): cannot open\nfi_getinfo: -61 (No data available)\n", "fi_getinfo: -61 (No data available)"},
		{"sh: 1: fi_info: not found\n", ""},
		{"fi_getinfo: -2 (No such file or directory)\n", ""},
		{"fi_getinfo: -610 (x)\n", ""},
	} {
		_, err := ParseDomains(tt.in)
		var np *NoProviderError
		if got := errors.As(err, &np); got != (tt.line != "") || (got && np.Line != tt.line) {
			t.Errorf("ParseDomains(%q) error %v, want the no-provider line %q", tt.in, err, tt.line)
		}
	}
}

func TestDeviceName(t *testing.T) {
	for in, want := range map[string]string{
		"rdmap16s27-rdm": "rdmap16s27", "efa_0-dgrm": "efa_0", "rdmap16s27": "rdmap16s27", " x-rdm ": "x", "": "",
	} {
		if got := DeviceName(in); got != want {
			t.Errorf("DeviceName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseVersion(t *testing.T) {
	v, err := ParseVersion(fixture.Read(t, "fi_info-version-2.6.0amzn1.0.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if v != (Version{FiInfo: "2.6.0amzn1.0", Libfabric: "2.6.0amzn1.0", API: "2.6"}) {
		t.Errorf("ParseVersion = %+v", v)
	}
	if _, err := ParseVersion("sh: 1: fi_info: not found"); err == nil {
		t.Error("ParseVersion of an error message succeeded")
	}
}

func FuzzParse(f *testing.F) {
	fixture.SeedFuzz(f, ".txt")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDomains(s)
		if err == nil && len(d) == 0 {
			t.Fatal("no error but no domains")
		}
		// The no-provider answer only ever quotes a libfabric -61 line that is in the output.
		var np *NoProviderError
		if errors.As(err, &np) && (!strings.Contains(np.Line, "-61") || !strings.HasPrefix(np.Line, "fi_getinfo") || !strings.Contains(s, strings.TrimSuffix(np.Line, "..."))) {
			t.Fatalf("no-provider error %q for %q", np.Line, s)
		}
		seen := map[string]bool{}
		for _, x := range d {
			if x == "" || seen[x] {
				t.Fatalf("domains %q: empty or duplicate %q", d, x)
			}
			seen[x] = true
		}
		v, err := ParseVersion(s)
		if err == nil && v.Libfabric == "" {
			t.Fatal("no error but no libfabric version")
		}
	})
}

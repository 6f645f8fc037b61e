package modinfo

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

func TestField(t *testing.T) {
	tests := []struct {
		in, want, errMention string
	}{
		{"3.3.0g\n", "3.3.0g", ""},
		{"595.91.07", "595.91.07", ""},
		{"Dual MIT/GPL\n", "Dual MIT/GPL", ""},
		{"  2.15.6 \r\n\n", "2.15.6", ""},
		{"", "", "empty"},
		{"\n\n", "", "empty"},
		{"modinfo: ERROR: Module lustre not found.\n", "", "Module lustre not found"},
		{"sh: 1: modinfo: not found\n", "", "not found"},
		{"1.0\n2.0\n", "", "2 lines"},
	}
	for _, tt := range tests {
		got, err := Field(tt.in)
		if tt.errMention != "" {
			if err == nil || !strings.Contains(err.Error(), tt.errMention) {
				t.Errorf("Field(%q) = %q, %v; want error mentioning %q", tt.in, got, err, tt.errMention)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Field(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestParseTestdata(t *testing.T) {
	tests := []struct {
		file    string
		want    map[string]string
		aliases int
	}{
		{"modinfo-efa-1.13.0g-ubuntu1804-dkms.txt", map[string]string{
			"version": "1.13.0g", "license": "Dual BSD/GPL", "name": "efa", "depends": "ib_core,ib_uverbs",
			"filename": "/lib/modules/5.4.0-1054-aws/updates/dkms/efa.ko", "softdep": "pre: ib_uverbs",
		}, 2},
		{"modinfo-nvidia-open-595-synth.txt", map[string]string{
			"version": "595.91.07", "license": "Dual MIT/GPL", "depends": "",
			"signature": "30:65:02:31:00:A1:B2:C3:D4:E5:F6:07:18:29:3A:4B:5C:6D:7E:8F:90:A1:B2:C3:D4:E5:F6:07:18:29:3A:4B:5C:6D:7E:8F:90:A1:B2:C3:D4:E5:F6:07",
			"parm":      "NvSwitchRegDwords:NvSwitch regkey (charp)",
		}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			info, err := Parse(fixture.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.want {
				if got := info.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if n := len(info["alias"]); n != tt.aliases {
				t.Errorf("%d aliases, want %d", n, tt.aliases)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ in, mention string }{
		{"", "empty"},
		{"modinfo: ERROR: Module efa not found.\n", "Module efa not found"},
		{"garbage without colon\n", "line 1"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("Parse(%q) error %v, want one mentioning %q", tt.in, err, tt.mention)
		}
	}
}

func FuzzParse(f *testing.F) {
	fixture.SeedFuzz(f, ".txt")
	f.Add("3.3.0g\n")
	f.Fuzz(func(t *testing.T, s string) {
		info, err := Parse(s)
		if err == nil && len(info) == 0 {
			t.Fatal("no error but no fields")
		}
		v, err := Field(s)
		if err == nil && (v == "" || strings.Contains(v, "\n")) {
			t.Fatalf("Field = %q without error", v)
		}
	})
}

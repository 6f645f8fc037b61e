package lsmod

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

func TestParseTestdata(t *testing.T) {
	tests := []struct {
		file    string
		count   int
		has     []string
		hasNot  []string
		holders map[string][]string
	}{
		{"lsmod-dlami-p6-b200-synth.txt", 23,
			[]string{"gdrdrv", "efa", "nvidia", "lustre", "efa-nv-peermem", "efa_nv_peermem"},
			[]string{"nvidia_peermem", "Module", "gdr"},
			map[string][]string{"nvidia": {"efa_nv_peermem", "nvidia_uvm", "gdrdrv", "nvidia_modeset"}, "gdrdrv": nil}},
		{"lsmod-no-gdrdrv-permanent-synth.txt", 3,
			[]string{"efa", "ipv6"}, []string{"gdrdrv"},
			map[string][]string{"ipv6": {"[permanent]"}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			set, err := Parse(fixture.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(set) != tt.count {
				t.Errorf("%d modules, want %d", len(set), tt.count)
			}
			for _, m := range tt.has {
				if !set.Has(m) {
					t.Errorf("Has(%q) = false", m)
				}
			}
			for _, m := range tt.hasNot {
				if set.Has(m) {
					t.Errorf("Has(%q) = true", m)
				}
			}
			for m, want := range tt.holders {
				if got := set[m].Holders; !reflect.DeepEqual(got, want) {
					t.Errorf("%s holders = %v, want %v", m, got, want)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ in, mention string }{
		{"", "empty"},
		{"sh: 1: lsmod: not found\n", "header"},
		{"gdrdrv 24576 0\n", "header"},
		{"Module Size Used by\ngdrdrv\n", "line 2"},
		{"Module Size Used by\ngdrdrv big 0\n", "size"},
		{"Module Size Used by\ngdrdrv 24576 x\n", "use count"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("Parse(%q) error %v, want one mentioning %q", tt.in, err, tt.mention)
		}
	}
	set, err := Parse("Module                  Size  Used by\n")
	if err != nil || len(set) != 0 {
		t.Errorf("header only: %v, %v; want an empty set", set, err)
	}
}

func FuzzParse(f *testing.F) {
	fixture.SeedFuzz(f, ".txt")
	f.Fuzz(func(t *testing.T, s string) {
		set, err := Parse(s)
		if err != nil {
			return
		}
		for k, m := range set {
			if k == "" || m.Size < 0 {
				t.Fatalf("bad module %q: %+v", k, m)
			}
		}
	})
}

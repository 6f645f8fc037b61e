package migmode

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, in string
		on       []int
		err      string
	}{
		{"disabled", "0, Disabled\n1, Disabled\n", nil, ""},
		{"one enabled", "0, Disabled\n1, Enabled\n", []int{1}, ""},
		{"no MIG (A10G)", "0, [N/A]\n", nil, ""},
		{"not supported", "0, [Not Supported]\n", nil, ""},
		{"unknown word", "0, Pending\n", nil, "not Enabled"},
		{"driver error", "Failed to initialize NVML: Driver/library version mismatch\n", nil, "want"},
		{"empty", "", nil, "no GPU"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if on := Enabled(got); len(on) != len(c.on) || len(on) > 0 && on[0] != c.on[0] {
				t.Errorf("enabled %v, want %v", on, c.on)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add("0, Disabled\n1, Enabled\n")
	f.Add("0, [N/A]")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Parse(in)
		if err == nil && len(got) == 0 {
			t.Fatal("no error and no GPU")
		}
	})
}

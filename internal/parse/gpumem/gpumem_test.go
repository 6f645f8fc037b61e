package gpumem

import (
	"os"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, in string
		want     []GPU
		err      string
	}{
		{"nounits", "0, 81559\n1, 81559\n", []GPU{{0, 81559}, {1, 81559}}, ""},
		{"with units", "0, 23028 MiB\n", []GPU{{0, 23028}}, ""},
		{"empty", "\n", nil, "no GPU"},
		{"driver error", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", nil, "want"},
		{"N/A", "0, [N/A]\n", nil, "not a positive"},
		{"zero", "0, 0\n", nil, "not a positive"},
		{"twice", "0, 1\n0, 1\n", nil, "twice"},
		{"bad index", "x, 1\n", nil, "bad GPU index"},
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
			if err != nil || len(got) != len(c.want) {
				t.Fatalf("Parse = %v, %v", got, err)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("GPU %d = %+v, want %+v", i, got[i], c.want[i])
				}
			}
		})
	}
}

// TestCapture reads the memory.total of the 8 × H100 capture (see testdata/*.source).
func TestCapture(t *testing.T) {
	b, err := os.ReadFile("testdata/derived-query-8xH100-memory-total.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(string(b))
	if err != nil || len(got) != 8 || got[7].TotalMiB != 81559 {
		t.Fatalf("Parse = %v, %v", got, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("0, 81559\n1, 81559\n")
	f.Add("0, 23028 MiB")
	f.Add("0, [N/A]")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Parse(in)
		if err == nil && len(got) == 0 {
			t.Fatal("no error and no GPU")
		}
		for _, g := range got {
			if g.TotalMiB <= 0 || g.Index < 0 {
				t.Fatalf("bad GPU %+v", g)
			}
		}
	})
}

package uptime

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"350735.47 234388.90\n", 350735*time.Second + 470*time.Millisecond, false},
		{"12.05 40.11", 12*time.Second + 50*time.Millisecond, false},
		{"0.00 0.00\n", 0, false},
		{"  86400.00   1.00  \n", 24 * time.Hour, false},
		{"", 0, true},
		{"350735.47\n", 0, true},
		{"350735.47 234388.90 7\n", 0, true},
		{"-1.00 0.00", 0, true},
		{"NaN 0.00", 0, true},
		{"Inf 0.00", 0, true},
		{"1e3 0.00", 0, true},
		{"0x10 0.00", 0, true},
		{"cat: /proc/uptime: No such file or directory", 0, true},
		{"99999999999.00 0.00", 0, true},
	} {
		got, err := Parse(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"350735.47 234388.90\n", "0.00 0.00", "", "1 2 3", "-0.5 1", "1e308 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		d, err := Parse(in)
		if err != nil {
			if d != 0 {
				t.Errorf("Parse(%q) = %v with error %v", in, d, err)
			}
			return
		}
		if d < 0 || d > maxUptime {
			t.Errorf("Parse(%q) = %v: outside 0..%v", in, d, maxUptime)
		}
	})
}

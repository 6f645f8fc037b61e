package uptime

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
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

// TestErrorQuotesWholeCharacters: an error quotes a bounded part of the host's text and never
// splits a multi-byte character where it cuts (%q would show the split bytes as \x escapes).
func TestErrorQuotesWholeCharacters(t *testing.T) {
	for _, tc := range []struct {
		name, in string
	}{
		// 79 ASCII bytes then "€" (3 bytes): a cut at byte 80 falls inside it.
		{"one field", strings.Repeat("1", 79) + strings.Repeat("€", 10)},
		{"uptime field", strings.Repeat("9", 79) + strings.Repeat("é", 10) + " 1.00"},
		{"all multi-byte", strings.Repeat("日本", 40) + " 1 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.in)
			if err == nil {
				t.Fatalf("Parse(%q) accepted it", tc.in)
			}
			msg := err.Error()
			if strings.Contains(msg, `\x`) || !utf8.ValidString(msg) {
				t.Errorf("the error splits a character: %s", msg)
			}
			if len(msg) > 200 {
				t.Errorf("the error quotes %d bytes, not a bounded part: %s", len(msg), msg)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"350735.47 234388.90\n", "0.00 0.00", "", "1 2 3", "-0.5 1", "1e308 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		d, err := Parse(in)
		if err != nil {
			if utf8.ValidString(in) && !utf8.ValidString(err.Error()) {
				t.Errorf("Parse(%q): the error splits a character: %v", in, err)
			}
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

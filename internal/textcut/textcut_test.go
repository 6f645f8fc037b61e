package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHead(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijkl", 5, "abcde..."},
		{"ab€cd", 3, "ab..."},  // € is 3 bytes: never split
		{"ab€cd", 5, "ab€..."}, // fits whole
		{"€€€", 0, "..."},
	} {
		if got := Head(c.in, c.max); got != c.want {
			t.Errorf("Head(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestPrefix(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc"},
		{"ab€cd", 3, "ab"},
		{"ab€cd", 4, "ab"},
		{"ab€cd", 5, "ab€"},
		{"€", 0, ""},
		{"abc", -1, ""},
		{"a\xffbc", 2, "a\xff"}, // invalid bytes are kept, not repaired
	} {
		if got := Prefix(c.in, c.max); got != c.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
		if got := Prefix([]byte(c.in), c.max); string(got) != c.want {
			t.Errorf("Prefix([]byte(%q), %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
	b := []byte("shared€memory")
	if p := Prefix(b, 8); len(p) != 6 || &p[0] != &b[0] {
		t.Errorf("Prefix of a []byte should share its memory: %q", p)
	}
}

func TestHeadNote(t *testing.T) {
	if got := HeadNote("abcdef", 4); got != "abcd\n... (2 more bytes)" {
		t.Errorf("got %q", got)
	}
	if got := HeadNote("ab", 4); got != "ab" {
		t.Errorf("got %q", got)
	}
}

func TestTail(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"  one\ntwo  ", 20, "one\ntwo"},
		{"line1\nline2\nline3", 15, "…line2\nline3"},
		{"line1\nline2\nline3", 13, "…line3"},
		{"abcdefgh", 6, "…fgh"},
		{"xx€€", 6, "…€"},
	} {
		if got := Tail(c.in, c.max); got != c.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func FuzzCuts(f *testing.F) {
	f.Add("h€llo wörld\nsecond line", 5)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<16 {
			return
		}
		for _, out := range []string{Head(s, max), HeadNote(s, max), Tail(s, max)} {
			if utf8.ValidString(s) && !utf8.ValidString(out) {
				t.Fatalf("cut of valid UTF-8 %q at %d is invalid: %q", s, max, out)
			}
		}
		if p := Prefix(s, max); len(p) > max || !strings.HasPrefix(s, p) || (utf8.ValidString(s) && !utf8.ValidString(p)) {
			t.Fatalf("Prefix(%q, %d) = %q", s, max, p)
		}
		if len(s) > max && !strings.HasSuffix(Head(s, max), "...") {
			t.Fatalf("Head did not mark the cut")
		}
		if tl := Tail(s, max); len(strings.TrimSpace(s)) > max && len(tl) > max {
			t.Fatalf("Tail too long: %d > %d", len(tl), max)
		}
		if h := Head(s, max); len(h) > max+3 {
			t.Fatalf("Head too long: %d > %d", len(h), max+3)
		}
	})
}

package dpkg

import (
	"os"
	"strings"
	"testing"
)

func TestParseQueryDLAMILike(t *testing.T) {
	b, err := os.ReadFile("testdata/dlami-like.txt")
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParseQuery(string(b))
	if err != nil {
		t.Fatalf("ParseQuery: %v", err)
	}
	if got, want := len(q.Packages), 31; got != want {
		t.Fatalf("got %d packages, want %d", got, want)
	}
	by := map[string]Package{}
	for _, p := range q.Packages {
		if _, dup := by[p.Name]; !dup {
			by[p.Name] = p
		}
	}
	tests := []struct {
		name            string
		version, status string
		held, installed bool
	}{
		{"linux-image-7.0.0-1014-aws", "7.0.0-1014.14", "hi ", true, true},
		{"linux-aws", "7.0.0.1014.14", "hi ", true, true},
		{"efa", "3.3.0-1", "ii ", false, true},
		{"linux-image-6.17.0-1019-aws", "6.17.0-1019.19", "rc ", false, false},
		{"nvidia-firmware-595", "", "un ", false, false},
		{"half-configured-pkg", "1.0-1", "iF ", false, false},
		{"reinst-pkg", "1.0-1", "hiR", true, true},
	}
	for _, tt := range tests {
		p, ok := by[tt.name]
		if !ok {
			t.Errorf("%s: missing", tt.name)
			continue
		}
		if p.Version != tt.version || p.Status != tt.status || p.Held != tt.held || p.Installed != tt.installed {
			t.Errorf("%s: got %+v, want version %q status %q held %v installed %v", tt.name, p, tt.version, tt.status, tt.held, tt.installed)
		}
	}
}

func TestParseQueryWarningsAndErrors(t *testing.T) {
	q, err := ParseQuery("dpkg-query: warning: parsing file '/var/lib/dpkg/status' near line 5: odd\nhi\tfoo\t1.0\tamd64\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Warnings) != 1 || len(q.Packages) != 1 || !q.Packages[0].Held || q.Packages[0].Status != "hi " {
		t.Fatalf("got %+v", q)
	}
	bad := []string{
		"sh: 1: dpkg-query: not found",
		"ii  foo 1.0 amd64",        // spaces, not tabs: wrong -f format
		"xi \tfoo\t1.0\tamd64",     // bad want flag
		"ii \t\t1.0\tamd64",        // no name
		"ii \tfoo\t1.0",            // missing field
		"dpkg-query: error: bad",   // not a warning
		"ii \tfoo bar\t1.0\tamd64", // space in name
	}
	for _, in := range bad {
		if _, err := ParseQuery(in); err == nil {
			t.Errorf("ParseQuery(%q): want error", in)
		} else if !strings.Contains(err.Error(), "dpkg-query") {
			t.Errorf("ParseQuery(%q): error %q does not name the command", in, err)
		}
	}
	if q, err := ParseQuery(""); err != nil || len(q.Packages) != 0 {
		t.Errorf("empty: got %+v, %v", q, err)
	}
}

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"7.0.0-1015-aws", "7.0.0-1014-aws", 1},
		{"7.0.0-1014-aws", "6.17.0-1019-aws", 1},
		{"6.8.0-1009-aws", "6.8.0-1010-aws", -1},
		{"7.0.0-1014.14", "7.0.0-1014.14", 0},
		{"1.0~rc1", "1.0", -1},
		{"1.0", "1.0+b1", -1},
		{"1:1.0", "2.0", 1},
		{"1.0a", "1.0", 1},
		{"1.0-1", "1.0-1ubuntu1", -1},
		{"595.91.07-1", "595.100.01-1", -1},
		{"001.0", "1.0", 0},
		{"1.0~~", "1.0~", -1},
		{"99999999999999999999999", "99999999999999999999998", 1},
		{"", "0", 0}, // dpkg treats an empty digit run as 0
	}
	for _, tt := range tests {
		if got := CompareVersions(tt.a, tt.b); got != tt.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := CompareVersions(tt.b, tt.a); got != -tt.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

func FuzzParseQuery(f *testing.F) {
	b, err := os.ReadFile("testdata/dlami-like.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Add("hi \tlinux-aws\t7.0\tamd64\n")
	f.Add("dpkg-query: warning: x\n")
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(s)
		if err != nil {
			return
		}
		for _, p := range q.Packages {
			if p.Name == "" || len(p.Status) != 3 {
				t.Fatalf("accepted a bad record %+v", p)
			}
			if p.Held != (p.Status[0] == 'h') || p.Installed != (p.Status[1] == 'i') {
				t.Fatalf("flags disagree with status: %+v", p)
			}
		}
	})
}

func FuzzCompareVersions(f *testing.F) {
	f.Add("7.0.0-1014-aws", "7.0.0-1015-aws")
	f.Add("1:2.0~rc1-1", "2.0-1")
	f.Fuzz(func(t *testing.T, a, b string) {
		if CompareVersions(a, b) != -CompareVersions(b, a) {
			t.Fatalf("not antisymmetric: %q %q", a, b)
		}
		if CompareVersions(a, a) != 0 {
			t.Fatalf("not reflexive: %q", a)
		}
	})
}

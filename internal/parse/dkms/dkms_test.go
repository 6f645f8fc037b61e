package dkms

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func read(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseDKMS3(t *testing.T) {
	s, err := Parse(read(t, "dlami-like-dkms3.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Entries) != 4 || len(s.Warnings) != 1 {
		t.Fatalf("got %d entries, %d warnings; want 4, 1", len(s.Entries), len(s.Warnings))
	}
	want := Entry{Module: "nvidia", Version: "595.91.07", Kernel: "7.0.0-1014-aws", Arch: "x86_64", State: "installed", Notes: []string{"original_module exists"}}
	if !reflect.DeepEqual(s.Entries[2], want) {
		t.Errorf("got %+v, want %+v", s.Entries[2], want)
	}
	if !s.Entries[0].Installed("7.0.0-1014-aws") || s.Entries[0].Installed("7.0.0-1015-aws") {
		t.Errorf("Installed wrong for %+v", s.Entries[0])
	}
}

func TestParseDKMS2(t *testing.T) {
	s, err := Parse(read(t, "old-dkms2.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []Entry{
		{Module: "8812au", Version: "4.2.2", State: "added"},
		{Module: "bbswitch", Version: "0.8", Kernel: "4.13.0-32-generic", Arch: "x86_64", State: "installed"},
		{Module: "nvidia-340", Version: "340.104", Kernel: "4.13.0-36-generic", Arch: "x86_64", State: "installed"},
		{Module: "rtl8812au", Version: "4.2.2", Kernel: "4.13.0-25-generic", Arch: "x86_64", State: "built"},
		{Module: "rtl8812au", Version: "4.2.2", Kernel: "4.13.0-32-generic", Arch: "x86_64", State: "installed", Notes: []string{"WARNING! Diff between built and installed module!"}},
		{Module: "virtualbox-ose", Version: "4.0.4", Kernel: "2.6.38-8-generic", Arch: "i686", State: "installed", Notes: []string{"WARNING! Diff between built and installed module!", "WARNING! Diff between built and installed module!"}},
	}
	if !reflect.DeepEqual(s.Entries, tests) {
		t.Errorf("got\n%+v\nwant\n%+v", s.Entries, tests)
	}
}

func TestParseRejectsUnknownLines(t *testing.T) {
	_, err := Parse(read(t, "mixed-warnings.txt"))
	if err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("want an error naming line 4, got %v", err)
	}
	s, err := Parse(strings.Join(strings.Split(read(t, "mixed-warnings.txt"), "\n")[:3], "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Entries) != 2 || s.Entries[0].State != "added" || s.Entries[0].Kernel != "" || len(s.Warnings) != 1 {
		t.Errorf("got %+v", s)
	}
	for _, in := range []string{
		"sh: 1: dkms: not found",
		"nvidia/595, 7.0.0-1014-aws: installed",                // kernel without arch
		"nvidia/595, 7.0.0-1014-aws, x86_64, extra: installed", // too many fields
		"nvidia/595, 7.0.0-1014-aws, x86_64:",                  // no state
		"nvidia: installed",                                    // dkms 2 without version
		"/595, 7.0.0-1014-aws, x86_64: installed",              // no name
	} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q): want error", in)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, n := range []string{"dlami-like-dkms3.txt", "old-dkms2.txt", "mixed-warnings.txt"} {
		f.Add(read(f, n))
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := Parse(s)
		if err != nil {
			return
		}
		for _, e := range st.Entries {
			if e.Module == "" || e.Version == "" || e.State == "" || (e.Kernel == "") != (e.Arch == "") {
				t.Fatalf("accepted a bad entry %+v", e)
			}
		}
	})
}

package kjournal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Entry // Line is not compared
		err  string
	}{
		{name: "empty output: no journal files, or no entries of this boot (-q)", in: ""},
		{name: "no entries without -q", in: "-- No entries --\n"},
		{
			name: "kernel record with hostname",
			in:   "[    5.351203] ip-10-1-42-17 kernel: NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  595.91.07\n",
			want: []Entry{{Stamp: 5.351203, Host: "ip-10-1-42-17", Identifier: "kernel", Message: "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  595.91.07"}},
		},
		{
			name: "no hostname (--no-hostname)",
			in:   "[  812.000001] kernel: NVRM: Xid (PCI:0000:1e:00): 79, GPU has fallen off the bus.",
			want: []Entry{{Stamp: 812.000001, Identifier: "kernel", Message: "NVRM: Xid (PCI:0000:1e:00): 79, GPU has fallen off the bus."}},
		},
		{
			name: "userspace record keeps its identifier in the message, as dmesg shows it",
			in:   "[    3.911020] ip-10-1-42-17 systemd[1]: Hostname set to <ip-10-1-42-17>.",
			want: []Entry{{Stamp: 3.911020, Host: "ip-10-1-42-17", Identifier: "systemd[1]", Message: "systemd[1]: Hostname set to <ip-10-1-42-17>."}},
		},
		{
			name: "empty message",
			in:   "[   12.000000] h kernel: ",
			want: []Entry{{Stamp: 12, Host: "h", Identifier: "kernel", Message: ""}},
		},
		{
			name: "stamp past 99999 s widens the field",
			in:   "[123456.000007] h kernel: x",
			want: []Entry{{Stamp: 123456.000007, Host: "h", Identifier: "kernel", Message: "x"}},
		},
		{
			name: "continuation lines",
			in:   "[    1.000000] h kernel: first\n                        second\n",
			want: []Entry{
				{Stamp: 1, Host: "h", Identifier: "kernel", Message: "first"},
				{Stamp: 1, Host: "h", Identifier: "kernel", Message: "second", Continuation: true},
			},
		},
		{
			name: "colours and CRLF",
			in:   "\x1b[1m[    1.000000] h kernel: bold\x1b[0m\r\n",
			want: []Entry{{Stamp: 1, Host: "h", Identifier: "kernel", Message: "bold"}},
		},
		{name: "an error on stderr", in: "Failed to iterate through journal: Bad message\n[    1.000000] h kernel: x", err: "line 1 is not"},
		{name: "permission error", in: "No journal files were opened due to insufficient permissions.", err: "not a journalctl"},
		{name: "another boot's separator", in: "[    1.000000] h kernel: x\n-- Boot 0123456789abcdef0123456789abcdef --\n[    1.000000] h kernel: y", err: "line 2"},
		{name: "continuation first", in: "   dangling", err: "before any entry"},
		{name: "short-precise realtime instead", in: "Feb 14 05:03:41 host kernel: x", err: "not a journalctl"},
		{name: "stamp without micros", in: "[    1.5] h kernel: x", err: "not a journalctl"},
		{name: "no identifier", in: "[    1.000000] just some words", err: "IDENTIFIER"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err = %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: %d entries, want %d: %+v", tt.name, len(got), len(tt.want), got)
			continue
		}
		for i := range got {
			g := got[i]
			if g.Line == "" {
				t.Errorf("%s: entry %d has no line", tt.name, i)
			}
			g.Line = ""
			if g != tt.want[i] {
				t.Errorf("%s: entry %d = %+v, want %+v", tt.name, i, g, tt.want[i])
			}
		}
	}
}

func TestParseTestdata(t *testing.T) {
	read := func(name string) []Entry {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		es, err := Parse(string(b))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return es
	}
	real := read("systemd-issues-short-monotonic.txt")
	if len(real) != 5 || real[0].Host != "LibreELEC" || !real[0].Kernel() || real[0].Message != "Booting Linux on physical CPU 0x0" ||
		real[2].Kernel() || real[2].Message != "systemd[1]: Hostname set to <localhost>." || real[4].Stamp != 20.990551 {
		t.Errorf("systemd issue captures: %+v", real)
	}
	dlami := read("dlami-p6-b200-xid-cleared-synth.txt")
	var xid, cont int
	for _, e := range dlami {
		if strings.Contains(e.Message, "NVRM: Xid (PCI:0000:1e:00): 79") && e.Kernel() && !e.Continuation {
			xid++
		}
		if e.Continuation {
			cont++
			if strings.HasPrefix(e.Message, " ") || !strings.HasPrefix(e.Message, "NVRM: ") {
				t.Errorf("continuation %q", e.Message)
			}
		}
	}
	if len(dlami) != 10 || xid != 1 || cont != 2 {
		t.Errorf("dlami: %d entries, %d Xid, %d continuations", len(dlami), xid, cont)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"systemd-issues-short-monotonic.txt", "dlami-p6-b200-xid-cleared-synth.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("[    1.000000] h kernel: x\n   y\n-- No entries --")
	f.Fuzz(func(t *testing.T, in string) {
		es, err := Parse(in)
		if err != nil {
			if es != nil {
				t.Fatal("entries with an error")
			}
			return
		}
		for i, e := range es {
			if e.Line == "" || strings.ContainsAny(e.Message, "\n") || strings.ContainsAny(e.Line, "\n") {
				t.Fatalf("entry %d: %+v", i, e)
			}
			if e.Continuation && i == 0 {
				t.Fatal("a continuation first")
			}
			if !e.Continuation && e.Identifier == "" {
				t.Fatalf("entry %d without identifier: %+v", i, e)
			}
			// An entry printed again parses to the same message.
			if !e.Continuation {
				again, err := Parse(e.Line)
				if err != nil || len(again) != 1 || again[0].Message != e.Message || again[0].Identifier != e.Identifier {
					t.Fatalf("entry %q parsed again: %+v %v", e.Line, again, err)
				}
			}
		}
	})
}

// journalctl's warnings of journal files it skipped are kept apart from the records, not read
// as an unparsable journal: a truncated archive after an unclean shutdown is common.
func TestParseOutputIgnoredFiles(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "truncated-file-warning.txt"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := ParseOutput(string(b) +
		"Journal file /var/log/journal/x/system.journal uses an unsupported feature, ignoring file.\n" +
		"Use SYSTEMD_LOG_LEVEL=debug journalctl --file=/var/log/journal/x/system.journal to see the details.\n" +
		"Journal file /var/log/journal/x/user-1000.journal corrupted, ignoring file.\n" +
		"An error was encountered while opening journal file or directory /var/log/journal/y, ignoring file: Input/output error\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Entries) != 2 || len(o.Ignored) != 4 || !strings.Contains(o.Ignored[0], "is truncated") {
		t.Fatalf("entries %d, ignored %q", len(o.Entries), o.Ignored)
	}
	// The hint line alone is not a warning of ours: unreadable.
	if _, err := ParseOutput("Use SYSTEMD_LOG_LEVEL=debug journalctl --file=/x to see the details.\n"); err == nil {
		t.Error("a lone hint line parsed")
	}
	if _, err := ParseOutput("Failed to open journal: Permission denied\n"); err == nil {
		t.Error("an error that is not an ignored file parsed")
	}
}

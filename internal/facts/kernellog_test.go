package facts

import (
	"slices"
	"testing"
)

// unstamped is a kernel log of boot "b" printed without stamps (printk.time=0): each message
// is its own line.
func unstamped(msgs ...string) KernelLog {
	l := KernelLog{BootID: "b"}
	for _, m := range msgs {
		l.Lines = append(l.Lines, LogLine{Raw: m, Text: m})
	}
	return l
}

func texts(lines []LogLine) []string {
	out := []string{}
	for _, l := range lines {
		out = append(out, l.Text)
	}
	return out
}

// numbered are messages "<prefix>1" … "<prefix>n".
func numbered(prefix string, n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, prefix+string(rune('0'+i/10))+string(rune('0'+i%10)))
	}
	return out
}

func TestKernelLogPlaceUnstamped(t *testing.T) {
	const xid = "NVRM: Xid (PCI:0000:62:00): 74, pid=4242, name=all_reduce_perf, NVLink: fatal error detected on link 3"
	short := []string{"Linux version 7.0.0-1014-aws", "Command line: ro", "efa: loading out-of-tree module", "nvidia-fabricmanager: Fabric Manager started"}
	long := numbered("boot line ", 12) // longer than the run that places a mark
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	tests := []struct {
		name   string
		before []string
		now    []string
		after  []string
		sure   bool
	}{
		{"nothing logged since", short, short, nil, true},
		{"lines appended", short, cat(short, []string{xid, "x"}), []string{xid, "x"}, true},
		{"the mark's last message logged again after the Xid, nothing dropped", short, cat(short, []string{xid, short[3]}), []string{xid, short[3]}, true},
		{"the whole run logged again after the Xid, nothing dropped", short, cat(short, []string{xid}, short), cat([]string{xid}, short), true},
		// The ring buffer dropped its two oldest lines and took three new ones: the run still
		// stands, earlier than its place; found there, but not for certain the mark.
		{"lines shifted (wrapped)", long, cat(long[2:], []string{"a", xid, "c"}), []string{"a", xid, "c"}, false},
		// Every line of the mark is gone: the whole log is after it.
		{"full wrap", long, []string{"a", xid, "c"}, []string{"a", xid, "c"}, true},
		{"full wrap to the same length", short, []string{"a", "b", xid, "c"}, []string{"a", "b", xid, "c"}, true},
		// The known miss of a one-line mark: the log wrapped to the same length and its last
		// line is the mark's last message again, logged after the Xid; one line placed the
		// mark at the end and nothing was judged.
		{"wrapped to the same length, the mark's last message again after the Xid", short, []string{short[2], short[3], xid, short[3]},
			[]string{short[2], short[3], xid, short[3]}, true},
		// Shifted, and the mark's last message logged again after the Xid: looked up from the end
		// by one line, the copy placed the mark after the Xid.
		{"shifted, the mark's last message again after the Xid", short, []string{short[1], short[2], short[3], xid, short[3]},
			[]string{short[1], short[2], short[3], xid, short[3]}, true},
		// The run logged again later, the mark still in the log: the earliest match is the
		// mark, so the Xid between them is after it.
		{"shifted, the whole run again after the Xid", long, cat(long[3:], []string{xid}, long[4:]), cat([]string{xid}, long[4:]), false},
		// The mark dropped, and the run logged again where the mark could still stand: the
		// copy cannot be told from the mark. Placed after it, the Xid before it is not after
		// the mark: sure is false, so the judge must not trust it alone.
		{"the mark dropped, the run logged again after the Xid", long, cat([]string{xid}, long[4:], []string{"d"}), []string{"d"}, false},
		{"cleared (dmesg -c), nothing logged since", short, nil, []string{}, true},
	}
	for _, tt := range tests {
		p := unstamped(tt.before...).End()
		got, sure := unstamped(tt.now...).Place(p)
		if !slices.Equal(texts(got), append([]string{}, tt.after...)) || sure != tt.sure {
			t.Errorf("%s: after %q sure %v, want %q sure %v", tt.name, texts(got), sure, tt.after, tt.sure)
		}
		if a := unstamped(tt.now...).After(p); !slices.Equal(a, got) {
			t.Errorf("%s: After and Place differ", tt.name)
		}
	}
}

func TestKernelLogPlaceStampedAndOtherBoot(t *testing.T) {
	stamped := func(stamps ...float64) KernelLog {
		l := KernelLog{BootID: "b"}
		for _, s := range stamps {
			l.Lines = append(l.Lines, LogLine{Text: "m", Stamp: s, Stamped: true})
		}
		return l
	}
	p := stamped(1, 2, 3).End()
	if got, sure := stamped(2, 3, 4, 5).Place(p); len(got) != 2 || got[0].Stamp != 4 || !sure {
		t.Errorf("stamped, shifted: %v %v", got, sure)
	}
	if got, sure := stamped(1, 2, 3).Place(p); len(got) != 0 || !sure {
		t.Errorf("stamped, nothing new: %v %v", got, sure)
	}
	other := stamped(0.5)
	other.BootID = "c"
	if got, sure := other.Place(p); len(got) != 1 || !sure {
		t.Errorf("another boot: %v %v", got, sure)
	}
	if p := unstamped(numbered("l", 20)...).End(); len(p.Tail) != markTail || p.Tail[markTail-1] != "l20" || p.FirstText != "l01" || p.Lines != 20 || p.HasStamp {
		t.Errorf("end: %+v", p)
	}
}

package kernlog

import (
	"slices"
	"strings"
	"testing"
)

const before = `[    0.000000] Linux version 7.0.0-1014-aws
[   12.311904] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  595.91.07
[   14.022173] gdrdrv:gdrdrv_init: loading gdrdrv version 2.5.1`

func TestAfter(t *testing.T) {
	p := Mark(before, "boot-1")
	if p.Lines != 3 || !p.HasStamp || p.Stamp != 14.022173 {
		t.Fatalf("Mark = %+v", p)
	}
	during := before + "\n[  812.000001] NVRM: Xid (PCI:0000:1e:00): 74, pid=4242, name=all_reduce_perf, NVLink: fatal error detected\n[  812.000002] NVRM: continuation without a new event"
	got := After(during, "boot-1", p)
	if len(got) != 2 || !strings.Contains(got[0], "Xid") {
		t.Errorf("After = %q", got)
	}
	if got := After(before, "boot-1", p); len(got) != 0 {
		t.Errorf("nothing new: %q", got)
	}
	// The ring buffer dropped the oldest lines: timestamps still place the new ones.
	rotated := strings.SplitN(during, "\n", 3)[2]
	if got := After(rotated, "boot-1", p); len(got) != 2 {
		t.Errorf("after rotation: %q", got)
	}
	// Another boot: the whole log is after.
	if got := After(before, "boot-2", p); !slices.Equal(got, strings.Split(before, "\n")) {
		t.Errorf("other boot: %q", got)
	}
}

func TestAfterWithoutTimestamps(t *testing.T) {
	log := "a\nb"
	p := Mark(log, "b1")
	if p.HasStamp || p.Lines != 2 {
		t.Fatalf("Mark = %+v", p)
	}
	if got := After(log+"\nc\nd", "b1", p); !slices.Equal(got, []string{"c", "d"}) {
		t.Errorf("After = %q", got)
	}
	if got := After("", "b1", Mark("", "b1")); got != nil {
		t.Errorf("empty: %q", got)
	}
}

func TestStamp(t *testing.T) {
	for in, want := range map[string]float64{"[    5.208331] efa": 5.208331, "  [12.5] x": 12.5} {
		if v, ok := stamp(in); !ok || v != want {
			t.Errorf("stamp(%q) = %v %v", in, v, ok)
		}
	}
	for _, in := range []string{"[Fri Apr  5 21:29:39 2024] NVRM", "no stamp", "[-1.0] x", "[12.5 x"} {
		if _, ok := stamp(in); ok {
			t.Errorf("stamp(%q) accepted", in)
		}
	}
}

func FuzzAfter(f *testing.F) {
	f.Add(before, before+"\n[ 99.0] x", "b", "b")
	f.Fuzz(func(t *testing.T, a, b, bootA, bootB string) {
		p := Mark(a, bootA)
		got := After(b, bootB, p)
		if len(got) > len(split(b)) {
			t.Fatalf("After returned more lines than the log has")
		}
		if bootA == bootB && a == b && len(got) != 0 && p.HasStamp {
			// An unchanged log has nothing after its own end, unless stamps go backwards.
			last, _ := stamp(got[0])
			if last <= p.Stamp {
				t.Fatalf("line %q not after %v", got[0], p.Stamp)
			}
		}
	})
}

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"[  812.000001] NVRM: Xid (PCI:0000:1e:00): 79, GPU": "NVRM: Xid (PCI:0000:1e:00): 79, GPU",
		"[    0.000000] Linux version 7.0.0-1014-aws":        "Linux version 7.0.0-1014-aws",
		"no stamp at all":                    "no stamp at all",
		"[Fri Apr  5 21:29:39 2024] NVRM: x": "[Fri Apr  5 21:29:39 2024] NVRM: x",
		"[1.5]":                              "",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

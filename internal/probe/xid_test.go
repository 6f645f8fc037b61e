package probe

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func TestXidFaults(t *testing.T) {
	runFaults(t, []fault{
		{"Xid 79", func(s map[string]bundle.Section) {
			set(s, sectionDmesg, s[sectionDmesg].Output+"\n[  812.000001] NVRM: Xid (PCI:0000:1e:00): 79, pid=4242, name=all_reduce_perf, GPU has fallen off the bus.", 0)
		}, nil, []string{result.Xid}, "retire the instance"},
		{"SXid fatal", func(s map[string]bundle.Section) {
			set(s, sectionDmesg, s[sectionDmesg].Output+"\n[ 9.1] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up", 0)
		}, nil, []string{result.Xid}, "SXid 20034"},
		{"unreadable Xid line", func(s map[string]bundle.Section) {
			set(s, sectionDmesg, s[sectionDmesg].Output+"\n[ 9.1] NVRM: Xid (PCI:0000:1e", 0)
		}, nil, []string{result.Xid}, "unreadable"},
		{"Xid 79 not ignored by other numbers", func(s map[string]bundle.Section) {
			set(s, sectionDmesg, s[sectionDmesg].Output+"\n[ 9.1] NVRM: Xid (PCI:0000:1e:00): 79, GPU has fallen off the bus.", 0)
		}, func(e *settings.Expectations) { e.IgnoreXids = []int{31, 43} }, []string{result.Xid}, "Xid 79"},
		{"dmesg not permitted", func(s map[string]bundle.Section) {
			set(s, sectionDmesg, "dmesg: read kernel buffer failed: Operation not permitted", 1)
		}, nil, []string{result.Xid}, "sudo"},
		{"dmesg timed out", func(s map[string]bundle.Section) { set(s, sectionDmesg, "", 124) }, nil, []string{result.Xid}, "timed out"},
		// A layer logged an Xid and cleared the ring buffer (dmesg -c): only journald kept it.
		{"Xid only in the journal", func(s map[string]bundle.Section) {
			set(s, sectionJournalKernel, s[sectionJournalKernel].Output+"\n[  812.000101] ip-10-1-42-17 kernel: NVRM: Xid (PCI:0000:1e:00): 79, pid=4242, name=all_reduce_perf, GPU has fallen off the bus.", 0)
			set(s, sectionDmesg, "[  815.000001] ena 0000:00:05.0: Elastic Network Adapter (ENA) link up", 0)
		}, nil, []string{result.Xid}, "only in the journal"},
		{"journalctl missing", func(s map[string]bundle.Section) {
			set(s, sectionJournalKernel, "journalctl: not found (looked in /usr/bin/journalctl, /bin/journalctl, PATH)", 127)
		}, nil, []string{result.Xid}, "journalctl: not found"},
		{"journalctl failed", func(s map[string]bundle.Section) {
			set(s, sectionJournalKernel, "No journal files were opened due to insufficient permissions.", 1)
		}, nil, []string{result.Xid}, "exited 1"},
		{"journal unparsable", func(s map[string]bundle.Section) {
			set(s, sectionJournalKernel, "Failed to iterate through journal: Bad message\n"+s[sectionJournalKernel].Output, 0)
		}, nil, []string{result.Xid}, "Bad message"},
	})
}

// journald keeping nothing of this boot (Storage=none) is a warning, never a pass: what a
// layer cleared from the ring buffer cannot be seen.
func TestJournalWithoutKernelMessagesWarns(t *testing.T) {
	checks := evaluate(t, func(s map[string]bundle.Section) { set(s, sectionJournalKernel, "", 0) }, nil)
	for _, c := range checks {
		switch {
		case c.ID == result.Xid && (c.Status != result.Warn || !strings.Contains(c.Message, "Storage=persistent")):
			t.Errorf("xid: %s: %s", c.Status, c.Message)
		case c.ID != result.Xid && c.Status != result.Pass:
			t.Errorf("%s: %s: %s", c.ID, c.Status, c.Message)
		}
	}
}

// A journal file journalctl skipped (truncated by an unclean shutdown, as real hosts show) is
// read as a warning of the probe's fact, not as an unparsable journal: xid warns, naming it.
func TestJournalFileIgnoredWarns(t *testing.T) {
	const w = "Journal file /var/log/journal/3896cb836fb54877836a1c5b0928ffc1/system@00061e84932b9110-fcfc2bf59397404f.journal~ is truncated, ignoring file."
	checks := evaluate(t, func(s map[string]bundle.Section) {
		set(s, sectionJournalKernel, w+"\n"+s[sectionJournalKernel].Output, 0)
	}, nil)
	for _, c := range checks {
		if c.ID == result.Xid && (c.Status != result.Warn || !strings.Contains(c.Message, "system@00061e84932b9110") || !strings.Contains(c.Evidence, w)) {
			t.Errorf("xid: %s: %s", c.Status, c.Message)
		}
	}
}

// The healthy fixture's journal holds the same records as its dmesg (other timestamps, one
// record of systemd's): nothing is counted twice and the check passes.
func TestJournalAndDmesgAgree(t *testing.T) {
	s := healthySections(t)
	h := ParseHost(s)
	if !h.KernelJournal.OK() || len(h.KernelJournal.Value.Entries) != 11 {
		t.Fatalf("journal: %q, %d entries", h.KernelJournal.Problem, len(h.KernelJournal.Value.Entries))
	}
	xid := "NVRM: Xid (PCI:0000:1e:00): 79, pid=4242, name=all_reduce_perf, GPU has fallen off the bus."
	set(s, sectionDmesg, s[sectionDmesg].Output+"\n[  812.000001] "+xid, 0)
	set(s, sectionJournalKernel, s[sectionJournalKernel].Output+"\n[  812.000090] ip-10-1-42-17 kernel: "+xid, 0)
	c := statusOf(hostChecks(ParseHost(s), Resolve(s, p6Pins(), "")), result.Xid)
	if c.Status != result.Fail || !strings.Contains(c.Message, "x1") || strings.Contains(c.Message, "only in the journal") {
		t.Errorf("an Xid in both: %s %q: %s", c.Status, c.Actual, c.Message)
	}
}

// With ssh_pty = true util-linux colours dmesg; the colours must not hide an Xid.
func TestColouredKernelLog(t *testing.T) {
	s := healthySections(t)
	set(s, sectionDmesg, s[sectionDmesg].Output+"\n\x1b[32m[  812.000001] \x1b[0m\x1b[33mNVRM: Xid (PCI:0000:1e:00): 79\x1b[0m, pid=4242, name=all_reduce_perf, GPU has fallen off the bus.", 0)
	c := statusOf(hostChecks(ParseHost(s), Resolve(s, p6Pins(), "")), result.Xid)
	if c.Status != result.Fail || !strings.Contains(c.Message, "Xid 79") {
		t.Errorf("coloured Xid 79: %s: %s", c.Status, c.Message)
	}
}

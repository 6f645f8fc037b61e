package checks

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/kernlog"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func TestXidFaults(t *testing.T) {
	runFaults(t, []fault{
		{"Xid 79", func(s map[string]bundle.Section) {
			set(s, HostSectionDmesg, s[HostSectionDmesg].Output+"\n[  812.000001] NVRM: Xid (PCI:0000:1e:00): 79, pid=4242, name=all_reduce_perf, GPU has fallen off the bus.", 0)
		}, nil, []string{result.Xid}, "retire the instance"},
		{"SXid fatal", func(s map[string]bundle.Section) {
			set(s, HostSectionDmesg, s[HostSectionDmesg].Output+"\n[ 9.1] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up", 0)
		}, nil, []string{result.Xid}, "SXid 20034"},
		{"unreadable Xid line", func(s map[string]bundle.Section) {
			set(s, HostSectionDmesg, s[HostSectionDmesg].Output+"\n[ 9.1] NVRM: Xid (PCI:0000:1e", 0)
		}, nil, []string{result.Xid}, "unreadable"},
		{"Xid 79 not ignored by other numbers", func(s map[string]bundle.Section) {
			set(s, HostSectionDmesg, s[HostSectionDmesg].Output+"\n[ 9.1] NVRM: Xid (PCI:0000:1e:00): 79, GPU has fallen off the bus.", 0)
		}, func(e *Expectations) { e.IgnoreXids = []int{31, 43} }, []string{result.Xid}, "Xid 79"},
		{"dmesg not permitted", func(s map[string]bundle.Section) {
			set(s, HostSectionDmesg, "dmesg: read kernel buffer failed: Operation not permitted", 1)
		}, nil, []string{result.Xid}, "sudo"},
		{"dmesg timed out", func(s map[string]bundle.Section) { set(s, HostSectionDmesg, "", 124) }, nil, []string{result.Xid}, "timed out"},
	})
}

func TestJudgeXidAfter(t *testing.T) {
	s := healthySections(t)
	tg := Resolve(s, p6Pins(), "")
	log := s[HostSectionDmesg].Output
	before := checkXid(s, tg)
	if before.Status != result.Pass {
		t.Fatalf("healthy log: %s", before.Status)
	}
	p := kernlog.Mark(log, "boot-1")
	during := log + "\n[ 9000.000001] NVRM: Xid (PCI:0000:62:00): 74, pid=4242, name=all_reduce_perf, NVLink: fatal error detected on link 3"

	c := JudgeXidAfter(before, during, "boot-1", p, tg, "during the NCCL test")
	if c.Status != result.Fail || !strings.Contains(c.Message, "during the NCCL test") || !strings.Contains(c.Message, "Xid 74") || !strings.Contains(c.Actual, "during the NCCL test") {
		t.Errorf("Xid during NCCL: %s %q: %s", c.Status, c.Actual, c.Message)
	}
	// Nothing new: the earlier verdict stands.
	if c := JudgeXidAfter(before, log, "boot-1", p, tg, "during the NCCL test"); c.Status != result.Pass {
		t.Errorf("no new lines: %s: %s", c.Status, c.Message)
	}
	// An Xid already in the log before the mark is the earlier check's, not "during".
	withOld := log + "\n[ 100.0] NVRM: Xid (PCI:0000:62:00): 79, GPU has fallen off the bus."
	old := checkXid(map[string]bundle.Section{HostSectionDmesg: {Name: HostSectionDmesg, Output: withOld}}, tg)
	pOld := kernlog.Mark(withOld, "boot-1")
	if c := JudgeXidAfter(old, withOld, "boot-1", pOld, tg, "during the NCCL test"); c.Status != result.Fail || strings.Contains(c.Message, "during") {
		t.Errorf("old Xid: %s: %s", c.Status, c.Message)
	}
	// Both: the message keeps the earlier finding and adds the new one.
	if c := JudgeXidAfter(old, withOld+"\n[ 9001.0] NVRM: Xid (PCI:0000:51:00): 74, NVLink", "boot-1", pOld, tg, "during the NCCL test"); !strings.Contains(c.Message, "Xid 79") || !strings.Contains(c.Message, "during the NCCL test: Xid 74") {
		t.Errorf("both: %s", c.Message)
	}
	// A log that cannot be read again is not a clean run.
	if c := JudgeXidAfter(before, "", "boot-1", p, tg, "during the NCCL test"); c.Status != result.Fail {
		t.Errorf("unreadable: %s", c.Status)
	}
	// Ignored numbers stay ignored during the test.
	tg.Expect.IgnoreXids = []int{74}
	if c := JudgeXidAfter(before, during, "boot-1", p, tg, "during the NCCL test"); c.Status != result.Pass {
		t.Errorf("ignored Xid 74 during: %s: %s", c.Status, c.Message)
	}
}

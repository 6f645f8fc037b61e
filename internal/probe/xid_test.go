package probe

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	judge "github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
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
		}, func(e *judge.Expectations) { e.IgnoreXids = []int{31, 43} }, []string{result.Xid}, "Xid 79"},
		{"dmesg not permitted", func(s map[string]bundle.Section) {
			set(s, sectionDmesg, "dmesg: read kernel buffer failed: Operation not permitted", 1)
		}, nil, []string{result.Xid}, "sudo"},
		{"dmesg timed out", func(s map[string]bundle.Section) { set(s, sectionDmesg, "", 124) }, nil, []string{result.Xid}, "timed out"},
	})
}

// With ssh_pty = true util-linux colours dmesg; the colours must not hide an Xid.
func TestColouredKernelLog(t *testing.T) {
	s := healthySections(t)
	set(s, sectionDmesg, s[sectionDmesg].Output+"\n\x1b[32m[  812.000001] \x1b[0m\x1b[33mNVRM: Xid (PCI:0000:1e:00): 79\x1b[0m, pid=4242, name=all_reduce_perf, GPU has fallen off the bus.", 0)
	c := statusOf(judge.EvaluateHost(ParseHost(s), Resolve(s, p6Pins(), "")), result.Xid)
	if c.Status != result.Fail || !strings.Contains(c.Message, "Xid 79") {
		t.Errorf("coloured Xid 79: %s: %s", c.Status, c.Message)
	}
}

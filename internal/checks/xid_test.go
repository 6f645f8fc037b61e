package checks

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/kernlog"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

const healthyLog = `[    0.000000] Linux version 7.0.0-1014-aws (buildd@lcy02-amd64-015)
[   12.311904] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  595.91.07
[   14.022173] gdrdrv:gdrdrv_init: loading gdrdrv version 2.5.1`

// xidAfter judges log's lines after p as the bake does after the NCCL test, folded into earlier.
func xidAfter(earlier result.Check, log string, p facts.LogPosition, tg Target) result.Check {
	f := facts.Read(probe.ReadKernelLog(log, "boot-1"), "")
	if log == "" {
		f = facts.Unread[facts.KernelLog]("dmesg printed nothing", "")
	}
	return foldXid(earlier, kernelLogVerdict(f, &facts.Mark{Position: p, During: "during the NCCL test"}, tg))
}

func TestJudgeXidAfter(t *testing.T) {
	tg := Target{}
	log := healthyLog
	before := kernelLogVerdict(facts.Read(probe.ReadKernelLog(log, "boot-1"), ""), nil, tg)
	if before.Status != result.Pass {
		t.Fatalf("healthy log: %s", before.Status)
	}
	p := probe.ReadKernelLog(log, "boot-1").End()
	during := log + "\n[ 9000.000001] NVRM: Xid (PCI:0000:62:00): 74, pid=4242, name=all_reduce_perf, NVLink: fatal error detected on link 3"

	c := xidAfter(before, during, p, tg)
	if c.Status != result.Fail || !strings.Contains(c.Message, "during the NCCL test") || !strings.Contains(c.Message, "Xid 74") || !strings.Contains(c.Actual, "during the NCCL test") {
		t.Errorf("Xid during NCCL: %s %q: %s", c.Status, c.Actual, c.Message)
	}
	// Nothing new: the earlier verdict stands.
	if c := xidAfter(before, log, p, tg); c.Status != result.Pass {
		t.Errorf("no new lines: %s: %s", c.Status, c.Message)
	}
	// An Xid already in the log before the mark is the earlier check's, not "during".
	withOld := log + "\n[ 100.0] NVRM: Xid (PCI:0000:62:00): 79, GPU has fallen off the bus."
	old := kernelLogVerdict(facts.Read(probe.ReadKernelLog(withOld, "boot-1"), ""), nil, tg)
	pOld := probe.ReadKernelLog(withOld, "boot-1").End()
	if c := xidAfter(old, withOld, pOld, tg); c.Status != result.Fail || strings.Contains(c.Message, "during") {
		t.Errorf("old Xid: %s: %s", c.Status, c.Message)
	}
	// Both: the message keeps the earlier finding and adds the new one.
	if c := xidAfter(old, withOld+"\n[ 9001.0] NVRM: Xid (PCI:0000:51:00): 74, NVLink", pOld, tg); !strings.Contains(c.Message, "Xid 79") || !strings.Contains(c.Message, "during the NCCL test: Xid 74") {
		t.Errorf("both: %s", c.Message)
	}
	// A log that cannot be read again is not a clean run.
	if c := xidAfter(before, "", p, tg); c.Status != result.Fail {
		t.Errorf("unreadable: %s", c.Status)
	}
	// Ignored numbers stay ignored during the test.
	tg.Expect.IgnoreXids = []int{74}
	if c := xidAfter(before, during, p, tg); c.Status != result.Pass {
		t.Errorf("ignored Xid 74 during: %s: %s", c.Status, c.Message)
	}
}

// journalOf renders dmesg-style lines as journalctl -k -o short-monotonic prints them, with
// the journal's own (different) timestamps.
func journalOf(t *testing.T, lines ...string) facts.Fact[facts.KernelJournal] {
	t.Helper()
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "[%5d.%06d] ip-10-1-42-17 kernel: %s\n", 3+i, 100+i, kernlog.Text(l))
	}
	j, err := probe.ReadKernelJournal(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return facts.Read(j, "")
}

func withIgnored(j facts.Fact[facts.KernelJournal], warnings ...string) facts.Fact[facts.KernelJournal] {
	j.Value.Ignored = warnings
	return j
}

func TestJudgeBoot(t *testing.T) {
	xid79 := "[  700.000001] NVRM: Xid (PCI:0000:51:00): 79, pid=1, name=x, GPU has fallen off the bus."
	xid74 := "[  812.000001] NVRM: Xid (PCI:0000:62:00): 74, pid=4242, name=all_reduce_perf, NVLink: fatal error detected on link 3"
	healthy := strings.Split(healthyLog, "\n")
	dmesg := func(lines ...string) facts.Fact[facts.KernelLog] {
		return facts.Read(probe.ReadKernelLog(strings.Join(lines, "\n"), "boot-1"), "")
	}
	all := func(extra ...string) []string { return append(slices.Clone(healthy), extra...) }
	tests := []struct {
		name    string
		dmesg   facts.Fact[facts.KernelLog]
		journal facts.Fact[facts.KernelJournal]
		ignore  []int
		status  result.Status
		want    []string // substrings of the message
		actual  string
	}{
		{"both clean", dmesg(healthy...), journalOf(t, healthy...), nil, result.Pass, nil, "none"},
		{"cleared from the ring buffer, kept in the journal", dmesg(), journalOf(t, all(xid79)...), nil, result.Fail,
			[]string{"Xid 79", "x1", "1 of them only in the journal", "dmesg -c"}, "1 events"},
		{"ring buffer lost its head (overflow): the journal has it", dmesg(healthy[2:]...), journalOf(t, all(xid79)...), nil, result.Fail,
			[]string{"Xid 79 on PCI 0000:51:00 x1"}, ""},
		{"in both: one event, not two", dmesg(all(xid79)...), journalOf(t, all(xid79)...), nil, result.Fail,
			[]string{"Xid 79 on PCI 0000:51:00 x1"}, "1 events"},
		{"logged twice, once cleared: two events", dmesg(all(xid79)...), journalOf(t, all(xid79, xid79)...), nil, result.Fail,
			[]string{"x2", "1 of them only in the journal"}, "2 events"},
		{"only dmesg has it (journald missed it)", dmesg(all(xid79)...), journalOf(t, healthy...), nil, result.Fail,
			[]string{"Xid 79"}, "1 events"},
		{"ignored in the journal too", dmesg(healthy...), journalOf(t, all(xid74)...), []int{74}, result.Pass,
			[]string{"only ignored Xids: Xid 74"}, "1 ignored events"},
		{"journal holds nothing: warn, never pass", dmesg(healthy...), facts.Read(facts.KernelJournal{}, "[host.journal_kernel: exit 0]\n"), nil, result.Warn,
			[]string{"no kernel message of this boot", "Storage=persistent", "dmesg -c"}, "journal: no kernel messages"},
		{"journal holds nothing, dmesg has an Xid: fail", dmesg(all(xid79)...), facts.Read(facts.KernelJournal{}, ""), nil, result.Fail,
			[]string{"Xid 79"}, ""},
		{"journal files ignored (truncated), the rest clean: warn, never pass", dmesg(healthy...), withIgnored(journalOf(t, healthy...), "Journal file /var/log/journal/m/system@1-2.journal~ is truncated, ignoring file."), nil, result.Warn,
			[]string{"ignored 1 journal file", "is truncated", "journalctl --rotate"}, "journal files ignored"},
		{"journal files ignored and an Xid: fail", dmesg(), withIgnored(journalOf(t, all(xid79)...), "Journal file /x corrupted, ignoring file."), nil, result.Fail,
			[]string{"Xid 79"}, "1 events"},
		{"journal unreadable: fail", dmesg(healthy...), facts.Unread[facts.KernelJournal]("host.journal_kernel: command not found (exit 127): journalctl: not found", ""), nil, result.Fail,
			[]string{"could not be read", "journalctl: not found", "passwordless sudo"}, "kernel journal unreadable"},
		{"journal unreadable and an Xid: both told", dmesg(all(xid79)...), facts.Unread[facts.KernelJournal]("host.journal_kernel: exited 1", ""), nil, result.Fail,
			[]string{"Xid 79", "and the kernel journal could not be read"}, ""},
		{"ring buffer emptied (dmesg -c), journal clean: judged from the journal", dmesg(), journalOf(t, healthy...), nil, result.Pass,
			[]string{"ring buffer is empty", "3 kernel records"}, "none"},
		{"ring buffer emptied, journal keeps nothing: fail", dmesg(), facts.Read(facts.KernelJournal{}, ""), nil, result.Fail,
			[]string{"dmesg printed nothing", "journal holds no kernel message", "Storage=persistent"}, "kernel log empty"},
		{"dmesg unreadable: fail whatever the journal", facts.Unread[facts.KernelLog]("dmesg printed nothing", ""), journalOf(t, healthy...), nil, result.Fail,
			[]string{"dmesg printed nothing"}, "kernel log unreadable"},
	}
	for _, tt := range tests {
		tg := Target{}
		tg.Expect.IgnoreXids = tt.ignore
		c := judgeXid(facts.Run{Host: facts.Host{KernelLog: tt.dmesg, KernelJournal: tt.journal}}, tg)
		if c.Status != tt.status || !strings.Contains(c.Actual, tt.actual) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
		for _, w := range tt.want {
			if !strings.Contains(c.Message, w) {
				t.Errorf("%s: message %q lacks %q", tt.name, c.Message, w)
			}
		}
		if c.ID != result.Xid || !strings.Contains(c.Expected, "journal") {
			t.Errorf("%s: id %q expected %q", tt.name, c.ID, c.Expected)
		}
	}
}

// After a layer's reboot all of this boot is after the mark (of the boot before): it is judged
// from dmesg and the journal as a whole boot is, and the verdict names the step. A mark of this
// same boot (the NCCL test's) judges dmesg's lines after it alone.
func TestJudgeXidSinceMark(t *testing.T) {
	xid79 := "[  700.000001] NVRM: Xid (PCI:0000:51:00): 79, pid=1, name=x, GPU has fallen off the bus."
	healthy := strings.Split(healthyLog, "\n")
	reboot := &facts.Mark{Position: facts.LogPosition{BootID: "old"}, During: "since the reboot of layer \"x\""}
	dmesg := facts.Read(probe.ReadKernelLog(healthyLog, "boot-1"), "")
	tests := []struct {
		name    string
		since   *facts.Mark
		journal facts.Fact[facts.KernelJournal]
		status  result.Status
		want    string
	}{
		{"reboot mark, both clean", reboot, journalOf(t, healthy...), result.Pass, ""},
		{"reboot mark, cleared by a later layer, kept in the journal", reboot, journalOf(t, append(slices.Clone(healthy), xid79)...), result.Fail, "since the reboot of layer \"x\": Xid 79"},
		{"reboot mark, journal unreadable", reboot, facts.Unread[facts.KernelJournal]("host.journal_kernel: exited 1", ""), result.Fail, "since the reboot of layer \"x\": the kernel journal could not be read"},
		{"mark of this boot: dmesg alone", &facts.Mark{Position: dmesg.Value.End(), During: "during the NCCL test"},
			facts.Unread[facts.KernelJournal]("host.journal_kernel: exited 1", ""), result.Pass, ""},
	}
	for _, tt := range tests {
		c := judgeXid(facts.Run{Host: facts.Host{KernelLog: dmesg, KernelJournal: tt.journal}}, Target{KernelLogSince: tt.since})
		if c.Status != tt.status || !strings.Contains(c.Message, tt.want) {
			t.Errorf("%s: %s: %s", tt.name, c.Status, c.Message)
		}
	}
}

// An Xid logged during the NCCL test and then cleared from the ring buffer (dmesg -c) or
// overflowed out of it is gone from dmesg after the test but kept in the journal: the load's
// verdict reads the journal's records after the mark and fails, naming the journal.
func TestJudgeXidDuringLoadFromTheJournal(t *testing.T) {
	xid74 := "[ 9000.000001] NVRM: Xid (PCI:0000:62:00): 74, pid=4242, name=all_reduce_perf, NVLink: fatal error detected on link 3"
	later := "[ 9100.000001] nvme nvme1: I/O 17 QID 3 timeout, completion polled"
	healthy := strings.Split(healthyLog, "\n")
	dmesg := func(lines ...string) facts.Fact[facts.KernelLog] {
		return facts.Read(probe.ReadKernelLog(strings.Join(lines, "\n"), "boot-1"), "")
	}
	all := func(extra ...string) []string { return append(slices.Clone(healthy), extra...) }
	// The mark: where dmesg and the journal ended before the test.
	mark := facts.Mark{Position: facts.EndOf(dmesg(healthy...), journalOf(t, healthy...)), During: "during the NCCL test"}
	tests := []struct {
		name    string
		mark    facts.Mark
		dmesg   facts.Fact[facts.KernelLog]
		journal facts.Fact[facts.KernelJournal]
		ignore  []int
		status  result.Status
		want    []string // substrings of the message
		actual  string
	}{
		{"clean test, both readings", mark, dmesg(all(later)...), journalOf(t, all(later)...), nil, result.Pass, nil, "none"},
		{"cleared with dmesg -c during the test, kept in the journal", mark, dmesg(later), journalOf(t, all(xid74, later)...), nil, result.Fail,
			[]string{"during the NCCL test: Xid 74 on PCI 0000:62:00 x1", "no longer in the kernel ring buffer", "read from the journal"}, "during the NCCL test"},
		{"overflowed out of the ring buffer, kept in the journal", mark, dmesg(later, later, later), journalOf(t, all(xid74, later, later, later)...), nil, result.Fail,
			[]string{"Xid 74", "read from the journal"}, "1 events"},
		{"cleared and nothing logged since: the journal still has it", mark, dmesg(), journalOf(t, all(xid74)...), nil, result.Fail,
			[]string{"Xid 74", "read from the journal"}, "1 events"},
		{"in dmesg and the journal: one event, not read from the journal", mark, dmesg(all(xid74, later)...), journalOf(t, all(xid74, later)...), nil, result.Fail,
			[]string{"during the NCCL test: Xid 74 on PCI 0000:62:00 x1"}, "1 events"},
		{"an Xid before the mark, only in the journal, is not the test's", mark, dmesg(later), journalOf(t, append(slices.Clone(healthy[:2]), xid74, healthy[2], later)...), nil, result.Pass,
			nil, "none"},
		{"cleared, the journal's Xid is ignored", mark, dmesg(later), journalOf(t, all(xid74, later)...), []int{74}, result.Pass,
			nil, ""},
		{"the journal unreadable after the test: fail, naming it", mark, dmesg(all(later)...), facts.Unread[facts.KernelJournal]("host.journal_kernel: exited 1", ""), nil, result.Fail,
			[]string{"the kernel journal could not be read during the NCCL test", "was not judged"}, "kernel journal unreadable during the NCCL test"},
	}
	for _, tt := range tests {
		tg := Target{}
		tg.Expect.IgnoreXids = tt.ignore
		f := facts.Run{
			Host: facts.Host{KernelLog: dmesg(healthy...), KernelJournal: journalOf(t, healthy...)},
			Load: facts.Load{Ran: true, Mark: &tt.mark, KernelLog: tt.dmesg, KernelJournal: tt.journal},
		}
		c := judgeXid(f, tg)
		if c.Status != tt.status || !strings.Contains(c.Actual, tt.actual) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
		for _, w := range tt.want {
			if !strings.Contains(c.Message, w) {
				t.Errorf("%s: message %q lacks %q", tt.name, c.Message, w)
			}
		}
		if tt.status == result.Pass && strings.Contains(c.Message, "read from the journal") {
			t.Errorf("%s: a passing verdict claims a journal finding: %s", tt.name, c.Message)
		}
	}
}

// A kernel log without stamps (printk.time=0) places the NCCL test's mark by the run of its
// last lines; where the ring buffer dropped lines since, a copy of that run logged after an
// Xid can pass for the mark and hide the Xid (facts.KernelLog.Place). The journal's records
// after the mark, by its own stamps, judge the step then; with no journal record to place it,
// the check fails closed and says how to make it judge.
func TestJudgeXidDuringLoadUnstampedLog(t *testing.T) {
	xid74 := "NVRM: Xid (PCI:0000:62:00): 74, pid=4242, name=all_reduce_perf, NVLink: fatal error detected on link 3"
	var boot []string
	for i := 1; i <= 12; i++ {
		boot = append(boot, fmt.Sprintf("unstamped boot message %d", i))
	}
	dmesg := func(lines ...string) facts.Fact[facts.KernelLog] {
		return facts.Read(probe.ReadKernelLog(strings.Join(lines, "\n"), "boot-1"), "")
	}
	noJournal := facts.Read(facts.KernelJournal{}, "")
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	// Dropped its four oldest lines, logged the Xid, then the mark's last eight lines again.
	hidden := cat([]string{xid74}, boot[4:], []string{"after"})
	tests := []struct {
		name          string
		before, after facts.Fact[facts.KernelJournal]
		dmesg         facts.Fact[facts.KernelLog]
		status        result.Status
		want, wantNot string
	}{
		{"nothing dropped, clean, no journal: pass", noJournal, noJournal, dmesg(cat(boot, []string{"after"})...), result.Pass, "", ""},
		{"nothing dropped, an Xid, no journal: fail", noJournal, noJournal, dmesg(cat(boot, []string{xid74})...), result.Fail, "during the NCCL test: Xid 74", "no timestamps"},
		{"the run again after the Xid, the journal has it: fail from the journal", journalOf(t, boot...), journalOf(t, cat(boot, hidden)...), dmesg(hidden...), result.Fail,
			"read from the journal", ""},
		{"the run again after the Xid, no journal record: fail closed", noJournal, noJournal, dmesg(hidden...), result.Fail,
			"cannot be told for certain from earlier ones", "Xid 74"},
		{"shifted, clean, the journal places it: pass", journalOf(t, boot...), journalOf(t, cat(boot, []string{"a", "b"})...), dmesg(cat(boot[3:], []string{"a", "b"})...), result.Pass, "", ""},
		{"shifted, clean, no journal record: fail closed, naming printk.time", noJournal, noJournal, dmesg(cat(boot[3:], []string{"a", "b"})...), result.Fail,
			"printk.time=1", ""},
	}
	for _, tt := range tests {
		mark := facts.Mark{Position: facts.EndOf(dmesg(boot...), tt.before), During: "during the NCCL test"}
		c := xidSince(tt.dmesg, tt.after, mark, Target{})
		if c.Status != tt.status || !strings.Contains(c.Message, tt.want) || tt.wantNot != "" && strings.Contains(c.Message, tt.wantNot) {
			t.Errorf("%s: %s %q: %s", tt.name, c.Status, c.Actual, c.Message)
		}
	}
}

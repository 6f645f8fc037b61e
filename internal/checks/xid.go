package checks

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

func init() {
	register(Entry{
		ID: result.Xid, Phase: PhaseHost, Family: "kernel", Order: 330, Judge: judgeXid,
		Refined: []Phase{PhaseLoad},
		Doc:     "no NVIDIA Xid or SXid in the current boot's kernel log, before the layers, after them and **during** the NCCL test, except `ignore_xids`; each is classified by NVIDIA's Xid catalog (resolution bucket and action). The whole boot is read twice: from the kernel's ring buffer, once before the first layer and again after the last, and from the journal's copy of the kernel log, which a layer's `dmesg -c` or a full ring buffer cannot empty (an event in both counts once). A journal that cannot be read fails; a journal that holds no kernel message of this boot (journald `Storage=none`, `ReadKMsg=no`) warns, because what a layer cleared from the ring buffer cannot be seen. After a layer's reboot the new boot is judged the same way, from both, and the verdict names the layer. The lines of the NCCL test are read from the ring buffer after the test's mark, and from the journal's records after it, so an Xid that the test's run cleared from or pushed out of the ring buffer still fails; where the mark cannot be placed with certainty in a log without timestamps and the journal keeps no kernel record, the check fails and names `printk.time=1` and journald's settings",
		Reads:   "`sudo -n dmesg` (else `dmesg`); `sudo -n journalctl -k -b 0 -q --no-pager -o short-monotonic` (`journalctl` unprivileged only where sudo refuses)",
	})
}

const xidEvidenceLines = 40

// xidExpected says what the check wants, naming the ignored numbers.
func xidExpected(ignore []int) (string, map[int]bool) {
	set := map[int]bool{}
	var names []string
	for _, n := range ignore {
		if !set[n] {
			set[n] = true
			names = append(names, strconv.Itoa(n))
		}
	}
	e := "no Xid/SXid in the kernel log"
	if len(names) > 0 {
		e += " (ignoring " + strings.Join(names, ", ") + ")"
	}
	return e, set
}

// judgeXid is the xid check: this whole boot, from dmesg and the journal's copy of the kernel
// log, or the lines since the mark the bake set in the target. A mark of an earlier boot (a
// layer's reboot) puts all of this boot after it, which is what the journal's -b 0 holds:
// then the whole boot is judged from both, and the verdict names the step, so a later layer's
// dmesg -c hides nothing either. An Xid a bake read before its layers ran, in this same boot,
// stays judged when a layer cleared it; and once the load ran, the records logged during it,
// in dmesg and in the journal, are judged too.
func judgeXid(f facts.Run, t Target) result.Check {
	c := xidThisBoot(f.Host, t)
	if f.BootLog != nil {
		c = xidBeforeLayers(c, *f.BootLog, f.Host, t)
	}
	if l := f.Load; l.Mark != nil {
		c = foldXid(c, xidSince(l.KernelLog, l.KernelJournal, *l.Mark, t))
	}
	return c
}

// xidThisBoot judges the host reading's kernel log.
func xidThisBoot(h facts.Host, t Target) result.Check {
	since := t.KernelLogSince
	if since == nil {
		return xidBoot(h.KernelLog, h.KernelJournal, t)
	}
	if !h.KernelLog.OK() || since.Position.BootID == h.KernelLog.Value.BootID {
		return kernelLogVerdict(h.KernelLog, since, t)
	}
	c := xidBoot(h.KernelLog, h.KernelJournal, t)
	if c.Message != "" {
		c.Message = since.During + ": " + c.Message
	}
	if c.Status == result.Fail {
		c.Actual += " " + since.During
	}
	return c
}

// xidBeforeLayers keeps the verdict on an Xid the kernel logged before the layers ran, in this
// same boot, when the log no longer shows it: a layer cleared the ring buffer.
func xidBeforeLayers(cur result.Check, boot facts.Fact[facts.KernelLog], h facts.Host, t Target) result.Check {
	if !boot.OK() || len(boot.Value.Lines) == 0 || t.KernelLogSince != nil || cur.Status == result.Fail ||
		!h.KernelLog.OK() || h.KernelLog.Value.BootID != boot.Value.BootID {
		return cur
	}
	early := kernelLogVerdict(boot, nil, t)
	if early.Status != result.Fail {
		return cur
	}
	early.Message = "logged before the layers ran and no longer in the kernel log (a layer cleared it): " + early.Message
	return early
}

// xidSince judges what the kernel logged after mark: dmesg's lines after it, and the journal's
// records after it that dmesg no longer shows (cleared from the ring buffer, or overflowed out
// of it, during the step).
func xidSince(log facts.Fact[facts.KernelLog], journal facts.Fact[facts.KernelJournal], mark facts.Mark, t Target) result.Check {
	c, sure := kernelLogSince(log, &mark, t)
	if !log.OK() {
		return c
	}
	expected, ignore := xidExpected(t.Expect.IgnoreXids)
	if !journal.OK() {
		msg := "the kernel journal could not be read " + mark.During + ": " + journal.Problem + "; an Xid cleared from the ring buffer during it was not judged"
		if c.Status == result.Fail {
			c.Message += "; and " + msg
			return c
		}
		return check(result.Xid, result.Fail, BasisRule, expected, "kernel journal unreadable "+mark.During, msg, journal.Evidence)
	}
	entries, placed := journal.Value.After(mark.Position, log.Value.BootID)
	if !placed || len(journal.Value.Entries) == 0 {
		// No journal record places the step: dmesg's lines alone, if they could be placed.
		if !sure {
			return unplaced(c, mark)
		}
		return c
	}
	// The journal's records after the mark, by its own stamps, are all of the step's: an
	// Xid dmesg's lines lost, or that an unsure placement put before the mark, is among them.
	after := log.Value.After(mark.Position)
	only := journalOnly(after, entries)
	if len(only) == 0 {
		return c
	}
	later := classifyXid(append(logReports(after), only...), expected, ignore, mark.During)
	if later.Status == result.Fail {
		if n := journalFindings(only, ignore); n > 0 {
			later.Message += fmt.Sprintf("; %d of them logged %s and no longer in the kernel ring buffer (cleared with dmesg -c, or overflowed out of it): read from the journal", n, mark.During)
		}
		return later
	}
	return c
}

// journalFindings counts the journal-only records that fail the check: Xids not ignored and
// reports that cannot be read.
func journalFindings(only []xidRecord, ignore map[int]bool) int {
	n := 0
	for _, r := range only {
		if r.Unreadable || r.Xid != nil && !isIgnored(*r.Xid, ignore) {
			n++
		}
	}
	return n
}

// journalHowTo says how to make journald keep the kernel log.
const journalHowTo = "keep it: Storage=persistent in /etc/systemd/journald.conf (or Storage=auto, Ubuntu's default, " +
	"with /var/log/journal present) and ReadKMsg=yes, then restart systemd-journald"

// xidBoot judges every Xid of this boot: the ring buffer dmesg reads loses what a layer
// cleared (dmesg -c) and what overflowed it, so the journal's copy of the kernel log (journald
// reads each record as it is logged) is judged with it. A record in both is one event: they
// are matched by message, timestamps stripped (the journal's are journald's own clock). A
// journal that cannot be read fails; one that holds no kernel message of this boot warns,
// naming what could not be seen: neither passes what it could not judge.
func xidBoot(log facts.Fact[facts.KernelLog], journal facts.Fact[facts.KernelJournal], t Target) result.Check {
	c := xidBootRecords(log, journal, t)
	// journalctl skips a journal file it cannot read (truncated by an unclean shutdown,
	// corrupted) and says so: its records were not judged, so the boot is not proven clean.
	if !journal.OK() || len(journal.Value.Ignored) == 0 || c.Status != result.Pass {
		return c
	}
	msg := fmt.Sprintf("journalctl ignored %d journal file(s) it could not read, whose records were not judged: %s; "+
		"rotate the journal (journalctl --rotate) and remove the damaged files, or check them with journalctl --verify",
		len(journal.Value.Ignored), textcut.Head(strings.Join(journal.Value.Ignored, "; "), 600))
	if c.Message != "" {
		msg = c.Message + "; " + msg
	}
	return check(result.Xid, result.Warn, BasisRule, c.Expected, c.Actual+"; journal files ignored", msg,
		strings.TrimSpace(c.Evidence+"\n"+strings.Join(journal.Value.Ignored, "\n")))
}

// xidBootRecords judges the records dmesg and the journal hold (xidBoot).
func xidBootRecords(log facts.Fact[facts.KernelLog], journal facts.Fact[facts.KernelJournal], t Target) result.Check {
	expected, ignore := xidExpected(t.Expect.IgnoreXids)
	expected += "; dmesg and this boot's journal"
	dm := kernelLogVerdict(log, nil, t)
	dm.Expected = expected
	if !log.OK() {
		return dm
	}
	if !journal.OK() {
		msg := "the kernel journal could not be read (journalctl -k -b 0): " + journal.Problem +
			"; an Xid a layer cleared from the ring buffer (dmesg -c), or that overflowed it, was not judged " +
			"(the login user needs passwordless sudo for systemd's journalctl, /usr/bin/journalctl)"
		if dm.Status == result.Fail {
			dm.Message += "; and " + msg
			dm.Evidence = strings.TrimSpace(dm.Evidence + "\n" + journal.Evidence)
			return dm
		}
		return check(result.Xid, result.Fail, BasisRule, expected, "kernel journal unreadable", msg, journal.Evidence)
	}
	lines := log.Value.Lines
	if len(journal.Value.Entries) == 0 {
		if dm.Status == result.Fail {
			if len(lines) == 0 {
				dm.Message += "; and the journal holds no kernel message of this boot either (journald Storage=none, or ReadKMsg=no): " + journalHowTo
			}
			return dm
		}
		msg := "the journal holds no kernel message of this boot (journald Storage=none, or ReadKMsg=no): " +
			"an Xid a layer cleared from the ring buffer (dmesg -c), or that overflowed it, cannot be seen, " +
			"so only dmesg's lines were judged; " + journalHowTo
		if dm.Message != "" {
			msg = dm.Message + "; " + msg
		}
		return check(result.Xid, result.Warn, BasisRule, expected, "dmesg: "+dm.Actual+"; journal: no kernel messages of this boot",
			msg, strings.TrimSpace(dm.Evidence+"\n"+journal.Evidence))
	}
	// The journal's records that dmesg no longer shows, each matched once (the same message
	// logged twice is two records). An empty ring buffer (dmesg -c) leaves the journal's
	// records alone to judge.
	if len(lines) == 0 {
		dm = check(result.Xid, result.Pass, BasisRule, expected, "none", "", "")
	}
	only := journalOnly(lines, journal.Value.Entries)
	if len(only) == 0 {
		return dm
	}
	c := classifyXid(append(logReports(lines), only...), expected, ignore, "")
	if len(lines) == 0 && c.Status == result.Pass {
		c.Message = strings.TrimPrefix(c.Message+"; ", "; ") + fmt.Sprintf("the kernel ring buffer is empty (cleared with dmesg -c): judged from the journal's %d kernel records of this boot", len(only))
	}
	if c.Status == result.Fail {
		if n := journalFindings(only, ignore); n > 0 {
			c.Message += fmt.Sprintf("; %d of them only in the journal: logged in this boot, then cleared from the ring buffer (dmesg -c) or overflowed out of it", n)
		}
	}
	return c
}

// xidRecord is one kernel log record the xid check reads: its line, as evidence, and the
// report it is.
type xidRecord struct {
	Line string
	facts.XidReport
}

// logReports are dmesg's lines as records.
func logReports(lines []facts.LogLine) []xidRecord {
	out := make([]xidRecord, len(lines))
	for i, l := range lines {
		out[i] = xidRecord{l.Raw, l.XidReport}
	}
	return out
}

// journalOnly are the journal's records that dmesg's lines do not show, each matched once by
// message (the same message logged twice is two records; stamps differ between the two).
func journalOnly(lines []facts.LogLine, entries []facts.JournalEntry) []xidRecord {
	inDmesg := map[string]int{}
	for _, l := range lines {
		inDmesg[l.Text]++
	}
	var only []xidRecord
	for _, e := range entries {
		if inDmesg[e.Message] > 0 {
			inDmesg[e.Message]--
			continue
		}
		only = append(only, xidRecord{e.Line, e.XidReport})
	}
	return only
}

// kernelLogVerdict is the one verdict on Xids and SXids in dmesg's lines: any that is not
// ignored fails, and so does a line that mentions one but cannot be read, and so does a log
// that cannot be read (the step is not proven clean). With since set, only the lines logged
// after it are judged and the verdict names the step; lines that could not be placed after it
// for certain fail closed (unplaced).
func kernelLogVerdict(log facts.Fact[facts.KernelLog], since *facts.Mark, t Target) result.Check {
	c, sure := kernelLogSince(log, since, t)
	if !sure {
		return unplaced(c, *since)
	}
	return c
}

// unplaced is the verdict on a step's lines that dmesg alone could not place for certain (no
// stamps, and the ring buffer dropped lines since the mark; facts.KernelLog.Place): an Xid
// among them fails, and so does finding none, since an Xid logged during the step may have
// been taken for an earlier line.
func unplaced(c result.Check, mark facts.Mark) result.Check {
	msg := "the kernel log carries no timestamps and its ring buffer dropped lines " + mark.During +
		", so the lines logged " + mark.During + " cannot be told for certain from earlier ones, and the journal holds no kernel record to place them: " +
		"an Xid logged then may not have been judged; turn printk timestamps on (printk.time=1 on the kernel command line), or " + journalHowTo
	if c.Status == result.Fail {
		c.Message += "; and " + msg
		return c
	}
	return check(result.Xid, result.Fail, BasisRule, c.Expected, "kernel log unplaced "+mark.During, msg, c.Evidence)
}

// kernelLogSince is kernelLogVerdict before an unsure placement is judged: sure is false when
// the lines after since could not be placed for certain.
func kernelLogSince(log facts.Fact[facts.KernelLog], since *facts.Mark, t Target) (c result.Check, sure bool) {
	expected, ignore := xidExpected(t.Expect.IgnoreXids)
	when := ""
	if since != nil {
		when = since.During
	}
	if !log.OK() {
		msg := log.Problem + " (the login user needs passwordless sudo for dmesg, or kernel.dmesg_restrict=0)"
		if when != "" {
			msg = "the kernel log could not be read " + when + ": " + msg + "; Xids it may hold were not judged"
		}
		return check(result.Xid, result.Fail, BasisRule, expected, "kernel log unreadable", msg, log.Evidence), true
	}
	lines := log.Value.Lines
	if len(lines) == 0 {
		msg := "dmesg printed nothing: the kernel ring buffer is empty (cleared with dmesg -c), so it proves nothing"
		if when != "" {
			msg = "the kernel log could not be read " + when + ": " + msg + "; Xids it may have held were not judged"
		}
		return check(result.Xid, result.Fail, BasisRule, expected, "kernel log empty", msg, log.Evidence), true
	}
	sure = true
	if since != nil {
		lines, sure = log.Value.Place(since.Position)
	}
	return classifyXid(logReports(lines), expected, ignore, when), sure
}

// foldXid folds the verdict on the lines of a step (later) into the verdict on the log before
// it (earlier): a failure of either stands, and both are told.
func foldXid(earlier, later result.Check) result.Check {
	if later.Status != result.Fail {
		if earlier.ID == "" {
			return later
		}
		return earlier
	}
	if earlier.Status == result.Fail {
		later.Message = earlier.Message + "; " + later.Message
		later.Evidence = earlier.Evidence + "\n" + later.Evidence
	}
	return later
}

// isIgnored reports whether ignore_xids excuses e. It names Xids only: an SXid (an NVSwitch
// error) with the same number is never excused.
func isIgnored(e facts.XidEvent, ignore map[int]bool) bool { return ignore[e.Xid] && !e.SXid }

// classifyXid classifies records; when is "" for the whole log, or names the step the lines come
// from.
func classifyXid(records []xidRecord, expected string, ignore map[int]bool, when string) result.Check {
	var events []facts.XidEvent
	var unparsed []string
	for _, r := range records {
		switch {
		case r.Xid != nil:
			events = append(events, *r.Xid)
		case r.Unreadable:
			unparsed = append(unparsed, r.Line)
		}
	}
	type key struct {
		sxid bool
		n    int
		pci  string
	}
	var order []key
	groups := map[key][]facts.XidEvent{}
	var bad, ignored []facts.XidEvent
	for _, e := range events {
		if isIgnored(e, ignore) {
			ignored = append(ignored, e)
			continue
		}
		bad = append(bad, e)
		k := key{e.SXid, e.Xid, e.PCI}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], e)
	}
	var evLines []string
	for _, e := range bad {
		evLines = append(evLines, e.Line)
	}
	evLines = append(evLines, unparsed...)
	for _, e := range ignored {
		evLines = append(evLines, e.Line)
	}
	ev := ""
	if len(evLines) > 0 {
		if len(evLines) > xidEvidenceLines {
			evLines = append(evLines[:xidEvidenceLines], fmt.Sprintf("... (%d more lines)", len(evLines)-xidEvidenceLines))
		}
		ev = textcut.HeadNote(strings.Join(evLines, "\n"), 4*evidenceMax)
	}
	prefix := ""
	if when != "" {
		prefix = when + ": "
	}
	if len(bad) == 0 && len(unparsed) == 0 {
		if len(ignored) > 0 {
			return check(result.Xid, result.Pass, BasisRule, expected, fmt.Sprintf("%d ignored events", len(ignored)),
				prefix+"only ignored Xids: "+xidSummary(ignored), ev)
		}
		return check(result.Xid, result.Pass, BasisRule, expected, "none", "", "")
	}
	var msgs []string
	for _, k := range order {
		g := groups[k]
		e := g[0]
		kind := "Xid"
		if e.SXid {
			kind = "SXid"
		}
		msg := fmt.Sprintf("%s %d on PCI %s x%d: %s [%s; action: %s]", kind, e.Xid, e.PCI, len(g), e.Severity.Name, e.Severity.Class, e.Severity.Action)
		if e.Message != "" {
			msg += " " + strconv.Quote(textcut.Head(e.Message, 100))
		}
		msgs = append(msgs, msg)
	}
	if len(unparsed) > 0 {
		msgs = append(msgs, fmt.Sprintf("%d unreadable Xid/SXid lines", len(unparsed)))
	}
	actual := fmt.Sprintf("%d events: %s", len(bad), xidSummary(bad))
	if len(bad) == 0 {
		actual = fmt.Sprintf("%d unreadable Xid lines", len(unparsed))
	}
	if when != "" {
		actual += " " + when
	}
	return check(result.Xid, result.Fail, BasisRule, expected, actual, prefix+strings.Join(msgs, "; "), ev)
}

// xidSummary renders distinct numbers in order: "Xid 79, SXid 20034".
func xidSummary(events []facts.XidEvent) string {
	seen := map[string]bool{}
	var out []string
	for _, e := range events {
		s := fmt.Sprintf("Xid %d", e.Xid)
		if e.SXid {
			s = "S" + s
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

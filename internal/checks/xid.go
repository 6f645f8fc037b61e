package checks

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/kernlog"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/xid"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

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

// judgeXid is the host suite's xid check: this whole boot, from dmesg and the journal's copy of
// the kernel log, or the lines since the mark the bake set in the target. A mark of an earlier
// boot (a layer's reboot) puts all of this boot after it, which is what the journal's -b 0
// holds: then the whole boot is judged from both, and the verdict names the step, so a later
// layer's dmesg -c hides nothing either.
func judgeXid(h facts.Host, t Target) result.Check {
	since := t.KernelLogSince
	if since == nil {
		return judgeBoot(h.KernelLog, h.KernelJournal, t)
	}
	if !h.KernelLog.OK() || since.Position.BootID == h.KernelLog.Value.BootID {
		return JudgeKernelLog(h.KernelLog, since, t)
	}
	c := judgeBoot(h.KernelLog, h.KernelJournal, t)
	if c.Message != "" {
		c.Message = since.During + ": " + c.Message
	}
	if c.Status == result.Fail {
		c.Actual += " " + since.During
	}
	return c
}

// journalHowTo says how to make journald keep the kernel log.
const journalHowTo = "keep it: Storage=persistent in /etc/systemd/journald.conf (or Storage=auto, Ubuntu's default, " +
	"with /var/log/journal present) and ReadKMsg=yes, then restart systemd-journald"

// judgeBoot judges every Xid of this boot: the ring buffer dmesg reads loses what a layer
// cleared (dmesg -c) and what overflowed it, so the journal's copy of the kernel log (journald
// reads each record as it is logged) is judged with it. A record in both is one event: they
// are matched by message, timestamps stripped (the journal's are journald's own clock). A
// journal that cannot be read fails; one that holds no kernel message of this boot warns,
// naming what could not be seen: neither passes what it could not judge.
func judgeBoot(log facts.Fact[facts.KernelLog], journal facts.Fact[facts.KernelJournal], t Target) result.Check {
	c := judgeBootRecords(log, journal, t)
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

// judgeBootRecords judges the records dmesg and the journal hold (judgeBoot).
func judgeBootRecords(log facts.Fact[facts.KernelLog], journal facts.Fact[facts.KernelJournal], t Target) result.Check {
	expected, ignore := xidExpected(t.Expect.IgnoreXids)
	expected += "; dmesg and this boot's journal"
	dm := JudgeKernelLog(log, nil, t)
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
	lines := log.Value.Lines()
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
	inDmesg := map[string]int{}
	for _, l := range lines {
		inDmesg[kernlog.Text(l)]++
	}
	var only []string
	for _, e := range journal.Value.Entries {
		if inDmesg[e.Message] > 0 {
			inDmesg[e.Message]--
			continue
		}
		only = append(only, e.Line)
	}
	if len(only) == 0 {
		return dm
	}
	c := classifyXid(append(slices.Clone(lines), only...), expected, ignore, "")
	if len(lines) == 0 && c.Status == result.Pass {
		c.Message = strings.TrimPrefix(c.Message+"; ", "; ") + fmt.Sprintf("the kernel ring buffer is empty (cleared with dmesg -c): judged from the journal's %d kernel records of this boot", len(only))
	}
	if c.Status == result.Fail {
		events, unparsed := xid.Parse(strings.Join(only, "\n"))
		n := len(unparsed)
		for _, e := range events {
			if !isIgnored(e, ignore) {
				n++
			}
		}
		if n > 0 {
			c.Message += fmt.Sprintf("; %d of them only in the journal: logged in this boot, then cleared from the ring buffer (dmesg -c) or overflowed out of it", n)
		}
	}
	return c
}

// JudgeKernelLog is the one judge of Xids and SXids: any that is not ignored fails, and so
// does a line that mentions one but cannot be read, and so does a log that cannot be read (the
// step is not proven clean). With since set, only the lines logged after it are judged and the
// verdict names the step.
func JudgeKernelLog(log facts.Fact[facts.KernelLog], since *facts.Mark, t Target) result.Check {
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
		return check(result.Xid, result.Fail, BasisRule, expected, "kernel log unreadable", msg, log.Evidence)
	}
	lines := log.Value.Lines()
	if len(lines) == 0 {
		msg := "dmesg printed nothing: the kernel ring buffer is empty (cleared with dmesg -c), so it proves nothing"
		if when != "" {
			msg = "the kernel log could not be read " + when + ": " + msg + "; Xids it may have held were not judged"
		}
		return check(result.Xid, result.Fail, BasisRule, expected, "kernel log empty", msg, log.Evidence)
	}
	if since != nil {
		lines = log.Value.After(since.Position)
	}
	return classifyXid(lines, expected, ignore, when)
}

// FoldXid folds the verdict on the lines of a step (later) into the verdict on the log before
// it (earlier): a failure of either stands, and both are told.
func FoldXid(earlier, later result.Check) result.Check {
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
func isIgnored(e xid.Event, ignore map[int]bool) bool { return ignore[e.Xid] && !e.SXid }

// classifyXid classifies lines; when is "" for the whole log, or names the step the lines come
// from.
func classifyXid(lines []string, expected string, ignore map[int]bool, when string) result.Check {
	events, unparsed := xid.Parse(strings.Join(lines, "\n"))
	type key struct {
		sxid bool
		n    int
		pci  string
	}
	var order []key
	groups := map[key][]xid.Event{}
	var bad, ignored []xid.Event
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
func xidSummary(events []xid.Event) string {
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

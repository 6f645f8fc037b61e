package checks

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
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

// judgeXid is the host suite's xid check: every line of this boot's kernel log, or, after a
// layer's reboot, the lines since the mark the bake set in the target.
func judgeXid(h facts.Host, t Target) result.Check {
	return JudgeKernelLog(h.KernelLog, t.KernelLogSince, t)
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
		if ignore[e.Xid] && !e.SXid {
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

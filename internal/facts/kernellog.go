package facts

import "github.com/dlami-bake/packer-plugin-dlami/internal/parse/kjournal"

// KernelLog is a kernel log read in one boot, each line read once: its stamp, its message and
// the Xid or SXid report it is.
type KernelLog struct {
	BootID string
	Lines  []LogLine
}

// LogLine is one line of the kernel log as dmesg printed it.
type LogLine struct {
	// Raw is the line, colours removed; Text is its message without the "[seconds]" stamp, as
	// the journal's copy of the same record carries it (whose own stamp differs).
	Raw, Text string
	// Stamp is the "[seconds.micros]" printk time, when Stamped.
	Stamp   float64
	Stamped bool
	XidReport
}

// XidReport is what a kernel log record says of an Xid or SXid: the event it reports, or
// Unreadable when it mentions one that could not be read (an unreadable report is still a
// report).
type XidReport struct {
	Xid        *XidEvent
	Unreadable bool
}

// Reports reports whether the record mentions an Xid or SXid at all.
func (r XidReport) Reports() bool { return r.Xid != nil || r.Unreadable }

// LogPosition is where a kernel log ended when it was read: the lines logged later are after
// it.
type LogPosition struct {
	// BootID is the boot the log belongs to; a log of another boot is entirely after.
	BootID string `json:"boot_id"`
	// Lines is how many lines the log had, Tail the messages of its last few lines (up to
	// markTail) and FirstText the message of its first: without stamps they place the mark. A
	// ring buffer that dropped old lines moves the tail and changes the first line; the run of
	// several lines tells the mark from its last message logged again later.
	Lines     int      `json:"lines"`
	Tail      []string `json:"tail,omitempty"`
	FirstText string   `json:"first_text,omitempty"`
	// Stamp is the last stamped line's printk time, when HasStamp: stamps survive the ring
	// buffer dropping old lines, line counts do not.
	Stamp    float64 `json:"stamp"`
	HasStamp bool    `json:"has_stamp"`
	// JournalStamp is the last kernel journal record's monotonic time, when HasJournal: the
	// journal keeps what the ring buffer lost, so its records after it are judged too.
	JournalStamp float64 `json:"journal_stamp,omitempty"`
	HasJournal   bool    `json:"has_journal,omitempty"`
}

// markTail is how many of a log's last lines place a mark in a log without stamps.
const markTail = 8

// End is the position at the end of the log: lines logged later are after it.
func (l KernelLog) End() LogPosition {
	p := LogPosition{BootID: l.BootID, Lines: len(l.Lines)}
	if n := len(l.Lines); n > 0 {
		p.FirstText = l.Lines[0].Text
		for _, line := range l.Lines[max(0, n-markTail):] {
			p.Tail = append(p.Tail, line.Text)
		}
	}
	for i := len(l.Lines) - 1; i >= 0; i-- {
		if l.Lines[i].Stamped {
			p.Stamp, p.HasStamp = l.Lines[i].Stamp, true
			break
		}
	}
	return p
}

// After returns the lines logged after p (Place), placed for certain or not.
func (l KernelLog) After(p LogPosition) []LogLine {
	after, _ := l.Place(p)
	return after
}

// Place returns the lines logged after p, and sure false when they are not certainly all of
// them. A log of another boot is after it whole. With stamps, the lines stamped later than p
// are after it (and the unstamped continuation lines that follow them). Without, the mark is
// the run of p's last lines (Tail): where it still ends at its place and the first line is the
// same, nothing was dropped and the lines after it are after p, for sure (a run logged again
// later stands after its place). Otherwise the ring buffer dropped old lines (it wrapped, or
// was cleared and refilled): the run is looked up where the mark can still stand (never later
// than its place, since the ring buffer drops lines from its head only) and the earliest match
// is taken, so that a run logged again after the mark never hides what came between; but
// whether the match is the mark or a copy of it logged after the mark was dropped cannot be
// told, so sure is false. A log where the run cannot be found is after p whole, for sure:
// nothing in it can be placed before the mark.
func (l KernelLog) Place(p LogPosition) (after []LogLine, sure bool) {
	if l.BootID != p.BootID {
		return l.Lines, true
	}
	if p.HasStamp {
		for i, line := range l.Lines {
			if line.Stamped && line.Stamp > p.Stamp {
				return l.Lines[i:], true
			}
		}
		return nil, true
	}
	if p.Lines == 0 || len(p.Tail) == 0 {
		return l.Lines, true
	}
	if p.Lines <= len(l.Lines) && l.Lines[0].Text == p.FirstText && l.endsWith(p.Lines-1, p.Tail) {
		return l.Lines[p.Lines:], true
	}
	for end := len(p.Tail) - 1; end < len(l.Lines) && end <= p.Lines-1; end++ {
		if l.endsWith(end, p.Tail) {
			return l.Lines[end+1:], false
		}
	}
	return l.Lines, true
}

// endsWith reports whether the lines up to and including end carry the messages tail.
func (l KernelLog) endsWith(end int, tail []string) bool {
	start := end - len(tail) + 1
	if start < 0 {
		return false
	}
	for i, text := range tail {
		if l.Lines[start+i].Text != text {
			return false
		}
	}
	return true
}

// After returns the journal's records of boot bootID logged after p: all of them for a mark of
// another boot, else those later than the journal's last record when the mark was set. ok is
// false without a journal reading at the mark: none can then be placed after it.
func (j KernelJournal) After(p LogPosition, bootID string) (entries []JournalEntry, ok bool) {
	if bootID != p.BootID {
		return j.Entries, true
	}
	if !p.HasJournal {
		return nil, false
	}
	for i, e := range j.Entries {
		if e.Stamp > p.JournalStamp {
			return j.Entries[i:], true
		}
	}
	return nil, true
}

// EndOf is the position at the end of both readings of this boot's kernel log.
func EndOf(log Fact[KernelLog], journal Fact[KernelJournal]) LogPosition {
	p := log.Value.End()
	if journal.OK() {
		p.HasJournal = true
		if n := len(journal.Value.Entries); n > 0 {
			p.JournalStamp = journal.Value.Entries[n-1].Stamp
		}
	}
	return p
}

// JournalEntry is one record of the kernel journal, with the Xid or SXid report it is.
type JournalEntry struct {
	kjournal.Entry
	XidReport
}

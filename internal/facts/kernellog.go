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
	// Lines is how many lines the log had, and LastText the message of the last one: without
	// stamps they place the mark, and a ring buffer that dropped lines moves the last one.
	Lines    int    `json:"lines"`
	LastText string `json:"last_text,omitempty"`
	// Stamp is the last stamped line's printk time, when HasStamp: stamps survive the ring
	// buffer dropping old lines, line counts do not.
	Stamp    float64 `json:"stamp"`
	HasStamp bool    `json:"has_stamp"`
	// JournalStamp is the last kernel journal record's monotonic time, when HasJournal: the
	// journal keeps what the ring buffer lost, so its records after it are judged too.
	JournalStamp float64 `json:"journal_stamp,omitempty"`
	HasJournal   bool    `json:"has_journal,omitempty"`
}

// End is the position at the end of the log: lines logged later are after it.
func (l KernelLog) End() LogPosition {
	p := LogPosition{BootID: l.BootID, Lines: len(l.Lines)}
	if n := len(l.Lines); n > 0 {
		p.LastText = l.Lines[n-1].Text
	}
	for i := len(l.Lines) - 1; i >= 0; i-- {
		if l.Lines[i].Stamped {
			p.Stamp, p.HasStamp = l.Lines[i].Stamp, true
			break
		}
	}
	return p
}

// After returns the lines logged after p. A log of another boot is after it whole. With
// stamps, the lines stamped later than p are after it (and the unstamped continuation lines
// that follow them). Without, the lines after p's last line are: where that line no longer
// stands at its place (the ring buffer dropped old lines and wrapped), it is looked up by its
// message, and a log where it cannot be found is after p whole, since nothing in it can be
// placed before the mark.
func (l KernelLog) After(p LogPosition) []LogLine {
	if l.BootID != p.BootID {
		return l.Lines
	}
	if p.HasStamp {
		for i, line := range l.Lines {
			if line.Stamped && line.Stamp > p.Stamp {
				return l.Lines[i:]
			}
		}
		return nil
	}
	if p.Lines == 0 {
		return l.Lines
	}
	if p.Lines <= len(l.Lines) && l.Lines[p.Lines-1].Text == p.LastText {
		return l.Lines[p.Lines:]
	}
	for i := len(l.Lines) - 1; i >= 0; i-- {
		if l.Lines[i].Text == p.LastText {
			return l.Lines[i+1:]
		}
	}
	return l.Lines
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

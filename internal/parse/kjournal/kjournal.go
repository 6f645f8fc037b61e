// Package kjournal parses this boot's kernel messages as journald kept them:
// `journalctl -k -b 0 -q --no-pager -o short-monotonic`. journald reads every record from
// /dev/kmsg as it is logged, so its copy survives what empties the kernel's ring buffer (a
// layer's `dmesg -c`, an overflow) for as long as the journal is kept.
//
// The format is systemd's output_short() (src/shared/logs-show.c) in the monotonic mode:
//
//	[    5.123456] ip-10-1-42-17 kernel: NVRM: loading NVIDIA UNIX Open Kernel Module ...
//	[   20.888224] localhost systemd[1]: Hostname set to <localhost>.
//
// "[%5llu.%06llu]", then " HOSTNAME" (absent with --no-hostname or when the entry has none),
// " IDENTIFIER" (SYSLOG_IDENTIFIER: "kernel" for the kernel's own records; for records
// userspace wrote to /dev/kmsg, the identifier journald parsed from them), "[PID]" when there
// is one, ": " and the message. A multi-line message continues on lines indented with
// spaces. With -q journalctl prints no "-- Boot … --" separators and no "-- No entries --":
// an empty boot is empty output (exit status 0), and so is a host without journal files.
package kjournal

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/kernlog"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Entry is one line of the kernel journal.
type Entry struct {
	// Stamp is the monotonic time journalctl shows, in seconds. It is not dmesg's timestamp:
	// systemd 256 and later show when journald received the record (systemd/systemd#34250),
	// so entries are matched with dmesg's lines by Message, never by Stamp.
	Stamp float64
	// Host is the hostname field ("" when the line has none).
	Host string
	// Identifier is the syslog identifier with its "[pid]" ("kernel", "systemd[1]").
	Identifier string
	// Message is the text as dmesg prints it after its timestamp: the message of the kernel's
	// own records, "IDENTIFIER: message" for records userspace wrote to /dev/kmsg (dmesg
	// shows those raw). For a continuation line, the line without its indentation.
	Message string
	// Line is the line as printed (ANSI colours removed), as evidence.
	Line string
	// Continuation is true for the indented lines that continue a multi-line message.
	Continuation bool
}

var entryLine = regexp.MustCompile(`^\[\s*(\d+\.\d{6})\] (.*)$`)

// Parse reads journalctl's output. Anything that is not an entry, a continuation of one or
// the "-- No entries --" line of a run without -q (a warning journalctl printed on stderr, a
// "-- Boot … --" separator of another boot) is an error: a journal that cannot be read whole
// is not a clean one.
func Parse(out string) ([]Entry, error) {
	o, err := ParseOutput(out)
	return o.Entries, err
}

// Output is what journalctl printed: the entries, and the journal files it said it ignored.
type Output struct {
	Entries []Entry
	// Ignored are the warnings of journal files journalctl could not read and skipped
	// (truncated by an unclean shutdown, corrupted, an unsupported feature): their records
	// are missing from Entries. journalctl prints them whatever -q says.
	Ignored []string
}

// ignoredFile matches the warnings of systemd's journal_access_check_and_warn()
// (src/shared/journal-util.c): "Journal file PATH is truncated, ignoring file.", "... uses an
// unsupported feature, ignoring file." (with a second line "Use SYSTEMD_LOG_LEVEL=debug
// journalctl --file=PATH to see the details."), "... corrupted, ignoring file.", and "An error
// was encountered while opening journal file or directory PATH, ignoring file: ERROR".
var (
	ignoredFile = regexp.MustCompile(`^(Journal file \S+ (is truncated|uses an unsupported feature|corrupted), ignoring file\.|An error was encountered while opening journal file or directory \S+, ignoring file: .*)$`)
	ignoredHint = regexp.MustCompile(`^Use SYSTEMD_LOG_LEVEL=debug journalctl --file=\S+ to see the details\.$`)
)

// ParseOutput is Parse keeping journalctl's warnings of ignored journal files apart.
func ParseOutput(out string) (Output, error) {
	var entries []Entry
	var ignored []string
	for n, raw := range strings.Split(out, "\n") {
		line := strings.TrimRight(kernlog.Uncolored(raw), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if ignoredFile.MatchString(line) {
			ignored = append(ignored, line)
			continue
		}
		if ignoredHint.MatchString(line) && len(ignored) > 0 {
			continue
		}
		if strings.TrimSpace(line) == "-- No entries --" {
			continue
		}
		if m := entryLine.FindStringSubmatch(line); m != nil {
			e, err := entry(m[1], m[2])
			if err != nil {
				return Output{}, fmt.Errorf("journal line %d: %w: %q", n+1, err, textcut.Head(line, 200))
			}
			e.Line = line
			entries = append(entries, e)
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if len(entries) == 0 {
				return Output{}, fmt.Errorf("journal line %d: a continuation line before any entry: %q", n+1, textcut.Head(line, 200))
			}
			prev := entries[len(entries)-1]
			entries = append(entries, Entry{Stamp: prev.Stamp, Host: prev.Host, Identifier: prev.Identifier,
				Message: strings.TrimSpace(line), Line: line, Continuation: true})
			continue
		}
		return Output{}, fmt.Errorf("journal line %d is not a journalctl -o short-monotonic entry: %q", n+1, textcut.Head(line, 200))
	}
	return Output{Entries: entries, Ignored: ignored}, nil
}

// entry reads what follows the timestamp: "[HOST ]IDENTIFIER: MESSAGE".
func entry(stamp, rest string) (Entry, error) {
	s, err := strconv.ParseFloat(stamp, 64)
	if err != nil {
		return Entry{}, fmt.Errorf("timestamp %q", stamp)
	}
	e := Entry{Stamp: s}
	first, after, _ := strings.Cut(rest, " ")
	ident, msg, ok := identified(first, after)
	if !ok {
		// The first word is the hostname (no spaces in a hostname): the identifier follows.
		e.Host = first
		second, after2, _ := strings.Cut(after, " ")
		if ident, msg, ok = identified(second, after2); !ok {
			return Entry{}, fmt.Errorf("no \"IDENTIFIER:\" after the timestamp")
		}
	}
	e.Identifier, e.Message = ident, msg
	if ident != "kernel" {
		e.Message = ident + ": " + msg
	}
	return e, nil
}

// identified reports whether word is "IDENTIFIER:" (the colon output_short prints after the
// identifier and its "[pid]") and returns the identifier and the message after it.
func identified(word, after string) (ident, msg string, ok bool) {
	ident, ok = strings.CutSuffix(word, ":")
	if !ok || ident == "" {
		return "", "", false
	}
	return ident, after, true
}

// Kernel reports whether e is one of the kernel's own records (not one userspace wrote to
// /dev/kmsg, such as systemd's early boot messages).
func (e Entry) Kernel() bool { return e.Identifier == "kernel" }

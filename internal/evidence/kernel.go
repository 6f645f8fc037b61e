package evidence

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
)

// DefaultRadius is how many kernel log records around each Xid or SXid report a bundle keeps:
// the driver's multi-line reports (an Xid 79's AER lines, an Xid 119's GSP RPC history) and
// what led to them.
const DefaultRadius = 10

// XidContext returns the kernel log records within radius of every Xid or SXid report, from
// dmesg's reading and from the journal's (which keeps what `dmesg -c` or a full ring buffer
// removed), each as `grep -C` prints them: the reports' neighbourhoods merged, "--" between
// them, every line as it was read. n counts the reports (an unreadable one counts: it is
// still a report). A reading that failed says so in its text instead.
func XidContext(log facts.Fact[facts.KernelLog], journal facts.Fact[facts.KernelJournal], radius int) (dmesg, journalText string, n int) {
	if radius < 0 {
		radius = 0
	}
	if !log.OK() {
		dmesg = "# the kernel log could not be read: " + log.Problem + "\n"
	} else {
		lines := make([]string, len(log.Value.Lines))
		reports := make([]bool, len(log.Value.Lines))
		for i, l := range log.Value.Lines {
			lines[i], reports[i] = l.Raw, l.Reports()
		}
		var k int
		dmesg, k = around(lines, reports, radius)
		n += k
		dmesg = fmt.Sprintf("# dmesg, boot %s: %d Xid/SXid record(s), %d record(s) of context each side\n", orUnknown(log.Value.BootID), k, radius) + dmesg
	}
	if !journal.OK() {
		journalText = "# the kernel journal could not be read: " + journal.Problem + "\n"
	} else {
		lines := make([]string, len(journal.Value.Entries))
		reports := make([]bool, len(journal.Value.Entries))
		for i, e := range journal.Value.Entries {
			lines[i], reports[i] = e.Line, e.Reports()
		}
		var k int
		journalText, k = around(lines, reports, radius)
		if k > n {
			// The journal kept reports dmesg no longer has: those count.
			n = k
		}
		journalText = fmt.Sprintf("# journalctl -k -b 0: %d Xid/SXid record(s), %d record(s) of context each side\n", k, radius) + journalText
	}
	return dmesg, journalText, n
}

// around is lines within radius of a reporting line, merged, "--" between the groups.
func around(lines []string, reports []bool, radius int) (string, int) {
	var b strings.Builder
	n, end := 0, -1 // end: one past the last line written
	for i := range lines {
		if !reports[i] {
			continue
		}
		n++
		from, to := max(i-radius, 0), min(i+radius+1, len(lines))
		if from < end {
			from = end
		} else if end >= 0 {
			b.WriteString("--\n")
		}
		for _, l := range lines[from:to] {
			b.WriteString(l)
			b.WriteByte('\n')
		}
		end = max(end, to)
	}
	return b.String(), n
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

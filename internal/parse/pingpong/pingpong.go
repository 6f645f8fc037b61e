// Package pingpong parses the table libfabric's fabtests fi_pingpong prints (as run by the EFA
// installer's efa_test.sh): one row per message size with the messages sent and acknowledged,
// the bytes moved, the time, and the bandwidth and latency.
//
// Output with a fabtests error line ("fi_getinfo(): util/pingpong.c:1765, ret=-61 (No data
// available)", "[error] ...") or with no table row is an error: a run that did not move data
// never reads as a pass.
package pingpong

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Row is one message size of the table.
type Row struct {
	// Bytes is the message size ("1.5k" is 1536: fabtests prints sizes in 1024-based k, m, g).
	Bytes uint64
	// Sent is the number of messages sent; Acked the number acknowledged ("=10" reads as 10).
	Sent, Acked uint64
	// Total is the bytes moved, as printed ("1.2k"), rounded by fabtests to one decimal.
	Total   uint64
	Seconds float64
	// MBps is MB/sec, UsecPerXfer usec/xfer, MxfersPerSec Mxfers/sec.
	MBps, UsecPerXfer, MxfersPerSec float64
	// Line is the row as printed.
	Line string
}

// Table is one header line and the rows under it; efa_test.sh can print a server's and a
// client's table ("Server Log:" / "Client Log:").
type Table struct {
	// Label is the nearest non-table line before the header ("Client Log:"); "" when none.
	Label string
	Rows  []Row
}

// Header is the column line fi_pingpong prints above its rows.
var Header = []string{"bytes", "#sent", "#ack", "total", "time", "MB/sec", "usec/xfer", "Mxfers/sec"}

var (
	// "fi_getinfo(): util/pingpong.c:1765, ret=-61 (No data available)"
	printErr = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\(\): \S+:\s*\d+, ret=(-?\d+) \((.*)\)\s*$`)
	// "[error] util/pingpong.c:1234: ..."
	ppErr = regexp.MustCompile(`^\[error\]`)
)

// Error is a fabtests error line.
type Error struct {
	// Call is the failing libfabric call ("fi_getinfo"); "" for an "[error]" line.
	Call string
	// Code is the returned value (-61 is -FI_ENODATA); 0 when the line gives none.
	Code int
	// Message is fi_strerror's text ("No data available") or the "[error]" line.
	Message string
}

func (e *Error) Error() string {
	if e.Call == "" {
		return "fi_pingpong: " + e.Message
	}
	return fmt.Sprintf("fi_pingpong: %s() returned %d (%s)", e.Call, e.Code, e.Message)
}

// Parse reads fi_pingpong's (or efa_test.sh's) output into its tables. Lines that are neither
// a header, a row nor an error ("Starting server...") are skipped.
func Parse(text string) ([]Table, error) {
	var tables []Table
	label, first := "", ""
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" {
			continue
		}
		if first == "" {
			first = line
		}
		if m := printErr.FindStringSubmatch(line); m != nil {
			code, _ := strconv.Atoi(m[2])
			return nil, &Error{Call: m[1], Code: code, Message: textcut.Head(m[3], 120)}
		}
		if ppErr.MatchString(line) {
			return nil, &Error{Message: textcut.Head(line, 200)}
		}
		f := strings.Fields(line)
		if isHeader(f) {
			tables = append(tables, Table{Label: label})
			continue
		}
		if len(tables) == 0 || !startsWithSize(f) {
			label = textcut.Head(line, 80)
			continue
		}
		r, err := parseRow(f)
		if err != nil {
			return nil, fmt.Errorf("fi_pingpong: line %d: %w: %q", n+1, err, textcut.Head(line, 160))
		}
		r.Line = textcut.Head(line, 160)
		t := &tables[len(tables)-1]
		t.Rows = append(t.Rows, r)
	}
	if len(tables) == 0 {
		if first == "" {
			return nil, errors.New("fi_pingpong: empty output")
		}
		return nil, fmt.Errorf("fi_pingpong: no result table: %q", textcut.Head(first, 160))
	}
	for i, t := range tables {
		if len(t.Rows) == 0 {
			return nil, fmt.Errorf("fi_pingpong: table %d (%q) has no row", i+1, t.Label)
		}
	}
	return tables, nil
}

func isHeader(f []string) bool {
	if len(f) != len(Header) {
		return false
	}
	for i := range f {
		if f[i] != Header[i] {
			return false
		}
	}
	return true
}

// startsWithSize reports whether a line looks like a row (it starts with a digit), so a
// malformed row is an error while prose between tables is a label.
func startsWithSize(f []string) bool {
	return len(f) > 0 && f[0][0] >= '0' && f[0][0] <= '9'
}

func parseRow(f []string) (Row, error) {
	if len(f) != len(Header) {
		return Row{}, fmt.Errorf("want %d columns, got %d", len(Header), len(f))
	}
	var r Row
	var err error
	if r.Bytes, err = parseSize(f[0]); err != nil {
		return Row{}, fmt.Errorf("bytes: %w", err)
	}
	if r.Sent, err = parseSize(f[1]); err != nil {
		return Row{}, fmt.Errorf("#sent: %w", err)
	}
	if r.Acked, err = parseSize(strings.TrimPrefix(f[2], "=")); err != nil {
		return Row{}, fmt.Errorf("#ack: %w", err)
	}
	if r.Total, err = parseSize(f[3]); err != nil {
		return Row{}, fmt.Errorf("total: %w", err)
	}
	sec, ok := strings.CutSuffix(f[4], "s")
	if !ok {
		return Row{}, fmt.Errorf("time %q has no \"s\"", textcut.Head(f[4], 20))
	}
	for _, c := range []struct {
		name string
		s    string
		dst  *float64
	}{{"time", sec, &r.Seconds}, {"MB/sec", f[5], &r.MBps}, {"usec/xfer", f[6], &r.UsecPerXfer}, {"Mxfers/sec", f[7], &r.MxfersPerSec}} {
		v, err := strconv.ParseFloat(c.s, 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return Row{}, fmt.Errorf("%s %q is not a number", c.name, textcut.Head(c.s, 20))
		}
		*c.dst = v
	}
	return r, nil
}

// parseSize reads fabtests' size_str: an integer or decimal with an optional 1024-based k, m,
// g or t suffix ("64", "1.2k", "20m").
func parseSize(s string) (uint64, error) {
	mult := 1.0
	num := s
	if s != "" {
		switch s[len(s)-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		case 't':
			mult = 1 << 40
		}
		if mult != 1 {
			num = s[:len(s)-1]
		}
	}
	if num == "" || num[0] < '0' || num[0] > '9' {
		return 0, fmt.Errorf("%q is not a size", textcut.Head(s, 20))
	}
	if n, err := strconv.ParseUint(num, 10, 64); err == nil && mult == 1 {
		return n, nil
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || v*mult >= 1<<63 {
		return 0, fmt.Errorf("%q is not a size", textcut.Head(s, 20))
	}
	return uint64(math.Round(v * mult)), nil
}

// Largest is the row with the largest message size of t (the bandwidth figure).
func (t Table) Largest() Row {
	var best Row
	for _, r := range t.Rows {
		if r.Bytes >= best.Bytes {
			best = r
		}
	}
	return best
}

// Complete reports whether every message sent was acknowledged, and some were sent.
func (r Row) Complete() bool { return r.Sent > 0 && r.Acked == r.Sent }

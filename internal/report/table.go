package report

import (
	"strings"
	"unicode/utf8"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// tableCellRunes bounds one column of Table so a long value does not wrap the UI.
const tableCellRunes = 48

// Table renders checks as a fixed-width table for the Packer UI:
//
//	CHECK             EXPECTED          ACTUAL            STATUS
//	kernel            7.0.0-1014-aws    7.0.0-1014-aws    PASS
//
// Values are put on one line and cut at 48 characters with "…".
func Table(checks []result.Check) string {
	rows := [][]string{{"CHECK", "EXPECTED", "ACTUAL", "STATUS"}}
	for _, c := range checks {
		rows = append(rows, []string{tableCell(c.ID), tableCell(c.Expected), tableCell(c.Actual), strings.ToUpper(tableCell(string(c.Status)))})
	}
	width := make([]int, 4)
	for _, r := range rows {
		for i, v := range r {
			width[i] = max(width[i], utf8.RuneCountInString(v))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, v := range r {
			b.WriteString(v)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(v)+2))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func tableCell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	if r := []rune(s); len(r) > tableCellRunes {
		return string(r[:tableCellRunes-1]) + "…"
	}
	return s
}

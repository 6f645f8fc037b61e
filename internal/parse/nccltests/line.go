package nccltests

import (
	"bytes"
	"strconv"
)

// parser is the state of one log being read; a Stream owns it.
type parser struct {
	res     Result
	lay     layout
	inTable bool // a table is open: a header, a row or a trailer has been seen
	hasRows bool // the open table has rows or a trailer
	onRow   func(Row)
	kinds   [kindCount]int
	kept    []string // the NCCL message of each evidence line kept, for de-duplication
	fl      factLine // the line the fact rules are looking at
	// host is the index in res.Hosts of the host that printed the line the rules look at; -1
	// when the line names none (or MaxHosts are kept already).
	host int
}

// line reads one line (without its newline, at most MaxLineBytes): "#" lines, rows and elision
// marks belong to the result table, everything else goes through the fact rules.
func (p *parser) line(raw []byte) {
	p.res.Lines++
	b := bytes.TrimRight(raw, "\r\n")
	b = stripRankPrefix(b)
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return
	}
	switch {
	case t[0] == '#':
		p.hashLine(t)
		return
	case t[0] >= '0' && t[0] <= '9':
		if p.row(t) {
			return
		}
	case (t[0] == '.' || t[0] == 0xE2) && isEllipsis(t):
		p.res.Elided = true
		return
	}
	p.facts(t)
}

// isEllipsis reports whether t is an elision line ("...", "…"; t is already trimmed).
func isEllipsis(t []byte) bool {
	if string(t) == "…" {
		return true
	}
	for _, c := range t {
		if c != '.' {
			return false
		}
	}
	return len(t) >= 3
}

// stripRankPrefix removes the per-rank prefixes launchers put on every line: Open MPI
// --tag-output "[1,0]<stdout>:" and Slurm srun --label "0: " (either, or both).
func stripRankPrefix(b []byte) []byte {
	if len(b) > 0 && b[0] == '[' {
		if end := bytes.Index(b[:min(len(b), 48)], []byte(">:")); end > 0 {
			if lt := bytes.IndexByte(b[:end], '<'); lt > 1 && isJobRank(b[1:lt-1]) && b[lt-1] == ']' {
				b = b[end+2:]
			}
		}
	}
	i := 0
	for i < len(b) && b[i] == ' ' {
		i++
	}
	j := i
	for j < len(b) && j-i < 7 && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j > i && j < len(b) && b[j] == ':' && (j+1 == len(b) || b[j+1] == ' ') {
		if j+1 == len(b) {
			return b[j+1:]
		}
		return b[j+2:]
	}
	return b
}

// isJobRank reports whether b is "N,M" (Open MPI job and rank).
func isJobRank(b []byte) bool {
	comma := bytes.IndexByte(b, ',')
	return comma > 0 && allDigits(b[:comma]) && allDigits(b[comma+1:])
}

func allDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// addDistinct appends s to list unless it is there or the list holds maxDistinct names.
func addDistinct(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	if len(list) >= maxDistinct {
		return list
	}
	return append(list, s)
}

func atoi(b []byte) int {
	n, _ := strconv.Atoi(string(b))
	return n
}

func atoi64(b []byte) int64 {
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}

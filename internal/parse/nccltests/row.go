package nccltests

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// This file reads the rows of the result table: which column is which, and the cells.

// layout maps column labels to row field indexes.
type layout struct {
	known  bool
	typ    int
	redop  int
	root   int
	halves [2]halfLayout
	maxIdx int
}

type halfLayout struct {
	time, algbw, busbw, wrong, err int
}

func layoutFrom(cols []string) layout {
	l := layout{known: true, typ: -1, redop: -1, root: -1}
	for i := range l.halves {
		l.halves[i] = halfLayout{-1, -1, -1, -1, -1}
	}
	seen := map[string]int{}
	for i, c := range cols {
		n := seen[c]
		seen[c] = n + 1
		h := -1
		if n < 2 {
			h = n
		}
		switch c {
		case "type":
			l.typ = i
		case "redop":
			l.redop = i
		case "root":
			l.root = i
		case "time", "cputime":
			if h >= 0 {
				l.halves[h].time = i
			}
		case "algbw":
			if h >= 0 {
				l.halves[h].algbw = i
			}
		case "busbw":
			if h >= 0 {
				l.halves[h].busbw = i
			}
		case "#wrong":
			if h >= 0 {
				l.halves[h].wrong = i
			}
		case "error":
			if h >= 0 {
				l.halves[h].err = i
			}
		}
		if i > l.maxIdx && c != "timestamp" {
			l.maxIdx = i
		}
	}
	if l.typ != 2 || l.halves[0].busbw < 0 {
		l.known = false
	}
	return l
}

// inferLayout guesses the columns of a row when no label line was printed (or it does not fit):
// size count type [redop] [root] then two halves of time algbw busbw wrong.
func inferLayout(f [][]byte) (layout, bool) {
	rem := len(f) - 3
	l := layout{typ: 2, redop: -1, root: -1}
	next := 3
	switch rem {
	case 10:
		l.redop, l.root, next = 3, 4, 5
	case 9:
		if isNumeric(f[3]) {
			l.root = 3
		} else {
			l.redop = 3
		}
		next = 4
	case 8:
	default:
		return l, false
	}
	for h := 0; h < 2; h++ {
		b := next + 4*h
		l.halves[h] = halfLayout{time: b, algbw: b + 1, busbw: b + 2, wrong: b + 3, err: -1}
	}
	// The pre-2.13 "error" column is a float deviation printed "%5.0le" ("5e-07", "0e+00");
	// #wrong is an integer, which "%g" prints with an exponent only from 1e6 on.
	for h := 0; h < 2; h++ {
		w := f[l.halves[h].wrong]
		if bytes.ContainsAny(w, "eE.") {
			if v, err := strconv.ParseFloat(string(w), 64); err == nil && v < 1e6 {
				l.halves[h].err, l.halves[h].wrong = l.halves[h].wrong, -1
			}
		}
	}
	l.maxIdx = len(f) - 1
	return l, true
}

func isNumeric(b []byte) bool {
	_, err := strconv.ParseFloat(string(b), 64)
	return err == nil
}

// row parses t as a table row; false means t is not a row at all.
func (p *parser) row(t []byte) bool {
	var buf [32][]byte
	f := fieldsInto(buf[:0], t)
	if len(f) < 11 {
		return false
	}
	size, err1 := strconv.ParseInt(string(f[0]), 10, 64)
	count, err2 := strconv.ParseInt(string(f[1]), 10, 64)
	if err1 != nil || err2 != nil || !isTypeName(f[2]) {
		return false
	}
	lay := p.lay
	if !lay.known || lay.maxIdx >= len(f) {
		var ok bool
		if lay, ok = inferLayout(f); !ok {
			p.res.MalformedRows++
			return true
		}
	}
	r := Row{SizeBytes: size, Count: count, Type: intern(f[2])}
	if lay.redop >= 0 {
		r.Redop = intern(f[lay.redop])
	}
	if lay.root >= 0 {
		v, err := strconv.ParseInt(string(f[lay.root]), 10, 64)
		if err != nil {
			p.res.MalformedRows++
			return true
		}
		r.Root = &v
	}
	ok := true
	halves := [2]*Measure{&r.OutOfPlace, &r.InPlace}
	for h, m := range halves {
		hl := lay.halves[h]
		m.TimeUS, ok = cellFloat(f, hl.time, ok)
		m.AlgBW, ok = cellFloat(f, hl.algbw, ok)
		m.BusBW, ok = cellFloat(f, hl.busbw, ok)
		m.MaxError, ok = cellFloat(f, hl.err, ok)
		var w *float64
		w, ok = cellFloat(f, hl.wrong, ok)
		if w != nil {
			if *w < 0 || *w > math.MaxInt64/2 {
				ok = false
			} else {
				n := int64(*w)
				m.Wrong = &n
			}
		}
	}
	if !ok || size < 0 || count < 0 {
		p.res.MalformedRows++
		return true
	}
	r.Line = textcut.Prefix(string(t), MaxEvidenceLine)
	if p.res.OutOfBounds != nil {
		// Rows after a trailer belong to a new run printed without a header.
		p.reset()
	}
	p.open()
	p.hasRows = true
	r.Table = p.res.Tables
	if p.res.Largest == nil || r.SizeBytes >= p.res.Largest.SizeBytes {
		c := r
		p.res.Largest = &c
	}
	if len(p.res.Rows) < MaxRows {
		p.res.Rows = append(p.res.Rows, r)
	} else {
		p.res.RowsDropped++
	}
	if p.onRow != nil {
		p.onRow(r)
	}
	return true
}

// cellFloat parses f[i] as a float; i < 0 means no such column. "N/A" and non-finite values
// give nil; anything else that does not parse clears ok.
func cellFloat(f [][]byte, i int, ok bool) (*float64, bool) {
	if i < 0 || i >= len(f) {
		return nil, ok
	}
	c := f[i]
	if string(c) == "N/A" || string(c) == "-" {
		return nil, ok
	}
	v, err := strconv.ParseFloat(string(c), 64)
	if err != nil {
		lc := strings.ToLower(string(c))
		if strings.Contains(lc, "nan") || strings.Contains(lc, "inf") {
			return nil, ok
		}
		return nil, false
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, ok
	}
	return &v, ok
}

// fieldsInto splits t on blanks into dst without allocating for up to cap(dst) fields.
func fieldsInto(dst [][]byte, t []byte) [][]byte {
	i := 0
	for i < len(t) {
		for i < len(t) && (t[i] == ' ' || t[i] == '\t') {
			i++
		}
		if i >= len(t) {
			break
		}
		j := i
		for j < len(t) && t[j] != ' ' && t[j] != '\t' {
			j++
		}
		dst = append(dst, t[i:j])
		i = j
	}
	return dst
}

func isTypeName(b []byte) bool {
	if len(b) == 0 || len(b) > 16 || b[0] < 'a' || b[0] > 'z' {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// intern returns the shared string for the usual type and redop names, so thousands of rows do
// not each allocate them; other names are copied, cut to 16 bytes.
func intern(b []byte) string {
	switch string(b) {
	case "int8":
		return "int8"
	case "uint8":
		return "uint8"
	case "int32":
		return "int32"
	case "uint32":
		return "uint32"
	case "int64":
		return "int64"
	case "uint64":
		return "uint64"
	case "half":
		return "half"
	case "float":
		return "float"
	case "double":
		return "double"
	case "bfloat16":
		return "bfloat16"
	case "f8e4m3":
		return "f8e4m3"
	case "f8e5m2":
		return "f8e5m2"
	case "char":
		return "char"
	case "int":
		return "int"
	case "sum":
		return "sum"
	case "prod":
		return "prod"
	case "max":
		return "max"
	case "min":
		return "min"
	case "avg":
		return "avg"
	case "mulsum":
		return "mulsum"
	case "none":
		return "none"
	case "all":
		return "all"
	}
	return textcut.Prefix(string(b), 16)
}

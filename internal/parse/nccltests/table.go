package nccltests

import (
	"bytes"
	"math"
	"strconv"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// This file reads the "#" lines around the result table nccl-tests prints: the header, device
// and column lines, and the trailer; row.go reads the rows.

// hashLine handles the "#"-lines nccl-tests prints: version, header, device list, column
// labels, trailer.
func (p *parser) hashLine(t []byte) {
	body := bytes.TrimSpace(t[1:])
	switch {
	case len(body) == 0:
		return
	case bytes.HasPrefix(body, []byte("Out of bounds values")):
		p.trailerOOB(t, body)
	case bytes.HasPrefix(body, []byte("Avg bus bandwidth")):
		p.trailerAvg(t, body)
	case bytes.HasPrefix(body, []byte("nThread ")):
		p.config(t, body)
	case bytes.HasPrefix(body, []byte("Rank ")):
		p.res.Devices++
	case bytes.HasPrefix(body, []byte("Using devices")):
		p.res.Devices = 0
	case bytes.HasPrefix(body, []byte("nccl-tests version ")):
		if f := bytes.Fields(body); len(f) >= 3 {
			p.res.TestsVersion = textcut.Prefix(string(f[2]), 40)
		}
	case bytes.HasPrefix(body, []byte("Collective test starting:")):
		p.res.Program = textcut.Prefix(string(bytes.TrimSpace(body[len("Collective test starting:"):])), 80)
	case bytes.HasPrefix(body, []byte("Collective test concluded")):
		p.res.Concluded = true
	case bytes.HasPrefix(body, []byte("error:")):
		if len(bytes.TrimSpace(body[len("error:"):])) > 0 {
			p.addError(t)
		}
	default:
		p.columns(body)
	}
}

// reset closes the current table and forgets its content, so a log with several runs reports
// the last one.
func (p *parser) reset() {
	p.res.Rows = nil
	p.res.Largest = nil
	p.res.RowsDropped = 0
	p.res.OutOfBounds = nil
	p.res.OutOfBoundsOK = false
	p.res.OutOfBoundsLine = ""
	p.res.AvgBusBW = nil
	p.res.AvgBusBWLine = ""
	p.hasRows = false
	p.inTable = false
}

// open makes sure a table is open, counting it once.
func (p *parser) open() {
	if !p.inTable {
		p.res.Tables++
		p.inTable = true
	}
}

// header starts a new table at a header line unless the open one is still empty (a config
// header followed by its column labels is one table).
func (p *parser) header() {
	if p.hasRows {
		p.reset()
	}
	p.open()
}

func (p *parser) config(t, body []byte) {
	p.header()
	c := &Config{Line: textcut.Prefix(string(t), MaxEvidenceLine)}
	f := bytes.Fields(body)
	for i := 0; i+1 < len(f); i++ {
		k, v := string(f[i]), f[i+1]
		switch k {
		case "nThread":
			c.NThread = atoi(v)
		case "nGpus":
			c.NGpus = atoi(v)
		case "minBytes":
			c.MinBytes = atoi64(v)
		case "maxBytes":
			c.MaxBytes = atoi64(v)
		case "iters:":
			if i > 0 && string(f[i-1]) == "warmup" {
				c.WarmupIters = atoi(v)
			} else if i == 0 || string(f[i-1]) != "agg" {
				c.Iters = atoi(v)
			}
		case "validation:":
			if n, err := strconv.Atoi(string(v)); err == nil {
				c.Validation = &n
			}
		}
	}
	p.res.Config = c
}

// columns recognises the column label line ("size count type redop root time algbw busbw
// #wrong ..."); the out-of-place/in-place banner and the units line are ignored.
func (p *parser) columns(body []byte) {
	if !bytes.HasPrefix(body, []byte("size")) {
		return
	}
	f := bytes.Fields(body)
	if len(f) < 6 || string(f[0]) != "size" || string(f[1]) != "count" {
		return
	}
	p.header()
	cols := make([]string, 0, len(f))
	for _, c := range f {
		cols = append(cols, textcut.Prefix(string(c), 20))
	}
	p.res.Columns = cols
	p.lay = layoutFrom(cols)
}

func (p *parser) trailerOOB(t, body []byte) {
	_, after, _ := bytes.Cut(body, []byte(":"))
	f := bytes.Fields(after)
	if len(f) == 0 {
		return
	}
	n, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return
	}
	if p.res.OutOfBounds != nil {
		p.reset()
	}
	p.open()
	p.hasRows = true
	p.res.OutOfBounds = &n
	p.res.OutOfBoundsOK = len(f) >= 2 && string(f[1]) == "OK"
	p.res.OutOfBoundsLine = textcut.Prefix(string(t), MaxEvidenceLine)
	if n != 0 || !p.res.OutOfBoundsOK {
		p.res.FailedTrailers++
	}
}

func (p *parser) trailerAvg(t, body []byte) {
	_, after, _ := bytes.Cut(body, []byte(":"))
	f := bytes.Fields(after)
	if len(f) == 0 {
		return
	}
	v, err := strconv.ParseFloat(string(f[0]), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	p.open()
	p.hasRows = true
	p.res.AvgBusBW = &v
	p.res.AvgBusBWLine = textcut.Prefix(string(t), MaxEvidenceLine)
}

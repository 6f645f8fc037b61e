// Package nccltests parses the stdout of NVIDIA nccl-tests (all_reduce_perf and friends, versions
// 2.4 to 2.19) together with the NCCL_DEBUG=INFO lines interleaved with it, into a typed Result.
//
// The parser streams: it reads one line at a time, keeps only the result rows (a few dozen in a
// normal run, capped at MaxRows), the trailer and a bounded set of transport facts and evidence
// lines, so a 10 MB log costs linear time and constant memory. It never fails on content: lines
// it does not recognise are skipped, and what it could not find stays nil or empty for the
// caller to judge. The only error is a failing reader.
package nccltests

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Bounds on what one Result keeps, whatever the size of the log.
const (
	// MaxRows is how many table rows are kept; later rows are counted in RowsDropped (the
	// largest row is still tracked in Largest).
	MaxRows = 4096
	// MaxLineBytes is the longest line considered; the rest of a longer line is skipped.
	MaxLineBytes = 64 * 1024
	// MaxEvidenceLine is how much of one log line is kept as evidence.
	MaxEvidenceLine = 400
	maxPerKind      = 3
	maxErrors       = 16
	maxDistinct     = 8
)

// Result is what one nccl-tests log says.
type Result struct {
	// TestsVersion is the nccl-tests version from "# nccl-tests version ..." (2.17.4+), else "".
	TestsVersion string
	// NCCLVersion is the NCCL library version as printed ("2.27.3+cuda12.9"), else "".
	NCCLVersion string
	// Program is the test name from "# Collective test starting: ..." (2.16.7+), else "".
	Program string
	// Concluded is true when "# Collective test concluded" was printed.
	Concluded bool
	// Config is the "# nThread ..." header line; nil when absent.
	Config *Config
	// Devices is the number of "#  Rank N ..." device lines of the last header.
	Devices int
	// Columns are the column labels of the last table header ("size", "count", "type",
	// "redop", "root", "time", "algbw", "busbw", "#wrong", ...); nil when no header was printed.
	Columns []string

	// Rows are the result rows of the last table in the log, in order.
	Rows []Row
	// Largest is the row with the largest message size of the last table (the last such row
	// on a tie); nil when there is no row.
	Largest *Row
	// RowsDropped counts rows beyond MaxRows that were not kept.
	RowsDropped int
	// Elided is true when the table contains a "..." line (rows left out by whoever shortened
	// the log).
	Elided bool
	// MalformedRows counts lines that started like a row but had a cell that does not parse.
	MalformedRows int

	// OutOfBounds is the count from "# Out of bounds values : N OK|FAILED" of the last table;
	// nil when that line is missing (the test did not finish, or the log was cut).
	OutOfBounds *int64
	// OutOfBoundsOK is true when that line said OK.
	OutOfBoundsOK bool
	// OutOfBoundsLine is that line as printed (prefix removed).
	OutOfBoundsLine string
	// AvgBusBW is "# Avg bus bandwidth : X" in GB/s; nil when missing.
	AvgBusBW *float64
	// AvgBusBWLine is that line as printed (prefix removed).
	AvgBusBWLine string
	// Tables counts result tables (a log may hold several runs; Rows and the trailer are the
	// last one's).
	Tables int
	// FailedTrailers counts "Out of bounds" lines in the whole log that were not "0 OK", so an
	// earlier failed run cannot hide behind a later clean one.
	FailedTrailers int

	// Transport holds the facts read from NCCL INFO lines.
	Transport Transport
	// Errors are failure lines (NCCL WARN, "Test NCCL failure", "Test CUDA failure", "Test
	// timeout", MPI aborts), at most 16, each cut to MaxEvidenceLine bytes.
	Errors []string
	// Lines is the number of lines read.
	Lines int
}

// Config is the "# nThread ..." header.
type Config struct {
	NThread, NGpus     int
	MinBytes, MaxBytes int64
	WarmupIters, Iters int
	// Validation is the -c setting; nil when the header does not say.
	Validation *int
	// Line is the header as printed (prefix removed).
	Line string
}

// Row is one line of the result table.
type Row struct {
	SizeBytes int64
	Count     int64
	Type      string
	// Redop is "" when the format has no redop column.
	Redop string
	// Root is nil when the format has no root column (nccl-tests before 2.13).
	Root       *int64
	OutOfPlace Measure
	InPlace    Measure
	// Line is the row as printed, prefix removed and trimmed.
	Line string
}

// Measure is one half (out-of-place or in-place) of a row. A nil field is a cell that was
// "N/A", not finite, or not present in this format.
type Measure struct {
	TimeUS *float64
	// AlgBW and BusBW are in GB/s.
	AlgBW *float64
	BusBW *float64
	// Wrong is the "#wrong" count (nccl-tests 2.13+).
	Wrong *int64
	// MaxError is the older "error" column (largest deviation, nccl-tests before 2.13).
	MaxError *float64
}

// Transport is what the NCCL INFO lines say about the network NCCL chose.
type Transport struct {
	// OFIPlugin is true when the aws-ofi-nccl plugin announced itself (NET/OFI lines,
	// "Initializing aws-ofi-nccl", or "Loaded net plugin" naming Libfabric/OFI).
	OFIPlugin bool
	// OFIVersion is from "Initializing aws-ofi-nccl X"; "" when not printed.
	OFIVersion string
	// NetPlugin is the name from "Loaded net plugin NAME (vN)"; "" when not printed.
	NetPlugin string
	// NetPluginEnv is the plugin NCCL was told to load (NCCL_NET_PLUGIN / "Plugin name set by
	// env to"); "" when not printed.
	NetPluginEnv string
	// PluginMissing is true when NCCL said it found no external net plugin.
	PluginMissing bool
	// Networks are the distinct names from "Using network NAME" in first-seen order.
	Networks []string
	// Providers are the distinct "Selected Provider is P (found N nics)" facts.
	Providers []Provider
	// Socket is true when any NET/Socket line or "Using network Socket" appeared.
	Socket bool
	// NCCLNetIB is true when NCCL_NET=IB was seen set.
	NCCLNetIB bool
	// ForwardCompat is true when "CUDA Forward Compatibility mode ENABLED" appeared
	// (informational: normal when the container CUDA is newer than the driver's).
	ForwardCompat bool
	// Lines are representative log lines for each fact (a few per kind), prefix removed.
	Lines []string
}

// Provider is one "Selected Provider is P (found N nics)" fact.
type Provider struct {
	Name string
	// NICs is nil when the line has no "(found N nics)" (older aws-ofi-nccl).
	NICs *int
}

// ParseString parses a whole log held in memory.
func ParseString(s string) (Result, error) {
	return Parse(strings.NewReader(s))
}

// Parse reads an nccl-tests log from r. It returns an error only when r fails.
func Parse(r io.Reader) (Result, error) {
	p := parser{}
	br := bufio.NewReaderSize(r, MaxLineBytes)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// Keep the first MaxLineBytes of an overlong line, skip the rest of it.
			p.line(line)
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return p.res, fmt.Errorf("nccl-tests: reading log: %w", err)
			}
			continue
		}
		if len(line) > 0 {
			p.line(line)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return p.res, fmt.Errorf("nccl-tests: reading log: %w", err)
		}
	}
	return p.res, nil
}

type parser struct {
	res     Result
	lay     layout
	inTable bool // a table is open: a header, a row or a trailer has been seen
	hasRows bool // the open table has rows or a trailer
	kinds   [kindCount]int
	kept    []string // the INFO message of each Transport.Lines entry, for de-duplication
}

var (
	bNCCLInfo = []byte("NCCL INFO")
	bNCCLWarn = []byte("NCCL WARN")
)

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
	p.fact(t)
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
			p.res.TestsVersion = cut(string(f[2]), 40)
		}
	case bytes.HasPrefix(body, []byte("Collective test starting:")):
		p.res.Program = cut(string(bytes.TrimSpace(body[len("Collective test starting:"):])), 80)
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
	c := &Config{Line: cut(string(t), MaxEvidenceLine)}
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
		cols = append(cols, cut(string(c), 20))
	}
	p.res.Columns = cols
	p.lay = layoutFrom(cols)
}

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
	r.Line = cut(string(t), MaxEvidenceLine)
	if p.res.OutOfBounds != nil {
		// Rows after a trailer belong to a new run printed without a header.
		p.reset()
	}
	p.open()
	p.hasRows = true
	if p.res.Largest == nil || r.SizeBytes >= p.res.Largest.SizeBytes {
		c := r
		p.res.Largest = &c
	}
	if len(p.res.Rows) >= MaxRows {
		p.res.RowsDropped++
		return true
	}
	p.res.Rows = append(p.res.Rows, r)
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

var interned = map[string]string{}

func init() {
	for _, s := range []string{"int8", "uint8", "int32", "uint32", "int64", "uint64", "half",
		"float", "double", "bfloat16", "f8e4m3", "f8e5m2", "char", "int", "sum", "prod", "max",
		"min", "avg", "mulsum", "none", "all"} {
		interned[s] = s
	}
}

func intern(b []byte) string {
	if s, ok := interned[string(b)]; ok {
		return s
	}
	return cut(string(b), 16)
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
	p.res.OutOfBoundsLine = cut(string(t), MaxEvidenceLine)
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
	p.res.AvgBusBWLine = cut(string(t), MaxEvidenceLine)
}

// Kinds of transport evidence, each kept a few times.
const (
	kindNetwork = iota
	kindProvider
	kindOFI
	kindPlugin
	kindSocket
	kindNCCLNet
	kindForwardCompat
	kindCount
)

var (
	bUsingNetwork   = []byte("Using network ")
	bNETOFI         = []byte("NET/OFI")
	bInitOFI        = []byte("Initializing aws-ofi-nccl")
	bLoadedPlugin   = []byte("Loaded net plugin ")
	bPluginEnv1     = []byte("NCCL_NET_PLUGIN set by environment to ")
	bPluginEnv2     = []byte("Plugin name set by env to ")
	bNETSocket      = []byte("NET/Socket")
	bNCCLNet        = []byte("NCCL_NET")
	bForwardCompat  = []byte("CUDA Forward Compatibility mode ENABLED")
	bNCCLVersion    = []byte("NCCL version ")
	bElectedProv    = []byte("elected Provider is ")
	bElectedProvLow = []byte("elected provider is ")
	bFound          = []byte("(found ")
)

var errorMarkers = [][]byte{
	[]byte("Test NCCL failure"),
	[]byte("Test CUDA failure"),
	[]byte("Test timeout"),
	[]byte("Test failure"),
	[]byte("MPI_ABORT"),
	[]byte("mpirun noticed"),
	[]byte("mpirun detected"),
	[]byte("Segmentation fault"),
	[]byte("NCCL error"),
	[]byte("unhandled system error"),
}

var pluginMissing = [][]byte{
	[]byte("Could not find: libnccl-net"),
	[]byte("No plugin found"),
	[]byte("Using internal network plugin"),
	[]byte("Using internal net plugin"),
}

// factKeywords pre-filter the lines worth the detailed look in fact.
var factKeywords = [][]byte{
	[]byte("NCCL"), []byte("NET/"), []byte("Test"), []byte("mpirun"), []byte("MPI_ABORT"),
	[]byte("Segmentation"), []byte("Forward Compatibility"),
}

// fact extracts what a non-table, non-"#" line says about NCCL and its transport.
func (p *parser) fact(t []byte) {
	if i := bytes.Index(t, bNCCLInfo); i >= 0 {
		p.infoFact(t, bytes.TrimSpace(t[i+len(bNCCLInfo):]))
		return
	}
	p.scanFacts(t)
}

// infoFact handles an NCCL INFO line by the start of its message m: NCCL and aws-ofi-nccl print
// each fact this parser wants at the start of a message, and most of a debug log is INFO lines,
// so this path avoids scanning every line for every pattern.
func (p *parser) infoFact(t, m []byte) {
	tr := &p.res.Transport
	switch {
	case len(m) == 0:
	case bytes.HasPrefix(m, bNETOFI):
		tr.OFIPlugin = true
		if i := bytes.Index(m, bElectedProv); i >= 0 {
			p.provider(t, m[i+len(bElectedProv):])
		} else if i := bytes.Index(m, bElectedProvLow); i >= 0 {
			p.provider(t, m[i+len(bElectedProv):])
		} else {
			if i := bytes.Index(m, bInitOFI); i >= 0 && tr.OFIVersion == "" {
				if f := bytes.Fields(m[i+len(bInitOFI):]); len(f) > 0 {
					tr.OFIVersion = cut(string(f[0]), 40)
				}
			}
			p.evidence(kindOFI, t)
		}
	case bytes.HasPrefix(m, bUsingNetwork):
		p.network(t, m[len(bUsingNetwork):])
	case bytes.HasPrefix(m, bNETSocket):
		tr.Socket = true
		p.evidence(kindSocket, t)
	case m[0] == 'C':
		// "Channel 00/0 : 0[0] -> 1[1] via NET/Socket/0", "CUDA Forward Compatibility ..."
		if bytes.Contains(m, bNETSocket) {
			tr.Socket = true
			p.evidence(kindSocket, t)
		}
		if bytes.Contains(m, bForwardCompat) {
			tr.ForwardCompat = true
			p.evidence(kindForwardCompat, t)
		}
	case bytes.HasPrefix(m, bNCCLVersion):
		p.version(m[len(bNCCLVersion):])
	case bytes.HasPrefix(m, []byte("NET/Plugin")), bytes.HasPrefix(m, []byte("Loaded")),
		bytes.HasPrefix(m, []byte("Plugin")), bytes.HasPrefix(m, bPluginEnv1):
		p.plugin(t)
	case bytes.HasPrefix(m, bNCCLNet):
		if setsNCCLNetIB(m) {
			tr.NCCLNetIB = true
			p.evidence(kindNCCLNet, t)
		}
	}
}

func (p *parser) network(t, rest []byte) {
	tr := &p.res.Transport
	name := bytes.TrimSpace(rest)
	if len(name) == 0 {
		return
	}
	if len(name) > 40 {
		name = name[:40]
	}
	known := false
	for _, n := range tr.Networks {
		if n == string(name) {
			known = true
			break
		}
	}
	if !known {
		tr.Networks = addDistinct(tr.Networks, cut(string(name), 40))
	}
	if bytes.EqualFold(name, []byte("Socket")) {
		tr.Socket = true
		p.evidence(kindSocket, t)
	}
	p.evidence(kindNetwork, t)
}

func (p *parser) version(rest []byte) {
	if p.res.NCCLVersion != "" {
		return
	}
	if f := bytes.Fields(rest); len(f) > 0 && f[0][0] >= '0' && f[0][0] <= '9' {
		p.res.NCCLVersion = cut(string(f[0]), 40)
	}
}

// plugin reads what NCCL says about loading its external net plugin.
func (p *parser) plugin(t []byte) {
	tr := &p.res.Transport
	if i := bytes.Index(t, bLoadedPlugin); i >= 0 {
		name := t[i+len(bLoadedPlugin):]
		if j := bytes.LastIndex(name, []byte(" (v")); j >= 0 {
			name = name[:j]
		}
		name = bytes.TrimSpace(name)
		if tr.NetPlugin == "" {
			tr.NetPlugin = cut(string(name), 40)
		}
		if bytes.Contains(name, []byte("Libfabric")) || bytes.Contains(name, []byte("OFI")) {
			tr.OFIPlugin = true
		}
		p.evidence(kindPlugin, t)
	}
	for _, m := range [][]byte{bPluginEnv1, bPluginEnv2} {
		if i := bytes.Index(t, m); i >= 0 && tr.NetPluginEnv == "" {
			if f := bytes.Fields(t[i+len(m):]); len(f) > 0 {
				tr.NetPluginEnv = cut(string(f[0]), 80)
				p.evidence(kindPlugin, t)
			}
		}
	}
	for _, m := range pluginMissing {
		if bytes.Contains(t, m) {
			tr.PluginMissing = true
			p.evidence(kindPlugin, t)
			break
		}
	}
}

// scanFacts looks for every fact anywhere in a line that is not an NCCL INFO line (warnings,
// launcher output, the bare "NCCL version" line of older NCCL, echoed environments).
func (p *parser) scanFacts(t []byte) {
	tr := &p.res.Transport
	interesting := false
	for _, k := range factKeywords {
		if bytes.Contains(t, k) {
			interesting = true
			break
		}
	}
	if !interesting {
		return
	}
	if bytes.Contains(t, bNCCLWarn) {
		p.addError(t)
	} else {
		for _, m := range errorMarkers {
			if bytes.Contains(t, m) {
				p.addError(t)
				break
			}
		}
	}
	if i := bytes.Index(t, bNCCLVersion); i >= 0 {
		p.version(t[i+len(bNCCLVersion):])
	}
	if i := bytes.Index(t, bUsingNetwork); i >= 0 {
		p.network(t, t[i+len(bUsingNetwork):])
	}
	if bytes.Contains(t, bNETOFI) {
		tr.OFIPlugin = true
		if !bytes.Contains(t, bElectedProv) && !bytes.Contains(t, bElectedProvLow) {
			p.evidence(kindOFI, t)
		}
	}
	if i := bytes.Index(t, bInitOFI); i >= 0 {
		tr.OFIPlugin = true
		if f := bytes.Fields(t[i+len(bInitOFI):]); len(f) > 0 && tr.OFIVersion == "" {
			tr.OFIVersion = cut(string(f[0]), 40)
		}
	}
	p.plugin(t)
	if bytes.Contains(t, bNETSocket) {
		tr.Socket = true
		p.evidence(kindSocket, t)
	}
	if bytes.Contains(t, bNCCLNet) && setsNCCLNetIB(t) {
		tr.NCCLNetIB = true
		p.evidence(kindNCCLNet, t)
	}
	if bytes.Contains(t, bForwardCompat) {
		tr.ForwardCompat = true
		p.evidence(kindForwardCompat, t)
	}
	i := bytes.Index(t, bElectedProv)
	if i < 0 {
		i = bytes.Index(t, bElectedProvLow)
	}
	if i >= 0 {
		p.provider(t, t[i+len(bElectedProv):])
	}
}

func (p *parser) provider(t, rest []byte) {
	tr := &p.res.Transport
	end := bytes.IndexAny(rest, " ,(")
	name := rest
	if end >= 0 {
		name = rest[:end]
	}
	if len(name) == 0 {
		return
	}
	if len(name) > 40 {
		name = name[:40]
	}
	nics := -1
	if k := bytes.Index(rest, bFound); k >= 0 {
		d := rest[k+len(bFound):]
		j := 0
		for j < len(d) && j < 9 && d[j] >= '0' && d[j] <= '9' {
			j++
		}
		if j > 0 {
			nics, _ = strconv.Atoi(string(d[:j]))
		}
	}
	p.evidence(kindProvider, t)
	for _, q := range tr.Providers {
		if q.Name == string(name) && (q.NICs == nil && nics < 0 || q.NICs != nil && *q.NICs == nics) {
			return
		}
	}
	if len(tr.Providers) >= maxDistinct {
		return
	}
	pr := Provider{Name: string(name)}
	if nics >= 0 {
		n := nics // only this copy escapes, not the per-line variable
		pr.NICs = &n
	}
	tr.Providers = append(tr.Providers, pr)
}

// setsNCCLNetIB reports whether t shows NCCL_NET set to IB ("NCCL_NET=IB", "-x NCCL_NET=ib",
// "NCCL_NET set by environment to IB"), not NCCL_NET_PLUGIN or NCCL_NET_GDR_LEVEL.
func setsNCCLNetIB(t []byte) bool {
	for off := 0; off < len(t); {
		i := bytes.Index(t[off:], bNCCLNet)
		if i < 0 {
			return false
		}
		rest := t[off+i+len(bNCCLNet):]
		off += i + len(bNCCLNet)
		switch {
		case len(rest) > 0 && rest[0] == '=':
			rest = rest[1:]
		case bytes.HasPrefix(rest, []byte(" set by environment to ")):
			rest = rest[len(" set by environment to "):]
		default:
			continue
		}
		rest = bytes.TrimLeft(rest, `"'`)
		if len(rest) >= 2 && bytes.EqualFold(rest[:2], []byte("IB")) &&
			(len(rest) == 2 || !isWordByte(rest[2])) {
			return true
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func (p *parser) evidence(kind int, t []byte) {
	if p.kinds[kind] >= maxPerKind {
		return
	}
	// Every rank prints the same message behind its own host:pid:tid [dev] prefix; keep each
	// message once.
	m := infoMessage(t)
	for _, k := range p.kept {
		if k == string(m) {
			return
		}
	}
	p.kinds[kind]++
	line := cut(string(t), MaxEvidenceLine)
	p.res.Transport.Lines = append(p.res.Transport.Lines, line)
	p.kept = append(p.kept, string(m))
}

// infoMessage is what follows "NCCL INFO " in t, or t when it is not an INFO line.
func infoMessage(t []byte) []byte {
	if i := bytes.Index(t, bNCCLInfo); i >= 0 {
		return bytes.TrimSpace(t[i+len(bNCCLInfo):])
	}
	return t
}

func infoMessageString(l string) string {
	if i := strings.Index(l, "NCCL INFO"); i >= 0 {
		return strings.TrimSpace(l[i+len("NCCL INFO"):])
	}
	return l
}

func (p *parser) addError(t []byte) {
	if len(p.res.Errors) < maxErrors {
		p.res.Errors = append(p.res.Errors, cut(string(t), MaxEvidenceLine))
	}
}

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

// cut shortens s to at most n bytes without splitting a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n]
}

func utf8Start(c byte) bool { return c&0xC0 != 0x80 }

func atoi(b []byte) int {
	n, _ := strconv.Atoi(string(b))
	return n
}

func atoi64(b []byte) int64 {
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}

// Package nccltests parses the stdout of NVIDIA nccl-tests (all_reduce_perf and friends, versions
// 2.4 to 2.19) together with the NCCL_DEBUG=INFO lines interleaved with it, into a typed Result.
//
// One machine reads every log: a Stream takes bytes in chunks of any size, cuts them into lines
// and hands each line either to the result-table reader (table.go) or to the one rule table of
// NCCL facts (facts.go). Parse and ParseString feed a Stream, so a log read whole and the same
// log streamed in pieces cannot give different Results. Only the result rows (capped at MaxRows),
// the trailer, a bounded set of transport facts and evidence lines, and at most one unfinished
// line are kept, so a 10 MB log costs linear time and constant memory. Content never makes it
// fail: lines it does not recognise are skipped, and what it could not find stays nil or empty
// for the caller to judge. The only error is a failing reader.
package nccltests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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
	// MaxDataPaths is how many distinct "via" paths Transport.DataPaths keeps.
	MaxDataPaths = 16
	// MaxHosts is how many hosts Result.Hosts keeps (a multi-node log names each host in its
	// NCCL lines); MaxRanksPerHost how many ranks each keeps.
	MaxHosts        = 64
	MaxRanksPerHost = 64
	maxPerKind      = 3
	maxErrors       = 16
	maxDistinct     = 8
	// readChunk is what Parse reads at a time; lines may span chunks.
	readChunk = 32 * 1024
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

	// Transport holds the facts read from the NCCL lines.
	Transport Transport
	// Hosts are the hosts that printed NCCL lines ("host:pid:tid [dev] NCCL INFO ..."), in
	// first-seen order, with what their own lines say about the network, at most MaxHosts: on a
	// run across nodes a fallback or a missing plugin on one node shows here and names it.
	Hosts []HostNet
	// NRanks is the communicator's size from the "nranks N" of NCCL's init lines; 0 when not
	// printed.
	NRanks int
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
	// Table is the number of the table the row belongs to (1 for the first; Result.Tables for
	// the rows Result keeps), so a Stream's onRow can tell when a new run started.
	Table int
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

// Transport is what the NCCL lines say about the network NCCL chose and about the paths that
// carried the test's data. Each field is set by the rules of facts.go, whatever the shape of the
// line that carries the fact (NCCL INFO, NCCL WARN, launcher-prefixed or plain).
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
	// Socket is true when any NET/Socket line (including a "via NET/Socket/0" connection) or
	// "Using network Socket" appeared.
	Socket bool
	// NCCLNetIB is true when NCCL_NET=IB was seen set.
	NCCLNetIB bool
	// ForwardCompat is true when "CUDA Forward Compatibility mode ENABLED" appeared
	// (informational: normal when the container CUDA is newer than the driver's).
	ForwardCompat bool
	// Lines are representative log lines for the facts above (a few per kind), prefix removed.
	Lines []string

	// DataPaths are the distinct paths NCCL connected ranks over, from the connection lines
	// "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read" (and the "Ring"/"CollNet" lines of older
	// NCCL), as printed after "via", in first-seen order, at most MaxDataPaths:
	// "P2P/CUMEM/read", "SHM/direct/direct", "NET/Libfabric/0/GDRDMA".
	DataPaths []string
	// DataTransports are the distinct transports of those paths without device numbers and
	// options ("P2P/CUMEM", "P2P/IPC", "SHM", "NET/Libfabric", "COLLNET/SHARP"), in first-seen
	// order; unlike DataPaths they are complete even when a host has many NICs.
	DataTransports []string
	// NVLSAvailable is true when a rank said "NVLS multicast support is available".
	NVLSAvailable bool
	// NVLS is true when NCCL set up NVLink SHARP buffers ("NVLS comm 0x..." or "Connected NVLS
	// tree"). Since NCCL 2.22 (NCCL_RUNTIME_CONNECT=1, the default) that happens when a
	// collective first uses an NVLS algorithm, so the NVSwitch reduced at least part of the
	// data; older NCCL set them up at init whenever NVLS was available.
	NVLS bool
	// RingsConnected and TreesConnected are true when "Connected all rings" / "Connected all
	// trees" appeared: the ranks finished connecting over the paths above.
	RingsConnected, TreesConnected bool
	// DataLines are representative log lines for the data-path facts (a few per kind).
	DataLines []string
}

// HostNet is what one host's NCCL lines say about its network.
type HostNet struct {
	// Name is the host name as NCCL prints it before ":pid:tid".
	Name string
	// Ranks are the distinct global ranks whose init completed on this host ("rank R nranks
	// N ... Init COMPLETE"), in first-seen order, at most MaxRanksPerHost.
	Ranks []int
	// OFIPlugin is true when aws-ofi-nccl announced itself in this host's lines.
	OFIPlugin bool
	// Networks are the distinct "Using network NAME" names of this host.
	Networks []string
	// Socket is true when this host's lines show NET/Socket or "Using network Socket".
	Socket bool
	// SocketLine is the first such line, prefix removed; "" when none.
	SocketLine string
	// NICs is the largest "(found N nics)" of this host's provider lines; nil when none said.
	NICs *int
	// NetPaths is true when a connection of this host went over the network ("via NET/...").
	NetPaths bool
	// GDRDMA is true when such a connection went with GPUDirect RDMA ("via NET/.../GDRDMA");
	// NoGDRDMALine is the first network connection without it, "" when none.
	GDRDMA       bool
	NoGDRDMALine string
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

// Parse reads an nccl-tests log from r. It returns an error only when r fails, together with
// what the log said up to then.
func Parse(r io.Reader) (Result, error) {
	s := NewStream(nil)
	buf := make([]byte, readChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			// A Stream fails only after Result, which comes last here.
			_, _ = s.Write(buf[:n])
		}
		if err == io.EOF {
			return s.Result(), nil
		}
		if err != nil {
			return s.Result(), fmt.Errorf("nccl-tests: reading log: %w", err)
		}
	}
}

// Stream parses a log as it arrives: it is an io.Writer that accepts chunks of any size and
// cuts them into lines itself, keeping at most one unfinished line (MaxLineBytes) besides the
// bounded Result. A Stream is not safe for concurrent use.
type Stream struct {
	p parser
	// partial is the start of a line whose end has not arrived yet.
	partial []byte
	// skipping is true while the rest of a line longer than MaxLineBytes goes by: its first
	// MaxLineBytes were already read as the line.
	skipping bool
	closed   bool
}

// NewStream returns a Stream that calls onRow (when not nil) once for every result row as the
// row is read, in order: every row of the table being printed, also those beyond MaxRows that
// Result does not keep. Row.Table tells which table a row belongs to. onRow runs inside Write
// and must not modify the Row's fields.
func NewStream(onRow func(Row)) *Stream {
	return &Stream{p: parser{onRow: onRow}}
}

// Write reads p as the next bytes of the log. It fails only after Result.
func (s *Stream) Write(p []byte) (int, error) {
	if s.closed {
		return 0, errors.New("nccl-tests: write after Result: the stream is closed; start a new Stream for more output")
	}
	n := len(p)
	for len(p) > 0 {
		nl := bytes.IndexByte(p, '\n')
		if s.skipping {
			if nl < 0 {
				return n, nil
			}
			s.skipping = false
			p = p[nl+1:]
			continue
		}
		if nl < 0 {
			s.hold(p)
			return n, nil
		}
		if len(s.partial) == 0 {
			// The common case: the whole line is in p, read it in place.
			s.p.line(p[:min(nl, MaxLineBytes)])
		} else {
			s.keep(p[:min(nl, MaxLineBytes-len(s.partial))])
			s.p.line(s.partial)
			s.partial = s.partial[:0]
		}
		p = p[nl+1:]
	}
	return n, nil
}

// hold keeps b, the start of a line, until its end arrives. A line that reaches MaxLineBytes is
// read at once and the rest of it skipped, so a stream without newlines cannot grow the buffer.
func (s *Stream) hold(b []byte) {
	room := MaxLineBytes - len(s.partial)
	if len(b) < room {
		s.keep(b)
		return
	}
	s.keep(b[:room])
	s.p.line(s.partial)
	s.partial = s.partial[:0]
	s.skipping = true
}

// keep appends b to the partial line, growing the buffer to at most MaxLineBytes (append alone
// may round the capacity up past it); callers never pass more than fits.
func (s *Stream) keep(b []byte) {
	need := len(s.partial) + len(b)
	if need > cap(s.partial) {
		grown := make([]byte, len(s.partial), min(max(need, 2*cap(s.partial), 256), MaxLineBytes))
		copy(grown, s.partial)
		s.partial = grown
	}
	s.partial = append(s.partial, b...)
}

// Result reads the last line when it has no newline, closes the stream and returns what Parse
// returns for the same bytes. Calling it again returns the same Result.
func (s *Stream) Result() Result {
	if !s.closed {
		if len(s.partial) > 0 {
			s.p.line(s.partial)
		}
		s.partial = nil
		s.closed = true
	}
	return s.p.res
}

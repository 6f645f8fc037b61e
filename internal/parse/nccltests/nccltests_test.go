package nccltests

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

// want is what a test expects of a Result; zero fields are not checked unless noted.
type want struct {
	rows         int
	largestSize  int64
	largestBusBW float64 // out-of-place
	oob          *int64  // checked always: nil means "no trailer"
	oobOK        bool
	avg          float64 // 0: AvgBusBW must be nil
	nccl         string
	tests        string
	networks     []string
	providers    string // "efa/8", "efa/-" (no count), "" none
	ofi          bool
	socket       bool
	ncclNetIB    bool
	elided       bool
	devices      int
	tables       int
	errors       int // minimum number of Errors
	validation   *int
	columns      int
	wrongKind    string // "wrong", "error", "" (not checked)
	concluded    bool
	forward      bool
	ofiVersion   string // "" : not checked
	// The data-path facts are checked always: nil/""/false mean "none in this log".
	paths         []string
	nvls          bool
	nvlsAvailable bool
	dataTransport string // Transport.DataTransport()
}

// Data paths of the reference logs, shared by the files cut from the same run.
var (
	p6Paths  = []string{"P2P/CUMEM/read"}
	p6DT     = "P2P/CUMEM (NVLink or PCIe peer-to-peer)"
	p4dPaths = []string{"NET/AWS Libfabric/1/GDRDMA", "P2P/IPC/read", "NET/AWS Libfabric/2/GDRDMA",
		"NET/AWS Libfabric/3/GDRDMA", "NET/AWS Libfabric/0/GDRDMA"}
	p4dDT = "NET/AWS Libfabric + P2P/IPC (NVLink or PCIe peer-to-peer)"
)

func i64(v int64) *int64 { return &v }
func iptr(v int) *int    { return &v }

func TestParseReferenceFiles(t *testing.T) {
	tests := map[string]want{
		"p3dn-2node-efa-nccl2.4.8-oldest-format.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 8.82, oob: i64(0), oobOK: true, avg: 2.80613,
			nccl: "2.4.8+cuda10.0", providers: "efa/-", ofi: true, devices: 16, tables: 1,
			validation: iptr(1), columns: 12, wrongKind: "error",
		},
		"p3dn-2node-efa-nccl2.4.8-selected-provider-old.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 8.82, oob: i64(0), oobOK: true, avg: 2.80613,
			nccl: "2.4.8+cuda10.0", providers: "efa/-", ofi: true, devices: 16, tables: 1,
			validation: iptr(1), columns: 12, wrongKind: "error",
		},
		"p4d-2node-efa-nccl2.9.9-mpi-tagged.txt": {
			rows: 30, largestSize: 4 << 30, largestBusBW: 43.81, oob: i64(0), oobOK: true, avg: 11.2432,
			nccl: "2.9.9+cuda11.2", networks: []string{"AWS Libfabric"}, providers: "efa/-", ofi: true,
			devices: 16, tables: 1, validation: iptr(1), columns: 12, wrongKind: "error",
			paths: p4dPaths, dataTransport: p4dDT,
		},
		"p4d-2node-efa-aws-libfabric-nccl2.9.9.txt": {
			rows: 30, largestSize: 4 << 30, largestBusBW: 43.81, oob: i64(0), oobOK: true, avg: 11.2432,
			nccl: "2.9.9+cuda11.2", networks: []string{"AWS Libfabric"}, providers: "efa/-", ofi: true,
			devices: 16, tables: 1, validation: iptr(1), columns: 12, wrongKind: "error",
			paths: p4dPaths, dataTransport: p4dDT,
		},
		"p4de-2node-slurm-srun-prefixed.txt": {
			rows: 29, largestSize: 2 << 30, largestBusBW: 78.33, oob: nil, tables: 1, columns: 13,
			wrongKind: "wrong",
		},
		"p5-2node-eks-mpi-tagged-elided.txt": {
			rows: 7, largestSize: 2 << 30, largestBusBW: 437.79, oob: i64(0), oobOK: true, avg: 52.9753,
			elided: true, tables: 1, columns: 13, wrongKind: "wrong",
		},
		"p5-2node-slurm-srun-prefixed-16G.txt": {
			rows: 32, largestSize: 16 << 30, largestBusBW: 487.09, oob: nil, tables: 1, columns: 13,
			wrongKind: "wrong",
		},
		"p5-awsbatch-mpi-tagged-16G.txt": {
			rows: 32, largestSize: 16 << 30, largestBusBW: 483.05, oob: i64(0), oobOK: true, avg: 156.742,
			tables: 1, columns: 13, wrongKind: "wrong",
		},
		"p5en-ami-elided.txt": {
			rows: 3, largestSize: 16 << 30, largestBusBW: 369.86, oob: i64(0), oobOK: true, avg: 84.0569,
			elided: true, tables: 1, columns: 13, wrongKind: "wrong",
		},
		"synthetic-p6b200-1node-ok.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 712.06, oob: i64(0), oobOK: true, avg: 192.934,
			nccl: "2.27.7+cuda13.0", tests: "2.17.6", networks: []string{"Libfabric"}, providers: "efa/8",
			ofi: true, devices: 8, tables: 1, validation: iptr(1), columns: 13, wrongKind: "wrong",
			concluded: true, paths: p6Paths, dataTransport: p6DT,
		},
		"derived-socket-fallback.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 712.06, oob: i64(0), oobOK: true, avg: 192.934,
			nccl: "2.27.7+cuda13.0", tests: "2.17.6", networks: []string{"Socket"}, socket: true,
			devices: 8, tables: 1, validation: iptr(1), columns: 13, concluded: true,
			paths: p6Paths, dataTransport: p6DT,
		},
		"derived-network-ib.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 712.06, oob: i64(0), oobOK: true, avg: 192.934,
			nccl: "2.27.7+cuda13.0", networks: []string{"IB"}, ncclNetIB: true, devices: 8, tables: 1,
			columns: 13, concluded: true, paths: p6Paths, dataTransport: p6DT,
		},
		"derived-ncclnet-ib-failed.txt": {
			oob: nil, tests: "2.17.6", ncclNetIB: true, devices: 8, tables: 1, errors: 3,
			validation: iptr(1),
		},
		"derived-oob-failed.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 712.06, oob: i64(15), oobOK: false, avg: 192.934,
			nccl: "2.27.7+cuda13.0", networks: []string{"Libfabric"}, providers: "efa/8", ofi: true, devices: 8, tables: 1,
			columns: 13, concluded: true, paths: p6Paths, dataTransport: p6DT,
		},
		"derived-validation-off.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 712.06, oob: i64(0), oobOK: true, avg: 192.934,
			nccl: "2.27.7+cuda13.0", networks: []string{"Libfabric"}, providers: "efa/8", ofi: true, devices: 8, tables: 1,
			validation: iptr(0), columns: 13, concluded: true, paths: p6Paths, dataTransport: p6DT,
		},
		"derived-p6b200-1node-nvls.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 712.06, oob: i64(0), oobOK: true, avg: 192.934,
			nccl: "2.27.7+cuda13.0", tests: "2.17.6", networks: []string{"Libfabric"}, providers: "efa/8",
			ofi: true, devices: 8, tables: 1, validation: iptr(1), columns: 13, wrongKind: "wrong",
			concluded: true, paths: p6Paths, nvls: true, nvlsAvailable: true,
			dataTransport: "NVLS + P2P/CUMEM (NVLink or PCIe peer-to-peer)",
		},
		"derived-p2p-disabled-shm.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 20.99, oob: i64(0), oobOK: true, avg: 9.10664,
			nccl: "2.27.7+cuda13.0", tests: "2.17.6", networks: []string{"Libfabric"}, providers: "efa/8",
			ofi: true, devices: 8, tables: 1, validation: iptr(1), columns: 13, wrongKind: "wrong",
			concluded: true, paths: []string{"SHM/direct/direct"}, dataTransport: "SHM",
		},
		// The two disagreements of the old INFO-only and non-INFO extractors, one file each.
		"derived-ring-via-socket-nccl2.4.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 1.59, oob: i64(0), oobOK: true, avg: 0.755717,
			socket: true, devices: 16, tables: 1, validation: iptr(1), columns: 12, wrongKind: "error",
			paths: []string{"P2P/IPC", "NET/Socket/0"}, dataTransport: "P2P/IPC (NVLink or PCIe peer-to-peer) + NET/Socket",
		},
		"derived-ofi-banner-message-only.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 706.70, oob: i64(0), oobOK: true, avg: 192.036,
			nccl: "2.27.7+cuda13.0", tests: "2.17.6", networks: []string{"Libfabric"}, providers: "efa/8",
			ofi: true, ofiVersion: "1.9.1", devices: 8, tables: 1, validation: iptr(1), columns: 13,
			wrongKind: "wrong", paths: p6Paths, dataTransport: p6DT,
		},
		"FORMAT-NOTES-from-nccl-tests-source.txt": {oob: nil, errors: 1},
	}
	// These logs are the NCCL judge's cases (internal/checks, TestJudgeNCCL): they differ from
	// the ones above in what the judge reads, not in what this parser reads.
	judgedOnly := map[string]bool{"derived-binary-missing.txt": true, "derived-forward-compat.txt": true,
		"derived-garbage.txt": true, "derived-nics-4.txt": true, "derived-no-trailer.txt": true}
	for _, name := range fixture.Names(t, ".txt") {
		if _, ok := tests[name]; !ok && !judgedOnly[name] {
			t.Errorf("%s: testdata file without a test case", name)
		}
		if _, err := os.Stat(filepath.Join("testdata", strings.TrimSuffix(name, ".txt")+".source")); err != nil {
			t.Errorf("%s: no .source note beside it", name)
		}
	}
	for name, w := range tests {
		t.Run(name, func(t *testing.T) {
			r, err := ParseString(fixture.Read(t, name))
			if err != nil {
				t.Fatal(err)
			}
			checkWant(t, r, w)
		})
	}
}

func checkWant(t *testing.T, r Result, w want) {
	t.Helper()
	if len(r.Rows) != w.rows {
		t.Errorf("rows = %d, want %d", len(r.Rows), w.rows)
	}
	if w.rows > 0 {
		if r.Largest == nil {
			t.Fatalf("Largest = nil")
		}
		if r.Largest.SizeBytes != w.largestSize {
			t.Errorf("largest size = %d, want %d", r.Largest.SizeBytes, w.largestSize)
		}
		if got := r.Largest.OutOfPlace.BusBW; got == nil || *got != w.largestBusBW {
			t.Errorf("largest out-of-place busbw = %v, want %v", fp(got), w.largestBusBW)
		}
		if r.MalformedRows != 0 {
			t.Errorf("MalformedRows = %d, want 0", r.MalformedRows)
		}
	} else if r.Largest != nil {
		t.Errorf("Largest = %+v, want nil", r.Largest)
	}
	switch {
	case w.oob == nil && r.OutOfBounds != nil:
		t.Errorf("OutOfBounds = %d, want nil", *r.OutOfBounds)
	case w.oob != nil && (r.OutOfBounds == nil || *r.OutOfBounds != *w.oob):
		t.Errorf("OutOfBounds = %v, want %d", ip(r.OutOfBounds), *w.oob)
	}
	if r.OutOfBoundsOK != w.oobOK {
		t.Errorf("OutOfBoundsOK = %v, want %v", r.OutOfBoundsOK, w.oobOK)
	}
	if w.oob != nil && !strings.Contains(r.OutOfBoundsLine, "Out of bounds values") {
		t.Errorf("OutOfBoundsLine = %q", r.OutOfBoundsLine)
	}
	if (w.avg == 0) != (r.AvgBusBW == nil) || (r.AvgBusBW != nil && *r.AvgBusBW != w.avg) {
		t.Errorf("AvgBusBW = %v, want %v", fp(r.AvgBusBW), w.avg)
	}
	if r.NCCLVersion != w.nccl {
		t.Errorf("NCCLVersion = %q, want %q", r.NCCLVersion, w.nccl)
	}
	if w.tests != "" && r.TestsVersion != w.tests {
		t.Errorf("TestsVersion = %q, want %q", r.TestsVersion, w.tests)
	}
	if !reflect.DeepEqual(r.Transport.Networks, w.networks) {
		t.Errorf("Networks = %q, want %q", r.Transport.Networks, w.networks)
	}
	if got := providerString(r.Transport.Providers); got != w.providers {
		t.Errorf("Providers = %q, want %q", got, w.providers)
	}
	if r.Transport.OFIPlugin != w.ofi {
		t.Errorf("OFIPlugin = %v, want %v", r.Transport.OFIPlugin, w.ofi)
	}
	if r.Transport.Socket != w.socket {
		t.Errorf("Socket = %v, want %v", r.Transport.Socket, w.socket)
	}
	if r.Transport.NCCLNetIB != w.ncclNetIB {
		t.Errorf("NCCLNetIB = %v, want %v", r.Transport.NCCLNetIB, w.ncclNetIB)
	}
	if r.Transport.ForwardCompat != w.forward {
		t.Errorf("ForwardCompat = %v, want %v", r.Transport.ForwardCompat, w.forward)
	}
	if r.Elided != w.elided {
		t.Errorf("Elided = %v, want %v", r.Elided, w.elided)
	}
	if r.Devices != w.devices {
		t.Errorf("Devices = %d, want %d", r.Devices, w.devices)
	}
	if r.Tables != w.tables {
		t.Errorf("Tables = %d, want %d", r.Tables, w.tables)
	}
	if len(r.Errors) < w.errors {
		t.Errorf("Errors = %q, want at least %d", r.Errors, w.errors)
	}
	if w.errors == 0 && len(r.Errors) != 0 {
		t.Errorf("Errors = %q, want none", r.Errors)
	}
	if w.validation != nil && (r.Config == nil || r.Config.Validation == nil || *r.Config.Validation != *w.validation) {
		t.Errorf("Config = %+v, want validation %d", r.Config, *w.validation)
	}
	if len(r.Columns) != w.columns {
		t.Errorf("Columns = %q, want %d labels", r.Columns, w.columns)
	}
	if r.Concluded != w.concluded {
		t.Errorf("Concluded = %v, want %v", r.Concluded, w.concluded)
	}
	if w.ofiVersion != "" && r.Transport.OFIVersion != w.ofiVersion {
		t.Errorf("OFIVersion = %q, want %q", r.Transport.OFIVersion, w.ofiVersion)
	}
	if !reflect.DeepEqual(r.Transport.DataPaths, w.paths) {
		t.Errorf("DataPaths = %q, want %q", r.Transport.DataPaths, w.paths)
	}
	if r.Transport.NVLS != w.nvls || r.Transport.NVLSAvailable != w.nvlsAvailable {
		t.Errorf("NVLS = %v, NVLSAvailable = %v, want %v, %v", r.Transport.NVLS, r.Transport.NVLSAvailable, w.nvls, w.nvlsAvailable)
	}
	if got := r.Transport.DataTransport(); got != w.dataTransport {
		t.Errorf("DataTransport() = %q, want %q", got, w.dataTransport)
	}
	if (len(r.Transport.DataPaths) > 0 || r.Transport.NVLS) != (len(r.Transport.DataLines) > 0) {
		t.Errorf("DataLines = %q for paths %q, NVLS %v: data-path facts need evidence", r.Transport.DataLines, r.Transport.DataPaths, r.Transport.NVLS)
	}
	for _, row := range r.Rows {
		for _, m := range []Measure{row.OutOfPlace, row.InPlace} {
			switch w.wrongKind {
			case "wrong":
				if m.Wrong == nil || m.MaxError != nil {
					t.Fatalf("row %d: Wrong=%v MaxError=%v, want a #wrong count", row.SizeBytes, ip(m.Wrong), fp(m.MaxError))
				}
			case "error":
				if m.Wrong != nil || m.MaxError == nil {
					t.Fatalf("row %d: Wrong=%v MaxError=%v, want an error value", row.SizeBytes, ip(m.Wrong), fp(m.MaxError))
				}
			}
		}
	}
}

func providerString(ps []Provider) string {
	var s []string
	for _, p := range ps {
		n := "-"
		if p.NICs != nil {
			n = fmt.Sprint(*p.NICs)
		}
		s = append(s, p.Name+"/"+n)
	}
	return strings.Join(s, ",")
}

func fp(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func ip(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// FuzzParse checks that Parse never panics, keeps its bounds, yields only finite numbers and
// does not depend on how the input is chunked.
func FuzzParse(f *testing.F) {
	seedFromTestdata(f, func(s string) { f.Add(s) })
	f.Add(header219 + "  1073741824     268435456     float     sum      -1  1.1e+04   97.61  170.82  1.23457e+06  N/A  nan  inf     N/A\n")
	f.Add("[1,0]<stdout>: 3: # Out of bounds values : -1 OK\n")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseString(s)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := Parse(iotest.OneByteReader(strings.NewReader(s)))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("result depends on read chunking:\n%+v\n%+v", r, r2)
		}
		tr := r.Transport
		if len(r.Rows) > MaxRows || len(r.Errors) > maxErrors || len(tr.Networks) > maxDistinct ||
			len(tr.Providers) > maxDistinct || len(tr.Lines) > maxPerKind*kindPath ||
			len(tr.DataPaths) > MaxDataPaths || len(tr.DataTransports) > maxDistinct ||
			len(tr.DataLines) > maxPerKind*(kindCount-kindPath) {
			t.Fatalf("bounds exceeded: rows=%d errors=%d transport=%+v", len(r.Rows), len(r.Errors), tr)
		}
		for _, row := range r.Rows {
			if row.Table != r.Tables {
				t.Fatalf("row of table %d kept in the result of table %d: %+v", row.Table, r.Tables, row)
			}
		}
		if (r.Largest == nil) != (len(r.Rows) == 0 && r.RowsDropped == 0) {
			t.Fatalf("Largest=%v with %d rows", r.Largest, len(r.Rows))
		}
		for _, row := range r.Rows {
			if row.SizeBytes < 0 || row.Count < 0 || len(row.Line) > MaxEvidenceLine {
				t.Fatalf("bad row %+v", row)
			}
			if r.Largest.SizeBytes < row.SizeBytes {
				t.Fatalf("Largest %d < row %d", r.Largest.SizeBytes, row.SizeBytes)
			}
			for _, m := range []Measure{row.OutOfPlace, row.InPlace} {
				for _, v := range []*float64{m.TimeUS, m.AlgBW, m.BusBW, m.MaxError} {
					if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0)) {
						t.Fatalf("non-finite cell in %+v", row)
					}
				}
				if m.Wrong != nil && *m.Wrong < 0 {
					t.Fatalf("negative #wrong in %+v", row)
				}
			}
		}
		if r.AvgBusBW != nil && (math.IsNaN(*r.AvgBusBW) || math.IsInf(*r.AvgBusBW, 0)) {
			t.Fatalf("non-finite avg")
		}
		if r.OutOfBoundsOK && r.OutOfBounds == nil {
			t.Fatalf("OK without a count")
		}
		for _, l := range append(append(append([]string{}, r.Errors...), r.Transport.Lines...), r.Transport.DataLines...) {
			if len(l) > MaxEvidenceLine {
				t.Fatalf("evidence line of %d bytes", len(l))
			}
		}
	})
}

// seedFromTestdata passes the end of every testdata log to add, for f's corpus: the last 16 KiB
// hold the table and the trailer, and shorter seeds keep the fuzzer fast.
func seedFromTestdata(f *testing.F, add func(string)) {
	for _, name := range fixture.Names(f, ".txt") {
		s := fixture.Read(f, name)
		if len(s) > 16*1024 {
			s = s[len(s)-16*1024:]
		}
		add(s)
	}
}

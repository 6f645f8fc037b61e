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
)

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

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
}

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
		},
		"p4d-2node-efa-aws-libfabric-nccl2.9.9.txt": {
			rows: 30, largestSize: 4 << 30, largestBusBW: 43.81, oob: i64(0), oobOK: true, avg: 11.2432,
			nccl: "2.9.9+cuda11.2", networks: []string{"AWS Libfabric"}, providers: "efa/-", ofi: true,
			devices: 16, tables: 1, validation: iptr(1), columns: 12, wrongKind: "error",
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
			concluded: true,
		},
		"derived-socket-fallback.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 712.06, oob: i64(0), oobOK: true, avg: 192.934,
			nccl: "2.27.7+cuda13.0", tests: "2.17.6", networks: []string{"Socket"}, socket: true,
			devices: 8, tables: 1, validation: iptr(1), columns: 13, concluded: true,
		},
		"derived-network-ib.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 712.06, oob: i64(0), oobOK: true, avg: 192.934,
			nccl: "2.27.7+cuda13.0", networks: []string{"IB"}, ncclNetIB: true, devices: 8, tables: 1,
			columns: 13, concluded: true,
		},
		"derived-ncclnet-ib-failed.txt": {
			oob: nil, tests: "2.17.6", ncclNetIB: true, devices: 8, tables: 1, errors: 3,
			validation: iptr(1),
		},
		"derived-oob-failed.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 712.06, oob: i64(15), oobOK: false, avg: 192.934,
			nccl: "2.27.7+cuda13.0", networks: []string{"Libfabric"}, providers: "efa/8", ofi: true, devices: 8, tables: 1,
			columns: 13, concluded: true,
		},
		"derived-validation-off.txt": {
			rows: 28, largestSize: 1 << 30, largestBusBW: 712.06, oob: i64(0), oobOK: true, avg: 192.934,
			nccl: "2.27.7+cuda13.0", networks: []string{"Libfabric"}, providers: "efa/8", ofi: true, devices: 8, tables: 1,
			validation: iptr(0), columns: 13, concluded: true,
		},
		"FORMAT-NOTES-from-nccl-tests-source.txt": {oob: nil, errors: 1},
	}
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		if _, ok := tests[name]; !ok {
			t.Errorf("%s: testdata file without a test case", name)
		}
		if _, err := os.Stat(strings.TrimSuffix(f, ".txt") + ".source"); err != nil {
			t.Errorf("%s: no .source note beside it", name)
		}
	}
	for name, w := range tests {
		t.Run(name, func(t *testing.T) {
			r, err := ParseString(readTestdata(t, name))
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

const header219 = `# nccl-tests version 2.19.6 nccl-headers=22903 nccl-library=22903
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 1 iters: 50 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4100 on ip-10-0-1-23 device  0 [0000:18:00] NVIDIA B200
#  Rank  1 Group  0 Pid   4101 on ip-10-0-1-23 device  1 [0000:28:00] NVIDIA B200
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         
`

// TestParseVariants covers format variations derived from the reference logs and the
// printf formats of the nccl-tests source.
func TestParseVariants(t *testing.T) {
	type check func(t *testing.T, r Result)
	tests := []struct {
		name string
		in   string
		chk  check
	}{
		{"empty", "", func(t *testing.T, r Result) {
			if r.Lines != 0 || r.Largest != nil || r.OutOfBounds != nil || r.Tables != 0 {
				t.Errorf("got %+v", r)
			}
		}},
		{"garbage", "\x00\xff\xfe garbage\n12 34\n1 2 float sum -1 a b c 0 d e f 0\n# Out of bounds values : many OK\n# Avg bus bandwidth : nan\nUsing network \n...\n", func(t *testing.T, r Result) {
			if len(r.Rows) != 0 || r.Largest != nil || r.OutOfBounds != nil || r.AvgBusBW != nil || len(r.Transport.Networks) != 0 {
				t.Errorf("garbage gave facts: %+v", r)
			}
			if r.MalformedRows != 1 {
				t.Errorf("MalformedRows = %d, want 1", r.MalformedRows)
			}
		}},
		{"2.19 with getFloatStr exponent, N/A and large #wrong", header219 +
			"           8             2     float     sum      -1    20.00    0.00    0.00       0    20.06    0.00    0.00       0\n" +
			"  1073741824     268435456     float     sum      -1  1.1e+04   97.61  170.82  1.23457e+06  2646.80  405.68  709.93     N/A\n" +
			"# Out of bounds values : 1234570 FAILED\n# Avg bus bandwidth    : 85.4 \n# GPU memory usage     : 12.3 GB\n# error: \n#\n# Collective test concluded: all_reduce_perf\n",
			func(t *testing.T, r Result) {
				if len(r.Rows) != 2 || r.Largest == nil {
					t.Fatalf("rows = %d", len(r.Rows))
				}
				l := r.Largest
				if *l.OutOfPlace.TimeUS != 11000 || *l.OutOfPlace.Wrong != 1234570 || l.InPlace.Wrong != nil || *l.InPlace.BusBW != 709.93 {
					t.Errorf("largest = %+v", l)
				}
				if r.OutOfBounds == nil || *r.OutOfBounds != 1234570 || r.OutOfBoundsOK || r.FailedTrailers != 1 {
					t.Errorf("OOB = %v ok=%v failed=%d", ip(r.OutOfBounds), r.OutOfBoundsOK, r.FailedTrailers)
				}
				if r.Config == nil || r.Config.Iters != 50 || r.Config.WarmupIters != 1 || r.Config.MaxBytes != 1<<30 {
					t.Errorf("Config = %+v", r.Config)
				}
				if len(r.Errors) != 0 {
					t.Errorf("an empty '# error:' line is not an error: %q", r.Errors)
				}
				if r.Devices != 2 || r.TestsVersion != "2.19.6" || r.Program != "all_reduce_perf" || !r.Concluded {
					t.Errorf("devices=%d tests=%q program=%q concluded=%v", r.Devices, r.TestsVersion, r.Program, r.Concluded)
				}
			}},
		{"per-iteration columns and cputime", `#       size         count      type   redop    root  cputime   algbw   busbw  #wrong  i_min  i_max  i_p99  i_cv%  cputime   algbw   busbw  #wrong  i_min  i_max  i_p99  i_cv%
        1024           256     float     sum      -1    20.10    0.05    0.09       0  19.9  21.0  20.9  1.2    20.20    0.05    0.09       0  19.9  21.0  20.9  1.2
`, func(t *testing.T, r Result) {
			if len(r.Rows) != 1 || r.MalformedRows != 0 {
				t.Fatalf("rows=%d malformed=%d", len(r.Rows), r.MalformedRows)
			}
			if m := r.Rows[0].InPlace; *m.TimeUS != 20.2 || *m.BusBW != 0.09 || *m.Wrong != 0 {
				t.Errorf("in-place = %+v", m)
			}
		}},
		{"old format without header, N/A error cells", "" +
			"           8             2   float     sum    145.4    0.00    0.00    N/A    152.8    0.00    0.00    N/A\n" +
			"        1024           256   float     sum    151.0    0.01    0.01  0e+00    137.7    0.01    0.01  2e-07\n",
			func(t *testing.T, r Result) {
				if len(r.Rows) != 2 || r.MalformedRows != 0 {
					t.Fatalf("rows=%d malformed=%d", len(r.Rows), r.MalformedRows)
				}
				if r.Rows[0].OutOfPlace.MaxError != nil || r.Rows[0].OutOfPlace.Wrong != nil || r.Rows[0].Root != nil {
					t.Errorf("row 0 = %+v", r.Rows[0])
				}
				if e := r.Rows[1].OutOfPlace.MaxError; e == nil || *e != 0 || r.Rows[1].OutOfPlace.Wrong != nil {
					t.Errorf("row 1 = %+v", r.Rows[1].OutOfPlace)
				}
			}},
		{"N/A and nan in bandwidth cells", header219 +
			"        1024           256     float     sum      -1      N/A     nan    -nan       0      inf     N/A     N/A     N/A\n",
			func(t *testing.T, r Result) {
				if len(r.Rows) != 1 {
					t.Fatalf("rows=%d malformed=%d", len(r.Rows), r.MalformedRows)
				}
				m := r.Rows[0].OutOfPlace
				if m.TimeUS != nil || m.AlgBW != nil || m.BusBW != nil || m.Wrong == nil {
					t.Errorf("out-of-place = %+v", m)
				}
			}},
		{"srun labels padded and mpi stderr tags, CRLF", " 0: #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\r\n" +
			"12:        1024           256     float     sum      -1    20.10    0.05    0.09      0    20.20    0.05    0.09      0\r\n" +
			"[1,3]<stderr>:host:1:1 [3] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\r\n" +
			"[1,0]<stdout>: 0: # Out of bounds values : 0 OK\r\n",
			func(t *testing.T, r Result) {
				if len(r.Rows) != 1 || r.OutOfBounds == nil || !r.OutOfBoundsOK || !r.Transport.Socket {
					t.Errorf("rows=%d oob=%v ok=%v socket=%v", len(r.Rows), ip(r.OutOfBounds), r.OutOfBoundsOK, r.Transport.Socket)
				}
			}},
		{"two runs: last table kept, earlier failure counted", header219 +
			"        1024           256     float     sum      -1    20.10    0.05    0.09      3    20.20    0.05    0.09      0\n" +
			"# Out of bounds values : 3 FAILED\n" + header219 +
			"        2048           512     float     sum      -1    20.10    0.10    0.18      0    20.20    0.10    0.18      0\n" +
			"# Out of bounds values : 0 OK\n",
			func(t *testing.T, r Result) {
				if r.Tables != 2 || len(r.Rows) != 1 || r.Rows[0].SizeBytes != 2048 || r.FailedTrailers != 1 || !r.OutOfBoundsOK {
					t.Errorf("tables=%d rows=%d failed=%d ok=%v", r.Tables, len(r.Rows), r.FailedTrailers, r.OutOfBoundsOK)
				}
			}},
		{"rows after a trailer start a new table", header219 +
			"        1024           256     float     sum      -1    20.10    0.05    0.09      0    20.20    0.05    0.09      0\n" +
			"# Out of bounds values : 0 OK\n" +
			"        2048           512     float     sum      -1    20.10    0.10    0.18      0    20.20    0.10    0.18      0\n",
			func(t *testing.T, r Result) {
				if r.Tables != 2 || len(r.Rows) != 1 || r.OutOfBounds != nil {
					t.Errorf("tables=%d rows=%d oob=%v", r.Tables, len(r.Rows), ip(r.OutOfBounds))
				}
			}},
		{"NCCL_NET spellings", "+ mpirun -x NCCL_NET_PLUGIN=ofi -x NCCL_NET_GDR_LEVEL=SYS\nNCCL INFO NCCL_NET set by environment to ib\n", func(t *testing.T, r Result) {
			if !r.Transport.NCCLNetIB {
				t.Errorf("NCCL_NET=ib not seen")
			}
		}},
		{"NCCL_NET other values", "mpirun -x NCCL_NET_PLUGIN=IB -x NCCL_NET=IBext -x NCCL_NET='AWS Libfabric'\n", func(t *testing.T, r Result) {
			if r.Transport.NCCLNetIB {
				t.Errorf("NCCL_NET=IB wrongly seen")
			}
		}},
		{"quoted NCCL_NET", `export NCCL_NET="IB"` + "\n", func(t *testing.T, r Result) {
			if !r.Transport.NCCLNetIB {
				t.Errorf("NCCL_NET=\"IB\" not seen")
			}
		}},
		{"plugin facts and forward compat", "h:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.\n" +
			"CUDA Forward Compatibility mode ENABLED.\n" +
			"h:1:2 [0] NCCL INFO NCCL_NET_PLUGIN set by environment to /opt/amazon/ofi-nccl/lib/libnccl-net.so\n" +
			"h:1:2 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.21.1\n" +
			"h:1:2 [0] NCCL INFO NET/OFI Selected Provider is efa (found 32 nics)\n" +
			"h:1:2 [1] NCCL INFO NET/OFI Selected Provider is efa (found 32 nics)\n" +
			"h:1:2 [0] NCCL INFO NET/OFI Selected provider is tcp, fabric is tcp (found 2 nics)\n",
			func(t *testing.T, r Result) {
				tr := r.Transport
				if !tr.PluginMissing || !tr.ForwardCompat || tr.OFIVersion != "1.21.1" || !tr.OFIPlugin ||
					tr.NetPluginEnv != "/opt/amazon/ofi-nccl/lib/libnccl-net.so" || providerString(tr.Providers) != "efa/32,tcp/2" {
					t.Errorf("transport = %+v", tr)
				}
				for i, l := range tr.Lines {
					for _, m := range tr.Lines[:i] {
						if infoMessageString(m) == infoMessageString(l) {
							t.Errorf("evidence line kept twice: %q", l)
						}
					}
				}
			}},
		{"unicode ellipsis and error line", "…\n# error: unhandled cuda error\n", func(t *testing.T, r Result) {
			if !r.Elided || len(r.Errors) != 1 {
				t.Errorf("elided=%v errors=%q", r.Elided, r.Errors)
			}
		}},
		{"overlong line is cut, next line still read", strings.Repeat("x", 3*MaxLineBytes) + "\n# Out of bounds values : 0 OK\n", func(t *testing.T, r Result) {
			if r.Lines != 2 || r.OutOfBounds == nil {
				t.Errorf("lines=%d oob=%v", r.Lines, ip(r.OutOfBounds))
			}
		}},
		{"no trailing newline", header219 + "# Out of bounds values : 0 OK", func(t *testing.T, r Result) {
			if r.OutOfBounds == nil || !r.OutOfBoundsOK {
				t.Errorf("trailer on last unterminated line not read")
			}
		}},
		{"errors collected and bounded", strings.Repeat("h:1:1 [0] NCCL WARN Cuda failure 'out of memory'\n", 40) +
			"h: Test NCCL failure common.cu:1279 'unhandled cuda error'\n", func(t *testing.T, r Result) {
			if len(r.Errors) != maxErrors {
				t.Errorf("Errors = %d, want %d", len(r.Errors), maxErrors)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseString(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			tc.chk(t, r)
		})
	}
}

func TestParseRowsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(header219)
	n := MaxRows + 100
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%12d  %12d  %8s  %6s  %6d    20.10    0.05    0.09      0    20.20    0.05    0.09      0\n", i*8, i*2, "float", "sum", -1)
	}
	r, err := ParseString(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != MaxRows || r.RowsDropped != 100 {
		t.Errorf("rows=%d dropped=%d", len(r.Rows), r.RowsDropped)
	}
	if r.Largest == nil || r.Largest.SizeBytes != int64(n*8) {
		t.Errorf("Largest = %+v, want the last (dropped) row", r.Largest)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, fmt.Errorf("connection reset") }

func TestParseReaderError(t *testing.T) {
	_, err := Parse(errReader{})
	if err == nil || !strings.Contains(err.Error(), "nccl-tests") || !strings.Contains(err.Error(), "connection reset") {
		t.Errorf("err = %v", err)
	}
	_, err = Parse(iotest.TimeoutReader(strings.NewReader(strings.Repeat("y", 2*MaxLineBytes))))
	if err == nil {
		t.Errorf("timeout reader: no error")
	}
}

// FuzzParse checks that Parse never panics, keeps its bounds, yields only finite numbers and
// does not depend on how the input is chunked.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.txt")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) > 16*1024 {
			b = b[len(b)-16*1024:]
		}
		f.Add(string(b))
	}
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
		if len(r.Rows) > MaxRows || len(r.Errors) > maxErrors || len(r.Transport.Networks) > maxDistinct ||
			len(r.Transport.Providers) > maxDistinct || len(r.Transport.Lines) > maxPerKind*kindCount {
			t.Fatalf("bounds exceeded: rows=%d errors=%d", len(r.Rows), len(r.Errors))
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
		for _, l := range append(append([]string{}, r.Errors...), r.Transport.Lines...) {
			if len(l) > MaxEvidenceLine {
				t.Fatalf("evidence line of %d bytes", len(l))
			}
		}
	})
}

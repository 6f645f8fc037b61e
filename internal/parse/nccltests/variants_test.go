package nccltests

import (
	"fmt"
	"strings"
	"testing"
	"testing/iotest"
)

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
						_, lm := splitTag([]byte(l))
						_, mm := splitTag([]byte(m))
						if string(lm) == string(mm) {
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

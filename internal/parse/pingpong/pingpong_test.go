package pingpong

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

func TestParseTestdata(t *testing.T) {
	for _, tt := range []struct {
		file    string
		labels  []string
		rows    []int
		largest uint64
		mbps    float64
	}{
		{"efa_test-aws-cdi-sdk-install-guide.txt", []string{"Starting client..."}, []int{6}, 1 << 20, 2359.00},
		{"real-libfabric-2.8.0a1-zero-and-fractional-sizes.txt", []string{""}, []int{5}, 6 << 20, 23436.23},
		{"derived-efa_test-server-and-client-logs.txt", []string{"Server Log:", "Client Log:"}, []int{6, 4}, 1 << 20, 15397.59},
	} {
		t.Run(tt.file, func(t *testing.T) {
			tables, err := Parse(fixture.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(tables) != len(tt.labels) {
				t.Fatalf("%d tables", len(tables))
			}
			for i, tb := range tables {
				if tb.Label != tt.labels[i] || len(tb.Rows) != tt.rows[i] {
					t.Errorf("table %d: label %q, %d rows", i, tb.Label, len(tb.Rows))
				}
				for _, r := range tb.Rows {
					if !r.Complete() || r.Sent != 10 || r.Line == "" {
						t.Errorf("row %+v", r)
					}
				}
			}
			if l := tables[0].Largest(); l.Bytes != tt.largest || l.MBps != tt.mbps {
				t.Errorf("largest = %+v", l)
			}
		})
	}
}

func TestParseValues(t *testing.T) {
	tables, _ := Parse(fixture.Read(t, "real-libfabric-2.8.0a1-zero-and-fractional-sizes.txt"))
	rows := tables[0].Rows
	want := []Row{
		{Bytes: 0, Sent: 10, Acked: 10, Total: 0, Seconds: 0, MBps: 0, UsecPerXfer: 3.95, MxfersPerSec: 0.25},
		{Bytes: 64, Sent: 10, Acked: 10, Total: 1229, Seconds: 0, MBps: 22.86, UsecPerXfer: 2.80, MxfersPerSec: 0.36},
		{Bytes: 1024, Sent: 10, Acked: 10, Total: 20 << 10, Seconds: 0, MBps: 252.84, UsecPerXfer: 4.05, MxfersPerSec: 0.25},
		{Bytes: 1536, Sent: 10, Acked: 10, Total: 30 << 10, Seconds: 0, MBps: 374.63, UsecPerXfer: 4.10, MxfersPerSec: 0.24},
		{Bytes: 6 << 20, Sent: 10, Acked: 10, Total: 120 << 20, Seconds: 0.01, MBps: 23436.23, UsecPerXfer: 268.45, MxfersPerSec: 0},
	}
	for i := range want {
		got := rows[i]
		got.Line = ""
		if got != want[i] {
			t.Errorf("row %d = %+v\nwant   %+v", i, got, want[i])
		}
	}
	partial, err := Parse("bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n64      10      7      1.2k        0.02s      0.08     803.40       0.00\n")
	if err != nil || partial[0].Rows[0].Complete() || partial[0].Rows[0].Acked != 7 {
		t.Errorf("partial ack: %+v, %v", partial, err)
	}
}

func TestParseErrors(t *testing.T) {
	var fe *Error
	_, err := Parse(fixture.Read(t, "derived-error-fi_getinfo-nodata.txt"))
	if !errors.As(err, &fe) || fe.Call != "fi_getinfo" || fe.Code != -61 || fe.Message != "No data available" || !strings.Contains(err.Error(), "fi_getinfo() returned -61") {
		t.Fatalf("fi_getinfo error = %#v (%v)", fe, err)
	}
	header := "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n"
	row := "64      10      =10      1.2k        0.02s      0.08     803.40       0.00\n"
	for _, tt := range []struct{ name, in, want string }{
		{"empty", "", "empty"},
		{"no table", "Starting server...\nStarting client...\n", "no result table"},
		{"header only", header, "no row"},
		{"second table empty", header + row + "Client Log:\n" + header, "Client Log:"},
		{"error after rows", header + row + "fi_cq_read(): util/pingpong.c:700, ret=-5 (Input/output error)\n", "fi_cq_read() returned -5"},
		{"pp_err", "[error] util/pingpong.c:1250: timeout: no completion\n", "timeout"},
		{"short row", header + "64      10      =10      1.2k\n", "columns"},
		{"bad time", header + strings.Replace(row, "0.02s", "0.02", 1), "time"},
		{"bad mbps", header + strings.Replace(row, "0.08", "fast", 1), "MB/sec"},
		{"bad ack", header + strings.Replace(row, "=10", "=x", 1), "#ack"},
		{"bad total", header + strings.Replace(row, "1.2k", "1.2q", 1), "total"},
		{"huge size", header + strings.Replace(row, "64  ", "99999999999t", 1), "bytes"},
	} {
		_, err := Parse(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	fixture.SeedFuzz(f, ".txt")
	f.Fuzz(func(t *testing.T, s string) {
		tables, err := Parse(s)
		if err != nil {
			return
		}
		if len(tables) == 0 {
			t.Fatal("no error, no table")
		}
		for _, tb := range tables {
			if len(tb.Rows) == 0 {
				t.Fatal("table without rows")
			}
			_ = tb.Largest()
		}
	})
}

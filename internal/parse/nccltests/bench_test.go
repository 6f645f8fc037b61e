package nccltests

import (
	"fmt"
	"strings"
	"testing"
)

// benchLog builds a log of about n bytes: a header, NCCL INFO lines from 8 ranks (the bulk, as
// in a real NCCL_DEBUG=INFO run), then the result table and trailer.
func benchLog(n int) string {
	var b strings.Builder
	b.Grow(n + 8192)
	b.WriteString(header219)
	msgs := []string{
		"NET/OFI Selected provider is efa, fabric is efa-direct (found 8 nics)",
		"Using network Libfabric",
		"Channel 03/0 : 3[3] -> 4[4] via P2P/CUMEM/read",
		"Connected all rings, use ring PXN 0 GDR 1",
		"NET/OFI Support for DMA-BUF registrations: true",
		"threadThresholds 8/8/64 | 64/8/64 | 512 | 512",
		"ncclCommInitRankConfig comm 0x55d0c0a00006 rank 6 nranks 8 cudaDev 6 nvmlDev 6 busId 104000 commId 0x7c1f3e2a9b5d4f11 - Init COMPLETE",
	}
	for i := 0; b.Len() < n-4096; i++ {
		r := i % 8
		fmt.Fprintf(&b, "ip-10-0-1-23:%d:%d [%d] NCCL INFO %s\n", 4100+r, 4160+r, r, msgs[i%len(msgs)])
	}
	for s := 8; s <= 1<<30; s *= 2 {
		fmt.Fprintf(&b, "%12d  %12d  %8s  %6s  %6d  %7.2f  %6.2f  %6.2f  %6d  %7.2f  %6.2f  %6.2f  %6d\n",
			s, s/4, "float", "sum", -1, 20.0, 1.0, 1.75, 0, 20.1, 1.0, 1.75, 0)
	}
	b.WriteString("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 183.3 \n#\n# Collective test concluded: all_reduce_perf\n")
	return b.String()
}

func benchmarkParse(b *testing.B, size int) {
	s := benchLog(size)
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := ParseString(s)
		if err != nil || r.OutOfBounds == nil || len(r.Rows) != 28 {
			b.Fatalf("err=%v rows=%d", err, len(r.Rows))
		}
	}
}

// BenchmarkParse1MB and BenchmarkParse10MB together show that memory per parse does not grow
// with the log: compare their B/op.
func BenchmarkParse1MB(b *testing.B)  { benchmarkParse(b, 1<<20) }
func BenchmarkParse10MB(b *testing.B) { benchmarkParse(b, 10<<20) }

// benchmarkStream feeds the log in 4 KiB writes, as a remote command's output arrives, with a
// row callback like the provisioner's.
func benchmarkStream(b *testing.B, size int) {
	s := []byte(benchLog(size))
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rows := 0
		st := NewStream(func(Row) { rows++ })
		for p := s; len(p) > 0; {
			n := min(4096, len(p))
			if _, err := st.Write(p[:n]); err != nil {
				b.Fatal(err)
			}
			p = p[n:]
		}
		if r := st.Result(); r.OutOfBounds == nil || rows != 28 {
			b.Fatalf("rows=%d", rows)
		}
	}
}

// BenchmarkStream1MB and BenchmarkStream10MB: compare their B/op as for Parse.
func BenchmarkStream1MB(b *testing.B)  { benchmarkStream(b, 1<<20) }
func BenchmarkStream10MB(b *testing.B) { benchmarkStream(b, 10<<20) }

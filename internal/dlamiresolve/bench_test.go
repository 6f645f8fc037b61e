package dlamiresolve

import (
	"context"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// BenchmarkResolve16RegionsLatency50ms resolves the default DLAMI (with a
// golden lookup) in one region and then in 16 regions, with 50 ms added to
// every AWS call, and reports the 16:1 wall-time ratio. Resolving regions
// concurrently should keep the ratio near 1; the goal is ≤ 1.5.
func BenchmarkResolve16RegionsLatency50ms(b *testing.B) {
	e := newEnv(b, awsfake.SeedRegions...)
	e.fake.SetFault(awsfake.OpAny, "", awsfake.Fault{Latency: 50 * time.Millisecond})
	r := e.resolver(b)
	q := Query{Golden: &GoldenQuery{NamePrefix: "ml-golden-"}}
	ctx := context.Background()
	var one, sixteen time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if _, err := r.ResolveAll(ctx, awsfake.SeedRegions[:1], q); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		res, err := r.ResolveAll(ctx, awsfake.SeedRegions, q)
		if err != nil {
			b.Fatal(err)
		}
		if len(res) != 16 {
			b.Fatalf("resolved %d regions, want 16", len(res))
		}
		one += mid.Sub(start)
		sixteen += time.Since(mid)
	}
	b.ReportMetric(float64(one.Milliseconds())/float64(b.N), "ms/1-region")
	b.ReportMetric(float64(sixteen.Milliseconds())/float64(b.N), "ms/16-regions")
	b.ReportMetric(float64(sixteen)/float64(one), "ratio-16:1")
}

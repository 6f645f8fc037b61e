package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nccltests"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// twoNodeFixture is a 2 × p5.48xlarge all-reduce on AWS (testdata/*.source says where from):
// its table gives the collectives' own time at each size.
const twoNodeFixture = "testdata/p5-2node-all-reduce-16G.txt"

// Iterations all_reduce_perf runs at each size and in each half of a row (out-of-place,
// in-place) with the multi-node test's arguments: nccl-tests' default 5 warm-up iterations,
// the test's -n, and one more for -c 1's data check.
const nccltestsWarmupIters, nccltestsCheckIters = 5, 1

// sourcedCollectives is how long the collectives of the multi-node test's sizes (its default
// -b to -e) take on 2 × p5.48xlarge: each row's out-of-place and in-place time from the
// fixture, times the iterations run at that size.
func sourcedCollectives(b *testing.B, m settings.MultiNode) time.Duration {
	b.Helper()
	data, err := os.ReadFile(twoNodeFixture)
	if err != nil {
		b.Fatal(err)
	}
	res, err := nccltests.Parse(strings.NewReader(string(data)))
	if err != nil {
		b.Fatalf("%s: %v", twoNodeFixture, err)
	}
	args := m.Args()
	i := slices.Index(args, "-n")
	if i < 0 || i+1 == len(args) {
		b.Fatalf("the test's arguments %q have no -n", args)
	}
	n, err := strconv.Atoi(args[i+1])
	if err != nil {
		b.Fatalf("the test's -n: %v", err)
	}
	iters := nccltestsWarmupIters + nccltestsCheckIters + n
	var us float64
	rows := 0
	for _, r := range res.Rows {
		if r.SizeBytes > m.MaxSizeBytes() {
			continue
		}
		if r.OutOfPlace.TimeUS == nil || r.InPlace.TimeUS == nil {
			b.Fatalf("%s: row %q has no time", twoNodeFixture, r.Line)
		}
		us += (*r.OutOfPlace.TimeUS + *r.InPlace.TimeUS) * float64(iters)
		rows++
	}
	if rows < 20 {
		b.Fatalf("%s: %d rows up to %s: the fixture does not cover the test's sizes", twoNodeFixture, rows, m.MaxBytes)
	}
	return time.Duration(us * float64(time.Microsecond))
}

// BenchmarkTwoP5Verification is the dlami post-processor's verification with nodes = 2 on
// p5.48xlarge, as it runs it: internal/launch launches both nodes from one RunInstances of the
// fake EC2 (every EFA attached on each, a temporary cluster placement group), each node's
// first boot is verified at once (the host suite, the NCCL test, DCGM's level 2, the EFA
// traffic test, GPUDirect RDMA, over real SSH), then engine.MultiNode runs the all-reduce
// across them (the first node's mpirun over SSH to the second, 8 ranks each). It reports the
// wall time of each node's verification, of the test across nodes, and the whole (s/verify),
// and an estimate on AWS (s/estimate-on-aws): the slower node with DCGM's sourced two minutes,
// plus the test across nodes with the collectives' sourced time (from a 2 × p5 run) added.
// The NCCL initialisation and mpirun's start are the simulation's (UNSOURCED). The launch and
// the instances' boot are not counted, as in BenchmarkP5VerificationStages. Goal: under 8
// minutes on AWS. Run with `make bench` as root.
func BenchmarkTwoP5Verification(b *testing.B) {
	root := repoRoot(b)
	if !canBoot(b, root) {
		return
	}
	api, ami := simulatedEC2(b, root)
	mn, err := settings.MultiNode{}.Resolved()
	if err != nil {
		b.Fatal(err)
	}
	collectives := sourcedCollectives(b, mn)

	var (
		nodeTook  []time.Duration
		nodeStage []map[string]time.Duration
		testTook  time.Duration
		whole     time.Duration
	)
	for b.Loop() {
		ctx := context.Background()
		in, err := launch.Launch(ctx, api, launch.Spec{ImageID: ami, InstanceType: "p5.48xlarge", Count: 2, EFA: launch.EFAAll, EFASetting: `efa = "all"`,
			TemporaryPlacementGroup: true, SSHCIDR: "127.0.0.0/8", Poll: 100 * time.Millisecond}, func(string) {})
		if err != nil {
			b.Fatal(err)
		}
		nodes := in.Nodes()
		if len(nodes) != 2 {
			b.Fatalf("%d nodes launched, want 2", len(nodes))
		}
		hosts := make([]*timedHost, len(nodes))
		boms := make([]bom.BOM, len(nodes))
		common := benchCommon()
		// Each node runs the image, whose bill of materials a bake wrote.
		for i, n := range nodes {
			hosts[i] = &timedHost{Host: sshTo(b, n), took: map[string]time.Duration{}}
			boms[i] = writeBOM(ctx, b, hosts[i], common)
		}
		launched := checks.Launch{Known: true, EFA: in.Layout.EFA, Setting: `efa = "all"`, SecurityGroups: in.SecurityGroups}

		start := time.Now()
		took := make([]time.Duration, len(nodes))
		errs := make([]error, len(nodes))
		var wg sync.WaitGroup
		for i := range nodes {
			wg.Go(func() {
				c := common
				c.ReportDir = b.TempDir()
				c.Checks = boms[i].Checks.Overlay(settings.Overlay{NCCL: settings.RunOn, DCGM: settings.RunAsBaked, EFATraffic: settings.RunAsBaked, GDR: settings.RunAsBaked})
				c.Launch = launched
				t0 := time.Now()
				errs[i] = engine.Verify(ctx, hosts[i], discardUI{}, engine.VerifyOptions{Common: c, BOM: boms[i], SettleTimeout: 5 * time.Minute, CompleteValidation: true})
				took[i] = time.Since(t0)
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				b.Fatalf("node %d's first boot failed: %v", i+1, err)
			}
		}
		mo := engine.MultiNodeOptions{Common: common}
		mo.ReportDir = b.TempDir()
		mo.Checks.MultiNode = mn
		mo.Common.Launch = launched
		for i, n := range nodes {
			mo.Nodes = append(mo.Nodes, engine.Node{Host: hosts[i], InstanceID: n.ID, PrivateIP: n.PrivateIP, InstanceType: "p5.48xlarge",
				SubnetID: n.SubnetID, PlacementGroup: n.PlacementGroup(), EFA: n.DescribedEFA})
		}
		t0 := time.Now()
		if err := engine.MultiNode(ctx, discardUI{}, mo); err != nil {
			b.Fatalf("the test across 2 × p5.48xlarge failed: %v", err)
		}
		testTook = time.Since(t0)
		whole = time.Since(start)
		nodeTook = took
		nodeStage = []map[string]time.Duration{hosts[0].took, hosts[1].took}
		if err := launch.Cleanup(ctx, in, func(string) {}); err != nil {
			b.Fatal(err)
		}
	}

	// The estimate: the slower node, with DCGM's level 2 at its sourced duration, then the
	// test across nodes with the collectives' sourced time added to the simulation's.
	var slowest time.Duration
	for i, d := range nodeTook {
		est := d
		var names []string
		for name := range nodeStage[i] {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if s, ok := sourced[name]; ok {
				est += s.real - nodeStage[i][name]
			}
		}
		b.Logf("node %d's first boot: %8s simulated, %s on AWS with DCGM's sourced %s", i+1, d.Round(10*time.Millisecond), est.Round(time.Second), sourced["the DCGM diagnostics"].real)
		b.ReportMetric(d.Seconds(), fmt.Sprintf("s/node-%d", i+1))
		slowest = max(slowest, est)
	}
	testEstimate := testTook + collectives
	b.Logf("the all-reduce across the nodes: %s simulated; the collectives of its sizes (%s to %s, -n plus warm-up and check) take %s on 2 × p5.48xlarge (%s); NCCL's initialisation and mpirun's start are the simulation's (UNSOURCED)",
		testTook.Round(10*time.Millisecond), mn.MinBytes, mn.MaxBytes, collectives.Round(time.Millisecond), twoNodeFixture)
	estimate := slowest + testEstimate
	b.ReportMetric(testTook.Seconds(), "s/multi-node")
	b.ReportMetric(whole.Seconds(), "s/verify")
	b.ReportMetric(estimate.Seconds(), "s/estimate-on-aws")
	b.Logf("the whole verification of 2 × p5.48xlarge: %s simulated; on AWS: %s (goal: under 8m; launch and boot not counted)",
		whole.Round(10*time.Millisecond), estimate.Round(time.Second))
	if estimate > 8*time.Minute {
		b.Errorf("estimated %s on AWS: over the 8-minute goal", estimate.Round(time.Second))
	}
}

package e2e

// Issue 35, the domain across trays in the verification: the real Packer and amazon-ebs bake
// the arm64 DLAMI on a simulated p6e-gb200.36xlarge tray, and the dlami post-processor
// verifies the AMI on 2 trays (ebs/gb200-multinode.pkr.hcl): the all-reduce across them runs
// over EFA (nccl-multinode) and over multi-node NVLink (nccl-mnnvl); a tray of another clique
// makes NCCL fall back to EFA, and nccl-mnnvl fails naming it; between the runs the
// verification forms the IMEX domain across the trays (imex-domain), and a tray whose
// nvidia-imex fails is named.

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestGB200MultiNode(t *testing.T) {
	e := ebsPrereqs(t)
	ebsDir, err := filepath.Abs("ebs")
	if err != nil {
		t.Fatal(err)
	}
	fake := e.startFake(t, "gb200-multinode-fake", true)
	// Once a scenario's trays run, the test breaks tray 2: in "split" its GPUs register in
	// another clique; in "imex" its nvidia-imex fails whenever it (re)starts, as with an IMEX
	// package that does not match the driver. Both knobs act after the trays' first boots.
	breaks := map[string][2]string{"split": {"fabric-clique", "all: 4027\n"}, "imex": {"imex-start", "failed\n"}}
	var (
		mu       sync.Mutex
		broken   = map[string]string{} // scenario: tray 2's instance id
		watchErr error
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			mu.Lock()
			done := len(broken) == len(breaks)
			mu.Unlock()
			if done {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			s, err := fake.stateQuiet()
			if err != nil {
				continue
			}
			for scenario, knob := range breaks {
				mu.Lock()
				_, seen := broken[scenario]
				mu.Unlock()
				if ins := scenarioInstances(s, scenario); !seen && allRunning(ins, 2) {
					err := os.WriteFile(filepath.Join(fake.stateRoot, "instances", ins[1].ID, "merged", "etc", "dlami-sim", knob[0]), []byte(knob[1]), 0o644)
					mu.Lock()
					broken[scenario], watchErr = ins[1].ID, errors.Join(watchErr, err)
					mu.Unlock()
				}
			}
		}
	}()
	out := outDir(t, "gb200-multinode")
	r := e.build(t, ebsDir, out, fake.packerEnv(e), nil,
		"-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "gb200-multinode.pkr.hcl")
	close(stop)
	wg.Wait()
	t.Logf("GB200 bake and three 2-tray verifications: %s", r.took.Round(time.Second))
	if watchErr != nil {
		t.Error(watchErr)
	}
	if r.code == 0 {
		t.Errorf("the build passed although the split and imex verifications must fail:\n%s", tail(filepath.Join(out, "packer.out"), 40))
	}
	s := fake.state(t)
	assertCleanedUp(t, s, ebsRegion)

	t.Run("healthy", func(t *testing.T) {
		rep := readMultiNodeReport(t, filepath.Join(out, "healthy", ebsRegion, "multi-node"))
		for _, id := range []string{"nccl-multinode", "imex-domain", "nccl-mnnvl"} {
			if st, msg := rep.check(id); st != "pass" {
				t.Errorf("%s = %s %q, want pass", id, st, msg)
			}
		}
		// The check names the transport NCCL connected the trays over.
		if raw, err := os.ReadFile(filepath.Join(out, "healthy", ebsRegion, "multi-node", "dlami-report.json")); err != nil || !strings.Contains(string(raw), "P2P/MNNVL (multi-node NVLink)") {
			t.Errorf("nccl-mnnvl does not name P2P/MNNVL as the transport (%v)", err)
		}
		if !strings.Contains(r.ui, "NCCL_MNNVL_ENABLE=1") {
			t.Errorf("Packer's output does not say the second run requires MNNVL")
		}
		if rep.Result != "pass" {
			t.Errorf("report %s, failed %v:\n%s", rep.Result, rep.FailedChecks, tail(filepath.Join(out, "packer.out"), 60))
		}
	})

	t.Run("split", func(t *testing.T) {
		rep := readMultiNodeReport(t, filepath.Join(out, "split", ebsRegion, "multi-node"))
		st, msg := rep.check("nccl-mnnvl")
		if st != "fail" || !strings.Contains(msg, "node 2 ("+broken["split"]) || !strings.Contains(msg, "fell back to the network (EFA, NET/Libfabric)") {
			t.Errorf("nccl-mnnvl = %s %q: want a failure naming tray 2 (%s) and its fallback to EFA", st, msg, broken["split"])
		}
		if st, msg := rep.check("nccl-multinode"); st != "pass" {
			t.Errorf("nccl-multinode = %s %q, want pass: the EFA run does not depend on the clique", st, msg)
		}
	})

	// Tray 2's IMEX never comes up: imex-domain fails naming it, the run over MNNVL does not
	// start, and the run over EFA still passes.
	t.Run("imex", func(t *testing.T) {
		rep := readMultiNodeReport(t, filepath.Join(out, "imex", ebsRegion, "multi-node"))
		st, msg := rep.check("imex-domain")
		if st != "fail" || !strings.Contains(msg, "node 2 ("+broken["imex"]) || !strings.Contains(msg, "never joined the IMEX domain across the trays") ||
			!strings.Contains(msg, "its nvidia-imex failed") || !strings.Contains(msg, "UNAVAILABLE") {
			t.Errorf("imex-domain = %s %q: want a failure naming tray 2 (%s), its failed service, and tray 1 seeing it UNAVAILABLE", st, msg, broken["imex"])
		}
		if st, msg := rep.check("nccl-mnnvl"); st != "skip" || !strings.Contains(msg, "the IMEX domain across the trays did not come up") {
			t.Errorf("nccl-mnnvl = %s %q, want not run for the IMEX domain", st, msg)
		}
		if st, msg := rep.check("nccl-multinode"); st != "pass" {
			t.Errorf("nccl-multinode = %s %q, want pass: the EFA run does not depend on IMEX", st, msg)
		}
	})
}

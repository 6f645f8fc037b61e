package e2e

// Issue 35, the domain across trays in the verification: the real Packer and amazon-ebs bake
// the arm64 DLAMI on a simulated p6e-gb200.36xlarge tray, and the dlami post-processor
// verifies the AMI on 2 trays (ebs/gb200-multinode.pkr.hcl): the all-reduce across them runs
// over EFA (nccl-multinode) and over multi-node NVLink (nccl-mnnvl); a tray of another clique
// makes NCCL fall back to EFA, and nccl-mnnvl fails naming it.

import (
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
	// Once the split scenario's trays run, tray 2's GPUs register in another clique.
	var (
		mu        sync.Mutex
		splitNode string
		watchErr  error
		stop      = make(chan struct{})
		wg        sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for splitNode == "" {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			s, err := fake.stateQuiet()
			if err != nil {
				continue
			}
			if ins := scenarioInstances(s, "split"); allRunning(ins, 2) {
				knob := filepath.Join(fake.stateRoot, "instances", ins[1].ID, "merged", "etc", "dlami-sim", "fabric-clique")
				err := os.WriteFile(knob, []byte("all: 4027\n"), 0o644)
				mu.Lock()
				splitNode, watchErr = ins[1].ID, err
				mu.Unlock()
			}
		}
	}()
	out := outDir(t, "gb200-multinode")
	r := e.build(t, ebsDir, out, fake.packerEnv(e), nil,
		"-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "gb200-multinode.pkr.hcl")
	close(stop)
	wg.Wait()
	t.Logf("GB200 bake and two 2-tray verifications: %s", r.took.Round(time.Second))
	if watchErr != nil {
		t.Error(watchErr)
	}
	if r.code == 0 {
		t.Errorf("the build passed although the split verification must fail:\n%s", tail(filepath.Join(out, "packer.out"), 40))
	}
	s := fake.state(t)
	assertCleanedUp(t, s, ebsRegion)

	t.Run("healthy", func(t *testing.T) {
		rep := readMultiNodeReport(t, filepath.Join(out, "healthy", ebsRegion, "multi-node"))
		for _, id := range []string{"nccl-multinode", "nccl-mnnvl"} {
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
		if st != "fail" || !strings.Contains(msg, "node 2 ("+splitNode) || !strings.Contains(msg, "fell back to the network (EFA, NET/Libfabric)") {
			t.Errorf("nccl-mnnvl = %s %q: want a failure naming tray 2 (%s) and its fallback to EFA", st, msg, splitNode)
		}
		if st, msg := rep.check("nccl-multinode"); st != "pass" {
			t.Errorf("nccl-multinode = %s %q, want pass: the EFA run does not depend on the clique", st, msg)
		}
	})
}

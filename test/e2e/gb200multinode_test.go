package e2e

// Issue 35, the domain across trays in the verification: the real Packer and amazon-ebs bake
// the arm64 DLAMI on a simulated p6e-gb200.36xlarge tray, and the dlami post-processor
// verifies the AMI on 2 trays (ebs/gb200-multinode.pkr.hcl): the all-reduce across them runs
// over EFA (nccl-multinode) and over multi-node NVLink (nccl-mnnvl); a tray of another clique
// makes NCCL fall back to EFA, and nccl-mnnvl fails naming it; between the runs the
// verification forms the IMEX domain across the trays (imex-domain), and a tray whose
// nvidia-imex fails is named.
//
// The bake installs the node check too: the plugin picks its linux/arm64 binary for the aarch64
// host, the trays of the healthy scenario run it at boot and pass, and one more tray booted from
// the AMI whose fabric degrades fails nvlink-fabric at boot and is drained. The trays are x86_64
// chroots on this machine: the arm64 binary runs through qemu-aarch64 (arm64Prereq).

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
	"github.com/dlami-bake/packer-plugin-dlami/test/simfleet"
)

func TestGB200MultiNode(t *testing.T) {
	e := ebsPrereqs(t)
	arm64Prereq(t, e)
	ebsDir, err := filepath.Abs("ebs")
	if err != nil {
		t.Fatal(err)
	}
	fake := e.startFake(t, "gb200-multinode-fake", true)
	// Once a scenario's trays run, the test breaks tray 2: in "split" its GPUs register in
	// another clique; in "imex" its nvidia-imex fails whenever it (re)starts, as with an IMEX
	// package that does not match the driver. Both knobs act after the trays' first boots.
	// The healthy scenario's trays are read while they run (they are terminated before the
	// build ends): their boot's journal, where the node check's unit ran before sshd started.
	breaks := map[string][2]string{"split": {"fabric-clique", "all: 4027\n"}, "imex": {"imex-start", "failed\n"}}
	var (
		mu       sync.Mutex
		broken   = map[string]string{} // scenario: tray 2's instance id
		journals = map[string]string{} // healthy tray's instance id: its boot's journal
		watchErr error
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			mu.Lock()
			done := len(broken) == len(breaks) && len(journals) == 2
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
			for _, in := range scenarioInstances(s, "healthy") {
				mu.Lock()
				seen := journals[in.ID] != ""
				mu.Unlock()
				if in.State != "running" || seen {
					continue
				}
				j, err := os.ReadFile(filepath.Join(fake.stateRoot, "instances", in.ID, "merged", "run", "dlami-sim", "journal"))
				if err == nil && bytes.Contains(j, []byte(nodeCheckUnit+" (after ")) {
					mu.Lock()
					journals[in.ID] = string(j)
					mu.Unlock()
				}
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

	// The node check on the trays: the plugin installed its linux/arm64 binary on the aarch64
	// build host (which ran its --version), and every tray of the healthy scenario ran it at
	// boot (the simulated systemd: test/simhost/root/usr/lib/dlami-sim/systemd-boot) and passed;
	// the post-processor's verification ran it again on each (node-check).
	var img *awsfake.Image
	for _, i := range ownImages(s, ebsRegion) {
		if strings.HasPrefix(i.Name, "gb200-multinode-") {
			img = &i
		}
	}
	t.Run("node-check-arm64", func(t *testing.T) {
		if !strings.Contains(r.ui, "dlami: installed /usr/local/sbin/dlami-node-check (linux/arm64, dlami-node-check ") {
			t.Errorf("the bake did not say it installed the linux/arm64 node check:\n%s", grepLines(r.ui, "node"))
		}
		if img == nil {
			t.Fatal("no gb200-multinode-* AMI")
		}
		f, err := elf.NewFile(bytes.NewReader(readLayerFile(t, *img, "usr/local/sbin/dlami-node-check")))
		if err != nil || f.Machine != elf.EM_AARCH64 {
			t.Errorf("the AMI's dlami-node-check: want an arm64 ELF binary, got %v (%v)", machineOf(f), err)
		}
	})

	t.Run("node-check-at-boot-healthy", func(t *testing.T) {
		mu.Lock()
		defer mu.Unlock()
		if len(journals) != 2 {
			t.Fatalf("read the boot journal of %d healthy trays, want 2", len(journals))
		}
		for id, j := range journals {
			if !strings.Contains(j, nodeCheckUnit+": dlami-node-check: PASS") || !strings.Contains(j, "Finished "+nodeCheckUnit) {
				t.Errorf("tray %s: its boot's journal lacks the node check's PASS:\n%s", id, j)
			}
			t.Logf("tray %s at boot: %s", id, grepLines(j, "dlami-node-check: PASS"))
			// The node check judged the fabric: its table (the verification's node-check
			// evidence) has nvlink-fabric passing, and imex judged.
			rep := readReportAs[evidenceReport](t, filepath.Join(out, "healthy", ebsRegion, id))
			st, ev := rep.check("node-check")
			if st != "pass" || !rowStatus(ev, "nvlink-fabric", "PASS") || rowStatus(ev, "imex", "FAIL") || !strings.Contains(ev, "\nimex ") {
				t.Errorf("tray %s: the verification's node-check %s, want pass with nvlink-fabric PASS and imex judged:\n%s", id, st, ev)
			}
		}
	})

	// A tray of the AMI whose fabric degrades (GPU 1's Health Summary Unhealthy, as
	// scenarios/gb200-fabric-unhealthy): the node check fails nvlink-fabric at boot and
	// drains the node, as an administrator sets a fleet to (nodecheck_test.go's
	// gpu-missing-drain: the config and a stand-in scontrol that records its calls).
	t.Run("node-check-at-boot-fabric-unhealthy", func(t *testing.T) {
		if img == nil {
			t.Fatal("no gb200-multinode-* AMI")
		}
		n := bootNode(t, e, filepath.Join(fake.stateRoot, "base"), img.Layers, "gb200-fabric-unhealthy", gb200Launch, "fabric-health=1:Unhealthy", map[string]string{
			"etc/dlami-node-check/config.json": `{"action": "drain", "bom_path": "/etc/dlami-bake/manifest.json", "out_dir": "/var/lib/dlami-node-check", "timeout": "2m", "check_timeout": "1m", "scontrol": "/usr/bin/scontrol", "before": ["slurmd.service"]}`,
			"usr/bin/scontrol": "#!/bin/sh\nprintf '%s\\n' \"$*\" >>/var/log/scontrol.calls\n" +
				"case \"$*\" in '-o show node '*) echo \"NodeName=$4 Arch=aarch64 CoresPerSocket=72 State=IDLE ThreadsPerCore=1\" ;; esac\n",
		})
		j := n.journal(t)
		// nvlink-fabric alone: the verdict line lists every failed check before the build.
		if !strings.Contains(j, nodeCheckUnit+": dlami-node-check: FAIL nvlink-fabric (image build ") || !strings.Contains(j, "Failed to start "+nodeCheckUnit) {
			t.Errorf("the boot's journal lacks the node check's FAIL nvlink-fabric:\n%s", j)
		}
		t.Logf("at boot: %s", grepLines(j, "dlami-node-check: FAIL"))
		rep := n.report(t)
		if st, msg := checkStatus(rep, "nvlink-fabric"), checkMessage(rep, "nvlink-fabric"); st != "fail" || !strings.Contains(msg, "GPU 1 (") {
			t.Errorf("nvlink-fabric %s %q: want a failure naming GPU 1", st, msg)
		}
		calls := n.file(t, "var/log/scontrol.calls")
		if want := "update nodename=" + simfleet.EC2HostName(n.env["ssh_host"]) + " state=drain reason=dlami: nvlink-fabric"; !strings.Contains(calls, want) {
			t.Errorf("scontrol calls, want %q:\n%s", want, calls)
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

// nodeCheckUnit is the node check's systemd unit, as its lines in a boot's journal name it.
const nodeCheckUnit = "dlami-node-check.service"

// gb200Launch are the knobs of a tray's launch into the UltraServer's Capacity Block with
// efa = "4", as simfleet writes them for the post-processor's trays.
const gb200Launch = "product-name=p6e-gb200.36xlarge efa-cards=0,1,2,3 efa-traffic=allowed"

func machineOf(f *elf.File) string {
	if f == nil {
		return "no ELF file"
	}
	return f.Machine.String()
}

// arm64Prereq: a simulated GB200 tray (and the Graviton build host) says aarch64 but is an
// x86_64 chroot on this machine, so the linux/arm64 node check the plugin installs there runs
// through qemu-user: qemu-aarch64 registered with binfmt_misc with the F flag, whose
// interpreter the kernel opened at registration, so the chroot needs no qemu of its own
// (test/simhost/install-deps). Missing skips, or fails with CI=true.
func arm64Prereq(t *testing.T, e ebsEnv) {
	t.Helper()
	const entry = "/proc/sys/fs/binfmt_misc/qemu-aarch64"
	b, err := os.ReadFile(entry)
	if err != nil {
		missing(t, "qemu-aarch64 is not registered with binfmt_misc ("+err.Error()+"): the trays' arm64 node check cannot run; run test/simhost/install-deps (qemu-user-static, then the registration)")
	}
	flags := ""
	for _, l := range strings.Split(string(b), "\n") {
		if f, ok := strings.CutPrefix(l, "flags: "); ok {
			flags = f
		}
	}
	if !strings.HasPrefix(string(b), "enabled\n") || !strings.Contains(flags, "F") {
		missing(t, entry+" is disabled or lacks the F flag (flags "+flags+"): an arm64 binary would not run inside a simulated host's chroot; run test/simhost/install-deps, which registers it again")
	}
	bin := filepath.Join(e.repo, "internal", "nodecheckbin", "dist", "linux_arm64", "dlami-node-check")
	if out, err := exec.Command(bin, "--version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "dlami-node-check ") {
		t.Fatalf("%s --version through qemu-aarch64: %v\n%s", bin, err, out)
	}
}

// evidenceReport is the part of a report whose checks' evidence a test reads.
type evidenceReport struct {
	Checks []struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		Evidence string `json:"evidence"`
	} `json:"checks"`
}

func (r evidenceReport) check(id string) (status, evidence string) {
	for _, c := range r.Checks {
		if c.ID == id {
			return c.Status, c.Evidence
		}
	}
	return "absent", ""
}

// rowStatus reports whether the check table in text has a row for check id ending in status.
func rowStatus(text, id, status string) bool {
	for _, l := range strings.Split(text, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == id && f[len(f)-1] == status {
			return true
		}
	}
	return false
}

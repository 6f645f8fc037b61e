package fleetengines

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
)

// Node names of testdata/slurm.conf: the simulated host's own name, and a Slurm name that
// differs from it (slurmd -N), as AWS ParallelCluster names its nodes.
const (
	hostNode  = "ip-10-1-42-17"
	otherNode = "gpu-st-p5-1"
)

// TestSlurm drives the real dlami-node-check, through the HealthCheckProgram wrapper the
// provisioner installs and with the environment slurmd gives it, against Debian's real
// slurmctld, slurmd, munge and scontrol on a one-node cluster, in the order a node lives
// through: healthy at slurmd's start, a failure drains it with the failed ids, a pass resumes
// it; an operator's drain survives a failing and a passing run with its reason; the boot unit
// (action drain) drains by the short host name; and a node whose Slurm name differs from its
// host name is drained by that name when slurmd itself runs the check.
func TestSlurm(t *testing.T) {
	needEngines(t)
	layer := script(t, 30*time.Minute, "test/fleetengines/build-slurm-layer")
	cfg := nodeconf.Config{Action: nodeconf.ActionDrain, BOMPath: bom.DefaultPath, OutDir: nodeconf.DefaultOutDir,
		Textfile: nodeconf.DefaultTextfile, Timeout: 2 * time.Minute, CheckTimeout: time.Minute,
		Scontrol: nodeconf.DefaultScontrol, Before: []string{"slurmd.service"}}
	start := time.Now()
	h := bootHost(t, layer, imageLayer(t, cfg))
	h.writeBOM()
	slurmScript := filepath.Join(repoRoot(t), "test/fleetengines/slurm")
	h.daemons(slurmScript, "controller", h.merged)
	h.daemons(slurmScript, "slurmd", h.merged)
	t.Logf("host booted, cluster up in %s", time.Since(start).Round(100*time.Millisecond))

	t.Run("healthy at slurmd's start", func(t *testing.T) {
		// slurmd ran the HealthCheckProgram before it registered, with SLURMD_NODENAME alone
		// in its environment (no PATH): the check ran, passed and left the node alone.
		log := grepLines(h.readFile("/var/log/slurm/slurmd.log"), "health_check")
		if !strings.Contains(log, "health_check success rc:0 output:dlami-node-check: PASS") {
			t.Fatalf("slurmd did not run the node check, or it did not pass:\n%s", log)
		}
		if rep := h.report(); rep.Result != "pass" {
			t.Errorf("the start-up run's report: result %q, failed %q", rep.Result, rep.FailedChecks)
		}
		if n := h.node(hostNode); n.drained() || n.reason != "" {
			t.Errorf("a healthy node is %s with reason %q", n.state, n.reason)
		}
	})

	t.Run("failing node is drained with the failed ids", func(t *testing.T) {
		h.knob("gpu-count", "7") // nvidia-smi lists 7 of the 8 GPUs on the PCI bus
		r := h.healthCheck(hostNode)
		if r.code != 0 {
			t.Errorf("exit %d, want 0 (the node is drained, as Slurm's contract asks)\n%s", r.code, r)
		}
		want := h.wantReason()
		n := h.node(hostNode)
		if !n.drained() || n.reason != want {
			t.Fatalf("after a failing run: state %s, reason %q; want drained with %q\n%s", n.state, n.reason, want, r)
		}
		// sinfo -R shows 20 characters of the reason by default: the ids come first.
		if line := h.sinfoReason(hostNode); !strings.HasPrefix(line, want[:min(20, len(want))]) {
			t.Errorf("sinfo -R shows %q for the node, want it to start with %q", line, want[:min(20, len(want))])
		}
		if !strings.Contains(r.stderr, "drained Slurm node "+hostNode+" (named by SLURMD_NODENAME") {
			t.Errorf("the run does not say it drained the node:\n%s", r)
		}
	})

	t.Run("passing node is resumed", func(t *testing.T) {
		h.knob("gpu-count", "")
		r := h.healthCheck(hostNode)
		if r.code != 0 || !strings.Contains(r.stderr, "resumed Slurm node "+hostNode) {
			t.Errorf("exit %d, want 0 and a note that it resumed the node\n%s", r.code, r)
		}
		if n := h.node(hostNode); n.drained() || n.reason != "" {
			t.Errorf("after a passing run: state %s, reason %q; want resumed", n.state, n.reason)
		}
	})

	t.Run("operator's drain survives a failing and a passing run", func(t *testing.T) {
		const operator = "fan replaced, burn-in pending"
		h.must("/usr/bin/scontrol", "update", "nodename="+hostNode, "state=drain", "reason="+operator)
		h.knob("gpu-count", "7")
		r := h.healthCheck(hostNode)
		if !strings.Contains(r.stderr, "drained by the operator") {
			t.Errorf("the failing run does not report the operator's drain:\n%s", r)
		}
		if n := h.node(hostNode); !n.drained() || n.reason != operator {
			t.Fatalf("after a failing run: state %s, reason %q; want the operator's drain and reason %q", n.state, n.reason, operator)
		}
		h.knob("gpu-count", "")
		r = h.healthCheck(hostNode)
		if r.code != 0 || !strings.Contains(r.stderr, "stays drained: drained by the operator") {
			t.Errorf("the passing run: exit %d, want 0 and a note that the operator's drain stays\n%s", r.code, r)
		}
		if n := h.node(hostNode); !n.drained() || n.reason != operator {
			t.Errorf("after a passing run: state %s, reason %q; the operator's drain was touched", n.state, n.reason)
		}
		h.must("/usr/bin/scontrol", "update", "nodename="+hostNode, "state=resume")
	})

	t.Run("boot unit with action drain drains by the short host name", func(t *testing.T) {
		// The unit's ExecStart, with the environment systemd gives it (no SLURMD_NODENAME).
		h.knob("gpu-count", "7")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		r, err := h.exec(ctx, true, nil, "", nodeconf.BinaryPath, "--mode", string(nodeconf.ModeBoot), "--config", nodeconf.ConfigPath)
		if err != nil || r.code != 1 {
			t.Errorf("exit %d (%v), want 1: the unit fails\n%s", r.code, err, r)
		}
		if n, want := h.node(hostNode), h.wantReason(); !n.drained() || n.reason != want {
			t.Errorf("after the boot unit: state %s, reason %q; want drained with %q\n%s", n.state, n.reason, want, r)
		}
		h.must("/usr/bin/scontrol", "update", "nodename="+hostNode, "state=resume")
	})

	t.Run("a Slurm name that differs from the host name", func(t *testing.T) {
		// slurmd -N gpu-st-p5-1 on the host ip-10-1-42-17, failing: slurmd runs the check at
		// its start with SLURMD_NODENAME=gpu-st-p5-1, and that node is the one drained.
		h.knob("gpu-count", "7")
		h.daemons(slurmScript, "stop-slurmd", h.merged)
		h.daemons(slurmScript, "slurmd", h.merged, otherNode)
		if n, want := h.node(otherNode), h.wantReason(); !n.drained() || n.reason != want {
			t.Errorf("%s: state %s, reason %q; want drained with %q\nslurmd.log:\n%s", otherNode, n.state, n.reason, want,
				tail(grepLines(h.readFile("/var/log/slurm/slurmd.log"), "health_check"), 2000))
		}
		if n := h.node(hostNode); n.drained() {
			t.Errorf("%s (the host name, not this slurmd's node) is %s, reason %q", hostNode, n.state, n.reason)
		}
		if log := h.readFile("/var/log/slurm/slurmd.log"); strings.Contains(log, "health_check failed") {
			t.Errorf("slurmd says the health check failed (it drained the node and should exit 0):\n%s", grepLines(log, "health_check"))
		}
	})
}

// nodeReport is what these tests read of the last run's dlami-report.json.
type nodeReport struct {
	Result       string   `json:"result"`
	FailedChecks []string `json:"failed_checks"`
}

func (h *host) report() nodeReport {
	h.t.Helper()
	var rep nodeReport
	if err := json.Unmarshal([]byte(h.readFile(filepath.Join(nodeconf.DefaultOutDir, "dlami-report.json"))), &rep); err != nil {
		h.t.Fatalf("the node check's report: %v", err)
	}
	return rep
}

// wantReason is the drain reason the last run's report calls for: "dlami: " and its failed
// check ids, gpu among them (the knob gpu-count=7 fails it).
func (h *host) wantReason() string {
	h.t.Helper()
	rep := h.report()
	if !slices.Contains(rep.FailedChecks, "gpu") {
		h.t.Fatalf("the run did not fail gpu: failed %q", rep.FailedChecks)
	}
	return "dlami: " + strings.Join(rep.FailedChecks, ",")
}

// daemons runs the harness's slurm script inside the host's namespaces (not chrooted: it
// chroots each daemon itself).
func (h *host) daemons(argv ...string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := h.exec(ctx, false, nil, "", argv...)
	if err != nil || r.code != 0 {
		h.t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, r)
	}
}

// healthCheck runs the HealthCheckProgram as slurmd runs it: no arguments, and nothing in the
// environment but SLURMD_NODENAME (slurmd.c run_script_health_check).
func (h *host) healthCheck(node string) result {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := h.exec(ctx, true, []string{"SLURMD_NODENAME=" + node}, "", nodeconf.SlurmWrapperPath)
	if err != nil {
		h.t.Fatalf("%s: %v\n%s", nodeconf.SlurmWrapperPath, err, r)
	}
	return r
}

// slurmNode is what `scontrol -o show node` says of a node, read here with regular
// expressions of its own (not the parser under test).
type slurmNode struct {
	state, reason string
}

func (n slurmNode) drained() bool { return strings.Contains(n.state, "DRAIN") }

var (
	stateRE  = regexp.MustCompile(` State=(\S+)`)
	reasonRE = regexp.MustCompile(` Reason=(.*) \[[^\]]+@[^\]]+\]`)
)

func (h *host) node(name string) slurmNode {
	h.t.Helper()
	out := h.must("/usr/bin/scontrol", "-o", "show", "node", name)
	var n slurmNode
	if m := stateRE.FindStringSubmatch(out); m != nil {
		n.state = m[1]
	} else {
		h.t.Fatalf("no State in scontrol's record of %s:\n%s", name, out)
	}
	if m := reasonRE.FindStringSubmatch(out); m != nil {
		n.reason = m[1]
	}
	return n
}

// sinfoReason is the node's line of `sinfo -R` as an operator sees it (default format: the
// reason in 20 columns, user, time, nodes), "" when it has none.
func (h *host) sinfoReason(node string) string {
	h.t.Helper()
	for _, l := range strings.Split(h.must("/usr/bin/sinfo", "-R"), "\n") {
		if strings.HasSuffix(strings.TrimSpace(l), " "+node) {
			return l
		}
	}
	return ""
}

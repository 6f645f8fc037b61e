package nodecheck

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
)

// scontrolCapture is a real `scontrol -o show node` output (testdata/scontrol/README.source).
func scontrolCapture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "scontrol", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// idleSlurmNode answers scontrol as Slurm 22.05 does for a registered, idle node
// ip-10-1-42-17: its record for `-o show node`, nothing for an update.
func idleSlurmNode(argv []string) (string, int) {
	if len(argv) > 1 && argv[1] == "-o" {
		b, err := os.ReadFile(filepath.Join("testdata", "scontrol", "idle.txt"))
		if err != nil {
			return err.Error(), 1
		}
		return string(b), 0
	}
	return "", 0
}

func TestParseSlurmNode(t *testing.T) {
	cases := []struct {
		file, node              string
		state, reason, by       string
		drained, drainedByCheck bool
		err                     string
	}{
		{file: "idle.txt", node: "ip-10-1-42-17", state: "IDLE"},
		{file: "drained-by-check.txt", node: "ip-10-1-42-17", state: "IDLE+DRAIN", reason: "dlami: gpu,xid", by: "root@2026-12-01T18:36:52", drained: true, drainedByCheck: true},
		{file: "drained-with-comment.txt", node: "ip-10-1-42-17", state: "IDLE+DRAIN", reason: "dlami: gpu,xid", by: "root@2026-12-01T18:36:52", drained: true, drainedByCheck: true},
		// An operator's reason may hold brackets, "State=" and "Comment=": only the fields
		// before "Reason=" are fields, and the reason runs to Slurm's " [user@time]".
		{file: "operator-drain-brackets.txt", node: "ip-10-1-42-17", state: "IDLE+DRAIN", reason: "bad fan [ticket 42], State=DOWN see Comment=x", by: "root@2026-12-01T18:36:52", drained: true},
		{file: "down-operator.txt", node: "ip-10-1-42-17", state: "DOWN+NOT_RESPONDING", reason: "hardware swap", by: "root@2026-12-01T18:36:52"},
		{file: "fail-operator.txt", node: "ip-10-1-42-17", state: "DOWN+FAIL+NOT_RESPONDING", reason: "retire: ECC", by: "root@2026-12-01T18:36:52", drained: true},
		{file: "unknown-never-registered.txt", node: "gpu-st-p5-1", state: "UNKNOWN"},
		{file: "after-resume-slurmd-stopped.txt", node: "ip-10-1-42-17", state: "IDLE+NOT_RESPONDING"},
		{file: "not-found.txt", node: "nosuch", err: "no record of node nosuch in: Node nosuch not found"},
		// The record of another node (a host list, a prefix of the name) is not this node's.
		{file: "idle.txt", node: "ip-10-1-42-1", err: "no record of node ip-10-1-42-1"},
	}
	for _, c := range cases {
		t.Run(c.file+"/"+c.node, func(t *testing.T) {
			n, err := ParseSlurmNode(scontrolCapture(t, c.file), c.node)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n.Name != c.node || n.State != c.state || n.Reason != c.reason || n.ReasonSetBy != c.by {
				t.Errorf("got %+v, want state %q reason %q by %q", n, c.state, c.reason, c.by)
			}
			if n.Drained() != c.drained || n.DrainedByCheck() != c.drainedByCheck {
				t.Errorf("drained %v by us %v, want %v %v", n.Drained(), n.DrainedByCheck(), c.drained, c.drainedByCheck)
			}
		})
	}
}

func TestParseSlurmNodeIgnoresOtherLines(t *testing.T) {
	// scontrol's warnings go to stderr, which Command returns with stdout: they are not the
	// record, even when they name a state.
	out := "scontrol: error: get_addr_info: State=DOWN Reason=x\n" + scontrolCapture(t, "idle.txt")
	n, err := ParseSlurmNode(out, "ip-10-1-42-17")
	if err != nil || n.State != "IDLE" || n.Reason != "" {
		t.Fatalf("%+v, %v", n, err)
	}
	if _, err := ParseSlurmNode("NodeName=ip-10-1-42-17 Arch=x86_64 CoresPerSocket=1", "ip-10-1-42-17"); err == nil {
		t.Error("a record without State was read")
	}
}

func FuzzParseSlurmNode(f *testing.F) {
	for _, name := range []string{"idle.txt", "drained-by-check.txt", "operator-drain-brackets.txt", "fail-operator.txt", "not-found.txt"} {
		f.Add(scontrolCapture(f, name), "ip-10-1-42-17")
	}
	f.Add("NodeName=n State= Reason= [", "n")
	f.Fuzz(func(t *testing.T, out, node string) {
		n, err := ParseSlurmNode(out, node)
		if err != nil {
			return
		}
		if n.State == "" || n.Name != node || strings.ContainsAny(n.State, " \n") {
			t.Fatalf("%+v from %q", n, out)
		}
	})
}

// fakeSlurm is scontrol as a controller with one node in a given state: it records the calls
// and applies updates.
type fakeSlurm struct {
	node, state, reason string
	// by signs the reason ("[by@time]"); "" is root, an operator.
	by         string
	calls      [][]string
	failUpdate bool
}

func (f *fakeSlurm) command(_ context.Context, argv []string, _ []string) (string, int, error) {
	f.calls = append(f.calls, argv)
	switch {
	case len(argv) == 5 && argv[1] == "-o" && argv[4] == f.node:
		rec := "NodeName=" + f.node + " Arch=x86_64 CoresPerSocket=1 State=" + f.state + " ThreadsPerCore=1"
		if f.reason != "" {
			rec += " Reason=" + f.reason + " [" + cmp.Or(f.by, "root") + "@2026-12-01T18:36:52]"
		}
		return rec + "\n", 0, nil
	case len(argv) == 5 && argv[1] == "-o":
		return "Node " + argv[4] + " not found\n", 1, nil
	case len(argv) >= 4 && argv[1] == "update" && argv[2] == "nodename="+f.node:
		if f.failUpdate {
			return "slurm_update error: Unable to contact slurm controller", 1, nil
		}
		switch argv[3] {
		case "state=drain":
			f.state, f.reason = "IDLE+DRAIN", strings.TrimPrefix(argv[4], "reason=")
		case "state=resume":
			f.state, f.reason = "IDLE", ""
		}
		return "", 0, nil
	}
	return "Invalid node name specified", 1, nil
}

func (f *fakeSlurm) slurm(env map[string]string) Slurm {
	return Slurm{Scontrol: nodeconf.DefaultScontrol, Command: f.command,
		Hostname: func() (string, error) { return "ip-10-1-42-17.ec2.internal", nil },
		Getenv:   func(k string) string { return env[k] }}
}

func (f *fakeSlurm) updates() []string {
	var out []string
	for _, c := range f.calls {
		if c[1] == "update" {
			out = append(out, strings.Join(c[2:], " "))
		}
	}
	return out
}

func TestSlurmDrain(t *testing.T) {
	cases := []struct {
		name          string
		state, reason string
		by            string
		env           map[string]string
		node          string
		wantUpdates   []string
		wantReason    string
		wantNote      string
		wantErr       bool
	}{
		{name: "idle node is drained with the ids first", state: "IDLE", node: "ip-10-1-42-17",
			wantUpdates: []string{"nodename=ip-10-1-42-17 state=drain reason=dlami: gpu,xid"}, wantReason: "dlami: gpu,xid",
			wantNote: `drained Slurm node ip-10-1-42-17 (named by the short host name; it was IDLE): reason "dlami: gpu,xid"`},
		{name: "a down node is drained (it must not return to service when slurmd registers)", state: "DOWN+NOT_RESPONDING", reason: "Not responding", by: "slurm", node: "ip-10-1-42-17",
			wantUpdates: []string{"nodename=ip-10-1-42-17 state=drain reason=dlami: gpu,xid"}, wantReason: "dlami: gpu,xid"},
		{name: "a down node without a reason is drained", state: "DOWN*", node: "ip-10-1-42-17",
			wantUpdates: []string{"nodename=ip-10-1-42-17 state=drain reason=dlami: gpu,xid"}, wantReason: "dlami: gpu,xid"},
		// An operator's `scontrol update state=down reason="hardware swap"` is theirs: kept.
		{name: "operator's down is left with its reason", state: "DOWN+NOT_RESPONDING", reason: "hardware swap", node: "ip-10-1-42-17",
			wantReason: "hardware swap", wantNote: `Slurm node ip-10-1-42-17 is set DOWN by the operator (state DOWN+NOT_RESPONDING, reason "hardware swap", set by root@2026-12-01T18:36:52): left as it is`},
		{name: "operator's drain is left with its reason", state: "IDLE+DRAIN", reason: "fan replaced, burn-in", node: "ip-10-1-42-17",
			wantReason: "fan replaced, burn-in", wantNote: `Slurm node ip-10-1-42-17 is drained by the operator (state IDLE+DRAIN, reason "fan replaced, burn-in", set by root@2026-12-01T18:36:52): left as it is; this run failed gpu,xid`},
		{name: "operator's fail is left", state: "DOWN+FAIL", reason: "retire: ECC", node: "ip-10-1-42-17", wantReason: "retire: ECC"},
		{name: "reboot asap is not ours", state: "IDLE+DRAIN+REBOOT_REQUESTED", reason: "Reboot ASAP", node: "ip-10-1-42-17", wantReason: "Reboot ASAP"},
		{name: "our own drain with the same ids is not rewritten", state: "IDLE+DRAIN", reason: "dlami: gpu,xid", node: "ip-10-1-42-17",
			wantReason: "dlami: gpu,xid", wantNote: `stays drained with reason "dlami: gpu,xid"`},
		{name: "our own drain gets the new ids", state: "IDLE+DRAIN", reason: "dlami: gpu", node: "ip-10-1-42-17",
			wantUpdates: []string{"nodename=ip-10-1-42-17 state=drain reason=dlami: gpu,xid"}, wantReason: "dlami: gpu,xid"},
		{name: "an older binary's drain is ours", state: "IDLE+DRAIN", reason: "dlami-node-check: gpu", node: "ip-10-1-42-17",
			wantUpdates: []string{"nodename=ip-10-1-42-17 state=drain reason=dlami: gpu,xid"}, wantReason: "dlami: gpu,xid"},
		{name: "SLURMD_NODENAME names the node", state: "IDLE", node: "gpu-st-p5-1", env: map[string]string{"SLURMD_NODENAME": "gpu-st-p5-1"},
			wantUpdates: []string{"nodename=gpu-st-p5-1 state=drain reason=dlami: gpu,xid"}, wantReason: "dlami: gpu,xid",
			wantNote: "(named by SLURMD_NODENAME"},
		{name: "a host list in SLURMD_NODENAME is refused", state: "IDLE", node: "ip-10-1-42-17", env: map[string]string{"SLURMD_NODENAME": "gpu-st-p5-[1-4]"},
			wantErr: true, wantNote: `SLURMD_NODENAME="gpu-st-p5-[1-4]" is not a Slurm node name`},
		{name: "an unknown node is not drained", state: "IDLE", node: "other-node",
			wantErr: true, wantNote: "Node ip-10-1-42-17 not found (nothing changed)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeSlurm{node: c.node, state: c.state, reason: c.reason, by: c.by}
			d, err := f.slurm(c.env).Drain(context.Background(), []string{"gpu", "xid"})
			note := d.Note
			if (err != nil) != c.wantErr {
				t.Fatalf("err %v, want error %v (note %q)", err, c.wantErr, note)
			}
			if strings.Join(f.updates(), "|") != strings.Join(c.wantUpdates, "|") {
				t.Errorf("updates %q, want %q", f.updates(), c.wantUpdates)
			}
			if !c.wantErr && f.reason != c.wantReason {
				t.Errorf("reason now %q, want %q", f.reason, c.wantReason)
			}
			if !strings.Contains(note, c.wantNote) {
				t.Errorf("note %q, want it to contain %q", note, c.wantNote)
			}
			// The node is read before anything is changed.
			if len(f.calls) > 0 && f.calls[0][1] != "-o" {
				t.Errorf("first call %q: the node must be read first", f.calls[0])
			}
		})
	}
}

func TestSlurmDrainUnreadableChangesNothing(t *testing.T) {
	f := &fakeSlurm{node: "ip-10-1-42-17", state: "IDLE"}
	s := f.slurm(nil)
	s.Command = func(ctx context.Context, argv []string, env []string) (string, int, error) {
		f.calls = append(f.calls, argv)
		return "", -1, errors.New("context deadline exceeded")
	}
	d, err := s.Drain(context.Background(), []string{"gpu"})
	note := d.Note
	if err == nil || len(f.updates()) != 0 || !strings.Contains(note, "before draining it") {
		t.Errorf("err %v, updates %q, note %q", err, f.updates(), note)
	}
}

func TestSlurmResume(t *testing.T) {
	cases := []struct {
		name          string
		state, reason string
		wantUpdates   []string
		wantNote      string
	}{
		{name: "ours is resumed", state: "IDLE+DRAIN", reason: "dlami: gpu",
			wantUpdates: []string{"nodename=ip-10-1-42-17 state=resume"}, wantNote: `resumed Slurm node ip-10-1-42-17 (named by the short host name): it passes again (it was drained with "dlami: gpu")`},
		{name: "operator's drain stays", state: "IDLE+DRAIN", reason: "fan replaced, burn-in",
			wantNote: `Slurm node ip-10-1-42-17 stays drained: drained by the operator (state IDLE+DRAIN, reason "fan replaced, burn-in", set by root@2026-12-01T18:36:52)`},
		{name: "operator's drain that mentions dlami stays", state: "MIXED+DRAIN", reason: "check dlami: gpu later"},
		{name: "an idle node is left", state: "IDLE"},
		{name: "a down node is left (Slurm returns it)", state: "DOWN+NOT_RESPONDING", reason: "dlami: gpu"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeSlurm{node: "ip-10-1-42-17", state: c.state, reason: c.reason}
			note := f.slurm(nil).Resume(context.Background())
			if strings.Join(f.updates(), "|") != strings.Join(c.wantUpdates, "|") {
				t.Errorf("updates %q, want %q", f.updates(), c.wantUpdates)
			}
			if !strings.Contains(note, c.wantNote) {
				t.Errorf("note %q, want %q", note, c.wantNote)
			}
		})
	}
}

// TestSlurmOperatorDrainLifecycle is the sequence on one node: the operator drains it,
// a failing run and then a passing run leave the drain and its reason.
func TestSlurmOperatorDrainLifecycle(t *testing.T) {
	f := &fakeSlurm{node: "ip-10-1-42-17", state: "IDLE+DRAIN", reason: "fan replaced, burn-in"}
	s := f.slurm(nil)
	if _, err := s.Drain(context.Background(), []string{"gpu"}); err != nil {
		t.Fatal(err)
	}
	s.Resume(context.Background())
	if f.state != "IDLE+DRAIN" || f.reason != "fan replaced, burn-in" || len(f.updates()) != 0 {
		t.Errorf("state %s reason %q updates %q", f.state, f.reason, f.updates())
	}
}

func TestDrainReasonFitsSinfo(t *testing.T) {
	// sinfo -R prints the reason in 20 columns by default (%20E): the ids must be in them.
	r := DrainReason([]string{"gpu", "xid", "first-boot-packages"})
	if !strings.HasPrefix(r, "dlami: gpu,xid") || len("dlami: gpu,xid") > 20 {
		t.Errorf("reason %q", r)
	}
}

// Who holds a node, on real scontrol captures: an operator's drain, fail and DOWN are theirs;
// the node check's drain is its own; an idle or never-registered node is nobody's.
func TestHeldByOperatorOnRealRecords(t *testing.T) {
	for file, want := range map[string]bool{
		"down-operator.txt": true, "fail-operator.txt": true, "operator-drain-brackets.txt": true,
		"drained-by-check.txt": false, "idle.txt": false, "unknown-never-registered.txt": false, "after-resume-slurmd-stopped.txt": false,
	} {
		node := "ip-10-1-42-17"
		if file == "unknown-never-registered.txt" {
			node = "gpu-st-p5-1"
		}
		n, err := ParseSlurmNode(scontrolCapture(t, file), node)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if got := n.HeldByOperator(); got != want {
			t.Errorf("%s (state %s, reason %q by %q): held by the operator %v, want %v", file, n.State, n.Reason, n.ReasonSetBy, got, want)
		}
	}
}

package checks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// ncclFixtures is the one copy of the NCCL test logs, the parser's.
const ncclFixtures = "../parse/nccltests/testdata"

func ncclTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ncclFixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNCCLTestdataHasSources(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(ncclFixtures, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		if _, err := os.Stat(strings.TrimSuffix(f, ".txt") + ".source"); err != nil {
			t.Errorf("%s: no .source note", f)
		}
	}
}

func TestJudgeNCCL(t *testing.T) {
	p6 := NCCLExpect{BusBWFloorGBps: 600, FloorBasis: BasisSetting, EFACount: 8, Transport: settings.TransportEFA, TransportBasis: BasisSetting}
	type wantCheck struct {
		status result.Status
		msg    string // substring of Message ("" : not checked)
		actual string // substring of Actual ("" : not checked)
	}
	tests := []struct {
		name     string
		file     string
		output   string // used when file is ""
		rc       int
		timedOut bool
		exp      NCCLExpect
		o        settings.NCCL
		want     [3]wantCheck // correctness, busbw, transport
	}{
		{name: "healthy P6-B200", file: "synthetic-p6b200-1node-ok.txt", exp: p6, want: [3]wantCheck{
			{result.Pass, "", "0 OK, exit 0"}, {result.Pass, "", "712.06 GB/s at 1 GiB (out-of-place)"}, {result.Pass, "", "Libfabric, efa, 8 nics"}}},
		{name: "no floor set warns with the figure", file: "synthetic-p6b200-1node-ok.txt", exp: NCCLExpect{EFACount: 8, Transport: settings.TransportEFA, TransportBasis: BasisSetting}, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Warn, "no busbw floor", "712.06 GB/s"}, {result.Pass, "", ""}}},
		{name: "below floor", file: "synthetic-p6b200-1node-ok.txt", exp: NCCLExpect{BusBWFloorGBps: 750, FloorBasis: BasisSetting, EFACount: 8, Transport: settings.TransportEFA, TransportBasis: BasisSetting}, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Fail, "below the floor of 750", ""}, {result.Pass, "", ""}}},
		{name: "socket fallback fails transport although fast", file: "derived-socket-fallback.txt", exp: p6, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", ""}, {result.Fail, "fell back to sockets", "Socket"}}},
		{name: "network IB", file: "derived-network-ib.txt", exp: p6, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", ""}, {result.Fail, "built-in IB", "IB"}}},
		{name: "NCCL_NET=IB breaks init", file: "derived-ncclnet-ib-failed.txt", rc: 3, exp: p6, o: settings.NCCL{Env: map[string]string{"NCCL_NET": "IB"}}, want: [3]wantCheck{
			{result.Fail, "did not finish", "no trailer, exit 3"}, {result.Fail, "no result table", "no result rows"}, {result.Fail, "NCCL_NET=IB was set", "no network line"}}},
		{name: "nic count mismatch", file: "derived-nics-4.txt", exp: p6, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", ""}, {result.Fail, "found 4 EFA nics, the instance has 8", "4 nics"}}},
		{name: "nic count not judged without an EFA count", file: "derived-nics-4.txt", exp: NCCLExpect{BusBWFloorGBps: 600, FloorBasis: BasisSetting, Transport: settings.TransportEFA, TransportBasis: BasisSetting}, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", ""}, {result.Pass, "", "4 nics"}}},
		{name: "NCCL_NET=IB in Env but Libfabric used warns", file: "synthetic-p6b200-1node-ok.txt", exp: p6, o: settings.NCCL{Env: map[string]string{"NCCL_NET": "ib"}}, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", ""}, {result.Warn, "NCCL_NET=IB", ""}}},
		{name: "forward compat is informational", file: "derived-forward-compat.txt", exp: p6, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", ""}, {result.Pass, "Forward Compatibility", ""}}},
		{name: "out of bounds", file: "derived-oob-failed.txt", rc: 0, exp: p6, want: [3]wantCheck{
			{result.Fail, "wrong values", "15 FAILED, exit 0"}, {result.Pass, "", ""}, {result.Pass, "", ""}}},
		{name: "out of bounds and non-zero exit", file: "derived-oob-failed.txt", rc: 1, exp: p6, want: [3]wantCheck{
			{result.Fail, "wrong values", "15 FAILED, exit 1"}, {result.Fail, "exited 1", ""}, {result.Pass, "", ""}}},
		{name: "validation off warns", file: "derived-validation-off.txt", exp: p6, o: settings.NCCL{Args: []string{"-c", "0"}}, want: [3]wantCheck{
			{result.Warn, "validation off", "validation off"}, {result.Pass, "", ""}, {result.Pass, "", ""}}},
		{name: "clean table but non-zero exit", file: "synthetic-p6b200-1node-ok.txt", rc: 1, exp: p6, want: [3]wantCheck{
			{result.Fail, "exited 1", "0 OK, exit 1"}, {result.Fail, "not trusted", ""}, {result.Pass, "", ""}}},
		{name: "no trailer without timeout", file: "derived-no-trailer.txt", rc: 0, exp: p6, want: [3]wantCheck{
			{result.Fail, "did not finish", "no trailer"}, {result.Fail, "table stops at 256 MiB", "at 256 MiB"}, {result.Pass, "", ""}}},
		{name: "hang: timeout fails all three", file: "derived-no-trailer.txt", rc: 124, timedOut: true, exp: p6, want: [3]wantCheck{
			{result.Fail, "timeout", "timed out"}, {result.Fail, "timeout", "timed out"}, {result.Fail, "timeout", "timed out"}}},
		{name: "killed after timeout, exit 137 only", file: "synthetic-p6b200-1node-ok.txt", rc: 137, exp: p6, want: [3]wantCheck{
			{result.Fail, "timeout", ""}, {result.Fail, "timeout", ""}, {result.Fail, "timeout", ""}}},
		{name: "binary missing", file: "derived-binary-missing.txt", rc: 127, exp: p6, want: [3]wantCheck{
			{result.Fail, "could not start", "not run"}, {result.Fail, "could not start", "not run"}, {result.Fail, "could not start", "not run"}}},
		{name: "garbage", file: "derived-garbage.txt", rc: 0, exp: p6, want: [3]wantCheck{
			{result.Fail, "did not finish", ""}, {result.Fail, "no result table", ""}, {result.Fail, "no 'Using network' line", ""}}},
		{name: "empty output exit 0", output: "", rc: 0, exp: p6, want: [3]wantCheck{
			{result.Fail, "", ""}, {result.Fail, "", ""}, {result.Fail, "", ""}}},
		{name: "old aws-ofi-nccl reference (AWS Libfabric, no nic count)", file: "p4d-2node-efa-nccl2.9.9-mpi-tagged.txt", exp: NCCLExpect{BusBWFloorGBps: 40, FloorBasis: BasisSetting, EFACount: 4, Transport: settings.TransportEFA, TransportBasis: BasisSetting}, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", "43.81 GB/s at 4 GiB"}, {result.Pass, "nic count", "AWS Libfabric, efa"}}},
		{name: "reference without INFO lines", file: "p5en-ami-elided.txt", exp: NCCLExpect{BusBWFloorGBps: 300, FloorBasis: BasisSetting, Transport: settings.TransportEFA, TransportBasis: BasisSetting}, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", "369.86 GB/s at 16 GiB"}, {result.Fail, "no 'Using network' line", ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.output
			if tc.file != "" {
				out = ncclTestdata(t, tc.file)
			}
			checks, fig := judgeNCCLOutput(out, tc.rc, tc.timedOut, tc.exp, tc.o)
			if len(checks) != 3 {
				t.Fatalf("%d checks, want 3", len(checks))
			}
			ids := []string{result.NCCLCorrectness, result.NCCLBusBW, result.NCCLTransport}
			for i, c := range checks {
				w := tc.want[i]
				if c.ID != ids[i] {
					t.Errorf("check %d id = %q, want %q", i, c.ID, ids[i])
				}
				if c.Status != w.status {
					t.Errorf("%s: status %s, want %s (actual %q, message %q)", c.ID, c.Status, w.status, c.Actual, c.Message)
				}
				if !strings.Contains(c.Message, w.msg) {
					t.Errorf("%s: message %q lacks %q", c.ID, c.Message, w.msg)
				}
				if !strings.Contains(c.Actual, w.actual) {
					t.Errorf("%s: actual %q lacks %q", c.ID, c.Actual, w.actual)
				}
				if c.Expected == "" || c.Actual == "" {
					t.Errorf("%s: empty expected/actual: %+v", c.ID, c)
				}
				if c.Status != result.Pass && c.Message == "" {
					t.Errorf("%s: %s without a message", c.ID, c.Status)
				}
				if len(c.Evidence) > ncclEvidenceMax {
					t.Errorf("%s: evidence of %d bytes", c.ID, len(c.Evidence))
				}
				if c.Status == result.Fail && c.Evidence == "" && strings.TrimSpace(out) != "" {
					t.Errorf("%s: failed without evidence", c.ID)
				}
			}
			if fig.ExitCode != tc.rc || fig.TimedOut != (tc.timedOut || tc.rc == 124 || tc.rc == 137) {
				t.Errorf("run exit=%d timedOut=%v", fig.ExitCode, fig.TimedOut)
			}
		})
	}
}

func TestNCCLSize(t *testing.T) {
	for in, want := range map[int64]string{8: "8 B", 1 << 30: "1 GiB", 1 << 28: "256 MiB", 17179869184: "16 GiB", 1000: "1000 B", 3 << 10: "3 KiB"} {
		if got := ncclSize(in); got != want {
			t.Errorf("ncclSize(%d) = %q, want %q", in, got, want)
		}
	}
}

// FuzzNCCLJudge checks that no output, however odd, makes JudgeNCCL panic or pass a check
// without the log lines that justify it.
func FuzzNCCLJudge(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(ncclFixtures, "*.txt"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), 0, false)
	}
	f.Add("# Out of bounds values : 0 OK\nUsing network Libfabric\n", 0, false)
	f.Fuzz(func(t *testing.T, out string, rc int, timedOut bool) {
		exp := NCCLExpect{BusBWFloorGBps: 100, FloorBasis: BasisSetting, EFACount: 8, Transport: settings.TransportEFA, TransportBasis: BasisSetting}
		checks, _ := judgeNCCLOutput(out, rc, timedOut, exp, settings.NCCL{})
		if len(checks) != 3 {
			t.Fatalf("%d checks", len(checks))
		}
		for _, c := range checks {
			if len(c.Evidence) > ncclEvidenceMax {
				t.Fatalf("%s: evidence of %d bytes", c.ID, len(c.Evidence))
			}
			if c.Status != result.Pass {
				continue
			}
			if timedOut || rc == 124 || rc == 137 {
				t.Fatalf("%s passed a timed-out run", c.ID)
			}
			switch c.ID {
			case result.NCCLCorrectness:
				if rc != 0 || !strings.Contains(out, "Out of bounds values") {
					t.Fatalf("correctness passed with rc=%d on %q", rc, out)
				}
			case result.NCCLBusBW:
				if rc != 0 || !strings.Contains(out, "Out of bounds values") {
					t.Fatalf("busbw passed with rc=%d without a trailer", rc)
				}
			case result.NCCLTransport:
				if !strings.Contains(out, "Using network") || strings.Contains(out, "NET/Socket") {
					t.Fatalf("transport passed on %q", out)
				}
			}
		}
	})
}

func TestNCCLTransportPolicy(t *testing.T) {
	out := ncclTestdata(t, "derived-socket-fallback.txt")
	efa := NCCLExpect{Transport: settings.TransportEFA, TransportBasis: BasisSetting}
	anyT := NCCLExpect{Transport: settings.TransportAny, TransportBasis: "PCI inventory: no EFA function"}
	cs, _ := judgeNCCLOutput(out, 0, false, efa, settings.NCCL{})
	if cs[2].Status != result.Fail || !strings.Contains(cs[2].Message, "sockets") {
		t.Errorf("socket run with EFA required: %s: %s", cs[2].Status, cs[2].Message)
	}
	cs, _ = judgeNCCLOutput(out, 0, false, anyT, settings.NCCL{})
	if cs[2].Status != result.Pass || !strings.Contains(cs[2].Actual, "Socket") || !strings.Contains(cs[2].Message, "reported, not required") {
		t.Errorf("socket run on a host without EFA: %s %q: %s", cs[2].Status, cs[2].Actual, cs[2].Message)
	}
	// The policy does not relax correctness or bandwidth.
	cs, _ = judgeNCCLOutput(ncclTestdata(t, "derived-oob-failed.txt"), 1, false, anyT, settings.NCCL{})
	if cs[0].Status != result.Fail {
		t.Errorf("correctness under policy any: %s", cs[0].Status)
	}
}

func TestTargetNCCLExpect(t *testing.T) {
	inv := func(lines string) facts.Fact[facts.PCIInventory] {
		v, err := pciParse(lines)
		if err != nil {
			t.Fatal(err)
		}
		return facts.Read(v, "")
	}
	p6 := strings.Repeat("0000:51:00.0 0x10de 0x2901 0x030200\n", 8) + strings.Repeat("0000:82:00.0 0x1d0f 0xefa3 0x020000\n", 8)
	s := facts.Host{Instance: facts.Instance{Type: "p6-b200.48xlarge", Source: "product_name"}, PCI: inv(p6)}
	x := Resolve(s, settings.Checks{Expect: settings.Expectations{}, NCCL: settings.NCCL{}}, "").NCCLExpect()
	if x.Transport != settings.TransportEFA || x.EFACount != 8 || x.BusBWFloorGBps != 600 || x.FloorBasis != "profile p6-b200.48xlarge" || x.Ranks != 8 {
		t.Errorf("p6: %+v", x)
	}
	s = facts.Host{Instance: facts.Instance{Type: "p7-future.48xlarge", Source: "product_name"}, PCI: inv("0000:05:00.0 0x1d0f 0xec20 0x020000\n0000:51:00.0 0x10de 0x2901 0x030200\n")}
	x = Resolve(s, settings.Checks{Expect: settings.Expectations{}, NCCL: settings.NCCL{}}, "").NCCLExpect()
	if x.Transport != settings.TransportAny || x.EFACount != 0 || x.BusBWFloorGBps != 0 || x.Ranks != 1 {
		t.Errorf("no EFA on the bus: %+v", x)
	}
	if x := Resolve(s, settings.Checks{Expect: settings.Expectations{}, NCCL: settings.NCCL{Transport: settings.TransportEFA}}, "").NCCLExpect(); x.Transport != settings.TransportEFA || x.TransportBasis != "setting nccl.transport" {
		t.Errorf("setting: %+v", x)
	}
	s.PCI = facts.Unread[facts.PCIInventory]("host.pci: exited 1", "")
	if x := Resolve(s, settings.Checks{Expect: settings.Expectations{}, NCCL: settings.NCCL{}}, "").NCCLExpect(); x.Transport != settings.TransportEFA {
		t.Errorf("unreadable PCI must not relax the transport: %+v", x)
	}
	// expect.efa_count = -1 turns the count off, not EFA: a socket fallback must still fail.
	s = facts.Host{Instance: facts.Instance{Type: "p7-future.48xlarge", Source: "product_name"}, PCI: inv(p6)}
	if x := Resolve(s, settings.Checks{Expect: settings.Expectations{EFACount: -1}, NCCL: settings.NCCL{}}, "").NCCLExpect(); x.Transport != settings.TransportEFA || !strings.Contains(x.TransportBasis, "expect.efa_count = -1") {
		t.Errorf("efa_count -1 on an EFA host: %+v", x)
	}
	off := Resolve(s, settings.Checks{Expect: settings.Expectations{EFACount: -1}, NCCL: settings.NCCL{}}, "").NCCLExpect()
	if cs, _ := judgeNCCLOutput(ncclTestdata(t, "derived-socket-fallback.txt"), 0, false, off, settings.NCCL{}); cs[2].Status != result.Fail {
		t.Errorf("socket fallback with efa_count = -1: %s: %s", cs[2].Status, cs[2].Message)
	}
	if _, err := (settings.NCCL{Transport: "ib"}).Resolved(); err == nil || !strings.Contains(err.Error(), "nccl.transport") {
		t.Errorf("bad transport: %v", err)
	}
}

// A run that chose Libfabric but never said which provider it selected does not prove EFA:
// the provider could be tcp, which leaves the host.
func TestNCCLTransportNeedsSelectedProvider(t *testing.T) {
	var kept []string
	for _, l := range strings.Split(ncclTestdata(t, "synthetic-p6b200-1node-ok.txt"), "\n") {
		if !strings.Contains(strings.ToLower(l), "selected provider") {
			kept = append(kept, l)
		}
	}
	x := NCCLExpect{EFACount: 8, Transport: settings.TransportEFA, TransportBasis: BasisSetting}
	cs, _ := judgeNCCLOutput(strings.Join(kept, "\n"), 0, false, x, settings.NCCL{})
	if c := cs[2]; c.Status != result.Fail || !strings.Contains(c.Message, "Selected provider") {
		t.Errorf("no Selected provider line: %s: %s", c.Status, c.Message)
	}
	// The same output with the line passes: the check above failed for the missing line alone.
	if cs, _ := judgeNCCLOutput(ncclTestdata(t, "synthetic-p6b200-1node-ok.txt"), 0, false, x, settings.NCCL{}); cs[2].Status != result.Pass {
		t.Errorf("with the line: %s: %s", cs[2].Status, cs[2].Message)
	}
}

// judgeNCCLOutput is the three NCCL checks of a test's output, as the probe reads it, against
// x and o.
func judgeNCCLOutput(out string, rc int, timedOut bool, x NCCLExpect, o settings.NCCL) ([]result.Check, facts.NCCLRun) {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = settings.NCCLDefaultTimeout
	}
	run := probe.ParseNCCLRun(out, rc, timedOut, timeout)
	v := ncclVerdicts(run, x, o)
	return v[:], run
}

// pciParse reads a PCI inventory as the probe does.
func pciParse(lines string) (facts.PCIInventory, error) { return pci.Parse(lines) }

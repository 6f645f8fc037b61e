package checks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
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

func TestNCCLCommandRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name  string
		o     NCCLOptions
		field string
	}{
		{"cuda version with shell", NCCLOptions{CUDAVersion: "13.2; rm -rf /"}, "nccl.cuda_version"},
		{"cuda version three parts", NCCLOptions{CUDAVersion: "13.2.1"}, "nccl.cuda_version"},
		{"negative ranks", NCCLOptions{Ranks: -1}, "nccl.ranks"},
		{"too many ranks", NCCLOptions{Ranks: 100000}, "nccl.ranks"},
		{"negative timeout", NCCLOptions{TimeoutSeconds: -5}, "nccl.timeout"},
		{"env key with space", NCCLOptions{Env: map[string]string{"A B": "1"}}, "nccl.env key"},
		{"env key with digit first", NCCLOptions{Env: map[string]string{"1A": "1"}}, "nccl.env key"},
		{"env key injection", NCCLOptions{Env: map[string]string{"A=1 -x B": "1"}}, "nccl.env key"},
		{"env overrides NCCL_DEBUG", NCCLOptions{Env: map[string]string{"NCCL_DEBUG": "WARN"}}, "NCCL_DEBUG"},
		{"env overrides LD_LIBRARY_PATH", NCCLOptions{Env: map[string]string{"LD_LIBRARY_PATH": "/tmp"}}, "LD_LIBRARY_PATH"},
		{"env value with newline", NCCLOptions{Env: map[string]string{"A": "1\nB"}}, `nccl.env["A"]`},
		{"arg with NUL", NCCLOptions{Args: []string{"-b", "8\x00"}}, "nccl.args[1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NCCLCommand(tc.o)
			if err == nil {
				t.Fatalf("no error; script:\n%s", s)
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.HasPrefix(err.Error(), "nccl.") {
				t.Errorf("error %q does not name %q", err, tc.field)
			}
		})
	}
}

func TestNCCLCommandText(t *testing.T) {
	s, err := NCCLCommand(NCCLOptions{Ranks: 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"timeout -k 10 900 \"$mpirun\" -n \"$ranks\" --bind-to none",
		"mpirun=/opt/amazon/openmpi/bin/mpirun",
		"-x \"LD_LIBRARY_PATH=$cuda/lib:$cuda/lib64:/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\"",
		"-x NCCL_DEBUG=INFO",
		"\"$bin\" '-b' '8' '-e' '1G' '-f' '2' '-g' '1' '-c' '1' '-n' '50'",
		"ranks=8\n",
		"/usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "sudo") {
		t.Errorf("script must run as the login user, not through sudo")
	}
	if s, err := NCCLCommand(NCCLOptions{TimeoutSeconds: 60}); err != nil || !strings.Contains(s, "timeout -k 10 60 ") {
		t.Errorf("timeout 60: %v\n%s", err, s)
	}
}

// ncclFakeHost builds a directory tree standing in for the DLAMI paths the script uses: CUDA
// installs with nccl-tests, an mpirun that prints its arguments, and nvidia-smi.
type ncclFakeHost struct {
	root, bin string
}

func ncclNewFakeHost(t *testing.T, cudas []string, gpus int) ncclFakeHost {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Skip("no coreutils timeout")
	}
	h := ncclFakeHost{root: t.TempDir()}
	h.bin = filepath.Join(h.root, "bin")
	write := func(path, body string, mode os.FileMode) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cudas {
		mode := os.FileMode(0o755)
		if strings.HasSuffix(c, "!") { // installed but not executable
			c, mode = strings.TrimSuffix(c, "!"), 0o644
		}
		write(filepath.Join(h.root, "usr/local/cuda-"+c, "efa/test-cuda-"+c, "all_reduce_perf"), "#!/bin/sh\n", mode)
	}
	write(filepath.Join(h.root, "opt/amazon/openmpi/bin/mpirun"), `#!/bin/sh
for a in "$@"; do printf 'ARG:%s\n' "$a"; done
[ -n "$FAKE_SLEEP" ] && sleep "$FAKE_SLEEP"
exit "${FAKE_RC:-0}"
`, 0o755)
	smi := "#!/bin/sh\n"
	for i := 0; i < gpus; i++ {
		smi += fmt.Sprintf("echo 'GPU %d: NVIDIA B200 (UUID: GPU-%d)'\n", i, i)
	}
	write(filepath.Join(h.bin, "nvidia-smi"), smi, 0o755)
	return h
}

// run runs the script as the bundle would (sh -c), with the DLAMI paths moved under root.
func (h ncclFakeHost) run(t *testing.T, o NCCLOptions, env ...string) (string, int) {
	t.Helper()
	s, err := NCCLCommand(o)
	if err != nil {
		t.Fatal(err)
	}
	s = strings.ReplaceAll(s, "/usr/local/cuda-", h.root+"/usr/local/cuda-")
	s = strings.ReplaceAll(s, ncclMPIRun, h.root+ncclMPIRun)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", s)
	cmd.Dir = h.root
	cmd.Env = append([]string{"PATH=" + h.bin + ":/usr/bin:/bin", "LC_ALL=C"}, env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return string(out), 0
}

func ncclArgs(out string) []string {
	var args []string
	for _, l := range strings.Split(out, "\n") {
		if a, ok := strings.CutPrefix(l, "ARG:"); ok {
			args = append(args, a)
		}
	}
	return args
}

func TestNCCLCommandRuns(t *testing.T) {
	h := ncclNewFakeHost(t, []string{"12.8", "12.9", "13.0", "13.10", "13.11!", "13.2x"}, 8)

	t.Run("newest CUDA by version, GPUs counted, args quoted", func(t *testing.T) {
		out, rc := h.run(t, NCCLOptions{
			Env:  map[string]string{"FI_EFA_FORK_SAFE": "1", "ODD": "a b'c $(touch pwned) `id`"},
			Args: []string{"-b", "8", "-e", "1G; touch pwned2", "-c", "1"},
		}, "LD_LIBRARY_PATH=/existing")
		if rc != 0 {
			t.Fatalf("rc = %d, output:\n%s", rc, out)
		}
		bin := h.root + "/usr/local/cuda-13.10/efa/test-cuda-13.10/all_reduce_perf"
		if first, _, _ := strings.Cut(out, "\n"); first != NCCLMarker+" BINARY "+bin {
			t.Errorf("first line = %q, want the binary marker for %s", first, bin)
		}
		cuda := h.root + "/usr/local/cuda-13.10"
		want := []string{"-n", "8", "--bind-to", "none",
			"-x", "LD_LIBRARY_PATH=" + cuda + "/lib:" + cuda + "/lib64:/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib:/existing",
			"-x", "NCCL_DEBUG=INFO",
			"-x", "FI_EFA_FORK_SAFE=1",
			"-x", "ODD=a b'c $(touch pwned) `id`",
			bin, "-b", "8", "-e", "1G; touch pwned2", "-c", "1"}
		if got := ncclArgs(out); !reflect.DeepEqual(got, want) {
			t.Errorf("mpirun args =\n%q\nwant\n%q", got, want)
		}
		for _, f := range []string{"pwned", "pwned2"} {
			if _, err := os.Stat(filepath.Join(h.root, f)); err == nil {
				t.Errorf("user input was executed: %s exists", f)
			}
		}
	})
	t.Run("unset LD_LIBRARY_PATH leaves no empty entry", func(t *testing.T) {
		out, _ := h.run(t, NCCLOptions{Ranks: 2})
		for _, a := range ncclArgs(out) {
			if strings.HasPrefix(a, "LD_LIBRARY_PATH=") && (strings.HasSuffix(a, ":") || strings.Contains(a, "::")) {
				t.Errorf("empty search path entry in %q", a)
			}
		}
	})
	t.Run("requested CUDA", func(t *testing.T) {
		out, rc := h.run(t, NCCLOptions{CUDAVersion: "12.9", Ranks: 4})
		if rc != 0 || !strings.Contains(out, NCCLMarker+" BINARY "+h.root+"/usr/local/cuda-12.9/efa/test-cuda-12.9/all_reduce_perf\n") {
			t.Errorf("rc=%d output:\n%s", rc, out)
		}
		if got := ncclArgs(out); len(got) < 2 || got[1] != "4" {
			t.Errorf("ranks: args %q", got)
		}
	})
	t.Run("requested CUDA missing", func(t *testing.T) {
		out, rc := h.run(t, NCCLOptions{CUDAVersion: "11.8"})
		if rc != ncclNoBinaryExit || !strings.Contains(out, NCCLMarker+" ERROR no nccl-tests binary for CUDA 11.8") || strings.Contains(out, "ARG:") {
			t.Errorf("rc=%d output:\n%s", rc, out)
		}
	})
	t.Run("exit status is mpirun's", func(t *testing.T) {
		_, rc := h.run(t, NCCLOptions{Ranks: 8}, "FAKE_RC=3")
		if rc != 3 {
			t.Errorf("rc = %d, want 3", rc)
		}
	})
	t.Run("timeout stops a hang", func(t *testing.T) {
		start := time.Now()
		_, rc := h.run(t, NCCLOptions{Ranks: 8, TimeoutSeconds: 1}, "FAKE_SLEEP=20")
		if rc != 124 && rc != 137 {
			t.Errorf("rc = %d, want 124 (timeout)", rc)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("took %v", d)
		}
	})

	empty := ncclNewFakeHost(t, nil, 8)
	t.Run("no binary", func(t *testing.T) {
		out, rc := empty.run(t, NCCLOptions{})
		if rc != ncclNoBinaryExit || !strings.HasPrefix(out, NCCLMarker+" ERROR no nccl-tests binary") {
			t.Errorf("rc=%d output:\n%s", rc, out)
		}
		checks, _ := JudgeNCCL(out, rc, false, NCCLExpect{Transport: TransportEFA, TransportBasis: BasisSetting}, NCCLOptions{})
		for _, c := range checks {
			if c.Status != result.Fail || !strings.Contains(c.Message, "could not start") {
				t.Errorf("%s: %s %q", c.ID, c.Status, c.Message)
			}
		}
	})
	noGPU := ncclNewFakeHost(t, []string{"13.0"}, 0)
	t.Run("no GPU to count", func(t *testing.T) {
		out, rc := noGPU.run(t, NCCLOptions{})
		if rc != ncclNoBinaryExit || !strings.Contains(out, "nvidia-smi lists no GPU") {
			t.Errorf("rc=%d output:\n%s", rc, out)
		}
	})
}

func TestJudgeNCCL(t *testing.T) {
	p6 := NCCLExpect{BusBWFloorGBps: 600, FloorBasis: BasisSetting, EFACount: 8, Transport: TransportEFA, TransportBasis: BasisSetting}
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
		o        NCCLOptions
		want     [3]wantCheck // correctness, busbw, transport
	}{
		{name: "healthy P6-B200", file: "synthetic-p6b200-1node-ok.txt", exp: p6, want: [3]wantCheck{
			{result.Pass, "", "0 OK, exit 0"}, {result.Pass, "", "712.06 GB/s at 1 GiB (out-of-place)"}, {result.Pass, "", "Libfabric, efa, 8 nics"}}},
		{name: "no floor set warns with the figure", file: "synthetic-p6b200-1node-ok.txt", exp: NCCLExpect{EFACount: 8, Transport: TransportEFA, TransportBasis: BasisSetting}, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Warn, "no busbw floor", "712.06 GB/s"}, {result.Pass, "", ""}}},
		{name: "below floor", file: "synthetic-p6b200-1node-ok.txt", exp: NCCLExpect{BusBWFloorGBps: 750, FloorBasis: BasisSetting, EFACount: 8, Transport: TransportEFA, TransportBasis: BasisSetting}, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Fail, "below the floor of 750", ""}, {result.Pass, "", ""}}},
		{name: "socket fallback fails transport although fast", file: "derived-socket-fallback.txt", exp: p6, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", ""}, {result.Fail, "fell back to sockets", "Socket"}}},
		{name: "network IB", file: "derived-network-ib.txt", exp: p6, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", ""}, {result.Fail, "built-in IB", "IB"}}},
		{name: "NCCL_NET=IB breaks init", file: "derived-ncclnet-ib-failed.txt", rc: 3, exp: p6, o: NCCLOptions{Env: map[string]string{"NCCL_NET": "IB"}}, want: [3]wantCheck{
			{result.Fail, "did not finish", "no trailer, exit 3"}, {result.Fail, "no result table", "no result rows"}, {result.Fail, "NCCL_NET=IB was set", "no network line"}}},
		{name: "nic count mismatch", file: "derived-nics-4.txt", exp: p6, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", ""}, {result.Fail, "found 4 EFA nics, the instance has 8", "4 nics"}}},
		{name: "nic count not judged without an EFA count", file: "derived-nics-4.txt", exp: NCCLExpect{BusBWFloorGBps: 600, FloorBasis: BasisSetting, Transport: TransportEFA, TransportBasis: BasisSetting}, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", ""}, {result.Pass, "", "4 nics"}}},
		{name: "NCCL_NET=IB in Env but Libfabric used warns", file: "synthetic-p6b200-1node-ok.txt", exp: p6, o: NCCLOptions{Env: map[string]string{"NCCL_NET": "ib"}}, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", ""}, {result.Warn, "NCCL_NET=IB", ""}}},
		{name: "forward compat is informational", file: "derived-forward-compat.txt", exp: p6, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", ""}, {result.Pass, "Forward Compatibility", ""}}},
		{name: "out of bounds", file: "derived-oob-failed.txt", rc: 0, exp: p6, want: [3]wantCheck{
			{result.Fail, "wrong values", "15 FAILED, exit 0"}, {result.Pass, "", ""}, {result.Pass, "", ""}}},
		{name: "out of bounds and non-zero exit", file: "derived-oob-failed.txt", rc: 1, exp: p6, want: [3]wantCheck{
			{result.Fail, "wrong values", "15 FAILED, exit 1"}, {result.Fail, "exited 1", ""}, {result.Pass, "", ""}}},
		{name: "validation off warns", file: "derived-validation-off.txt", exp: p6, o: NCCLOptions{Args: []string{"-c", "0"}}, want: [3]wantCheck{
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
		{name: "old aws-ofi-nccl reference (AWS Libfabric, no nic count)", file: "p4d-2node-efa-nccl2.9.9-mpi-tagged.txt", exp: NCCLExpect{BusBWFloorGBps: 40, FloorBasis: BasisSetting, EFACount: 4, Transport: TransportEFA, TransportBasis: BasisSetting}, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", "43.81 GB/s at 4 GiB"}, {result.Pass, "nic count", "AWS Libfabric, efa"}}},
		{name: "reference without INFO lines", file: "p5en-ami-elided.txt", exp: NCCLExpect{BusBWFloorGBps: 300, FloorBasis: BasisSetting, Transport: TransportEFA, TransportBasis: BasisSetting}, want: [3]wantCheck{
			{result.Pass, "", ""}, {result.Pass, "", "369.86 GB/s at 16 GiB"}, {result.Fail, "no 'Using network' line", ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.output
			if tc.file != "" {
				out = ncclTestdata(t, tc.file)
			}
			checks, fig := JudgeNCCL(out, tc.rc, tc.timedOut, tc.exp, tc.o)
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
				t.Errorf("figures exit=%d timedOut=%v", fig.ExitCode, fig.TimedOut)
			}
		})
	}
}

func TestJudgeNCCLFigures(t *testing.T) {
	out := ncclTestdata(t, "synthetic-p6b200-1node-ok.txt")
	checks, fig := JudgeNCCL(out, 0, false, NCCLExpect{BusBWFloorGBps: 600, FloorBasis: BasisSetting, EFACount: 8, Transport: TransportEFA, TransportBasis: BasisSetting}, NCCLOptions{})
	if result.Failed(checks) {
		t.Fatalf("healthy run failed: %+v", checks)
	}
	if fig.Binary != "/usr/local/cuda-13.0/efa/test-cuda-13.0/all_reduce_perf" || fig.NCCLVersion != "2.27.7+cuda13.0" ||
		fig.LargestSizeBytes != 1<<30 || fig.BusBWGBps == nil || *fig.BusBWGBps != 712.06 || fig.BusBWPlacement != "out-of-place" ||
		fig.AvgBusBWGBps == nil || *fig.AvgBusBWGBps != 192.934 || fig.OutOfBounds == nil || *fig.OutOfBounds != 0 ||
		fig.Network != "Libfabric" || fig.Provider != "efa" || fig.NICs == nil || *fig.NICs != 8 {
		t.Errorf("figures = %+v", fig)
	}
	b, err := json.Marshal(fig)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"avg_busbw_gbps", "binary", "busbw_gbps", "busbw_placement", "data_transport", "exit_code", "largest_size_bytes",
		"nccl_version", "network", "nics", "out_of_bounds", "provider", "timed_out"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("json keys = %q, want %q", keys, want)
	}

	_, empty := JudgeNCCL("", 1, false, NCCLExpect{Transport: TransportEFA, TransportBasis: BasisSetting}, NCCLOptions{})
	b, _ = json.Marshal(empty)
	if !strings.Contains(string(b), `"busbw_gbps":null`) || !strings.Contains(string(b), `"out_of_bounds":null`) {
		t.Errorf("unknown figures must be null, got %s", b)
	}
}

func TestNCCLWarnings(t *testing.T) {
	if w := NCCLWarnings(NCCLOptions{}); len(w) != 0 {
		t.Errorf("defaults warn: %q", w)
	}
	w := NCCLWarnings(NCCLOptions{Env: map[string]string{"NCCL_NET": " IB "}, Args: []string{"-c", "0"}})
	if len(w) != 2 || !strings.Contains(w[0], "NCCL_NET=IB") || !strings.Contains(w[1], "-c 0") {
		t.Errorf("warnings = %q", w)
	}
	if w := NCCLWarnings(NCCLOptions{Env: map[string]string{"NCCL_NET": "AWS Libfabric"}}); len(w) != 0 {
		t.Errorf("Libfabric warns: %q", w)
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
		exp := NCCLExpect{BusBWFloorGBps: 100, FloorBasis: BasisSetting, EFACount: 8, Transport: TransportEFA, TransportBasis: BasisSetting}
		checks, _ := JudgeNCCL(out, rc, timedOut, exp, NCCLOptions{})
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
	efa := NCCLExpect{Transport: TransportEFA, TransportBasis: BasisSetting}
	anyT := NCCLExpect{Transport: TransportAny, TransportBasis: "PCI inventory: no EFA function"}
	cs, _ := JudgeNCCL(out, 0, false, efa, NCCLOptions{})
	if cs[2].Status != result.Fail || !strings.Contains(cs[2].Message, "sockets") {
		t.Errorf("socket run with EFA required: %s: %s", cs[2].Status, cs[2].Message)
	}
	cs, _ = JudgeNCCL(out, 0, false, anyT, NCCLOptions{})
	if cs[2].Status != result.Pass || !strings.Contains(cs[2].Actual, "Socket") || !strings.Contains(cs[2].Message, "reported, not required") {
		t.Errorf("socket run on a host without EFA: %s %q: %s", cs[2].Status, cs[2].Actual, cs[2].Message)
	}
	// The policy does not relax correctness or bandwidth.
	cs, _ = JudgeNCCL(ncclTestdata(t, "derived-oob-failed.txt"), 1, false, anyT, NCCLOptions{})
	if cs[0].Status != result.Fail {
		t.Errorf("correctness under policy any: %s", cs[0].Status)
	}
}

func TestTargetNCCLExpect(t *testing.T) {
	inv := func(lines string) facts.Fact[pci.Inventory] {
		v, err := pci.Parse(lines)
		if err != nil {
			t.Fatal(err)
		}
		return facts.Read(v, "")
	}
	p6 := strings.Repeat("0000:51:00.0 0x10de 0x2901 0x030200\n", 8) + strings.Repeat("0000:82:00.0 0x1d0f 0xefa3 0x020000\n", 8)
	s := facts.Host{Instance: facts.Instance{Type: "p6-b200.48xlarge", Source: "product_name"}, PCI: inv(p6)}
	x := Resolve(s, Expectations{}, "").NCCLExpect(NCCLOptions{})
	if x.Transport != TransportEFA || x.EFACount != 8 || x.BusBWFloorGBps != 600 || x.FloorBasis != "profile p6-b200.48xlarge" || x.Ranks != 8 {
		t.Errorf("p6: %+v", x)
	}
	s = facts.Host{Instance: facts.Instance{Type: "p7-future.48xlarge", Source: "product_name"}, PCI: inv("0000:05:00.0 0x1d0f 0xec20 0x020000\n0000:51:00.0 0x10de 0x2901 0x030200\n")}
	x = Resolve(s, Expectations{}, "").NCCLExpect(NCCLOptions{})
	if x.Transport != TransportAny || x.EFACount != 0 || x.BusBWFloorGBps != 0 || x.Ranks != 1 {
		t.Errorf("no EFA on the bus: %+v", x)
	}
	if x := Resolve(s, Expectations{}, "").NCCLExpect(NCCLOptions{Transport: TransportEFA}); x.Transport != TransportEFA || x.TransportBasis != "setting nccl.transport" {
		t.Errorf("setting: %+v", x)
	}
	s.PCI = facts.Unread[pci.Inventory]("host.pci: exited 1", "")
	if x := Resolve(s, Expectations{}, "").NCCLExpect(NCCLOptions{}); x.Transport != TransportEFA {
		t.Errorf("unreadable PCI must not relax the transport: %+v", x)
	}
	// expect.efa_count = -1 turns the count off, not EFA: a socket fallback must still fail.
	s = facts.Host{Instance: facts.Instance{Type: "p7-future.48xlarge", Source: "product_name"}, PCI: inv(p6)}
	if x := Resolve(s, Expectations{EFACount: -1}, "").NCCLExpect(NCCLOptions{}); x.Transport != TransportEFA || !strings.Contains(x.TransportBasis, "expect.efa_count = -1") {
		t.Errorf("efa_count -1 on an EFA host: %+v", x)
	}
	off := Resolve(s, Expectations{EFACount: -1}, "").NCCLExpect(NCCLOptions{})
	if cs, _ := JudgeNCCL(ncclTestdata(t, "derived-socket-fallback.txt"), 0, false, off, NCCLOptions{}); cs[2].Status != result.Fail {
		t.Errorf("socket fallback with efa_count = -1: %s: %s", cs[2].Status, cs[2].Message)
	}
	if _, err := NCCLCommand(NCCLOptions{Transport: "ib"}); err == nil || !strings.Contains(err.Error(), "nccl.transport") {
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
	x := NCCLExpect{EFACount: 8, Transport: TransportEFA, TransportBasis: BasisSetting}
	cs, _ := JudgeNCCL(strings.Join(kept, "\n"), 0, false, x, NCCLOptions{})
	if c := cs[2]; c.Status != result.Fail || !strings.Contains(c.Message, "Selected provider") {
		t.Errorf("no Selected provider line: %s: %s", c.Status, c.Message)
	}
	// The same output with the line passes: the check above failed for the missing line alone.
	if cs, _ := JudgeNCCL(ncclTestdata(t, "synthetic-p6b200-1node-ok.txt"), 0, false, x, NCCLOptions{}); cs[2].Status != result.Pass {
		t.Errorf("with the line: %s: %s", cs[2].Status, cs[2].Message)
	}
}

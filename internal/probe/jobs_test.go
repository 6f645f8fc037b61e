package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func TestNCCLScriptText(t *testing.T) {
	script, err := NCCLScript("the NCCL test", "nccl", settings.NCCL{}, 8)
	if err != nil {
		t.Fatal(err)
	}
	s := script.Text
	for _, want := range []string{
		"with_env \"$timeout\" -k 10 \"$timeout_s\" \"$mpirun\" -n \"$ranks\" --bind-to none",
		"timeout_s='900'\n",
		"mpirun_paths='/opt/amazon/openmpi/bin/mpirun'",
		"libs=$cuda/lib:$cuda/lib64:/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n",
		"-x \"LD_LIBRARY_PATH=$libs\"",
		"-x NCCL_DEBUG=INFO",
		"set -- '@@BINARY@@' '-b' '8' '-e' '1G' '-f' '2' '-g' '1' '-c' '1' '-n' '50'\n",
		"ranks='8'\n",
		"/usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	for _, l := range strings.Split(scriptFile("nccl.sh"), "\n") {
		if l = strings.TrimSpace(l); !strings.HasPrefix(l, "#") && (strings.Contains(l, "sudo") || strings.Contains(l, "as_root")) {
			t.Errorf("the NCCL test must run as the login user, not through sudo: %s", l)
		}
	}
	if s, err := NCCLScript("the NCCL test", "nccl", settings.NCCL{Timeout: time.Minute}, 0); err != nil || !strings.Contains(s.Text, "timeout_s='60'\n") || s.Timeout != time.Minute {
		t.Errorf("timeout 60: %v\n%s", err, s.Text)
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
# A variable passed as -x NAME (no value) is printed with the value mpirun's environment gave it.
prev=
for a in "$@"; do
	printf 'ARG:%s\n' "$a"
	if [ "$prev" = -x ]; then
		case $a in *=*) ;; *) printf 'ENV:%s=%s\n' "$a" "$(printenv "$a")" ;; esac
	fi
	prev=$a
done
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
func (h ncclFakeHost) run(t *testing.T, o settings.NCCL, env ...string) (string, int) {
	t.Helper()
	script, err := NCCLScript("the NCCL test", "nccl", o, o.Ranks)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(script.Text, "/usr/local/cuda-", h.root+"/usr/local/cuda-")
	s = strings.ReplaceAll(s, hosttools.Mpirun.Paths[0], h.root+hosttools.Mpirun.Paths[0])
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

// ncclArgs returns the arguments the fake mpirun was given.
func ncclArgs(out string) []string {
	return ncclLines(out, "ARG:")
}

// ncclLines returns the fake mpirun's lines that start with prefix, without it.
func ncclLines(out, prefix string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if a, ok := strings.CutPrefix(l, prefix); ok {
			lines = append(lines, a)
		}
	}
	return lines
}

func TestNCCLScriptRuns(t *testing.T) {
	h := ncclNewFakeHost(t, []string{"12.8", "12.9", "13.0", "13.10", "13.11!", "13.2x"}, 8)

	t.Run("newest CUDA by version, GPUs counted, args quoted", func(t *testing.T) {
		out, rc := h.run(t, settings.NCCL{
			Env:  map[string]string{"FI_EFA_FORK_SAFE": "1", "ODD": "a b'c $(touch pwned) `id`"},
			Args: []string{"-b", "8", "-e", "1G; touch pwned2", "-c", "1"},
		}, "LD_LIBRARY_PATH=/existing")
		if rc != 0 {
			t.Fatalf("rc = %d, output:\n%s", rc, out)
		}
		bin := h.root + "/usr/local/cuda-13.10/efa/test-cuda-13.10/all_reduce_perf"
		if first, _, _ := strings.Cut(out, "\n"); first != ncclMarker+" BINARY "+bin {
			t.Errorf("first line = %q, want the binary marker for %s", first, bin)
		}
		cuda := h.root + "/usr/local/cuda-13.10"
		want := []string{"-n", "8", "--bind-to", "none",
			"-x", "LD_LIBRARY_PATH=" + cuda + "/lib:" + cuda + "/lib64:/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib:/existing",
			"-x", "NCCL_DEBUG=INFO",
			"-x", "FI_EFA_FORK_SAFE",
			"-x", "ODD",
			bin, "-b", "8", "-e", "1G; touch pwned2", "-c", "1"}
		if got := ncclArgs(out); !reflect.DeepEqual(got, want) {
			t.Errorf("mpirun args =\n%q\nwant\n%q", got, want)
		}
		// The values reach mpirun through its environment, never its command line (ps shows
		// that to every user of the host).
		wantEnv := []string{"FI_EFA_FORK_SAFE=1", "ODD=a b'c $(touch pwned) `id`"}
		if got := ncclLines(out, "ENV:"); !reflect.DeepEqual(got, wantEnv) {
			t.Errorf("mpirun environment =\n%q\nwant\n%q", got, wantEnv)
		}
		for _, f := range []string{"pwned", "pwned2"} {
			if _, err := os.Stat(filepath.Join(h.root, f)); err == nil {
				t.Errorf("user input was executed: %s exists", f)
			}
		}
	})
	t.Run("unset LD_LIBRARY_PATH leaves no empty entry", func(t *testing.T) {
		out, _ := h.run(t, settings.NCCL{Ranks: 2})
		for _, a := range ncclArgs(out) {
			if strings.HasPrefix(a, "LD_LIBRARY_PATH=") && (strings.HasSuffix(a, ":") || strings.Contains(a, "::")) {
				t.Errorf("empty search path entry in %q", a)
			}
		}
	})
	t.Run("requested CUDA", func(t *testing.T) {
		out, rc := h.run(t, settings.NCCL{CUDAVersion: "12.9", Ranks: 4})
		if rc != 0 || !strings.Contains(out, ncclMarker+" BINARY "+h.root+"/usr/local/cuda-12.9/efa/test-cuda-12.9/all_reduce_perf\n") {
			t.Errorf("rc=%d output:\n%s", rc, out)
		}
		if got := ncclArgs(out); len(got) < 2 || got[1] != "4" {
			t.Errorf("ranks: args %q", got)
		}
	})
	t.Run("requested CUDA missing", func(t *testing.T) {
		out, rc := h.run(t, settings.NCCL{CUDAVersion: "11.8"})
		if rc != 127 || !strings.Contains(out, ncclMarker+" ERROR no nccl-tests binary for CUDA 11.8") || strings.Contains(out, "ARG:") {
			t.Errorf("rc=%d output:\n%s", rc, out)
		}
	})
	t.Run("exit status is mpirun's", func(t *testing.T) {
		_, rc := h.run(t, settings.NCCL{Ranks: 8}, "FAKE_RC=3")
		if rc != 3 {
			t.Errorf("rc = %d, want 3", rc)
		}
	})
	t.Run("timeout stops a hang", func(t *testing.T) {
		start := time.Now()
		_, rc := h.run(t, settings.NCCL{Ranks: 8, Timeout: time.Second}, "FAKE_SLEEP=20")
		if rc != 124 && rc != 137 {
			t.Errorf("rc = %d, want 124 (timeout)", rc)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("took %v", d)
		}
	})

	empty := ncclNewFakeHost(t, nil, 8)
	t.Run("no binary", func(t *testing.T) {
		out, rc := empty.run(t, settings.NCCL{})
		if rc != 127 || !strings.HasPrefix(out, ncclMarker+" ERROR no nccl-tests binary") {
			t.Errorf("rc=%d output:\n%s", rc, out)
		}
		if run := ParseNCCLRun(out, rc, false, time.Minute); len(run.ScriptErrors) != 1 || !strings.HasPrefix(run.ScriptErrors[0], "no nccl-tests binary") || run.Binary != "" {
			t.Errorf("parsed run: %+v", run)
		}
	})
	noGPU := ncclNewFakeHost(t, []string{"13.0"}, 0)
	t.Run("no GPU to count", func(t *testing.T) {
		out, rc := noGPU.run(t, settings.NCCL{})
		if rc != 127 || !strings.Contains(out, "nvidia-smi lists no GPU") {
			t.Errorf("rc=%d output:\n%s", rc, out)
		}
	})
}

package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/localhost"
)

// jobHosts are both implementations of host.Runner: the SSH one (its command lines run by
// /bin/sh as sshd would run them) and this machine's, used by the node check. Both run
// host.JobScript, and the Kill test below holds for each.
func jobHosts(t *testing.T) map[string]host.Runner {
	return map[string]host.Runner{
		"ssh":       SSH{C: newLocalComm(t)},
		"localhost": localhost.Host{},
	}
}

// killableJobs are jobs whose processes leave the job's process group: timeout(1) makes a group
// of its own (as around mpirun in the NCCL job), and what it runs starts children of its own.
// Each writes the pids of its processes into files named after them in $D.
var killableJobs = []struct {
	name  string
	body  string
	procs []string
}{
	{
		name:  "timeout child and its children",
		body:  `timeout 60 sh -c 'echo $$ >"$D/inner"; sleep 300 & echo $! >"$D/bg"; sleep 300' & echo $! >"$D/timeout"; wait`,
		procs: []string{"timeout", "inner", "bg"},
	},
	{
		name:  "timeout inside timeout",
		body:  `timeout 60 sh -c 'timeout 50 sleep 301 & echo $! >"$D/inner"; sleep 302' & echo $! >"$D/timeout"; wait`,
		procs: []string{"timeout", "inner"},
	},
	{
		name:  "detached background subshell",
		body:  `(sleep 300; echo ran >"$D/ran") </dev/null >/dev/null 2>&1 & echo $! >"$D/bg"; timeout 60 sleep 303 & echo $! >"$D/timeout"; wait`,
		procs: []string{"bg", "timeout"},
	},
}

// startJob writes body as a job script (D set to its folder) and runs it on h in the
// background; it returns the job, a channel with Run's error, and a function that reads the
// pid a process of the job recorded (waiting for it).
func startJob(t *testing.T, ctx context.Context, h host.Runner, body string) (host.Job, chan error, func(string) int) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte("export D="+shellQuote(dir)+"\necho started\n"+body+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j := host.Job{Name: "the test job", Script: script, PIDFile: filepath.Join(dir, "job.pid"), Output: io.Discard}
	done := make(chan error, 1)
	go func() { _, err := h.Run(ctx, j); done <- err }()
	pid := func(name string) int {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
				if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 1 {
					return n
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the job did not record %s", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return j, done, pid
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestKillStopsTheWholeJob: on both hosts, Kill stops a job's processes that left its process
// group (a timeout(1) child and everything under it), whether Run is still waiting for the job
// or its context ended first; and Kill of a job that ended is not an error. Before the one job
// script, the node check's Kill stopped the process group only, and the timeout child outlived it.
func TestKillStopsTheWholeJob(t *testing.T) {
	for hostName, h := range jobHosts(t) {
		for _, job := range killableJobs {
			for _, runEnded := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/run ended first %v", hostName, job.name, runEnded)
				t.Run(name, func(t *testing.T) {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					j, done, pid := startJob(t, ctx, h, job.body)
					pids := map[string]int{}
					for _, p := range job.procs {
						pids[p] = pid(p)
						t.Cleanup(func() { _ = syscall.Kill(pids[p], syscall.SIGKILL) })
					}
					for p, n := range pids {
						if !alive(n) {
							t.Fatalf("%s (pid %d) is not running before Kill", p, n)
						}
					}
					if runEnded {
						cancel()
						select {
						case err := <-done:
							if !errors.Is(err, context.Canceled) {
								t.Errorf("Run after its context ended: %v", err)
							}
						case <-time.After(15 * time.Second):
							t.Fatal("Run did not return after its context ended")
						}
					}
					kctx, kcancel := context.WithTimeout(context.Background(), 15*time.Second)
					defer kcancel()
					if err := h.Kill(kctx, j); err != nil {
						t.Fatal(err)
					}
					if !runEnded {
						select {
						case <-done:
						case <-time.After(10 * time.Second):
							t.Fatal("Run still waits for the job after Kill")
						}
					}
					for deadline := time.Now().Add(5 * time.Second); ; {
						var left []string
						for p, n := range pids {
							if alive(n) {
								left = append(left, fmt.Sprintf("%s (pid %d)", p, n))
							}
						}
						if len(left) == 0 {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("outlived Kill: %v", left)
						}
						time.Sleep(50 * time.Millisecond)
					}
					if err := h.Kill(kctx, j); err != nil {
						t.Errorf("killing a job that ended: %v", err)
					}
				})
			}
		}
	}
}

// TestJobExitStatusOnBothHosts: Run returns the script's own exit status and its output, and
// removes the pid file, on both hosts.
func TestJobExitStatusOnBothHosts(t *testing.T) {
	for name, h := range jobHosts(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, "job.sh")
			if err := os.WriteFile(script, []byte("echo out; echo err >&2; exit 7\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var out Buffer
			j := host.Job{Name: "j", Script: script, PIDFile: filepath.Join(dir, "pid"), Output: &out}
			code, err := h.Run(context.Background(), j)
			if err != nil || code != 7 || !strings.Contains(out.String(), "out") || !strings.Contains(out.String(), "err") {
				t.Errorf("code %d err %v out %q", code, err, out.String())
			}
			if _, err := os.Stat(j.PIDFile); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("pid file left after the job ended: %v", err)
			}
		})
	}
}

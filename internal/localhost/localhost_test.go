package localhost

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
)

// TestQueryKillsHungTools: a tool that never ends is killed with its whole process
// group when the bound ends, and the query returns at once.
func TestQueryKillsHungTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Host{}.Query(ctx, []bundle.Command{{Name: "hang", Shell: "sleep 30", Timeout: 30 * time.Second}})
	if err == nil || time.Since(start) > 4*time.Second {
		t.Fatalf("hung query: %v after %s", err, time.Since(start))
	}
	s, err := Host{}.Query(context.Background(), []bundle.Command{{Name: "ok", Shell: "echo hello; exit 3", Timeout: 10 * time.Second}})
	if err != nil || s["ok"].Output != "hello" || s["ok"].ExitCode != 3 {
		t.Errorf("query: %+v %v", s, err)
	}
}

// A job leads a session of its own, recorded in its pid file: Kill stops the session whole,
// the job's children included, and a job that ended is not an error to kill.
func TestJobAndKill(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	marker := filepath.Join(dir, "child-alive")
	if err := os.WriteFile(script, []byte("echo started\n(while true; do touch "+marker+"; sleep 0.1; done) &\nwait\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	j := host.Job{Name: "the test job", Script: script, PIDFile: filepath.Join(dir, "job.pid"), Output: &bytes.Buffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := Host{}.Run(ctx, j); done <- err }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := (Host{}).Kill(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the job outlived Kill")
	}
	cancel()
	os.Remove(marker)
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Error("the job's child outlived Kill: the session was not stopped whole")
	}
	if err := (Host{}).Kill(context.Background(), j); err != nil {
		t.Errorf("killing a job that ended: %v", err)
	}
}

// Install puts a file in place with its mode, creating its parents; MakeTempDir makes a new
// folder no one else could have made first.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "a", "b", "site-check")
	if err := (Host{}).Install(context.Background(), []byte("#!/bin/sh\nexit 0\n"), dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dst); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("installed %v %v", st, err)
	}
	d1, err1 := Host{}.MakeTempDir(context.Background(), dir, "dlami-node-check")
	d2, err2 := Host{}.MakeTempDir(context.Background(), dir, "dlami-node-check")
	if err1 != nil || err2 != nil || d1 == d2 || !strings.HasPrefix(filepath.Base(d1), "dlami-node-check.") {
		t.Errorf("temp dirs %q %q: %v %v", d1, d2, err1, err2)
	}
	if st, err := os.Stat(d1); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("temp dir mode %v %v", st, err)
	}
	if err := (Host{}).Hold(context.Background(), []string{"linux-aws"}); !errors.Is(err, ErrNotABake) {
		t.Errorf("a node check held a package: %v", err)
	}
}

// When the process that ran a job goes away without stopping it (the node check killed), the
// job script's watchdog stops the job's whole session: the localhost host passes its own pid
// as the process to watch.
func TestJobStopsWhenItsRunnerGoes(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte("timeout 60 sh -c 'sleep 300 & sleep 300' &\necho $! >"+dir+"/timeout\nwait\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runner := exec.Command("/bin/sleep", "300")
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	j := host.Job{Script: script, PIDFile: filepath.Join(dir, "job.pid")}
	job := exec.Command("/bin/sh", append([]string{"-c", host.JobScript}, host.JobRunArgs(j, runner.Process.Pid)...)...)
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	defer job.Wait()
	var timeoutPID int
	for deadline := time.Now().Add(5 * time.Second); timeoutPID == 0; {
		b, _ := os.ReadFile(filepath.Join(dir, "timeout"))
		timeoutPID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if time.Now().After(deadline) {
			t.Fatal("the job did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() { _ = syscall.Kill(timeoutPID, syscall.SIGKILL) })
	time.Sleep(1500 * time.Millisecond) // the watchdog has read the session id
	if !running(timeoutPID) {
		t.Fatal("the job's timeout child stopped before its runner went")
	}
	_ = runner.Process.Kill()
	_ = runner.Wait()
	for deadline := time.Now().Add(10 * time.Second); running(timeoutPID); {
		if time.Now().After(deadline) {
			t.Fatal("the job's timeout child outlived the process that ran the job by 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// running reports whether pid is a live process (not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
)

// localComm is a Packer communicator that runs command lines on this machine with /bin/sh,
// as sshd would on the host: the SSH type's shell lines are exercised for real (sh, setsid,
// kill, cat, install), with a sudo shim in front because the test runs without sudo.
type localComm struct{ path string }

func newLocalComm(t *testing.T) localComm {
	dir := t.TempDir()
	shim := "#!/bin/sh\n[ \"$1\" = -n ] && shift\nexec \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "sudo"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	return localComm{path: dir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
}

func (c localComm) Start(ctx context.Context, rc *packersdk.RemoteCmd) error {
	cmd := exec.Command("/bin/sh", "-c", rc.Command)
	cmd.Env = []string{"PATH=" + c.path, "HOME=/tmp"}
	cmd.Stdout, cmd.Stderr = orDiscard(rc.Stdout), orDiscard(rc.Stderr)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		rc.SetExited(code)
	}()
	return nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func (localComm) Upload(dst string, r io.Reader, _ *os.FileInfo) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o600)
}
func (localComm) UploadDir(string, string, []string) error   { return errors.New("not used") }
func (localComm) Download(string, io.Writer) error           { return errors.New("not used") }
func (localComm) DownloadDir(string, string, []string) error { return errors.New("not used") }

func TestSSHFiles(t *testing.T) {
	s := SSH{C: newLocalComm(t), TempDir: t.TempDir()}
	ctx := context.Background()
	dir := t.TempDir()

	if _, err := s.ReadFile(ctx, filepath.Join(dir, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := s.ReadFile(ctx, dir); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a directory must be unreadable, not absent: %v", err)
	}
	dst := filepath.Join(dir, "nested", "it's a file.json")
	if err := s.Install(ctx, []byte("{\"a\": 1}\n"), dst, 0o640); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadFile(ctx, dst)
	if err != nil || string(got) != "{\"a\": 1}\n" {
		t.Fatalf("read back %q %v", got, err)
	}
	if st, _ := os.Stat(dst); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %o", st.Mode().Perm())
	}
	if ents, _ := os.ReadDir(s.TempDir); len(ents) != 0 {
		t.Errorf("staged files left behind: %v", ents)
	}
	if err := s.MakeDir(ctx, filepath.Join(dir, "a", "b")); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveAll(ctx, filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Error("RemoveAll left the directory")
	}
	if id, err := s.BootID(ctx); err != nil || len(id) != 36 {
		t.Errorf("boot id %q %v", id, err)
	}
}

func TestSSHQuery(t *testing.T) {
	s := SSH{C: newLocalComm(t)}
	cmds := []bundle.Command{{Name: "a", Shell: "echo one", Timeout: 10 * time.Second}, {Name: "b", Shell: "echo two >&2; exit 3", Timeout: 10 * time.Second}}
	got, err := s.Query(context.Background(), cmds)
	if err != nil {
		t.Fatal(err)
	}
	if got["a"].Output != "one" || got["b"].Output != "two" || got["b"].ExitCode != 3 {
		t.Errorf("sections %+v", got)
	}
}

// sessionMembers returns the processes in session sid, read from /proc the way the scripts do.
func sessionMembers(t *testing.T, sid int) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 4 || fields[3] != strconv.Itoa(sid) {
			continue
		}
		if fields[0] == "Z" {
			continue // exited, waiting for its parent to collect it
		}
		pid, _ := strconv.Atoi(strings.Split(f, "/")[2])
		pids = append(pids, pid)
	}
	return pids
}

// waitSessionGone fails the test when session sid still has live processes after d.
func waitSessionGone(t *testing.T, sid int, d time.Duration, what string) {
	t.Helper()
	for deadline := time.Now().Add(d); ; {
		left := sessionMembers(t, sid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %d still has processes %v %s", sid, left, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// jobScriptWithOwnGroup starts a process in a process group of its own (timeout(1) makes one,
// as it does around mpirun in the NCCL job) beside one in the job's group.
const jobScriptWithOwnGroup = "echo started\ntimeout 300 sleep 300 &\nsleep 300\n"

// A job runs as the leader of its own session, so Kill stops everything it started, even
// processes in other groups, after the caller stopped waiting for it.
func TestSSHJobAndKill(t *testing.T) {
	s := SSH{C: newLocalComm(t)}
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte(jobScriptWithOwnGroup), 0o644); err != nil {
		t.Fatal(err)
	}
	j := host.Job{Name: "long job", Script: script, PIDFile: filepath.Join(dir, "pid"), Output: io.Discard}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := s.Run(ctx, j); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("run: %v", err)
	}
	pidText, err := os.ReadFile(j.PIDFile)
	if err != nil {
		t.Fatal(err)
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sessionMembers(t, pgid)); n < 3 {
		t.Fatalf("the job's session has %d processes before Kill, want 3 (sh, timeout, sleep)", n)
	}
	kctx, kcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer kcancel()
	if err := s.Kill(kctx, j); err != nil {
		t.Fatal(err)
	}
	waitSessionGone(t, pgid, 5*time.Second, "after Kill")
	// Killing a job that already ended, or never started, is not an error.
	if err := s.Kill(kctx, j); err != nil {
		t.Errorf("second kill: %v", err)
	}
	if err := s.Kill(kctx, host.Job{Name: "never", PIDFile: filepath.Join(dir, "none")}); err != nil {
		t.Errorf("kill without pid file: %v", err)
	}
}

func TestSSHJobExitStatus(t *testing.T) {
	s := SSH{C: newLocalComm(t)}
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte("echo out; echo err >&2; exit 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out Buffer
	code, err := s.Run(context.Background(), host.Job{Name: "j", Script: script, AsRoot: true, PIDFile: filepath.Join(dir, "pid"), Output: &out})
	if err != nil || code != 7 || !strings.Contains(out.String(), "out") || !strings.Contains(out.String(), "err") {
		t.Errorf("code %d err %v out %q", code, err, out.String())
	}
	// The pid file goes with the job, so a later Kill cannot reach a process that reused the id.
	if _, err := os.Stat(filepath.Join(dir, "pid")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pid file left after the job ended: %v", err)
	}
}

// When the SSH session a job was started from goes away (Packer killed on Ctrl-C), the job's
// whole session is stopped on the host by the watchdog, without anyone calling Kill; also when
// the session process lingers as a zombie because nobody collected it, and when the staging
// folder holding the pid file was removed first.
func TestSSHJobStopsWhenItsSessionGoes(t *testing.T) {
	for _, tc := range []struct {
		name               string
		reaped, removePIDs bool
	}{
		{"session reaped", true, false},
		{"session a zombie", false, false},
		{"pid file removed", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// A stand-in for the SSH session process: the job runs under a process named sshd.
			sshd := filepath.Join(dir, "sshd")
			if err := os.Symlink("/bin/sh", sshd); err != nil {
				t.Fatal(err)
			}
			script := filepath.Join(dir, "job.sh")
			if err := os.WriteFile(script, []byte(jobScriptWithOwnGroup), 0o644); err != nil {
				t.Fatal(err)
			}
			pidFile := filepath.Join(dir, "pid")
			session := exec.Command(sshd, "-c", jobCommand(host.Job{Script: script, PIDFile: pidFile}))
			session.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
			if err := session.Start(); err != nil {
				t.Fatal(err)
			}
			sid := 0
			for deadline := time.Now().Add(5 * time.Second); sid == 0; {
				if b, err := os.ReadFile(pidFile); err == nil {
					sid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				}
				if time.Now().After(deadline) {
					t.Fatal("the job did not record its session")
				}
				time.Sleep(50 * time.Millisecond)
			}
			if tc.removePIDs {
				// As the bake's cleanup does, long after the job started (the watchdog reads
				// the file within 0.1 s of its writing).
				time.Sleep(500 * time.Millisecond)
				if err := os.Remove(pidFile); err != nil {
					t.Fatal(err)
				}
			}
			// The session dies (SIGKILL: no chance to clean up).
			if err := session.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			if tc.reaped {
				_ = session.Wait()
			} else {
				defer session.Wait()
			}
			waitSessionGone(t, sid, 10*time.Second, "10 s after the SSH session went")
		})
	}
}

// dropComm drops the connection under the first `drops` commands (exit CmdDisconnect, some
// output already written), then behaves as its inner communicator.
type dropComm struct {
	localComm
	drops *int
}

func (c dropComm) Start(ctx context.Context, rc *packersdk.RemoteCmd) error {
	if *c.drops > 0 {
		*c.drops--
		fmt.Fprint(orDiscard(rc.Stdout), "half an answer")
		rc.SetExited(packersdk.CmdDisconnect)
		return nil
	}
	return c.localComm.Start(ctx, rc)
}

// Read-only work is run again, once, when the connection drops under it: the partial output
// of the dropped attempt never reaches the caller. A second drop is an error.
func TestReadOnlyWorkSurvivesOneDrop(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	drops := 1
	s := SSH{C: dropComm{newLocalComm(t), &drops}}
	if b, err := s.ReadFile(ctx, file); err != nil || string(b) != "content" {
		t.Errorf("ReadFile after one drop: %q %v", b, err)
	}
	drops = 1
	if id, err := s.BootID(ctx); err != nil || len(id) != 36 {
		t.Errorf("BootID after one drop: %q %v", id, err)
	}
	drops = 2
	if _, err := s.ReadFile(ctx, file); !errors.Is(err, ErrDisconnected) {
		t.Errorf("ReadFile after two drops: %v", err)
	}
	drops = 2
	if _, err := s.BootID(ctx); !errors.Is(err, ErrDisconnected) {
		t.Errorf("BootID after two drops: %v", err)
	}
}

// hangComm never finishes opening a session, like SSH to a black-holed host.
type hangComm struct {
	localComm
	release chan struct{}
}

func (c hangComm) Start(context.Context, *packersdk.RemoteCmd) error {
	<-c.release
	return errors.New("released")
}

// A session that never opens is bounded by the caller's context: the kill, the staging-folder
// removal and the reboot polling all build their deadlines on it.
func TestStartIsBoundedByContext(t *testing.T) {
	c := hangComm{release: make(chan struct{})}
	defer close(c.release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := SSH{C: c}.Query(ctx, []bundle.Command{{Name: "x", Shell: "true", Timeout: 10 * time.Second}})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the context's deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Query waited on a session that never opened past its context")
	}
}

// The staging folder must not be a name another user of the host can guess and create first:
// each call makes a new folder with mktemp's random suffix, mode 0700 whatever the umask,
// owned by the login user, inside a parent that is created when missing (and may hold
// characters the shell would otherwise split on).
func TestSSHMakeTempDir(t *testing.T) {
	s := SSH{C: newLocalComm(t)}
	ctx := context.Background()
	parent := filepath.Join(t.TempDir(), "it's a folder", "nested")
	a, err := s.MakeTempDir(ctx, parent+"/", "dlami-bake")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.MakeTempDir(ctx, parent, "dlami-bake")
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("two calls answered the same folder %s", a)
	}
	for _, d := range []string{a, b} {
		rest, ok := strings.CutPrefix(d, parent+"/dlami-bake.")
		if !ok || len(rest) != 10 || strings.Contains(rest, "/") {
			t.Errorf("folder %q is not %s/dlami-bake.XXXXXXXXXX", d, parent)
		}
		st, err := os.Stat(d)
		if err != nil || !st.IsDir() {
			t.Fatalf("%s not created: %v", d, err)
		}
		if st.Mode().Perm() != 0o700 {
			t.Errorf("%s has mode %o, want 0700", d, st.Mode().Perm())
		}
		if uid := st.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Getuid() {
			t.Errorf("%s is owned by uid %d, want the login user %d", d, uid, os.Getuid())
		}
	}
	for _, bad := range []struct{ parent, prefix string }{{"tmp", "x"}, {parent, "-rf"}, {parent, "a b"}, {parent, "a/../b"}, {parent, ""}} {
		if d, err := s.MakeTempDir(ctx, bad.parent, bad.prefix); err == nil {
			t.Errorf("MakeTempDir(%q, %q) = %s, want an error", bad.parent, bad.prefix, d)
		}
	}
	// A parent the login user cannot write to is an error naming it, never a guessed path.
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 {
		if d, err := s.MakeTempDir(ctx, ro, "dlami-bake"); err == nil || !strings.Contains(err.Error(), ro) {
			t.Errorf("read-only parent: %q %v, want an error naming %s", d, err, ro)
		}
	}
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// When a job's script exits, what it left running in its session (a background subshell
// that would run apt-get later, its output redirected so nothing holds the SSH session open;
// a process of a group of its own) is stopped and named in the
// job's output, before Run returns; a daemon that left the session (as systemd's services
// are, and anything that called setsid) keeps running.
func TestSSHJobStopsItsLeftoversWhenItEnds(t *testing.T) {
	s := SSH{C: newLocalComm(t)}
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	body := fmt.Sprintf(`(sleep 300; echo LEFTOVER-RAN >%[1]s/ran) </dev/null >/dev/null 2>&1 &
echo $! >%[1]s/leftover
timeout 300 sleep 301 &
echo $! >%[1]s/group
setsid sh -c 'echo $$ >%[1]s/daemon; exec sleep 302' </dev/null >/dev/null 2>&1 &
while [ ! -s %[1]s/daemon ]; do sleep 0.05; done
echo done
exit 3
`, dir)
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var out Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, err := s.Run(ctx, host.Job{Name: "layer", Script: script, PIDFile: filepath.Join(dir, "pid"), Output: &out})
	if err != nil || code != 3 {
		t.Fatalf("run: code %d err %v (want the script's own exit status 3)", code, err)
	}
	pid := func(name string) int {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	daemon := pid("daemon")
	t.Cleanup(func() { _ = syscall.Kill(daemon, syscall.SIGKILL) })
	for _, name := range []string{"leftover", "group"} {
		if p := pid(name); alive(p) {
			t.Errorf("the job's %s process %d still runs after the job ended", name, p)
		}
	}
	if !alive(daemon) {
		t.Errorf("the daemon %d that left the job's session was stopped too", daemon)
	}
	if o := out.String(); !strings.Contains(o, "left processes running in its session; stopping them") || !strings.Contains(o, "sleep 300") || !strings.Contains(o, "timeout 300 sleep 301") {
		t.Errorf("output does not name the leftovers:\n%s", o)
	}
	if strings.Contains(out.String(), "sleep 302") {
		t.Errorf("the daemon was named as a leftover:\n%s", out.String())
	}
}

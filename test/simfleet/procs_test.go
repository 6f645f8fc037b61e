package simfleet

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeProc builds a /proc look-alike: one directory per pid with a root symlink and a
// NUL-separated cmdline.
func fakeProc(t *testing.T, procs map[string][2]string) string {
	t.Helper()
	dir := t.TempDir()
	for pid, p := range procs {
		d := filepath.Join(dir, pid)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if p[0] != "" {
			if err := os.Symlink(p[0], filepath.Join(d, "root")); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(d, "cmdline"), []byte(strings.ReplaceAll(p[1], " ", "\x00")+"\x00"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestProcessesUsing(t *testing.T) {
	proc := fakeProc(t, map[string][2]string{
		"100":  {"/", "/usr/sbin/sshd -D"},                                        // the machine's own
		"101":  {"/s/instances/i-1/merged", "sshd: ubuntu@notty"},                 // inside the host
		"102":  {"/s/instances/i-1/merged (deleted)", "bash -c apt-get"},          // lazily detached, still there
		"103":  {"/", "/bin/bash /repo/test/simhost/supervisor /s/instances/i-1"}, // the host's supervisor
		"104":  {"/", "go test ./test/e2e/ -state /s"},                            // names the dir, not a host script
		"105":  {"/s/instances/i-10/merged", "sshd"},                              // another instance
		"106":  {"", "kworker"},                                                   // exited while listed: no root link
		"self": {"/", "ignored"},                                                  // not a pid
	})
	tests := []struct {
		dir  string
		want []int
	}{
		{"/s/instances/i-1", []int{101, 102, 103}},
		{"/s", []int{101, 102, 103, 105}},
		{"/s/instances/i-2", nil},
	}
	for _, tt := range tests {
		got, err := ProcessesUsing(proc, tt.dir, "/repo/test/simhost")
		if err != nil {
			t.Fatalf("%s: %v", tt.dir, err)
		}
		var pids []int
		for _, p := range got {
			pids = append(pids, p.PID)
		}
		slices.Sort(pids)
		if !slices.Equal(pids, tt.want) {
			t.Errorf("ProcessesUsing(%q) = %v, want %v", tt.dir, pids, tt.want)
		}
	}
}

func TestProcessesUsingRefusesBadDirs(t *testing.T) {
	for _, dir := range []string{"/", "relative", ""} {
		if _, err := ProcessesUsing(t.TempDir(), dir, "/repo/test/simhost"); err == nil {
			t.Errorf("ProcessesUsing(%q) accepted a directory that would match everything or nothing", dir)
		}
	}
	if _, err := ProcessesUsing(filepath.Join(t.TempDir(), "missing"), "/s", "/x"); err == nil {
		t.Error("an unreadable process table must be an error, never \"no process\"")
	}
}

// TestProcessesUsingRealProc checks the reader against this machine's /proc: this test
// process (cwd in the package) is never reported, and nothing is reported for a fresh dir.
func TestProcessesUsingRealProc(t *testing.T) {
	needProcRoot(t)
	got, err := ProcessesUsing("/proc", t.TempDir(), "/nonexistent/test/simhost")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("processes using a fresh temp dir: %v", got)
	}
}

func TestLoopDevicesUsing(t *testing.T) {
	sys := t.TempDir()
	for dev, backing := range map[string]string{
		"loop0": "/s/instances/i-1/nvme.img\n",
		"loop1": "/s/instances/i-10/nvme.img\n",
		"loop2": "", // attached to nothing: no backing_file (skipped below)
	} {
		d := filepath.Join(sys, "block", dev, "loop")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if backing != "" {
			if err := os.WriteFile(filepath.Join(d, "backing_file"), []byte(backing), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		dir  string
		want []string
	}{
		{"/s/instances/i-1", []string{"/dev/loop0 (/s/instances/i-1/nvme.img)"}},
		{"/s", []string{"/dev/loop0 (/s/instances/i-1/nvme.img)", "/dev/loop1 (/s/instances/i-10/nvme.img)"}},
		{"/s/instances/i-2", nil},
	}
	for _, tt := range tests {
		got, err := LoopDevicesUsing(sys, tt.dir)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("LoopDevicesUsing(%q) = %q, want %q", tt.dir, got, tt.want)
		}
	}
	if _, err := LoopDevicesUsing(sys, "/"); err == nil {
		t.Error("LoopDevicesUsing(/) accepted a directory that matches everything")
	}
}

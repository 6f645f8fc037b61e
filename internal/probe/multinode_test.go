package probe

import (
	"context"
	"errors"
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

// The multi-node test runs the same script as the 1-node test, told the nodes: mpirun gets
// the hostfile, the SSH agent and its arguments (the test's key, the nodes' host keys, no
// prompt), the ranks per node and the settings' environment; the key is made private.
func TestMultiNodeScriptRuns(t *testing.T) {
	h := ncclNewFakeHost(t, []string{"13.2"}, 8)
	keyDir := filepath.Join(h.root, "keys")
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keyDir, "id_ed25519"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	sshBin := filepath.Join(h.root, "usr/bin/ssh")
	if err := os.MkdirAll(filepath.Dir(sshBin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sshBin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := MultiNodeScript(settings.MultiNode{Nodes: 2, MaxBytes: "1G", Env: map[string]string{"NCCL_ALGO": "Ring"}}, 8,
		[]string{"10.0.1.5", "10.0.1.6"}, keyDir)
	if err != nil {
		t.Fatal(err)
	}
	if script.Timeout != settings.MultiNodeDefaultTimeout || script.File != "nccl-multinode" {
		t.Errorf("script %q %s", script.File, script.Timeout)
	}
	s := strings.ReplaceAll(script.Text, "/usr/local/cuda-", h.root+"/usr/local/cuda-")
	s = strings.ReplaceAll(s, hosttools.Mpirun.Paths[0], h.root+hosttools.Mpirun.Paths[0])
	s = strings.ReplaceAll(s, hosttools.SSH.Paths[0], sshBin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", s)
	cmd.Env = []string{"PATH=" + h.bin + ":/usr/bin:/bin", "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	bin := h.root + "/usr/local/cuda-13.2/efa/test-cuda-13.2/all_reduce_perf"
	cuda := h.root + "/usr/local/cuda-13.2"
	want := []string{"--prefix", h.root + "/opt/amazon/openmpi", "-n", "16", "-N", "8", "--hostfile", keyDir + "/hostfile", "--bind-to", "none", "--tag-output",
		"--mca", "plm_rsh_agent", sshBin,
		"--mca", "plm_rsh_args", "-i " + keyDir + "/id_ed25519 -o IdentitiesOnly=yes -o BatchMode=yes -o UserKnownHostsFile=" + keyDir + "/known_hosts -o StrictHostKeyChecking=yes -o ConnectTimeout=20",
		"-x", "LD_LIBRARY_PATH=" + cuda + "/lib:" + cuda + "/lib64:/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib",
		"-x", "NCCL_DEBUG=INFO", "-x", "FI_PROVIDER=efa", "-x", "NCCL_ALGO",
		bin, "-b", "8", "-e", "1G", "-f", "2", "-g", "1", "-c", "1", "-n", "20"}
	if got := ncclArgs(string(out)); !reflect.DeepEqual(got, want) {
		t.Errorf("mpirun args =\n%q\nwant\n%q", got, want)
	}
	if got := ncclLines(string(out), "ENV:"); !reflect.DeepEqual(got, []string{"NCCL_ALGO=Ring"}) {
		t.Errorf("mpirun environment = %q, want NCCL_ALGO=Ring", got)
	}
	hostfile, err := os.ReadFile(filepath.Join(keyDir, "hostfile"))
	if err != nil || string(hostfile) != "10.0.1.5 slots=8\n10.0.1.6 slots=8\n" {
		t.Errorf("hostfile %q %v", hostfile, err)
	}
	if fi, err := os.Stat(filepath.Join(keyDir, "id_ed25519")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key mode: %v %v", fi.Mode(), err)
	}
	run := ParseNCCLRun(string(out), 0, false, script.Timeout)
	if run.Nodes != "2" || run.Ranks != "8" || run.Binary != bin {
		t.Errorf("parsed: nodes %q ranks %q binary %q", run.Nodes, run.Ranks, run.Binary)
	}
}

func TestMultiNodeScriptRefuses(t *testing.T) {
	ok := settings.MultiNode{Nodes: 2}
	tests := []struct {
		m      settings.MultiNode
		hosts  []string
		keyDir string
		want   string
	}{
		{ok, []string{"10.0.0.1"}, "/tmp/k", "need 2 or more"},
		{ok, []string{"10.0.0.1", "host; rm -rf /"}, "/tmp/k", "not an IP address"},
		{ok, []string{"10.0.0.1", "10.0.0.2"}, "/tmp/a b", "key folder"},
		{settings.MultiNode{Nodes: 2, MaxBytes: "x"}, []string{"10.0.0.1", "10.0.0.2"}, "/tmp/k", "multi_node.max_bytes"},
	}
	for _, tc := range tests {
		if _, err := MultiNodeScript(tc.m, 8, tc.hosts, tc.keyDir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %q: error %v, want %q", tc.hosts, tc.keyDir, err, tc.want)
		}
	}
}

// The key script adds the key line and removes every tagged line and nothing else, keeping
// the file's mode.
func TestMultiNodeKeyScript(t *testing.T) {
	home := t.TempDir()
	keys := filepath.Join(home, ".ssh", "authorized_keys")
	if err := os.MkdirAll(filepath.Dir(keys), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keys, []byte("ssh-ed25519 AAAAold user@laptop\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(add bool) (string, int) {
		t.Helper()
		s, err := MultiNodeKeyScript(add, "ssh-ed25519 AAAAnew dlami-multinode-r1", "dlami-multinode-r1")
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", s.Text)
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, rc := run(true)
	if n, err := ParseMultiNodeKey(out, rc); err != nil || n != 1 {
		t.Fatalf("add: %d %v\n%s", n, err, out)
	}
	run(true)
	if b, _ := os.ReadFile(keys); strings.Count(string(b), "dlami-multinode-r1") != 2 || !strings.HasPrefix(string(b), "ssh-ed25519 AAAAold user@laptop\n") {
		t.Errorf("after adding twice: %q", b)
	}
	out, rc = run(false)
	if n, err := ParseMultiNodeKey(out, rc); err != nil || n != 0 {
		t.Fatalf("remove: %d %v\n%s", n, err, out)
	}
	b, _ := os.ReadFile(keys)
	if string(b) != "ssh-ed25519 AAAAold user@laptop\n" {
		t.Errorf("after removing: %q", b)
	}
	if fi, _ := os.Stat(keys); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if _, err := MultiNodeKeyScript(true, "ssh-ed25519 AAAA x\nssh-rsa BBBB dlami-multinode-r1", "dlami-multinode-r1"); err == nil {
		t.Error("a key line with a line break was accepted")
	}
}

func TestMarkerCounts(t *testing.T) {
	tests := []struct {
		out     string
		code    int
		want    int
		wantErr string
	}{
		{stopMarker + " LEFT 0\n", 0, 0, ""},
		{"noise\n" + stopMarker + " LEFT 3\n", 0, 3, ""},
		{stopMarker + " ERROR pkill or pgrep not found\n", 1, -1, "pkill or pgrep not found"},
		{"", 0, -1, "printed no LEFT line"},
		{stopMarker + " LEFT x\n", 0, -1, "unreadable"},
		{stopMarker + " LEFT 0\n", 2, 0, "exited 2"},
	}
	for _, tc := range tests {
		n, err := ParseMultiNodeStop(tc.out, tc.code)
		if n != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q rc %d: %d %v, want %d %q", tc.out, tc.code, n, err, tc.want, tc.wantErr)
		}
	}
}

func TestKnownHosts(t *testing.T) {
	ed := []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHyWZbRJMl6y2lvb8mB6A6Y9bKpbc0Iyq0X4CR7dO5Nc root@ip-10-0-1-5\n")
	got, err := KnownHosts("10.0.1.5", [][]byte{ed, nil})
	if err != nil || got != "10.0.1.5 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHyWZbRJMl6y2lvb8mB6A6Y9bKpbc0Iyq0X4CR7dO5Nc\n" {
		t.Errorf("%q %v", got, err)
	}
	for _, bad := range [][][]byte{{}, {[]byte("not a key")}, {append(ed, []byte("ssh-rsa AAAA\n")...)}} {
		if _, err := KnownHosts("10.0.1.5", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := KnownHosts("ip-10-0-1-5", [][]byte{ed}); err == nil {
		t.Error("a host name accepted")
	}
}

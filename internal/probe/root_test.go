package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTools puts id, sudo and a journalctl and dmesg stand-in on a PATH of their own: id says
// uid, sudo prints the warning sudo prints when the host name is not in /etc/hosts (common
// after a scheduler renamed the node) and records that it ran, journalctl prints a kernel
// record and, on stderr, the warning of a journal file it skipped.
func fakeTools(t *testing.T, uid string) (dir string, sudoRan func() bool) {
	t.Helper()
	dir = t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("id", "echo "+uid+"\n")
	write("sudo", `echo "sudo: unable to resolve host gpu-node-17: Name or service not known" >&2
touch "`+dir+`/sudo-ran"
[ "$1" = -n ] && shift
exec "$@"
`)
	write("journalctl", `echo "[    5.000001] gpu-node-17 kernel: NVRM: loading NVIDIA UNIX Open Kernel Module"
echo "Journal file /var/log/journal/x/system@1.journal is truncated, ignoring file." >&2
`)
	write("dmesg", `echo "[    5.000001] NVRM: loading NVIDIA UNIX Open Kernel Module"
`)
	return dir, func() bool { _, err := os.Stat(filepath.Join(dir, "sudo-ran")); return err == nil }
}

// runShell runs a probe command's shell the way the bundle does: sh -c SHELL dlami-tool TOOL.
func runShell(t *testing.T, dir, shell, tool string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", shell, "dlami-tool", filepath.Join(dir, tool))
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", tool, err, out)
	}
	return string(out)
}

// The kernel log is read as root: directly when the probe already is root, through sudo -n
// otherwise; sudo's own warnings never land in what the parsers read (an "unable to resolve
// host" line in the journal's output made the xid check fail a healthy node), while
// journalctl's own warnings (a skipped journal file) still do.
func TestKernelLogReadsNeverParseSudoWarnings(t *testing.T) {
	for _, tt := range []struct {
		uid      string
		wantSudo bool
	}{{"0", false}, {"1000", true}} {
		for _, c := range []struct{ shell, tool string }{{journalShell, "journalctl"}, {dmesgShell, "dmesg"}} {
			dir, sudoRan := fakeTools(t, tt.uid)
			out := runShell(t, dir, c.shell, c.tool)
			if strings.Contains(out, "unable to resolve host") {
				t.Errorf("uid %s %s: sudo's warning reached the output:\n%s", tt.uid, c.tool, out)
			}
			if !strings.Contains(out, "NVRM: loading NVIDIA") {
				t.Errorf("uid %s %s: the log line is missing:\n%s", tt.uid, c.tool, out)
			}
			if c.tool == "journalctl" && !strings.Contains(out, "is truncated, ignoring file") {
				t.Errorf("uid %s: journalctl's own warning was dropped:\n%s", tt.uid, out)
			}
			if sudoRan() != tt.wantSudo {
				t.Errorf("uid %s %s: sudo ran = %v, want %v", tt.uid, c.tool, sudoRan(), tt.wantSudo)
			}
		}
	}
}

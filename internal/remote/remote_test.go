package remote

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowEmpty returns EOF only after a pause, like an idle stderr stream that closes when the
// command exits.
type slowEmpty struct{}

func (slowEmpty) Read([]byte) (int, error) { time.Sleep(50 * time.Millisecond); return 0, io.EOF }

// The communicator copies stdout and stderr into one writer at the same time. With a
// *bytes.Buffer the idle stream's ReadFrom truncated the other stream's output to nothing.
func TestBufferKeepsOutputOfConcurrentStreams(t *testing.T) {
	var out Buffer
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(&out, slowEmpty{}) }()
	go func() { defer wg.Done(); _, _ = io.Copy(&out, strings.NewReader(strings.Repeat("x", 17000))) }()
	wg.Wait()
	if got := len(out.String()); got != 17000 {
		t.Fatalf("kept %d of 17000 bytes", got)
	}
}

func TestScriptCommandQuotes(t *testing.T) {
	got := ScriptCommand("echo 'a b'")
	want := `/bin/sh -c 'echo '\''a b'\'''`
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// hold_unheld waits for a dpkg lock held by cloud-init or unattended-upgrades, as the layers
// do: an apt-mark that fails on the lock twice is run again until it succeeds; any other
// failure is reported at once.
func TestHoldWaitsForTheDpkgLock(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "apt-mark")
	script := `#!/bin/sh
n=$(cat "$0.count" 2>/dev/null || echo 0); n=$((n+1)); echo $n >"$0.count"
case "$*" in *DPkg::Lock::Timeout=*) ;; *) echo "no lock timeout"; exit 100 ;; esac
if [ "$FAIL" = other ]; then echo "E: Unable to locate package nope"; exit 100; fi
if [ $n -le 2 ]; then echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 42 (unattended-upgr)"; exit 100; fi
echo "$* set on hold."
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/sh", "-c", holdCommand(fake, []string{"linux-aws", "nvidia-open"}, 0)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "set on hold") {
		t.Fatalf("held after the lock was released: %v: %s", err, out)
	}
	if n, _ := os.ReadFile(fake + ".count"); strings.TrimSpace(string(n)) != "3" {
		t.Errorf("apt-mark ran %s times, want 3", n)
	}
	cmd := exec.Command("/bin/sh", "-c", holdCommand(fake, []string{"nope"}, 0))
	cmd.Env = append(os.Environ(), "FAIL=other")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "Unable to locate") {
		t.Errorf("a failure that is not the lock: %v: %s", err, out)
	}
}

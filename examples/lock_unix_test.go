//go:build unix

package examples

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// sharePluginDir takes a shared lock on PLUGIN_DIR/.lock, the lock test/e2e/run-scenario holds
// exclusively while it reinstalls the plugin, so that Packer never runs here while the plugin
// binary is being replaced. It returns the unlock function.
func sharePluginDir(t *testing.T, dir string) func() {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		t.Fatalf("locking %s: %v", f.Name(), err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

package simfleet

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBootRefusesBadHostName: DLAMI_SIM_HOSTNAME must be one DNS label; anything else is the
// caller's mistake, refused with the reason before anything is mounted.
func TestBootRefusesBadHostName(t *testing.T) {
	if os.Getuid() != 0 {
		needRoot(t, "test/simhost/boot (it refuses to run without root before checking its settings)")
	}
	boot, err := filepath.Abs("../../test/simhost/boot")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bad_name", "-leading", "trailing-", "UPPER", "a.b", "x y", strings.Repeat("a", 64), "a;reboot"} {
		st := t.TempDir()
		cmd := exec.Command(boot, st)
		cmd.Env = append(launchEnv(nil), "DLAMI_SIM_HOSTNAME="+name)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "DLAMI_SIM_HOSTNAME="+name+" is not a host name") {
			t.Errorf("DLAMI_SIM_HOSTNAME=%q: %v\n%s", name, err, out)
		}
		if _, err := os.Stat(filepath.Join(st, "merged")); !os.IsNotExist(err) {
			t.Errorf("DLAMI_SIM_HOSTNAME=%q: boot went on to make %s/merged", name, st)
		}
	}
}

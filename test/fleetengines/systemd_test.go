package fleetengines

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
)

const (
	systemdAnalyze = "/usr/bin/systemd-analyze"
	systemctl      = "/usr/bin/systemctl"
)

// TestSystemdUnits: every unit the plugin renders (the node check's, with each action, with
// and without units to run before) is enabled by the real `systemctl --root enable`, as the
// provisioner enables it in the image, and passes `systemd-analyze verify` together with
// Debian's real munge.service, slurmd.service and slurmctld.service: no unknown key, no bad
// value, no missing program, and no ordering cycle among them (verify builds one start
// transaction of all the units it is given, which fails on a cycle). systemd-analyze exits 0
// on warnings, so any output fails the test. --man=no: verify otherwise runs `man` for each
// Documentation= entry, which fails on a machine without the pages installed (munge and slurm's
// own units did, code 16), and the pages are not what this test judges.
func TestSystemdUnits(t *testing.T) {
	needEngines(t, systemdAnalyze, systemctl)
	layer := script(t, 30*time.Minute, "test/fleetengines/build-slurm-layer")
	bin := nodeCheckBinary(t)
	for _, action := range nodeconf.Actions {
		for _, before := range [][]string{nodeconf.DefaultBefore, nil} {
			name := string(action) + "/before=" + strings.Join(before, ",")
			t.Run(name, func(t *testing.T) {
				cfg := nodeconf.Config{Action: action, BOMPath: bom.DefaultPath, OutDir: nodeconf.DefaultOutDir,
					Textfile: nodeconf.DefaultTextfile, Timeout: 5 * time.Minute, CheckTimeout: time.Minute,
					Scontrol: nodeconf.DefaultScontrol, Before: before}
				root := unitRoot(t, layer, bin, nodeconf.Unit(cfg))
				out := runSystemd(t, systemctl, "--root="+root, "enable", "munge.service", "slurmd.service", nodeconf.UnitName)
				if !strings.Contains(out, "multi-user.target.wants/"+nodeconf.UnitName) {
					t.Errorf("systemctl enable did not link the unit into multi-user.target:\n%s", out)
				}
				requires := filepath.Join(root, "etc/systemd/system/slurmd.service.requires", nodeconf.UnitName)
				_, err := os.Lstat(requires)
				if blocks := action == nodeconf.ActionBlock && len(before) > 0; blocks != (err == nil) {
					t.Errorf("action %s: slurmd.service.requires link present %v, want %v", action, err == nil, blocks)
				}
				if out := runSystemd(t, systemdAnalyze, "verify", "--man=no", "--root="+root, nodeconf.UnitPath,
					"/usr/lib/systemd/system/munge.service", "/usr/lib/systemd/system/slurmd.service",
					"/usr/lib/systemd/system/slurmctld.service"); strings.TrimSpace(out) != "" {
					t.Errorf("systemd-analyze verify:\n%s\nunit:\n%s", out, nodeconf.Unit(cfg))
				}
			})
		}
	}

	t.Run("verify judges", func(t *testing.T) {
		// The checks above could fail: verify does report a cycle (the unit ordered before
		// munge, which a drain unit runs after) and an unknown key.
		cfg := nodeconf.Config{Action: nodeconf.ActionDrain, Timeout: 5 * time.Minute, Before: []string{"slurmd.service", "munge.service"}}
		unit := nodeconf.Unit(cfg) + "\n[Unit]\nAftr=x.service\n"
		root := unitRoot(t, layer, bin, unit)
		out := runSystemdStatus(t, systemdAnalyze, "verify", "--man=no", "--root="+root, nodeconf.UnitPath,
			"/usr/lib/systemd/system/munge.service", "/usr/lib/systemd/system/slurmd.service")
		if !strings.Contains(out, "ordering cycle") || !strings.Contains(out, "Unknown key 'Aftr'") {
			t.Errorf("verify did not report the cycle and the unknown key:\n%s", out)
		}
	})
}

// unitRoot is a root file system for systemd's tools: this machine's unit files (the targets),
// Debian's munge, slurmd and slurmctld units from the Slurm layer, the node check's unit and
// binary at their installed paths. The programs of Debian's units are empty scripts there:
// verify only checks that they are executable.
func unitRoot(t *testing.T, layer, bin, unit string) string {
	t.Helper()
	root := t.TempDir()
	units := filepath.Join(root, "usr/lib/systemd/system")
	if err := os.MkdirAll(filepath.Dir(units), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/bin/cp", "-a", "/usr/lib/systemd/system", units).CombinedOutput(); err != nil {
		t.Fatalf("copying this machine's unit files: %v\n%s", err, out)
	}
	for _, u := range []string{"munge.service", "slurmd.service", "slurmctld.service"} {
		data, err := os.ReadFile(filepath.Join(layer, "usr/lib/systemd/system", u))
		if err != nil {
			missing(t, "Debian's %s in the Slurm layer: %v", u, err)
		}
		write(t, filepath.Join(units, u), data, 0o644)
	}
	for _, p := range []string{"usr/sbin/munged", "usr/sbin/slurmd", "usr/sbin/slurmctld", "bin/kill"} {
		write(t, filepath.Join(root, p), []byte("#!/bin/sh\n"), 0o755)
	}
	write(t, filepath.Join(root, "etc/slurm/slurm.conf"), nil, 0o644)
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, nodeconf.BinaryPath), data, 0o755)
	write(t, filepath.Join(root, nodeconf.UnitPath), []byte(unit), 0o644)
	return root
}

func write(t *testing.T, p string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
}

// runSystemd runs one of systemd's tools, fails the test unless it exits 0, and returns its
// output (stdout and stderr).
func runSystemd(t *testing.T, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// runSystemdStatus is runSystemd that accepts any exit status.
func runSystemdStatus(t *testing.T, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, _ := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s: %v", strings.Join(argv, " "), ctx.Err())
	}
	return string(out)
}

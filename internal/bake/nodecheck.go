package bake

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheck"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheckbin"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// nodeCheckEnableTimeout bounds daemon-reload, enable and the installed binary's --version.
const nodeCheckEnableTimeout = 2 * time.Minute

// sectionMachine is the host's `uname -m`.
const sectionMachine = "nodecheck.machine"

// installNodeCheck installs dlami-node-check into the image when node_check is set: the
// binary for the host's architecture (embedded in the plugin: no download), its config, the
// systemd unit (enabled), the Slurm HealthCheckProgram wrapper and the node-problem-detector
// custom plugin config. It runs after the checks passed and before the bill of materials it
// judges against is written. The installed binary answers --version before the bake goes on.
func (b *Bake) installNodeCheck(ctx context.Context) error {
	c := b.opt.NodeCheck
	if c == nil {
		return nil
	}
	b.stage("installing the node check")
	sections, err := b.host.Query(ctx, []bundle.Command{{Name: sectionMachine, Shell: `"$1" -m`, Tool: hosttools.Ptr(hosttools.Uname)}})
	if err != nil {
		return fmt.Errorf("node check: reading the host's architecture: %w", err)
	}
	s := sections[sectionMachine]
	if s.ExitCode != 0 || s.TimedOut {
		return fmt.Errorf("node check: uname -m exited %d: %s", s.ExitCode, textcut.Head(s.Output, 200))
	}
	arch, err := nodecheckbin.Arch(strings.TrimSpace(s.Output))
	if err != nil {
		return fmt.Errorf("node check: %w", err)
	}
	bin, err := nodecheckbin.Binary(arch)
	if err != nil {
		return fmt.Errorf("node check: %w", err)
	}
	files := []struct {
		path string
		data []byte
		mode fs.FileMode
	}{
		{nodecheck.BinaryPath, bin, 0o755},
		{nodecheck.SlurmWrapperPath, []byte(nodecheck.SlurmWrapper()), 0o755},
		{nodecheck.ConfigPath, c.Encode(), 0o644},
		{nodecheck.NPDConfigPath, nodecheck.NPDConfig(*c), 0o644},
		{nodecheck.UnitPath, []byte(nodecheck.Unit(*c)), 0o644},
	}
	for _, f := range files {
		if err := b.host.Install(ctx, f.data, f.path, f.mode); err != nil {
			return fmt.Errorf("node check: installing %s: %w", f.path, err)
		}
	}
	script := path.Join(b.workDir, "node-check-enable.sh")
	if err := b.host.Upload(ctx, script, strings.NewReader(enableScript())); err != nil {
		return fmt.Errorf("node check: uploading the enable script: %w", err)
	}
	out := newTailWriter(4000)
	job := host.Job{Name: "enabling the node check", Script: script, AsRoot: true, PIDFile: path.Join(b.workDir, "node-check.pid"), Output: out}
	ectx, cancel := context.WithTimeout(ctx, nodeCheckEnableTimeout)
	defer cancel()
	code, err := b.host.Run(ectx, job)
	if ctx.Err() != nil {
		b.stopLater = append(b.stopLater, job)
		return ctx.Err()
	}
	if err != nil || code != 0 {
		if ectx.Err() != nil {
			b.kill(ctx, job)
		}
		return fmt.Errorf("node check: enabling %s failed (exit %d, %v): %s", nodecheck.UnitName, code, err, textcut.Tail(out.String(), 1000))
	}
	b.ui.Say(fmt.Sprintf("dlami: installed %s (linux/%s, %s) and enabled %s: action %s before %s; Slurm HealthCheckProgram %s; node-problem-detector %s",
		nodecheck.BinaryPath, arch, lastLine(out.String()), nodecheck.UnitName, c.Action, strings.Join(c.Before, " "), nodecheck.SlurmWrapperPath, nodecheck.NPDConfigPath))
	return nil
}

// enableScript reloads systemd, enables the unit (its [Install] section makes it WantedBy
// multi-user.target and, with action block, RequiredBy the units it runs before) and runs
// the installed binary once, by absolute paths only.
func enableScript() string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\nset -eu\n")
	b.WriteString("systemctl=\nfor p in")
	for _, p := range hosttools.Systemctl.Paths {
		b.WriteString(" " + bundle.Quote(p))
	}
	b.WriteString("; do if [ -x \"$p\" ]; then systemctl=$p; break; fi; done\n")
	b.WriteString("[ -n \"$systemctl\" ] || { echo 'systemctl not found: the node check needs systemd'; exit 1; }\n")
	b.WriteString("\"$systemctl\" daemon-reload\n")
	fmt.Fprintf(&b, "\"$systemctl\" enable %s\n", bundle.Quote(nodecheck.UnitName))
	fmt.Fprintf(&b, "%s --version\n", bundle.Quote(nodecheck.BinaryPath))
	return b.String()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

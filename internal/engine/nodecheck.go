package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheckbin"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
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
		{nodeconf.BinaryPath, bin, 0o755},
		{nodeconf.SlurmWrapperPath, []byte(nodeconf.SlurmWrapper()), 0o755},
		{nodeconf.ConfigPath, c.Encode(), 0o644},
		{nodeconf.NPDConfigPath, nodeconf.NPDConfig(*c), 0o644},
		{nodeconf.UnitPath, []byte(nodeconf.Unit(*c)), 0o644},
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
		return fmt.Errorf("node check: enabling %s failed (exit %d, %v): %s", nodeconf.UnitName, code, err, textcut.Tail(out.String(), 1000))
	}
	b.ui.Say(fmt.Sprintf("dlami: installed %s (linux/%s, %s) and enabled %s: action %s before %s; Slurm HealthCheckProgram %s; node-problem-detector %s",
		nodeconf.BinaryPath, arch, lastLine(out.String()), nodeconf.UnitName, c.Action, strings.Join(c.Before, " "), nodeconf.SlurmWrapperPath, nodeconf.NPDConfigPath))
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
	fmt.Fprintf(&b, "\"$systemctl\" enable %s\n", bundle.Quote(nodeconf.UnitName))
	fmt.Fprintf(&b, "%s --version\n", bundle.Quote(nodeconf.BinaryPath))
	return b.String()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// Sections of the first-boot verification's node check run.
const (
	sectionNodeCheckPresent = "nodecheck.present"
	sectionNodeCheckRun     = "nodecheck.run"
	// nodeCheckRunSlack is how much longer the SSH command may take than the node check's own
	// bound.
	nodeCheckRunSlack = 60 * time.Second
)

// nodeCheckVerify runs the image's own node check on the verification instance, when the
// image has one, so that what was verified is what every node runs at boot: its verdict is
// the node-check entry (its checks as evidence). The NCCL
// test is left to the verification's own setting. A node check that fails fails the
// verification; one that cannot run or answers nothing readable fails too.
func (b *Bake) nodeCheckVerify(ctx context.Context) error {
	b.stage("first boot: the image's node check")
	start := b.now()
	bin := bundle.Quote(nodeconf.BinaryPath)
	sections, err := b.host.Query(ctx, []bundle.Command{{Name: sectionNodeCheckPresent, Shell: "if [ -x " + bin + " ]; then echo present; else echo absent; fi"}})
	if err != nil {
		return err
	}
	if strings.TrimSpace(sections[sectionNodeCheckPresent].Output) != "present" {
		b.record(skipped("the image has no node check ("+nodeconf.BinaryPath+"; the provisioner's node_check block installs it)", result.NodeCheck)...)
		return nil
	}
	timeout := nodeconf.DefaultTimeout
	if data, err := b.host.ReadFile(ctx, nodeconf.ConfigPath); err == nil {
		if c, err := nodeconf.DecodeConfig(data); err == nil && c.TimeoutSeconds > 0 {
			timeout = time.Duration(c.TimeoutSeconds) * time.Second
		}
	}
	// stdout is the JSON report; the one-line verdict and notes go to stderr, dropped here
	// (the report carries them).
	cmd := bundle.Command{Name: sectionNodeCheckRun, TimeoutSeconds: int((timeout + nodeCheckRunSlack) / time.Second),
		Shell: "sudo -n " + bin + " --mode " + nodeconf.ModeReport + " --json --nccl=false 2>/dev/null"}
	sections, err = b.host.Query(ctx, []bundle.Command{cmd})
	if err != nil {
		return err
	}
	c := judgeNodeCheck(sections[sectionNodeCheckRun])
	c.DurationMS = b.now().Sub(start).Milliseconds()
	b.record(c)
	if c.Status.Failing() {
		b.ui.Error("dlami: node-check failed on the verification instance: " + c.Message)
	}
	return nil
}

// judgeNodeCheck turns the node check's JSON report into the node-check entry, its checks as
// evidence.
func judgeNodeCheck(s bundle.Section) result.Check {
	c := result.Check{ID: result.NodeCheck, Basis: "bill of materials", Expected: "the image's node check passes (" + nodeconf.BinaryPath + " --mode report)"}
	var r report.Report
	switch {
	case s.TimedOut:
		c.Status, c.Actual, c.Message = result.Fail, "timed out", "the node check did not answer within its timeout"
		return c
	case s.ExitCode != 0 && s.ExitCode != 1:
		c.Status, c.Actual, c.Message = result.Fail, fmt.Sprintf("exit %d", s.ExitCode), "the node check could not run (sudo -n, a missing file?): "+textcut.Head(s.Output, 500)
		c.Evidence = textcut.Head(s.Output, 2000)
		return c
	}
	if err := json.Unmarshal([]byte(s.Output), &r); err != nil || r.Result == "" {
		c.Status, c.Actual = result.Fail, "unreadable"
		c.Message = fmt.Sprintf("the node check exited %d without a readable JSON report: %v", s.ExitCode, err)
		c.Evidence = textcut.Head(s.Output, 2000)
		return c
	}
	c.Evidence = report.Table(r.Checks)
	if r.Result == report.ResultPass && s.ExitCode == 0 {
		c.Status, c.Actual = result.Pass, fmt.Sprintf("pass (%d checks)", len(r.Checks))
		return c
	}
	c.Status, c.Actual = result.Fail, "fail: "+strings.Join(r.FailedChecks, ", ")
	c.Message = "the node check that every node runs at boot fails on this instance: " + strings.Join(r.FailedChecks, ", ")
	for _, id := range r.FailedChecks {
		if f, ok := result.Find(r.Checks, id); ok && f.Message != "" {
			c.Message += "; " + id + ": " + textcut.Head(f.Message, 300)
			break
		}
	}
	return c
}

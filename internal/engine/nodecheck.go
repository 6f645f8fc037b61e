package engine

import (
	"context"
	"fmt"
	"io/fs"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheckbin"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

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
	machine, err := probe.Machine(ctx, b.host)
	if err != nil {
		return fmt.Errorf("node check: %w", err)
	}
	arch, err := nodecheckbin.Arch(machine)
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
	run, err := b.runJob(ctx, probe.NodeCheckEnableScript(nodeconf.UnitName, nodeconf.BinaryPath), false)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil || run.code != 0 || run.timedOut {
		return fmt.Errorf("node check: enabling %s failed (exit %d, %v): %s", nodeconf.UnitName, run.code, err, textcut.Tail(run.output, 1000))
	}
	out := run.output
	b.ui.Say(fmt.Sprintf("dlami: installed %s (linux/%s, %s) and enabled %s: action %s before %s; Slurm HealthCheckProgram %s; node-problem-detector %s",
		nodeconf.BinaryPath, arch, lastLine(out), nodeconf.UnitName, c.Action, strings.Join(c.Before, " "), nodeconf.SlurmWrapperPath, nodeconf.NPDConfigPath))
	return nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// nodeCheckVerify runs the image's own node check on the verification instance, when the
// image has one, so that what was verified is what every node runs at boot: its verdict is
// the node-check entry (its checks as evidence). The NCCL test is left to the verification's
// own setting.
func (b *Bake) nodeCheckVerify(ctx context.Context) error {
	b.stage("first boot: the image's node check")
	start := b.now()
	// The image's own bound, as its command resolves it.
	c := nodeconf.Config{}
	if data, err := b.host.ReadFile(ctx, nodeconf.ConfigPath); err == nil {
		c, _ = nodeconf.DecodeConfig(data)
	}
	n, err := probe.NodeCheck(ctx, b.host, nodeconf.BinaryPath, string(nodeconf.ModeReport), c.Resolved().Timeout)
	if err != nil {
		return err
	}
	b.run.NodeCheck = readNodeCheckReport(n)
	for _, c := range b.judge(checks.PhaseNode, b.now().Sub(start)) {
		if c.Status.Failing() {
			b.ui.Error("dlami: node-check failed on the verification instance: " + c.Message)
		}
	}
	return nil
}

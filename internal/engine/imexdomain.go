package engine

import (
	"context"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/imexctl"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// imexDomainTest brings up a one-node IMEX domain on a bake's multi-node NVLink host where
// imex resolves to "host" (issue 35; grace-blackwell.md section 1.5: a tray's own address
// alone forms a domain that comes up UP/READY): the tray's private address as the only line
// of nodes_config.cfg, nvidia-imex restarted, the domain read until UP, then the file and the
// service put back. Check imex judges it when the function phase refines it. Only a bake runs
// it: a verification and the node check judge what the image has and change nothing.
func (b *Bake) imexDomainTest(ctx context.Context) error {
	if !b.imexOneNode {
		return nil
	}
	if ok, _ := b.target.OneNodeIMEXDomain(); !ok {
		return nil
	}
	x := &b.run.Host.IMEX
	switch {
	case b.target.Skips(result.IMEX):
		x.OneNode = &facts.IMEXOneNode{NotRun: "skip_checks names imex"}
		return nil
	case !x.Packages.OK() || len(x.Packages.Value) == 0 || !x.Enabled.OK() || x.Enabled.Value == "not-found":
		// Check imex already fails on the package or the unit: there is no service to restart.
		x.OneNode = &facts.IMEXOneNode{NotRun: "no nvidia-imex package or unit"}
		return nil
	}
	script := probe.IMEXDomainScript(0)
	b.stage("IMEX: a one-node domain of the tray's own address")
	run, err := b.runJob(ctx, script, false)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	o := probe.ParseIMEXDomainRun(run.output, run.code, run.timedOut)
	if err != nil && o.RestoreProblem == "" && o.Domain.OK() {
		o.Domain = facts.Unread[imexctl.Domain](err.Error(), run.output)
	}
	x.OneNode = &o
	return nil
}

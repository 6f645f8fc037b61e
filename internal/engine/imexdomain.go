package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/imexctl"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
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
	if ok, _ := b.target.HostIMEXDomain(); !ok {
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

// imexDomainPoll is how often the nodes' views are read while the domain across the trays
// forms; imexDomainBound bounds the wait (ParallelCluster's prolog waits up to 60 s for
// nvidia-imex to start). Variables so that the tests need not wait.
var (
	imexDomainPoll  = 2 * time.Second
	imexDomainBound = probe.DefaultIMEXDomainTimeout
)

// imexDomain forms the IMEX domain across the trays before the all-reduce over multi-node
// NVLink, as a Slurm prolog does on GB200 (grace-blackwell.md section 1.5; check imex-domain):
// every node's private address, in node order, as every node's nodes_config.cfg, nvidia-imex
// restarted on every node, then every node's view read until all are healthy, one cannot come
// up, or the bound. The nodes are the verification's own instances, terminated after it: the
// file is not put back. It returns only ctx's error.
func (m *multiNode) imexDomain(ctx context.Context) error {
	b := m.b
	x := &b.run.MultiNode.IMEXDomain
	if ok, why := b.target.HostIMEXDomain(); !ok {
		x.NotRun = why
		return nil
	}
	if b.target.Skips(result.IMEXDomain) {
		x.NotRun = "skip_checks names " + result.IMEXDomain
		return nil
	}
	x.Ran = true
	for _, n := range m.o.Nodes {
		x.Addresses = append(x.Addresses, n.PrivateIP)
	}
	script, err := probe.IMEXNodesScript(x.Addresses)
	if err != nil {
		x.Problem = err.Error()
		return nil
	}
	b.stage("multi-node test: the IMEX domain across the trays")
	b.ui.Say(fmt.Sprintf("dlami: forming the IMEX domain of %s (nodes_config.cfg, nvidia-imex restarted on every node), at most %s", strings.Join(x.Addresses, ", "), imexDomainBound))
	x.Nodes = make([]facts.IMEXDomainNode, len(m.o.Nodes))
	_ = m.eachNode(ctx, func(ctx context.Context, i int, n Node) error {
		out, err := b.runJobOn(ctx, n.Host, m.dirs[i], script, false)
		node := probe.ParseIMEXNodesRun(out.output, out.code, out.timedOut)
		if err != nil && node.Problem == "" {
			node.Problem = err.Error()
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		x.Nodes[i] = node
		return nil
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	x.Bound = imexDomainBound
	start := time.Now()
	for {
		m.readIMEXViews(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		x.Waited = time.Since(start)
		if x.Healthy() || x.Hopeless() {
			return nil
		}
		if x.Waited >= x.Bound {
			x.TimedOut = true
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(imexDomainPoll):
		}
	}
}

// readIMEXViews reads every configured node's service state and view of the domain.
func (m *multiNode) readIMEXViews(ctx context.Context) {
	x := &m.b.run.MultiNode.IMEXDomain
	_ = m.eachNode(ctx, func(ctx context.Context, i int, n Node) error {
		if x.Nodes[i].Problem != "" {
			return nil
		}
		cctx, cancel := m.bound(ctx)
		defer cancel()
		active, view, err := probe.IMEXView(cctx, n.Host, m.b.probeOptions())
		if err != nil {
			active, view = facts.Unread[string](err.Error(), ""), facts.Unread[imexctl.Domain](err.Error(), "")
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		x.Nodes[i].Active, x.Nodes[i].View = active, view
		return nil
	})
}

// imexBlocksMNNVL says why the all-reduce over multi-node NVLink does not run ("" when it
// does): without an IMEX domain across the trays NCCL cannot share fabric memory between them,
// so the run would only fail again for the same cause.
func (m *multiNode) imexBlocksMNNVL() string {
	x := m.b.run.MultiNode.IMEXDomain
	mode, _ := m.b.target.IMEXMode()
	switch {
	case mode == settings.IMEXOff:
		return `imex = "off": without IMEX no GPU memory is shared across the trays`
	case mode == settings.IMEXDRA:
		return `imex = "dra": the EKS DRA driver forms the IMEX domain across the trays, which a verification outside Kubernetes does not run`
	case !x.Ran:
		return "" // skip_checks names imex-domain: the domain is formed some other way
	case !x.Healthy():
		return "the IMEX domain across the trays did not come up (imex-domain)"
	}
	return ""
}

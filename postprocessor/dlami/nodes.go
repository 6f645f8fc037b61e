package dlami

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// prefixUI names the node on every line one node's verification writes.
type prefixUI struct {
	ui     packersdk.Ui
	prefix string
}

func (u prefixUI) Say(s string)     { u.ui.Say(withPrefix(s, u.prefix)) }
func (u prefixUI) Message(s string) { u.ui.Message(withPrefix(s, u.prefix)) }
func (u prefixUI) Error(s string)   { u.ui.Error(withPrefix(s, u.prefix)) }

// withPrefix puts p after the "dlami: " every line starts with.
func withPrefix(s, p string) string {
	if rest, ok := strings.CutPrefix(s, "dlami: "); ok {
		return "dlami: " + p + rest
	}
	return p + s
}

// checkNodes verifies each node's first boot, all at once, each into its own report folder
// (report_dir/<region>/<instance id>), then runs the test across them (report_dir/<region>/
// multi-node) when every node passed. A node that could not be judged leaves the launch
// unverified; a node judged wrong fails it, and the test across nodes is reported not run.
func (p *PostProcessor) checkNodes(ctx context.Context, ui packersdk.Ui, in *launch.Instance, t target, typ string, say func(string)) error {
	c := &p.config
	nodes := in.Nodes()
	for i, n := range nodes {
		if n.DescribedEFA != in.Layout.EFA {
			ui.Error(fmt.Sprintf("dlami: %s: node %d (%s): EC2 describes %d EFA interfaces, the launch asked for %d: its checks judge what it got", t.region, i+1, n.ID, n.DescribedEFA, in.Layout.EFA))
		}
	}
	hosts := make([]host.Host, len(nodes))
	boms := make([]bom.BOM, len(nodes))
	errs := make([]error, len(nodes))
	ncclOf := make([]*result.NCCLFigures, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := fmt.Sprintf("node %d (%s): ", i+1, n.ID)
			nsay := func(s string) { say(who + s) }
			h, b, err := p.connect(ctx, n, nsay)
			if err != nil {
				errs[i] = err
				return
			}
			hosts[i], boms[i] = h, b
			o := c.verifyOptions(n, t, typ, b)
			o.ReportDir = filepath.Join(c.ReportDir, t.region, n.ID)
			o.ProgressEvery = p.progressEvery
			errs[i] = engine.Verify(ctx, h, prefixUI{ui, who}, o)
			ncclOf[i] = report.NCCLOf(o.ReportDir)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var failed, unjudged []string
	for i, err := range errs {
		if err == nil {
			continue
		}
		line := fmt.Sprintf("node %d (%s): %v", i+1, nodes[i].ID, err)
		if engine.Judged(err) {
			failed = append(failed, line)
		} else {
			unjudged = append(unjudged, line)
		}
	}
	if len(failed) == 0 && len(unjudged) > 0 {
		// Nothing was judged wrong, and not every node could be judged: no verdict.
		return errors.New(strings.Join(unjudged, "; "))
	}
	mo := engine.MultiNodeOptions{Common: c.verifyOptions(in, t, typ, boms[0]).Common, Launch: launchReport(in, c)}
	mo.ReportDir = filepath.Join(c.ReportDir, t.region, "multi-node")
	mo.ProgressEvery = p.progressEvery
	mo.Launch.InstanceID = ""
	mo.Checks.MultiNode = c.multi
	if len(failed) > 0 {
		mo.NotRun = "a node failed its first-boot verification: " + strings.Join(append(failed, unjudged...), "; ")
	}
	watched := make([]*watchedHost, len(nodes))
	for i, n := range nodes {
		watched[i] = &watchedHost{Host: hosts[i]}
		mo.Nodes = append(mo.Nodes, engine.Node{Host: watched[i], InstanceID: n.ID, PrivateIP: n.PrivateIP, InstanceType: n.Placement.InstanceType,
			SubnetID: n.SubnetID, PlacementGroup: n.PlacementGroup(), EFA: n.DescribedEFA, NCCL: ncclOf[i]})
	}
	say(fmt.Sprintf("every node's first boot judged (%d nodes); the NCCL test across them next", len(nodes)))
	var outcome result.Status
	mo.Outcome = &outcome
	err := engine.MultiNode(ctx, ui, mo)
	p.across = &outcome
	if len(failed) > 0 {
		return err // a node judged wrong on its own: that verdict stands
	}
	var dropped []int
	for i, w := range watched {
		if w.dropped.Load() {
			dropped = append(dropped, i)
		}
	}
	return acrossVerdict(ctx, in, err, dropped, say)
}

// acrossVerdict is the verdict of a test across nodes that ended in err, dropped the nodes
// whose SSH connection dropped during it. A node lost during the test (EC2 no longer describes
// it running, or its connection dropped) is no verdict on the image: a host EC2 retired, a
// Capacity Block that ended or a network blip fails the test without saying anything about the
// AMI, so the failure is "could not be verified" (on_failure is not applied), as the same loss
// during the first-boot checks already is. The run still fails: what the nodes printed is
// never taken for a pass.
func acrossVerdict(ctx context.Context, in *launch.Instance, err error, dropped []int, say func(string)) error {
	if err == nil || !engine.Judged(err) {
		return err
	}
	nodes := in.Nodes()
	var lost []string
	for _, i := range dropped {
		lost = append(lost, fmt.Sprintf("node %d (%s): the SSH connection dropped during the test", i+1, nodes[i].ID))
	}
	gone, lerr := in.Lost(context.WithoutCancel(ctx))
	lost = append(lost, gone...)
	if len(lost) == 0 {
		if lerr != nil {
			// Nothing says a node was lost: the verdict stands.
			say(fmt.Sprintf("could not read whether every node still runs (%v): the verdict of the test across nodes stands", lerr))
		}
		return err
	}
	return fmt.Errorf("a node was lost during the test across nodes (%s): no verdict on the AMI; the test said: %v", strings.Join(lost, "; "), err)
}

// watchedHost is a node's host that remembers whether its connection dropped (a command whose
// exit status never came back) during the test across nodes.
type watchedHost struct {
	host.Host
	dropped atomic.Bool
}

func (w *watchedHost) note(err error) {
	if errors.Is(err, host.ErrDisconnected) {
		w.dropped.Store(true)
	}
}

func (w *watchedHost) Run(ctx context.Context, j host.Job) (int, error) {
	code, err := w.Host.Run(ctx, j)
	w.note(err)
	return code, err
}

func (w *watchedHost) Query(ctx context.Context, cmds []bundle.Command) (map[string]bundle.Section, error) {
	out, err := w.Host.Query(ctx, cmds)
	w.note(err)
	return out, err
}

package dlami

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
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
	ncclOf := make([]*report.NCCLFigures, len(nodes))
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
	mo.Checks.MultiNode, _ = c.multiNode().Resolved()
	if len(failed) > 0 {
		mo.NotRun = "a node failed its first-boot verification: " + strings.Join(append(failed, unjudged...), "; ")
	}
	for i, n := range nodes {
		mo.Nodes = append(mo.Nodes, engine.Node{Host: hosts[i], InstanceID: n.ID, PrivateIP: n.PrivateIP, InstanceType: n.Placement.InstanceType,
			SubnetID: n.SubnetID, PlacementGroup: n.PlacementGroup(), EFA: n.DescribedEFA, NCCL: ncclOf[i]})
	}
	say(fmt.Sprintf("every node's first boot judged (%d nodes); the NCCL test across them next", len(nodes)))
	return engine.MultiNode(ctx, ui, mo)
}

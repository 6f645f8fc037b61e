package dlami

import (
	"context"
	"path/filepath"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/version"
)

// check connects to the launched instance and judges its first boot.
func (p *PostProcessor) check(ctx context.Context, ui packersdk.Ui, in *launch.Instance, t target, typ string, say func(string)) error {
	h, b, err := p.connect(ctx, in, say)
	if err != nil {
		return err
	}
	o := p.config.singleNodeOptions(in, t, typ, b)
	o.ProgressEvery = p.progressEvery
	return engine.Verify(ctx, h, ui, o)
}

// singleNodeOptions is what a single-node verification is judged with: its launch's request,
// not EC2's description. The verification exists to prove the EFA devices the bake could not
// have; judged by what EC2 describes, an instance EC2 gave fewer EFA interfaces than asked
// would only warn, skip the EFA traffic and GPUDirect RDMA tests, and leave the AMI tagged
// verified with EFA never proven. So efa-devices demands what was asked for (naming what EC2
// describes and what the host shows) and the EFA tests run. (A launch of several nodes keeps
// verifyOptions: there each node is judged by what it got, and the test across nodes names
// the node without EFA.)
func (c *Config) singleNodeOptions(in *launch.Instance, t target, typ string, b bom.BOM) engine.VerifyOptions {
	o := c.verifyOptions(in, t, typ, b)
	o.Checks = verifySettings(c, b, in.Layout.EFA)
	o.Common.Launch.EFA = in.Layout.EFA
	return o
}

// verifyOptions is what the engine judges the first boot of in with.
func (c *Config) verifyOptions(in *launch.Instance, t target, typ string, b bom.BOM) engine.VerifyOptions {
	return engine.VerifyOptions{
		Common: engine.Common{
			BuildName: c.PackerBuildName, PluginVersion: version.PluginVersion.FormattedVersion(),
			ReportDir: filepath.Join(c.ReportDir, t.region), InstanceType: typ,
			Policy: c.policy(), CheckTimeout: c.CheckTimeout, RemoteFolder: settings.DefaultRemoteFolder,
			Checks: verifySettings(c, b, in.DescribedEFA), Secrets: c.Secrets(),
			// What this launch attached: the judges demand exactly that many EFA devices, and
			// name the groups EFA traffic depends on.
			// EC2's description of the instance, not the request: a node of a launch of several
			// is judged by what it got (singleNodeOptions judges a single node by the request).
			Launch: checks.Launch{Known: true, EFA: in.DescribedEFA, Setting: c.efaSetting(), SecurityGroups: in.SecurityGroups,
				Described: true, DescribedEFA: in.DescribedEFA},
		},
		BOM: b, SettleTimeout: c.SettleTimeout, CompleteValidation: c.CompleteValidation, Launch: launchReport(in, c),
	}
}

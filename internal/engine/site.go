package engine

import (
	"context"
	"fmt"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
)

// siteChecks runs the image's site checks (probe.SiteChecksDir), each bounded by
// check_timeout; an image without them has none.
func (b *Bake) siteChecks(ctx context.Context) ([]facts.SiteRun, error) {
	return probe.SiteChecks(ctx, b.host, probe.SiteChecksDir, b.opt.CheckTimeout)
}

// SiteCheck is one site check the bake installs into the image (site_checks_dir).
type SiteCheck struct {
	Name string
	Data []byte
}

// installSiteChecks puts the bake's site checks into the image, where the host phase of this
// bake, the first-boot verification and every node check run them.
func (b *Bake) installSiteChecks(ctx context.Context) error {
	if len(b.opt.SiteChecks) == 0 {
		return nil
	}
	b.stage("installing the site checks")
	for _, s := range b.opt.SiteChecks {
		dst := probe.SiteChecksDir + "/" + s.Name
		if err := b.host.Install(ctx, s.Data, dst, 0o755); err != nil {
			return fmt.Errorf("installing site check %s: %w", dst, err)
		}
	}
	b.ui.Say(fmt.Sprintf("dlami: installed %d site checks into %s", len(b.opt.SiteChecks), probe.SiteChecksDir))
	return nil
}

package engine

import (
	"context"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
)

// buildInstanceReadTimeout bounds the read of the build instance's id and uptime.
const buildInstanceReadTimeout = 30 * time.Second

// buildInstance is the bake's record of the instance it runs on: what the host said at the
// start, and the bake's clock then.
type buildInstance struct {
	id, idSource, typ string
	bootedAt          time.Time // zero when the uptime could not be read
	unknown           string
}

// readBuildInstance reads the build instance's type and uptime (and its id, when the builder
// gave none) at the start of a bake, so
// the reports can say how long the instance had run when provisioning ended (a layer's reboot
// later does not reset it). It never fails the bake: what it cannot read, the report says.
func (b *Bake) readBuildInstance(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, buildInstanceReadTimeout)
	self, err := probe.Self(rctx, b.host)
	cancel()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	bi := &buildInstance{typ: b.opt.InstanceType}
	if b.opt.BuildInstanceID != "" {
		bi.id, bi.idSource = b.opt.BuildInstanceID, report.IDFromBuilder
	}
	switch {
	case err != nil:
		bi.unknown = "the host's uptime could not be read: " + err.Error()
	case !self.Uptime.OK():
		bi.unknown = "/proc/uptime: " + self.Uptime.Problem
	default:
		bi.bootedAt = b.now().Add(-self.Uptime.Value).UTC()
	}
	if err == nil {
		if self.Instance.Type != "" {
			bi.typ = self.Instance.Type
		}
		if self.ID.OK() && bi.id == "" {
			bi.id, bi.idSource = self.ID.Value, report.IDFromHost
		}
	}
	b.mu.Lock()
	b.build = bi
	b.mu.Unlock()
	return nil
}

// at is the report's build instance as of finished (the end of provisioning); nil when the
// bake never read it (a run that is not a bake, or one that ended before).
func (bi *buildInstance) at(finished time.Time) *report.BuildInstance {
	if bi == nil {
		return nil
	}
	r := &report.BuildInstance{InstanceID: bi.id, InstanceIDSource: bi.idSource, InstanceType: bi.typ, Basis: report.BuildInstanceBasis}
	if bi.bootedAt.IsZero() {
		r.Unknown = bi.unknown
		return r
	}
	booted := bi.bootedAt
	r.BootedAt, r.Known = &booted, true
	r.Seconds = max(0, finished.Sub(booted).Round(time.Millisecond).Seconds())
	return r
}

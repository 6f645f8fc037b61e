package dlami

import (
	"reflect"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// verifySettings is what the first boot is judged with, efa the EFA interfaces the launch
// attached. With nccl = true or complete_validation = true it runs the NCCL test and the tests
// that prove the hardware works, with the bake's settings from the bill of materials (DCGM's
// level, the EFA traffic and GPUDirect RDMA floors: a bake that turned DCGM off is not judged
// with it here). With EFA attached and nccl unset, the tests that prove the EFA devices the
// bake could not have: the EFA traffic test, and the NCCL test with the all-reduce forced over
// EFA (gpudirect-rdma), which runs only with it; not DCGM. nccl = false keeps the EFA traffic
// test only. Otherwise none of them, so a verification stays a first-boot check that costs no
// GPU minutes. The post-processor's expect block and check selection are its own on top of the
// bake's (settings.Checks.Overlay); complete_validation without an expect block takes the
// bake's.
func verifySettings(c *Config, doc bom.BOM, efa int) settings.Checks {
	o := settings.Overlay{
		Expect: &c.Expect, Skip: c.SkipChecks, Warn: c.WarnChecks,
		SkipSetting: "skip_checks (here or in the bake)", WarnSetting: "warn_checks (here or in the bake)",
	}
	// The container-gpu check is cheap (seconds, no load): every verification runs it as the
	// bake did, with the bake's container_check.
	o.Container = settings.RunAsBaked
	nccl := c.NCCL != nil && *c.NCCL
	switch {
	case nccl || c.CompleteValidation:
		o.NCCL, o.DCGM, o.EFATraffic, o.GDR = settings.RunOn, settings.RunAsBaked, settings.RunAsBaked, settings.RunAsBaked
		if c.CompleteValidation && reflect.ValueOf(c.Expect).IsZero() {
			// Completing the bake's validation: its own expect block where this one sets none.
			o.Expect = nil
		}
	case efa > 0:
		o.EFATraffic = settings.RunAsBaked
		if c.NCCL == nil {
			o.NCCL, o.GDR = settings.RunOn, settings.RunAsBaked
		}
	}
	return doc.Checks.Overlay(o)
}

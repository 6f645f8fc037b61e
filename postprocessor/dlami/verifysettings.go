package dlami

import (
	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
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
// GPU minutes.
func verifySettings(c *Config, doc bom.BOM, efa int) checks.Settings {
	s := checks.Settings{
		Expect: c.Expect, NCCL: settings.NCCL{Skip: true},
		Function: settings.Function{EFATraffic: settings.EFATraffic{Skip: true}, GDR: settings.GDR{Skip: true}},
		Skip:     c.SkipChecks, Warn: c.WarnChecks, SkipSetting: "skip_checks (here or in the bake)", WarnSetting: "warn_checks (here or in the bake)",
	}
	nccl := c.NCCL != nil && *c.NCCL
	switch {
	case nccl || c.CompleteValidation:
		s = engine.BakeTests(s, doc)
		s.NCCL.Skip = false
	case efa > 0:
		bake := engine.BakeTests(s, doc)
		s.Skip, s.Warn = bake.Skip, bake.Warn
		s.Function.EFATraffic = bake.Function.EFATraffic
		if c.NCCL == nil {
			s.NCCL, s.Function.GDR = bake.NCCL, bake.Function.GDR
			s.NCCL.Skip = false
		}
	}
	return s
}

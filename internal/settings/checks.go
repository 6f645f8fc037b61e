package settings

import "slices"

// Checks are the settings the judges compare against, resolved once and carried whole: the
// expect block, the NCCL test's and the function tests' settings, and which checks are
// skipped or only warn. The bill of materials carries the bake's; a verification and every
// node judge with the bake's under their own (Overlay).
type Checks struct {
	Expect   Expectations `json:"expect"`
	NCCL     NCCL         `json:"nccl"`
	Function Function     `json:"function"`
	// MultiNode is the NCCL test across a verification's nodes (never a bake's).
	MultiNode MultiNode `json:"multi_node,omitzero"`
	// IMEX is who owns IMEX (the imex setting), unresolved: IMEXUnset until a judge knows
	// the instance type (IMEX.Resolved).
	IMEX IMEX `json:"imex,omitempty"`
	// Skip are the checks skip_checks names (reported skipped, never judged); Warn those
	// warn_checks names (a failure is reported as a warning). SkipSetting and WarnSetting name
	// the settings in messages.
	Skip        []string `json:"skip_checks,omitempty"`
	Warn        []string `json:"warn_checks,omitempty"`
	SkipSetting string   `json:"-"`
	WarnSetting string   `json:"-"`
}

// BakeDefaults are the settings of a bake that recorded none (a bill of materials older than
// the record, or a test's): no expectations, the NCCL test and the function tests with their
// defaults, DCGM at its default level.
func BakeDefaults() Checks {
	return Checks{Function: Function{DCGMLevel: DefaultDCGMLevel}.Resolved()}
}

// Run says whether a phase runs one of the bake's tests.
type Run int

const (
	// RunOff: the phase does not run the test (its checks are reported skipped, with why).
	RunOff Run = iota
	// RunAsBaked: the phase runs the test when the bake did, with the bake's settings.
	RunAsBaked
	// RunOn: the phase runs the test with the bake's floors and bounds, whatever the bake did.
	RunOn
)

// skip is whether a test the bake skipped (or not) is skipped under r.
func (r Run) skip(baked bool) bool {
	switch r {
	case RunOn:
		return false
	case RunAsBaked:
		return baked
	}
	return true
}

// Overlay is what one phase (a verification of the image, a node's check of itself) sets of
// its own on top of the bake's settings. Its zero value runs none of the load and function
// tests and keeps the rest of the bake's.
type Overlay struct {
	// Expect replaces the bake's expect block; nil keeps the bake's.
	Expect *Expectations
	// Skip and Warn are added to the bake's selection (the bake's first); SkipSetting and
	// WarnSetting name the settings of both in messages.
	Skip, Warn               []string
	SkipSetting, WarnSetting string
	// NCCL, EFATraffic, GDR, Container and DCGM say which of the bake's tests the phase runs;
	// DCGMLevel is the level DCGM's diagnostics run at under RunOn (DCGMOff: none).
	NCCL, EFATraffic, GDR, Container, DCGM Run
	DCGMLevel                              DCGMLevel
	// NCCLEnv is the phase's own NCCL environment: the bill of materials never carries one.
	NCCLEnv map[string]string
}

// Overlay returns what a phase judges with: the bake's settings (a bill of materials that
// recorded none: BakeDefaults) under the phase's own o, by one rule: what o sets replaces the
// bake's, its check selection is added to the bake's, and only the tests o runs run.
func (bake *Checks) Overlay(o Overlay) Checks {
	s := BakeDefaults()
	if bake != nil {
		s = *bake
	}
	s.Skip, s.Warn = union(s.Skip, o.Skip), union(s.Warn, o.Warn)
	s.SkipSetting, s.WarnSetting = o.SkipSetting, o.WarnSetting
	if o.Expect != nil {
		s.Expect = *o.Expect
	}
	s.NCCL.Env = o.NCCLEnv
	s.NCCL.Skip = o.NCCL.skip(s.NCCL.Skip)
	s.Function.EFATraffic.Skip = o.EFATraffic.skip(s.Function.EFATraffic.Skip)
	s.Function.GDR.Skip = o.GDR.skip(s.Function.GDR.Skip)
	s.Function.Container.Skip = o.Container.skip(s.Function.Container.Skip)
	switch o.DCGM {
	case RunOff:
		s.Function.DCGMLevel = DCGMOff
	case RunOn:
		s.Function.DCGMLevel = o.DCGMLevel
	}
	return s
}

// union is a followed by the ids of b it lacks.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, id := range b {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

package settings

// Checks are the settings the judges compare against, resolved once and carried whole: the
// expect block, the NCCL test's and the function tests' settings, and which checks are
// skipped or only warn.
type Checks struct {
	Expect   Expectations
	NCCL     NCCL
	Function Function
	// MultiNode is the NCCL test across a verification's nodes.
	MultiNode MultiNode
	// Skip are the checks skip_checks names (reported skipped, never judged); Warn those
	// warn_checks names (a failure is reported as a warning). SkipSetting and WarnSetting name
	// the settings in messages.
	Skip, Warn               []string
	SkipSetting, WarnSetting string
}

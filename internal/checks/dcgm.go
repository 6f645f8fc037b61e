package checks

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

func init() {
	register(Entry{
		ID: result.DCGM, Phase: PhaseFunction, Family: "gpu", Order: 500, Judge: judgeDCGM,
		Doc:   "`dcgmi diag -r <dcgm_level> -j` (default level 2): every test passes; a failed test fails naming the test, the GPU and DCGM's message; DCGM's own execution errors and skipped tests are \"could not run\" (`error`), never a pass; DCGM missing with a level above 0 fails, naming `dcgm_level`. When no host engine answers, `nv-hostengine` is started for the test and stopped afterwards",
		Reads: "`dcgmi diag -j`",
	})
}

// judgeDCGM judges a dcgmi diag run: a failed test fails, naming the test, the GPU and DCGM's
// message; a test DCGM skipped or did not run, and a run that could not happen at all
// (DCGM_ST_* errors, no host engine), are "could not run": an error, never a pass. DCGM
// missing with a level above 0 fails, naming dcgm_level.
func judgeDCGM(run facts.Run, t Target) result.Check {
	id := result.DCGM
	level := t.Function.DCGMLevel
	d := run.DCGM
	f := d.Result
	expected := fmt.Sprintf("dcgmi diag -r %d: every test passes", level)
	basis := "setting dcgm_level"
	if level.Off() {
		return check(id, result.Skip, basis, "not run", "dcgm_level = 0", "DCGM diagnostics are off (dcgm_level = 0)", "")
	}
	switch {
	case d.NotRun != "":
		return check(id, result.Skip, "", "", "", "not run: "+d.NotRun, "")
	case d.TimedOut:
		return check(id, result.Error, basis, expected, "timed out", fmt.Sprintf("dcgmi diag -r %d did not finish within %ds: could not run", level, int(level.Timeout().Seconds())), f.Evidence)
	case !f.OK() && d.Missing:
		return check(id, result.Fail, basis, expected, "DCGM missing",
			f.Problem+": install DCGM (datacenter-gpu-manager-4, as the DLAMI ships it) or set dcgm_level = 0 to turn the diagnostics off", f.Evidence)
	case !f.OK():
		return check(id, result.Error, basis, expected, "could not run", "DCGM could not run the diagnostics: "+f.Problem, f.Evidence)
	}
	var fails, notRun, warns []string
	passed := 0
	for _, t := range f.Value.Report.Tests {
		for _, r := range t.Results {
			what := fmt.Sprintf("%s on %s %d", t.Name, r.Entity, r.EntityID)
			msg := ""
			if len(r.Warnings) > 0 {
				msg = ": " + textcut.Head(r.Warnings[0].Text, 200)
			}
			switch r.Outcome {
			case facts.DCGMPass:
				passed++
			case facts.DCGMFail, facts.DCGMUnknown:
				fails = append(fails, what+" "+r.Outcome.String()+msg)
			case facts.DCGMSkip, facts.DCGMNotRun:
				notRun = append(notRun, what+" "+r.Outcome.String()+msg)
			case facts.DCGMWarn:
				warns = append(warns, what+msg)
			}
		}
		if len(t.Results) == 0 && t.Summary != facts.DCGMPass {
			notRun = append(notRun, t.Name+" "+t.Summary.String())
		}
	}
	actual := fmt.Sprintf("%d tests, %d results passed (DCGM %s)", len(f.Value.Report.Tests), passed, f.Value.Report.Version)
	switch {
	case len(fails) > 0:
		return check(id, result.Fail, basis, expected, actual, "DCGM diagnostics failed: "+strings.Join(fails, "; "), f.Evidence)
	case len(notRun) > 0:
		return check(id, result.Error, basis, expected, actual, "could not run: DCGM skipped or did not run "+strings.Join(notRun, "; "), f.Evidence)
	case passed == 0:
		return check(id, result.Error, basis, expected, actual, "could not run: DCGM reported no result", f.Evidence)
	case len(warns) > 0:
		return check(id, result.Warn, basis, expected, actual, "DCGM warned: "+strings.Join(warns, "; "), f.Evidence)
	}
	return check(id, result.Pass, basis, expected, actual, "", "")
}

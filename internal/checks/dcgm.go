package checks

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/migmode"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

func init() {
	register(Entry{
		ID: result.DCGM, Phase: PhaseFunction, Family: "gpu", Order: 500, Judge: judgeDCGM,
		Doc:   "`dcgmi diag -r <dcgm_level> -j` (default level 2): every test passes by its own verdict (DCGM 4.x's `test_summary`, which can fail while every GPU's result passes) on every GPU the host has (`expect.gpu_count`, the profile, else the PCI bus; without a count the check warns), and dcgmi exits 0; a failed test, or exit 226/205 (`DCGM_ST_NVVS_ERROR`, isolate: \"retire\") even with no test marked failed, fails naming the test, the GPU and DCGM's message; DCGM's own execution errors, skipped tests, any other exit status and a run that reported none are \"could not run\" (`error`), never a pass; DCGM missing with a level above 0 fails, naming `dcgm_level`. Where the slot is narrower than the GPU (`expect.pcie_width` or the profile: the single-GPU G6 sizes), DCGM's pcie test is given it as `min_pci_width`. When no host engine answers, `nv-hostengine` is started for the test and stopped afterwards",
		Reads: "`dcgmi diag -r <level> [-p pcie.*.min_pci_width=<w>] -j` and its exit status",
	})
}

// DCGMRunTime is how long NVIDIA's DCGM documentation says a dcgmi diag level runs: level 1
// seconds, level 2 about two minutes, level 3 ("long") about 15 minutes, level 4 extended
// (docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-diag.html
// and .../user-guide/dcgm-diagnostics.html, quoted in shared/docs/fleet-replacement.md).
func DCGMRunTime(level int) string {
	switch level {
	case 1:
		return "seconds"
	case 2:
		return "about two minutes"
	case 3:
		return "about 15 minutes"
	case 4:
		return "extended: longer than level 3, for an administrator's post-mortem"
	}
	return "not documented"
}

// judgeDCGM judges a dcgmi diag run: a failed test fails, naming the test, the GPU and DCGM's
// message; a test DCGM skipped or did not run, and a run that could not happen at all
// (DCGM_ST_* errors, no host engine), are "could not run": an error, never a pass. Each test's
// verdict is DCGM 4.x's test_summary (3.x: its worst result), which may fail on an error of no
// GPU while every result passes. dcgmi's exit status (the script's EXIT line) must be 0 for a
// pass: 226 (DCGM_ST_NVVS_ERROR) or 205 (an isolate error) fail even when the document marks no
// test failed, any other status is "could not run", and so is a run that printed none. The run
// must cover every GPU the host has (expect.gpu_count, the profile, else the PCI bus), and
// each test every GPU the run covered. DCGM missing with a level above 0 fails, naming
// dcgm_level.
func judgeDCGM(run facts.Run, t Target) result.Check {
	id := result.DCGM
	level := t.Function.DCGMLevel
	d := run.DCGM
	f := d.Result
	expected := fmt.Sprintf("dcgmi diag -r %d: every test passes on every GPU, dcgmi exits 0 (expected run time: %s)", level, DCGMRunTime(int(level)))
	basis := "setting dcgm_level"
	if level.Off() {
		return check(id, result.Skip, basis, "not run", "dcgm_level = 0", "DCGM diagnostics are off (dcgm_level = 0)", "")
	}
	// dcgmi diag does not run under MIG (aws-parallelcluster-cookbook PR 3183 skips DCGM when
	// MIG is on): proven MIG mode skips, naming why; an unread MIG mode proves nothing and the
	// run is judged as usual.
	if h := run.Host; h.MIG.OK() {
		if on := migmode.Enabled(h.MIG.Value); len(on) > 0 {
			return check(id, result.Skip, "MIG mode", expected, fmt.Sprintf("MIG enabled on GPU %v", on),
				fmt.Sprintf("skipped: MIG is enabled on GPU %v and dcgmi diag does not run under MIG; disable MIG (nvidia-smi -mig 0) to run the diagnostics, or set dcgm_level = 0 to say they are not wanted", on), h.MIG.Evidence)
		}
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
	rep := f.Value.Report
	fnd := dcgmTestFindings(rep)
	fails, notRun, warns := fnd.fails, fnd.notRun, fnd.warns
	covered := rep.GPUs()
	coverFails, coverWarns := dcgmCoverage(rep, covered, t)
	fails, warns = append(fails, coverFails...), append(warns, coverWarns...)
	exit := f.Value.Exit
	switch code := f.Value.ExitCode; {
	case code < 0:
		notRun = append(notRun, "the DCGM script printed no exit status for dcgmi: the run is not proven to have finished")
	case exit.TestFailed:
		msg := fmt.Sprintf("dcgmi exited %s: a test failed", exit)
		if fnd.failedTests == 0 {
			msg += ", though the document marks none failed (never a pass)"
		}
		if exit.Isolate {
			msg += "; DCGM says isolate the GPU: retire the instance"
		}
		fails = append(fails, msg)
	case code != 0:
		name := exit.Name
		if name == "" {
			name = "a status DCGM does not name"
		}
		notRun = append(notRun, fmt.Sprintf("dcgmi exited %d (%s)", code, name))
	}
	passed := fnd.passed
	actual := fmt.Sprintf("%d tests, %d results passed on %d GPUs (DCGM %s), exit %d", len(rep.Tests), passed, len(covered), rep.Version, f.Value.ExitCode)
	switch {
	case len(fails) > 0:
		return check(id, result.Fail, basis, expected, actual, "DCGM diagnostics failed: "+strings.Join(fails, "; "), f.Evidence)
	case len(notRun) > 0:
		return check(id, result.Error, basis, expected, actual, "could not run: "+strings.Join(notRun, "; "), f.Evidence)
	case passed == 0:
		return check(id, result.Error, basis, expected, actual, "could not run: DCGM reported no result", f.Evidence)
	case len(warns) > 0:
		return check(id, result.Warn, basis, expected, actual, "DCGM warned: "+strings.Join(warns, "; "), f.Evidence)
	}
	return check(id, result.Pass, basis, expected, actual, "", "")
}

// dcgmFindings is what a run's tests say, each test's results first and its test_summary where
// no result carries the verdict.
type dcgmFindings struct {
	fails, notRun, warns []string
	passed, failedTests  int
}

// dcgmTestFindings sorts every result of every test of rep into failed, not run and warned,
// counting the results that passed and the tests that failed.
func dcgmTestFindings(rep facts.DCGMReport) dcgmFindings {
	var d dcgmFindings
	for _, tst := range rep.Tests {
		var tf, tn, tw []string
		for _, r := range tst.Results {
			what := fmt.Sprintf("%s on %s %d", tst.Name, r.Entity, r.EntityID)
			if r.EntityID < 0 {
				what = tst.Name
			}
			msg := ""
			if len(r.Warnings) > 0 {
				msg = ": " + textcut.Head(r.Warnings[0].Text, 200)
			}
			switch r.Outcome {
			case facts.DCGMPass:
				d.passed++
			case facts.DCGMFail, facts.DCGMUnknown:
				tf = append(tf, what+" "+r.Outcome.String()+msg)
			case facts.DCGMSkip, facts.DCGMNotRun:
				tn = append(tn, what+" "+r.Outcome.String()+msg)
			case facts.DCGMWarn:
				tw = append(tw, what+msg)
			}
		}
		// The test's own verdict, where no result carries it.
		summary := tst.Name + " test_summary " + tst.Summary.String()
		if tst.SummaryWorse() {
			summary += " while its results are " + tst.WorstResult().String()
		}
		if len(tst.SummaryWarnings) > 0 {
			summary += ": " + textcut.Head(tst.SummaryWarnings[0].Text, 200)
		}
		switch tst.Summary {
		case facts.DCGMFail, facts.DCGMUnknown:
			if len(tf) == 0 {
				tf = append(tf, summary)
			}
		case facts.DCGMSkip, facts.DCGMNotRun:
			if len(tn) == 0 {
				tn = append(tn, summary)
			}
		case facts.DCGMWarn:
			if len(tw) == 0 {
				tw = append(tw, summary)
			}
		}
		if len(tf) > 0 {
			d.failedTests++
		}
		d.fails, d.notRun, d.warns = append(d.fails, tf...), append(d.notRun, tn...), append(d.warns, tw...)
	}
	return d
}

// dcgmCoverage judges that the run covered every GPU the host must have, and each test every
// GPU the run covered.
func dcgmCoverage(rep facts.DCGMReport, covered []int, t Target) (fails, warns []string) {
	if want, b, ok := t.gpusExpected(); ok {
		if len(covered) < want {
			fails = append(fails, fmt.Sprintf("the run covered %d of %d GPUs (%s): the others were not diagnosed", len(covered), want, b))
		}
	} else {
		warns = append(warns, "how many GPUs the host has is not known, so the run's coverage is not judged (set expect.gpu_count)")
	}
	for _, tst := range rep.Tests {
		on := tst.GPUs()
		if len(on) == 0 {
			continue
		}
		var absent []int
		for _, g := range covered {
			if !slices.Contains(on, g) {
				absent = append(absent, g)
			}
		}
		if len(absent) > 0 {
			fails = append(fails, fmt.Sprintf("%s has no result for %s of the %d GPUs the run covered", tst.Name, gpuList(absent), len(covered)))
		}
	}
	return fails, warns
}

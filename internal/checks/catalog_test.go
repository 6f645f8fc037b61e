package checks

import (
	"slices"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// The catalog holds every check once, in report order, each with its docs; the guard's own
// order (package guard returns its five checks in it) is the catalog's.
func TestCatalog(t *testing.T) {
	want := []string{
		result.Kernel, result.Holds, result.Packages, result.NextBootKernel, result.DKMS,
		result.FirstBootKernel, result.FirstBootPackages,
		result.InstanceType, result.GPU, result.NvidiaDriver, result.Persistence, result.GPUMemory, result.NVLink, result.FabricManager, result.NVLinkFabric, result.IMEX,
		result.EFADriver, result.EFAInstaller, result.EFADevices, result.GDRCopy, result.Memlock, result.NVMe, result.Lustre,
		result.Xid, result.JobMemlock,
		result.NCCLCorrectness, result.NCCLBusBW, result.NCCLTransport, result.PCIeLink, result.GPUClocks,
		result.ContainerGPU, result.DCGM, result.EFATraffic, result.GPUDirectRDMA,
		result.NodeCheck, result.NCCLMultiNode, result.IMEXDomain, result.NCCLMNNVL, result.ImageHygiene,
	}
	var ids []string
	for _, e := range Catalog() {
		ids = append(ids, e.ID)
		if e.Doc == "" || e.Reads == "" || e.Family == "" {
			t.Errorf("%s: no doc, evidence or family", e.ID)
		}
		required := e.Phase == PhaseGuard || e.Phase == PhaseFirstBoot
		if e.Required != required {
			t.Errorf("%s (%s): required = %v", e.ID, e.Phase, e.Required)
		}
		if (e.Judge == nil) != required {
			t.Errorf("%s (%s): judge set = %v; only the guard's and the first boot's are judged elsewhere", e.ID, e.Phase, e.Judge != nil)
		}
	}
	if !slices.Equal(ids, want) {
		t.Errorf("catalog order\n%q\nwant\n%q", ids, want)
	}
	if g := IDs(PhaseGuard); !slices.Equal(g, guard.CheckIDs) {
		t.Errorf("guard phase %q, package guard returns %q", g, guard.CheckIDs)
	}
}

// JudgePhase judges a phase's checks and, after the load, the host checks its facts refine.
func TestJudgePhase(t *testing.T) {
	var ids []string
	for _, c := range JudgePhase(PhaseLoad, facts.Run{Load: facts.Load{NotRun: "nccl.skip = true", NCCL: facts.NCCLRun{NotRun: "nccl.skip = true"}}}, Target{}) {
		ids = append(ids, c.ID)
	}
	want := []string{result.NVLink, result.Xid, result.NCCLCorrectness, result.NCCLBusBW, result.NCCLTransport, result.PCIeLink, result.GPUClocks}
	if !slices.Equal(ids, want) {
		t.Errorf("after the load: %q, want %q", ids, want)
	}
	if cs := JudgePhase(PhaseGuard, facts.Run{}, Target{}); len(cs) != 0 {
		t.Errorf("the guard's checks are judged by package guard, got %d", len(cs))
	}
}

// skip_checks reports a check skipped, naming the setting, and never runs its judge;
// warn_checks turns a failure into a warning that says what would have failed, and leaves a
// pass alone.
func TestSkipAndWarnChecks(t *testing.T) {
	tg := Target{Checks: settings.Checks{Skip: []string{result.GPU}, SkipSetting: "skip_checks", Warn: []string{result.NvidiaDriver, result.GDRCopy}, WarnSetting: "warn_checks"}}
	cs := JudgePhase(PhaseHost, facts.Run{}, tg)
	gpu, _ := result.Find(cs, result.GPU)
	if gpu.Status != result.Skip || !strings.Contains(gpu.Message, "skip_checks") {
		t.Errorf("skipped gpu: %s %q", gpu.Status, gpu.Message)
	}
	drv, _ := result.Find(cs, result.NvidiaDriver)
	if drv.Status != result.Warn || !strings.Contains(drv.Message, "would fail, but warn_checks names nvidia-driver") {
		t.Errorf("demoted nvidia-driver: %s %q", drv.Status, drv.Message)
	}
	// Not demoted: a check warn_checks does not name still fails on the same facts.
	if mem, _ := result.Find(cs, result.GPUMemory); mem.Status != result.Fail {
		t.Errorf("gpu-memory on unread facts: %s", mem.Status)
	}
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{[]string{"gpu", "no-such-check"}, `skip_checks[1] "no-such-check": no such check`},
		{[]string{"holds"}, "cannot be skipped or demoted"},
		{[]string{"first-boot-kernel"}, "cannot be skipped or demoted"},
		{[]string{"gpu", "gpu"}, "named twice"},
	} {
		errs := CheckSelection("skip_checks", tc.ids)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%q: %v, want one error with %q", tc.ids, errs, tc.want)
		}
	}
	if errs := CheckSelection("warn_checks", []string{"dcgm", "site:gpu-fans"}); len(errs) != 0 {
		t.Errorf("valid selection refused: %v", errs)
	}
}

// A site check passes on 0, fails on 1, warns on 2, and fails on anything that is not a
// verdict: another status, a timeout, a file that could not run.
func TestJudgeSite(t *testing.T) {
	for _, tc := range []struct {
		run    facts.SiteRun
		status result.Status
		msg    string
	}{
		{facts.SiteRun{Name: "fans", ExitCode: 0, Output: "fans ok\n"}, result.Pass, "fans ok"},
		{facts.SiteRun{Name: "fans", ExitCode: 1, Output: "fan 3 stopped"}, result.Fail, "fan 3 stopped"},
		{facts.SiteRun{Name: "fans", ExitCode: 2, Output: "fan 3 slow"}, result.Warn, "fan 3 slow"},
		{facts.SiteRun{Name: "fans", ExitCode: 3}, result.Fail, "neither 0 (pass), 1 (fail) nor 2 (warn)"},
		{facts.SiteRun{Name: "fans", ExitCode: 126, Output: "Permission denied"}, result.Fail, "did not judge"},
		{facts.SiteRun{Name: "fans", TimedOut: true, ExitCode: 124}, result.Fail, "did not finish"},
		{facts.SiteRun{Name: "bad name", Problem: `"bad name" is not a site check name`}, result.Fail, "not a site check name"},
		{facts.SiteRun{Name: "fans", ExitCode: 1}, result.Fail, "printed nothing"},
	} {
		c := JudgeSite(tc.run, Target{})
		if c.ID != result.SitePrefix+tc.run.Name || c.Status != tc.status || !strings.Contains(c.Message, tc.msg) {
			t.Errorf("%+v: %s %s %q", tc.run, c.ID, c.Status, c.Message)
		}
	}
	skip := Target{Checks: settings.Checks{Skip: []string{"site:fans"}}}
	if c := JudgeSite(facts.SiteRun{Name: "fans", ExitCode: 1}, skip); c.Status != result.Skip {
		t.Errorf("skipped site check: %s", c.Status)
	}
	warn := Target{Checks: settings.Checks{Warn: []string{"site:fans"}}}
	if c := JudgeSite(facts.SiteRun{Name: "fans", ExitCode: 1, Output: "x"}, warn); c.Status != result.Warn {
		t.Errorf("demoted site check: %s", c.Status)
	}
}

// The docs' tables name every check of the catalog.
func TestDocTables(t *testing.T) {
	doc, readme := DocTable(), ReadmeTable()
	for _, e := range Catalog() {
		if !strings.Contains(doc, "| `"+e.ID+"` |") || !strings.Contains(readme, "| `"+e.ID+"` |") {
			t.Errorf("%s missing from a table", e.ID)
		}
	}
	// Every phase says where its checks run, in both tables.
	for _, p := range Phases {
		if phaseDoc[p] == "" || runsIn(p) == "" {
			t.Errorf("phase %q: the docs' table (%q) or the README's (%q) does not say where its checks run", p, phaseDoc[p], runsIn(p))
		}
	}
}

// A run that read nothing passes nothing: every judge, given empty facts and nothing to
// compare against, fails, warns or skips.
func TestNothingReadPassesNothing(t *testing.T) {
	for _, p := range Phases {
		for _, c := range JudgePhase(p, facts.Run{}, Target{}) {
			if c.Status == result.Pass {
				t.Errorf("%s passed on nothing read (%s): %q %q", c.ID, p, c.Actual, c.Message)
			}
		}
	}
}

package probe

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	judge "github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// healthySections loads the healthy p6-b200 sections. The fixture format is this test's own
// ("=== <section> exit=N" then the output), so it does not depend on bundle's marker format.
func healthySections(t testing.TB) map[string]bundle.Section {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "host", "p6-b200-healthy.sections"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bundle.Section{}
	var name string
	var rc int
	var body []string
	flush := func() {
		if name != "" {
			set(sections, name, strings.Join(body, "\n"), rc)
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "=== "); ok {
			flush()
			n, code, ok := strings.Cut(rest, " exit=")
			if !ok {
				t.Fatalf("bad fixture header %q", line)
			}
			if rc, err = strconv.Atoi(code); err != nil {
				t.Fatalf("bad fixture header %q", line)
			}
			name, body = n, nil
			continue
		}
		body = append(body, line)
	}
	flush()
	for _, c := range hostCommands(Options{NVMePath: "/opt/dlami/nvme", CheckTimeout: settings.DefaultCheckTimeout}) {
		if _, ok := sections[c.Name]; !ok {
			t.Fatalf("fixture lacks section %s", c.Name)
		}
	}
	return sections
}

// p6Pins are the versions of the validated DLAMI build.
func p6Pins() settings.Expectations {
	yes := true
	return settings.Expectations{
		NvidiaDriver:   "595.91.07",
		EFADriver:      ">= 3.3.0",
		EFAInstaller:   "1.50.0",
		Libfabric:      "2.6.0",
		AWSOFINCCL:     "1.21.1",
		GDRCopy:        ">= 2.4",
		Lustre:         "2.15.6",
		LustreExpected: &yes,
	}
}

func set(s map[string]bundle.Section, name, out string, rc int) {
	s[name] = bundle.Section{Name: name, Output: out, ExitCode: rc, TimedOut: bundle.TimedOut(rc)}
}

func rdmLines(domains []string, suffixes ...string) string {
	var b strings.Builder
	for _, d := range domains {
		for _, suf := range suffixes {
			typ := "FI_EP_RDM"
			if suf == "-dgrm" {
				typ = "FI_EP_DGRAM"
			}
			b.WriteString("provider: efa\n    fabric: efa\n    domain: " + d + suf + "\n    version: 206.0\n    type: " + typ + "\n    protocol: FI_PROTO_EFA\n")
		}
	}
	return b.String()
}

var p6RDMAP = []string{"rdmap82s0", "rdmap83s0", "rdmap99s0", "rdmap100s0", "rdmap118s0", "rdmap119s0", "rdmap135s0", "rdmap136s0"}

// pciLines renders PCI inventory lines: n devices of vendor:device:class each.
func pciLines(groups ...struct {
	n                     int
	vendor, device, class string
}) string {
	var b strings.Builder
	bus := 0x10
	for _, g := range groups {
		for i := 0; i < g.n; i++ {
			b.WriteString("0000:" + strconv.FormatInt(int64(bus), 16) + ":00.0 " + g.vendor + " " + g.device + " " + g.class + "\n")
			bus++
		}
	}
	return b.String()
}

type pciGroup = struct {
	n                     int
	vendor, device, class string
}

func gpuGroup(n int) pciGroup    { return pciGroup{n, "0x10de", "0x2901", "0x030200"} }
func efaGroup(n int) pciGroup    { return pciGroup{n, "0x1d0f", "0xefa3", "0x020000"} }
func cx7Group(n int) pciGroup    { return pciGroup{n, "0x15b3", "0x1021", "0x020700"} }
func switchGroup(n int) pciGroup { return pciGroup{n, "0x10de", "0x22a3", "0x068000"} }
func enaGroup() pciGroup         { return pciGroup{1, "0x1d0f", "0xec20", "0x020000"} }

// evaluate judges the healthy P6-B200 sections with the pins after mutate changes the sections
// and expect the expectations (either may be nil).
func evaluate(t testing.TB, mutate func(map[string]bundle.Section), expect func(*settings.Expectations)) []result.Check {
	t.Helper()
	s := healthySections(t)
	if mutate != nil {
		mutate(s)
	}
	e := p6Pins()
	if expect != nil {
		expect(&e)
	}
	return hostChecks(ParseHost(s), Resolve(s, e, ""))
}

// hostChecks are the host phase's checks of the host suite's reading (job-memlock, which reads
// the job units, left out; imex, which applies only to multi-node NVLink types and is judged
// in imex_test.go; and nvlink-fabric, not applicable on this p6-b200 reading: see
// TestNVLinkFabricNotApplicableOnP6B200).
func hostChecks(h facts.Host, t judge.Target) []result.Check {
	var out []result.Check
	for _, c := range judge.JudgePhase(judge.PhaseHost, facts.Run{Host: h}, t) {
		if c.ID != result.JobMemlock && c.ID != result.IMEX && c.ID != result.NVLinkFabric {
			out = append(out, c)
		}
	}
	return out
}

// fault is one way to break the healthy host, and which checks must fail for it.
type fault struct {
	name    string
	mutate  func(s map[string]bundle.Section)
	expect  func(e *settings.Expectations)
	fail    []string
	mention string // in the failing check's message
}

// runFaults asserts that each fault fails exactly its checks, with evidence and a message that
// names the cause, and that every other check still passes.
func runFaults(t *testing.T, faults []fault) {
	t.Helper()
	for _, tt := range faults {
		t.Run(tt.name, func(t *testing.T) {
			checks := evaluate(t, tt.mutate, tt.expect)
			// hostChecks leaves job-memlock, imex and nvlink-fabric out.
			if want := len(judge.IDs(judge.PhaseHost)) - 3; len(checks) != want {
				t.Fatalf("%d checks, want %d", len(checks), want)
			}
			for _, c := range checks {
				wantFail := slices.Contains(tt.fail, c.ID)
				switch {
				case wantFail && c.Status != result.Fail:
					t.Errorf("%s: %s, want fail (actual %q: %s)", c.ID, c.Status, c.Actual, c.Message)
				case !wantFail && c.Status != result.Pass:
					t.Errorf("%s: %s, want pass (actual %q: %s)", c.ID, c.Status, c.Actual, c.Message)
				case wantFail:
					if c.Evidence == "" {
						t.Errorf("%s failed without evidence", c.ID)
					}
					if len(c.Evidence) > 10*evidenceMax {
						t.Errorf("%s evidence is %d bytes", c.ID, len(c.Evidence))
					}
					if !strings.Contains(c.Message, tt.mention) {
						t.Errorf("%s message %q does not mention %q", c.ID, c.Message, tt.mention)
					}
				}
			}
		})
	}
}

func statusOf(checks []result.Check, id string) result.Check {
	c, _ := result.Find(checks, id)
	return c
}

// Resolve parses the sections and resolves their target, as the bake does.
func Resolve(s map[string]bundle.Section, e settings.Expectations, configured string) judge.Target {
	return judge.Resolve(ParseHost(s), settings.Checks{Expect: e}, configured)
}

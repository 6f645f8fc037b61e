package probe

import (
	"strings"
	"testing"
	"time"
)

// oneNodeJSON is a one-node domain as nvidia-imex-ctl -N -j prints it (the shape of
// ParallelCluster's healthy example, internal/parse/imexctl/testdata/healthy-2node.json, cut
// to one node at the tray's own address).
const oneNodeJSON = `{"nodes":{"0":{"status":"READY","host":"10.1.42.17","connections":{"0":{"host":"10.1.42.17","status":"CONNECTED","changed":true}},"changed":true,"version":"570.172.08"}},"timestamp":"8/8/2025 17:38:02.641","status":"UP"}`

func TestParseIMEXDomainRun(t *testing.T) {
	m := imexDomainMarker
	healthy := strings.Join([]string{m + " WAS inactive", m + " CONFIG absent", m + " ADDRESS 10.1.42.17", m + " RESTART 0",
		m + " ACTIVE active", m + " BEGIN", oneNodeJSON, m + " END 0", m + " RESTORED"}, "\n")
	r := ParseIMEXDomainRun(healthy, 0, false)
	if !r.Ran || r.WasActive != "inactive" || r.HadConfig || r.Address != "10.1.42.17" || r.ActiveAfter != "active" || r.RestoreProblem != "" || r.Problem != "" {
		t.Fatalf("healthy: %+v", r)
	}
	if !r.Domain.OK() || r.Domain.Value.Status != "UP" || len(r.Domain.Value.Nodes) != 1 || r.Domain.Value.Nodes[0].Host != "10.1.42.17" {
		t.Fatalf("healthy domain: %+v", r.Domain)
	}

	for _, tc := range []struct {
		name, out       string
		code            int
		timedOut        bool
		domain, restore string // substrings of the problems ("" none)
	}{
		{"baked list", strings.Replace(healthy, m+" CONFIG absent", m+" CONFIG present\n"+m+" BAKED 2 10.9.8.7 10.9.8.6", 1), 0, false, "", ""},
		{"restore failed", strings.Replace(healthy, m+" RESTORED", m+" RESTORE-FAILED /etc/nvidia-imex/nodes_config.cfg could not be put back", 1), 0, false,
			"", "/etc/nvidia-imex/nodes_config.cfg could not be put back"},
		{"stopped at the bound", strings.Join([]string{m + " WAS inactive", m + " CONFIG present", m + " ADDRESS 10.1.42.17", m + " RESTART 0"}, "\n"), 124, true,
			"stopped at its bound before reading the domain", "stopped at its bound before reporting its restore"},
		{"tool missing", m + " ERROR ip is not installed\n" + m + " UNCHANGED\n", 127, false, "ip is not installed", ""},
		{"killed before the restore", m + " WAS inactive\n" + m + " CONFIG absent\n", -1, false, "ended before reading the domain", "ended without reporting its restore"},
		{"no address, restored", m + " WAS inactive\n" + m + " ERROR no private IPv4 address\n" + m + " RESTORED\n", 1, false, "no private IPv4 address", ""},
		{"unreachable", strings.Replace(healthy, oneNodeJSON, "Query Status returned error code: 14 - failed to connect", 1), 0, false, "nvidia-imex-ctl -N -j:", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ParseIMEXDomainRun(tc.out, tc.code, tc.timedOut)
			if tc.name == "baked list" && (!r.HadConfig || r.BakedCount != 2 || len(r.BakedAddresses) != 2 || r.BakedAddresses[1] != "10.9.8.6") {
				t.Errorf("baked list: %+v", r)
			}
			if tc.domain == "" && !r.Domain.OK() || tc.domain != "" && (r.Domain.OK() || !strings.Contains(r.Domain.Problem, tc.domain)) {
				t.Errorf("domain %+v, want problem %q", r.Domain, tc.domain)
			}
			if tc.restore == "" && r.RestoreProblem != "" || !strings.Contains(r.RestoreProblem, tc.restore) {
				t.Errorf("restore problem %q, want %q", r.RestoreProblem, tc.restore)
			}
		})
	}
}

func TestIMEXDomainScript(t *testing.T) {
	s := IMEXDomainScript(0)
	if !s.AsRoot || s.Timeout != DefaultIMEXDomainTimeout+time.Minute || !strings.Contains(s.Text, "timeout_s='60'") {
		t.Errorf("default script: root %v, bound %s", s.AsRoot, s.Timeout)
	}
	if s := IMEXDomainScript(90 * time.Second); !strings.Contains(s.Text, "timeout_s='90'") {
		t.Error("the wait is not the one asked for")
	}
	for _, p := range []string{"/usr/sbin/ip", "/usr/bin/systemctl", "/usr/bin/nvidia-imex-ctl", "trap restore EXIT"} {
		if !strings.Contains(s.Text, p) {
			t.Errorf("the script lacks %q", p)
		}
	}
}

// Whatever the job prints, reading it never panics, and a run that did not report its restore
// is never taken as restored.
func FuzzParseIMEXDomainRun(f *testing.F) {
	m := imexDomainMarker
	f.Add(m+" WAS active\n"+m+" CONFIG present\n"+m+" BAKED 1 10.0.0.1\n"+m+" BEGIN\n"+oneNodeJSON+"\n"+m+" END 0\n"+m+" RESTORED\n", 0)
	f.Add(m+" BAKED x\n"+m+" RESTART\n"+m+" END\n", 124)
	f.Fuzz(func(t *testing.T, out string, code int) {
		r := ParseIMEXDomainRun(out, code, false)
		if !strings.Contains(out, m+" RESTORE") && !strings.Contains(out, m+" UNCHANGED") && r.RestoreProblem == "" {
			t.Errorf("no restore line, yet restored: %+v", r)
		}
	})
}

func TestIMEXNodesScript(t *testing.T) {
	s, err := IMEXNodesScript([]string{"10.0.1.5", "10.0.1.6"})
	if err != nil {
		t.Fatal(err)
	}
	if !s.AsRoot || !strings.Contains(s.Text, "addresses='10.0.1.5 10.0.1.6'") || s.Timeout != IMEXNodesTimeout {
		t.Errorf("script: as root %v, bound %s, addresses not set quoted:\n%s", s.AsRoot, s.Timeout, s.Text)
	}
	for _, bad := range [][]string{nil, {"10.0.1.5", "10.0.1.6; reboot"}, {"fe80::1"}, {"ip-10-0-1-5"}} {
		if _, err := IMEXNodesScript(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestParseIMEXNodesRun(t *testing.T) {
	m := imexNodesMarker
	for _, tc := range []struct {
		name, out       string
		code            int
		timedOut        bool
		restart         int
		active, printed string
		problem         string // substring ("" none)
	}{
		{"restarted", m + " RESTART 0\n" + m + " ACTIVE active\n", 0, false, 0, "active", "", ""},
		{"failed to start", m + " RESTART 1\nJob for nvidia-imex.service failed because the control process exited with error code.\n" + m + " ACTIVE failed\n", 0, false,
			1, "failed", "Job for nvidia-imex.service failed", ""},
		{"no systemctl", m + " ERROR systemctl is not installed\n", 127, false, 0, "", "", "systemctl is not installed"},
		{"stopped at its bound", m + " RESTART 0\n", 124, true, 0, "", "did not end within its bound", "did not end within its bound"},
		{"cut short", "", 255, false, 0, "", "", "before reporting the restart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := ParseIMEXNodesRun(tc.out, tc.code, tc.timedOut)
			if tc.problem == "" && n.Problem != "" || !strings.Contains(n.Problem, tc.problem) {
				t.Errorf("problem %q, want %q", n.Problem, tc.problem)
			}
			if n.RestartExit != tc.restart || tc.active != "" && (!n.Active.OK() || n.Active.Value != tc.active) || tc.active == "" && n.Active.OK() {
				t.Errorf("restart %d, active %+v; want %d, %q", n.RestartExit, n.Active, tc.restart, tc.active)
			}
			if tc.printed != "" && !strings.Contains(n.RestartOutput, tc.printed) && !strings.Contains(n.Problem, tc.printed) {
				t.Errorf("restart output %q, want %q", n.RestartOutput, tc.printed)
			}
			if n.View.OK() {
				t.Errorf("the view is read apart, yet %+v", n.View)
			}
		})
	}
}

// Whatever the job prints, reading it never panics, and a node whose restart was never reported
// always carries a problem.
func FuzzParseIMEXNodesRun(f *testing.F) {
	m := imexNodesMarker
	f.Add(m+" RESTART 0\n"+m+" ACTIVE active\n", 0)
	f.Add(m+" RESTART x\nout\n"+m+" ERROR\n", 124)
	f.Fuzz(func(t *testing.T, out string, code int) {
		n := ParseIMEXNodesRun(out, code, false)
		if !strings.Contains(out, m+" RESTART ") && n.Problem == "" {
			t.Errorf("no restart line, yet no problem: %+v", n)
		}
	})
}

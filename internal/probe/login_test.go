package probe

import (
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// efaConf is the EFA installer's limits file as the fixture has it (unlimited for everyone).
const efaConf = "==> /etc/security/limits.d/01_efa.conf\n| *   soft   memlock   unlimited\n| *   hard   memlock   unlimited\n"

// withFiles replaces the limits files.
func withFiles(files string) func(map[string]bundle.Section) {
	return func(s map[string]bundle.Section) { set(s, sectionLimitsFiles, files, 0) }
}

func withBase(base string) func(map[string]bundle.Section) {
	return func(s map[string]bundle.Section) { set(s, sectionLimitsBase, base, 0) }
}

func withUser(user string) func(map[string]bundle.Section) {
	return func(s map[string]bundle.Section) { set(s, sectionLoginUser, user, 0) }
}

// withoutPAMLimits drops pam_limits from sshd's stack (a site that removed the line).
func withoutPAMLimits(s map[string]bundle.Section) {
	out := strings.ReplaceAll(s[sectionPAMFiles].Output, "| session    required     pam_limits.so", "| # session    required     pam_limits.so")
	set(s, sectionPAMFiles, out, 0)
}

const (
	base8M        = "init 8388608 8388608 bytes\nsshd 1187 8388608 8388608 bytes"
	baseInitUnlim = "init unlimited unlimited bytes\nsshd 1187 65536 65536 bytes"
	baseSSHDUnlim = "init 65536 65536 bytes\nsshd 1187 unlimited unlimited bytes"
	baseBothUnlim = "init unlimited unlimited bytes\nsshd 1187 unlimited unlimited bytes"
	rootUser      = "root\n0\n0\n0\nroot"
)

// The memlock limit of a new login, as pam_limits applies the files now on the host: a layer's
// limits file counts whatever the probe's own session says.
func TestLoginMemlock(t *testing.T) {
	tests := []struct {
		name    string
		mutate  []func(map[string]bundle.Section)
		session bool // SessionIsLogin
		status  result.Status
		actual  string // substring of the check's actual
		mention string // substring of message (fail) or evidence (pass)
	}{
		{"fixture: 01_efa.conf makes it unlimited", nil, false, result.Pass, "unlimited for a new login of ubuntu", "01_efa.conf:2"},
		{"a layer's later file lowers it: the session still says unlimited",
			[]func(map[string]bundle.Section){withFiles(efaConf + "==> /etc/security/limits.d/99-site.conf\n| *  soft memlock 65536\n| *  hard memlock 65536\n")},
			false, result.Fail, "65536 KiB", "99-site.conf:1"},
		{"a layer's later file raises it: the session's own 64 KiB is stale",
			[]func(map[string]bundle.Section){func(s map[string]bundle.Section) { set(s, sectionMemlock, "64", 0) },
				withFiles("==> /etc/security/limits.d/99-memlock.conf\n| * - memlock unlimited\n"), withBase("init 65536 65536 bytes\nsshd 1 65536 65536 bytes")},
			false, result.Pass, "unlimited", "99-memlock.conf:1"},
		{"on a first boot the fresh session's own 64 KiB fails too",
			[]func(map[string]bundle.Section){func(s map[string]bundle.Section) { set(s, sectionMemlock, "64", 0) }},
			true, result.Fail, "64 KiB for this login", "outside pam_limits"},
		{"01_efa.conf commented out (as some scripts do): the 8 MiB start",
			[]func(map[string]bundle.Section){withFiles("==> /etc/security/limits.d/01_efa.conf\n| #*   soft   memlock   unlimited\n| #*   hard   memlock   unlimited\n"), withBase(base8M)},
			false, result.Fail, "8192 KiB", "PID 1's limit"},
		{"no file, PID 1 unlimited but sshd 64 KiB: the lower counts",
			[]func(map[string]bundle.Section){withFiles(""), withBase(baseInitUnlim)},
			false, result.Fail, "64 KiB", "sshd (pid 1187)"},
		{"no file, sshd unlimited but PID 1 64 KiB: the lower counts",
			[]func(map[string]bundle.Section){withFiles(""), withBase(baseSSHDUnlim)},
			false, result.Fail, "64 KiB", "PID 1's limit"},
		{"no file, both unlimited", []func(map[string]bundle.Section){withFiles(""), withBase(baseBothUnlim)}, false, result.Pass, "unlimited", "PID 1's"},
		{"soft unlimited but a hard 1024 caps it",
			[]func(map[string]bundle.Section){withFiles(efaConf + "==> /etc/security/limits.d/50-cap.conf\n| @sudo hard memlock 1024\n")},
			false, result.Fail, "1024 KiB", "the hard limit caps the soft one"},
		{"a user line beats a later wildcard",
			[]func(map[string]bundle.Section){withFiles("==> /etc/security/limits.conf\n| ubuntu - memlock unlimited\n==> /etc/security/limits.d/99-low.conf\n| * - memlock 64\n")},
			false, result.Pass, "unlimited", "limits.conf:1"},
		{"a group line beats a later wildcard",
			[]func(map[string]bundle.Section){withFiles("==> /etc/security/limits.d/10-adm.conf\n| @adm - memlock 64\n==> /etc/security/limits.d/99-all.conf\n| * - memlock unlimited\n")},
			false, result.Fail, "64 KiB", "10-adm.conf:1"},
		{"files are read in name order, not the order printed",
			[]func(map[string]bundle.Section){withFiles("==> /etc/security/limits.d/99-b.conf\n| * - memlock unlimited\n==> /etc/security/limits.d/10-a.conf\n| * - memlock 64\n")},
			false, result.Pass, "unlimited", "99-b.conf:1"},
		{"a file not ending in .conf is not read",
			[]func(map[string]bundle.Section){withFiles(efaConf + "==> /etc/security/limits.d/99-low.conf.disabled\n| * - memlock 64\n")},
			false, result.Pass, "unlimited", "01_efa.conf"},
		{"a \"<user> -\" line: pam_limits sets nothing, the session keeps sshd's",
			[]func(map[string]bundle.Section){withFiles("==> /etc/security/limits.conf\n| ubuntu -\n" + efaConf), withBase(baseInitUnlim)},
			false, result.Fail, "64 KiB", "sets no limit at all"},
		{"pam_limits not in sshd's stack: the files do not apply",
			[]func(map[string]bundle.Section){withoutPAMLimits, withBase(baseInitUnlim)},
			false, result.Fail, "64 KiB", "not in sshd's PAM session stack"},
		{"root: the wildcard does not apply (Debian's rule)",
			[]func(map[string]bundle.Section){withUser(rootUser), withBase(base8M)},
			false, result.Fail, "8192 KiB for a new login of root", "PID 1's"},
		{"root named literally", []func(map[string]bundle.Section){withUser(rootUser), withFiles("==> /etc/security/limits.conf\n| root - memlock unlimited\n")},
			false, result.Pass, "unlimited for a new login of root", "limits.conf:1"},
		{"no sshd found and no file sets it: unknown",
			[]func(map[string]bundle.Section){withFiles(""), withBase("init unlimited unlimited bytes")},
			false, result.Fail, "unreadable", "no sshd was found"},
		{"an invalid value is skipped as pam_limits does",
			[]func(map[string]bundle.Section){withFiles(efaConf + "==> /etc/security/limits.d/99-typo.conf\n| * - memlock lots\n")},
			false, result.Pass, "unlimited", "skips the invalid line"},
		{"no user", []func(map[string]bundle.Section){func(s map[string]bundle.Section) { set(s, sectionLoginUser, "id: 'builder': no such user", 1) }},
			false, result.Fail, "unreadable", "exited 1"},
		{"no sshd PAM file", []func(map[string]bundle.Section){func(s map[string]bundle.Section) { set(s, sectionPAMFiles, "", 0) }},
			false, result.Fail, "unreadable", "no PAM configuration"},
		{"conf= another file", []func(map[string]bundle.Section){func(s map[string]bundle.Section) {
			set(s, sectionPAMFiles, "==> /etc/pam.d/sshd\n| session required pam_limits.so conf=/etc/site/limits.conf", 0)
		}}, false, result.Fail, "unreadable", "conf=/etc/site/limits.conf"},
		{"unreadable base", []func(map[string]bundle.Section){withBase("init 1 2")}, false, result.Fail, "unreadable", "limits_base"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := healthySections(t)
			for _, m := range tt.mutate {
				m(s)
			}
			h := ParseHost(s)
			c := hostChecks(h, checks.Target{SessionIsLogin: tt.session})
			var got result.Check
			for _, x := range c {
				if x.ID == result.Memlock {
					got = x
				}
			}
			if got.Status != tt.status || !strings.Contains(got.Actual, tt.actual) {
				t.Fatalf("memlock %s %q, want %s %q\nmessage: %s\nevidence: %s", got.Status, got.Actual, tt.status, tt.actual, got.Message, got.Evidence)
			}
			text := got.Message + "\n" + got.Evidence
			if !strings.Contains(text, tt.mention) {
				t.Errorf("memlock message/evidence does not mention %q:\n%s", tt.mention, text)
			}
			if got.Status == result.Fail && got.Evidence == "" {
				t.Error("failed without evidence")
			}
		})
	}
}

// The login user option reaches the shell quoted, as a literal name; without it the probe's
// own user is read.
func TestLoginUserShell(t *testing.T) {
	self, err := exec.Command("id", "-un").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct{ user, want string }{
		{"", strings.TrimSpace(string(self))},
		{"ubuntu'; touch " + dir + "/pwned; '", "ubuntu'; touch " + dir + "/pwned; '"},
		{"$(touch " + dir + "/pwned)", "$(touch " + dir + "/pwned)"},
	} {
		out, _ := exec.Command("/bin/sh", "-c", loginUserShell(tc.user)).Output()
		if first, _, _ := strings.Cut(string(out), "\n"); first != tc.want {
			t.Errorf("user %q: the shell printed %q first, want the name %q", tc.user, first, tc.want)
		}
		if _, err := os.Stat(dir + "/pwned"); err == nil {
			t.Fatalf("user %q ran as shell", tc.user)
		}
	}
}

// Whatever the four sections print, the login memlock fact is read or carries a problem, and
// never claims unlimited for a soft limit its hard limit caps.
func FuzzParseLoginMemlock(f *testing.F) {
	s := healthySections(f)
	f.Add(s[sectionLoginUser].Output, s[sectionLimitsFiles].Output, s[sectionLimitsBase].Output)
	f.Add(rootUser, "==> /etc/security/limits.conf\n| root - memlock 1\n| ubuntu -", baseInitUnlim)
	f.Fuzz(func(t *testing.T, user, files, base string) {
		m := maps.Clone(s)
		set(m, sectionLoginUser, user, 0)
		set(m, sectionLimitsFiles, files, 0)
		set(m, sectionLimitsBase, base, 0)
		lm := parseLoginMemlock(m)
		if lm.OK() == (lm.Problem != "") {
			t.Fatalf("ok %v with problem %q", lm.OK(), lm.Problem)
		}
		if lm.OK() && lm.Value.Soft.Unlimited && !lm.Value.Hard.Unlimited {
			t.Fatalf("soft unlimited over hard %s", lm.Value.Hard)
		}
	})
}

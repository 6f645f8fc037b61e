package pamlimits

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var ubuntu = User{Name: "ubuntu", UID: 1000, GID: 1000, Groups: []Group{{"ubuntu", 1000}, {"adm", 4}, {"sudo", 27}}}

var root = User{Name: "root", UID: 0, GID: 0, Groups: []Group{{"root", 0}}}

func conf(text string) File { return File{Path: ConfPath, Text: text} }

func dropIn(name, text string) File { return File{Path: Dir + "/" + name, Text: text} }

func show(s *Setting) string {
	if s == nil {
		return "unset"
	}
	return s.Value.String()
}

// Memlock follows pam_limits.c: priorities, order, units, spellings, domains.
func TestMemlock(t *testing.T) {
	debian := Options{RootOnlyLiteral: true}
	tests := []struct {
		name       string
		files      []File
		user       User
		opt        Options
		soft, hard string // Value.String or "unset"
		from       string // the soft setting's file:line, "" when unset
		noLimits   bool
		skipped    int
	}{
		{"nothing", nil, ubuntu, debian, "unset", "unset", "", false, 0},
		{"stock Debian limits.conf sets nothing", []File{conf(readTestdata(t, "debian12-limits.conf"))}, ubuntu, debian, "unset", "unset", "", false, 0},
		{"wildcard both", []File{dropIn("01_efa.conf", "*\tsoft\tmemlock\tunlimited\n*\thard\tmemlock\tunlimited\n")}, ubuntu, debian, "unlimited", "unlimited", "01_efa.conf:1", false, 0},
		{"dash is both", []File{conf("* - memlock 64")}, ubuntu, debian, "64 KiB", "64 KiB", "limits.conf:1", false, 0},
		{"value is KiB", []File{conf("ubuntu soft memlock 2048")}, ubuntu, debian, "2048 KiB", "unset", "limits.conf:1", false, 0},
		{"spellings of unlimited", []File{conf("* soft memlock -1\n* hard memlock infinity\nubuntu soft memlock UNLIMITED\n")}, ubuntu, debian, "unlimited", "unlimited", "limits.conf:3", false, 0},
		{"case of type and item", []File{conf("* SOFT MemLock 10")}, ubuntu, debian, "10 KiB", "unset", "limits.conf:1", false, 0},
		{"trailing text after the number is ignored (strtoull)", []File{conf("* soft memlock 64kb")}, ubuntu, debian, "64 KiB", "unset", "limits.conf:1", false, 0},
		{"comment after the value", []File{conf("* soft memlock 64 # lowered")}, ubuntu, debian, "64 KiB", "unset", "limits.conf:1", false, 0},
		{"an invalid value is skipped", []File{conf("* soft memlock lots\n")}, ubuntu, debian, "unset", "unset", "", false, 1},
		{"an unknown type is skipped", []File{conf("* medium memlock 1\n")}, ubuntu, debian, "unset", "unset", "", false, 1},
		{"three fields are not a line", []File{conf("* soft memlock\n")}, ubuntu, debian, "unset", "unset", "", false, 0},
		{"other items do not count", []File{conf("* - nofile 64\n* - stack 64\n")}, ubuntu, debian, "unset", "unset", "", false, 0},
		{"later equal priority overrides", []File{conf("* - memlock 64"), dropIn("99.conf", "* - memlock unlimited")}, ubuntu, debian, "unlimited", "unlimited", "99.conf:1", false, 0},
		{"user beats a later wildcard", []File{conf("ubuntu - memlock 64"), dropIn("99.conf", "* - memlock unlimited")}, ubuntu, debian, "64 KiB", "64 KiB", "limits.conf:1", false, 0},
		{"group beats a later wildcard", []File{dropIn("10.conf", "@adm - memlock 64"), dropIn("99.conf", "* - memlock unlimited")}, ubuntu, debian, "64 KiB", "64 KiB", "10.conf:1", false, 0},
		{"a later user beats a group", []File{dropIn("10.conf", "@adm - memlock 64"), dropIn("99.conf", "ubuntu - memlock 128")}, ubuntu, debian, "128 KiB", "128 KiB", "99.conf:1", false, 0},
		{"another user's line", []File{conf("slurm - memlock 64")}, ubuntu, debian, "unset", "unset", "", false, 0},
		{"another group's line", []File{conf("@docker - memlock 64")}, ubuntu, debian, "unset", "unset", "", false, 0},
		{"limits.d in name order", []File{dropIn("99-b.conf", "* - memlock 99"), dropIn("10-a.conf", "* - memlock 10")}, ubuntu, debian, "99 KiB", "99 KiB", "99-b.conf:1", false, 0},
		{"limits.conf before limits.d whatever the order given", []File{dropIn("00.conf", "* - memlock 1"), conf("* - memlock 2")}, ubuntu, debian, "1 KiB", "1 KiB", "00.conf:1", false, 0},
		{"not .conf", []File{dropIn("99.conf.dpkg-old", "* - memlock 1")}, ubuntu, debian, "unset", "unset", "", false, 0},
		{"a hidden file", []File{dropIn(".99.conf", "* - memlock 1")}, ubuntu, debian, "unset", "unset", "", false, 0},
		{"uid range holding the user", []File{conf("1000:2000 - memlock 5")}, ubuntu, debian, "5 KiB", "5 KiB", "limits.conf:1", false, 0},
		{"uid range not holding the user", []File{conf("2000: - memlock 5")}, ubuntu, debian, "unset", "unset", "", false, 0},
		{"exact uid", []File{conf(":1000 - memlock 5")}, ubuntu, debian, "5 KiB", "5 KiB", "limits.conf:1", false, 0},
		{"gid range", []File{conf("@1000:1000 - memlock 6")}, ubuntu, debian, "6 KiB", "6 KiB", "limits.conf:1", false, 0},
		{"exact supplementary gid", []File{conf("@:27 - memlock 7")}, ubuntu, debian, "7 KiB", "7 KiB", "limits.conf:1", false, 0},
		{"an invalid range is skipped", []File{conf("x:y - memlock 7")}, ubuntu, debian, "unset", "unset", "", false, 0},
		{"% is for maxlogins only", []File{conf("% - memlock 7\n%adm - memlock 7")}, ubuntu, debian, "unset", "unset", "", false, 0},
		{"a higher-priority soft stops the hard of a dash line", []File{conf("ubuntu soft memlock 5"), dropIn("9.conf", "* - memlock 9")}, ubuntu, debian, "5 KiB", "unset", "limits.conf:1", false, 0},
		{"no-limits line for the user", []File{conf("ubuntu -\n* - memlock 5")}, ubuntu, debian, "unset", "unset", "", true, 0},
		{"no-limits line stops later files", []File{conf("@sudo -"), dropIn("9.conf", "* - memlock 5")}, ubuntu, debian, "unset", "unset", "", true, 0},
		{"no-limits for * does not count", []File{conf("* -\n* - memlock 5")}, ubuntu, debian, "5 KiB", "5 KiB", "limits.conf:2", false, 0},
		{"root: no wildcard (Debian)", []File{conf("* - memlock unlimited\n@root - memlock unlimited")}, root, debian, "unset", "unset", "", false, 0},
		{"root: literal", []File{conf("* - memlock 1\nroot - memlock unlimited")}, root, debian, "unlimited", "unlimited", "limits.conf:2", false, 0},
		{"root: wildcard upstream", []File{conf("* - memlock 3")}, root, Options{}, "3 KiB", "3 KiB", "limits.conf:1", false, 0},
		{"conf= reads only that file", []File{conf("* - memlock 1"), dropIn("9.conf", "* - memlock 9"), {Path: "/etc/site.conf", Text: "* - memlock 5"}}, ubuntu, Options{Conf: "/etc/site.conf"}, "5 KiB", "5 KiB", "site.conf:1", false, 0},
		{"a huge number is unlimited", []File{conf("* - memlock 99999999999999999999")}, ubuntu, debian, "unlimited", "unlimited", "limits.conf:1", false, 0},
		{"a negative number wraps to unlimited", []File{conf("* - memlock -5")}, ubuntu, debian, "unlimited", "unlimited", "limits.conf:1", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Memlock(tt.files, tt.user, tt.opt)
			if show(r.Soft) != tt.soft || show(r.Hard) != tt.hard {
				t.Errorf("soft %s hard %s, want %s %s", show(r.Soft), show(r.Hard), tt.soft, tt.hard)
			}
			from := ""
			if r.Soft != nil {
				from = r.Soft.From.String()
			}
			if (tt.from == "") != (from == "") || !strings.Contains(from, tt.from) {
				t.Errorf("soft from %q, want %q", from, tt.from)
			}
			if (r.NoLimits != nil) != tt.noLimits {
				t.Errorf("no-limits %v, want %v", r.NoLimits, tt.noLimits)
			}
			if len(r.Skipped) != tt.skipped {
				t.Errorf("skipped %v, want %d", r.Skipped, tt.skipped)
			}
		})
	}
}

func TestParseFiles(t *testing.T) {
	files, err := ParseFiles("==> /etc/security/limits.conf\n| # c\n|\n| * - memlock 1\n==> /etc/security/limits.d/empty.conf\n==> /etc/security/limits.d/01_efa.conf\n| ==> not a header\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || files[0].Text != "# c\n\n* - memlock 1\n" || files[1].Text != "" || files[2].Text != "==> not a header\n" {
		t.Errorf("files %+v", files)
	}
	if files, err := ParseFiles(""); err != nil || len(files) != 0 {
		t.Errorf("empty: %v %v", files, err)
	}
	for _, bad := range []string{"| orphan", "==> relative/path", "sed: can't read x: Permission denied", "==> /a\nstray"} {
		if _, err := ParseFiles(bad); err == nil {
			t.Errorf("ParseFiles(%q) accepted", bad)
		}
	}
}

func TestParseUser(t *testing.T) {
	u, err := ParseUser("ubuntu\n1000\n1000\n1000 4 27\nubuntu adm sudo\n")
	if err != nil || u.Name != "ubuntu" || u.UID != 1000 || len(u.Groups) != 3 || u.Groups[2] != (Group{"sudo", 27}) {
		t.Fatalf("%+v %v", u, err)
	}
	for _, bad := range []string{"", "ubuntu\n1000\n1000\n1000", "ubuntu\nx\n1000\n1000\nubuntu", "ubuntu\n1000\n1000\n1000 4\nubuntu", "a b\n1\n1\n1\na", "u\n1\n1\n1 x\nu y"} {
		if _, err := ParseUser(bad); err == nil {
			t.Errorf("ParseUser(%q) accepted", bad)
		}
	}
}

func TestProcLimit(t *testing.T) {
	s, h, err := ProcLimit("8388608              8388608              bytes     ")
	if err != nil || s != (Value{Bytes: 8 << 20}) || h != s {
		t.Errorf("%v %v %v", s, h, err)
	}
	s, h, err = ProcLimit("unlimited unlimited bytes")
	if err != nil || !s.Infinite || !h.Infinite {
		t.Errorf("%v %v %v", s, h, err)
	}
	for _, bad := range []string{"", "1 2", "1 2 pages", "x 2 bytes", "1 -2 bytes"} {
		if _, _, err := ProcLimit(bad); err == nil {
			t.Errorf("ProcLimit(%q) accepted", bad)
		}
	}
}

func TestSessionLimits(t *testing.T) {
	real := []File{{"/etc/pam.d/sshd", readTestdata(t, "debian12-pam.d-sshd")}, {"/etc/pam.d/common-session", readTestdata(t, "debian12-pam.d-common-session")}}
	s, err := SessionLimits(real, "sshd")
	if err != nil || !s.Applies || s.From.File != "/etc/pam.d/sshd" || len(s.Args) != 0 {
		t.Fatalf("Debian's sshd: %+v %v", s, err)
	}
	tests := []struct {
		name    string
		files   []File
		applies bool
		args    string
		err     bool
	}{
		{"through @include", []File{{"/etc/pam.d/sshd", "@include common-session\n"}, {"/etc/pam.d/common-session", "session required pam_limits.so set_all\n"}}, true, "set_all", false},
		{"through substack", []File{{"/etc/pam.d/sshd", "session substack password-auth\n"}, {"/etc/pam.d/password-auth", "-session optional /lib/security/pam_limits.so\n"}}, true, "", false},
		{"bracket control", []File{{"/etc/pam.d/sshd", "session [success=ok default=bad] pam_limits.so conf=/x\n"}}, true, "conf=/x", false},
		{"commented out", []File{{"/etc/pam.d/sshd", "# session required pam_limits.so\n"}}, false, "", false},
		{"in another type", []File{{"/etc/pam.d/sshd", "account required pam_limits.so\n"}}, false, "", false},
		{"missing include", []File{{"/etc/pam.d/sshd", "@include nowhere\n"}}, false, "", false},
		{"include loop", []File{{"/etc/pam.d/sshd", "@include sshd\n"}}, false, "", true},
		{"no sshd file", []File{{"/etc/pam.d/login", "session required pam_limits.so\n"}}, false, "", true},
	}
	for _, tt := range tests {
		s, err := SessionLimits(tt.files, "sshd")
		if (err != nil) != tt.err || s.Applies != tt.applies || strings.Join(s.Args, " ") != tt.args {
			t.Errorf("%s: %+v %v", tt.name, s, err)
		}
	}
}

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The parsers and the evaluator never panic, and what they return is consistent.
func FuzzMemlock(f *testing.F) {
	f.Add("==> /etc/security/limits.d/01_efa.conf\n| * - memlock unlimited\n", "@adm soft memlock 64\nubuntu -\n1000: hard memlock 1")
	f.Add("", "%:4 - memlock 1\n@:27 hard memlock x\n:1000 - memlock -1")
	f.Fuzz(func(t *testing.T, dump, text string) {
		files, err := ParseFiles(dump)
		if err == nil {
			for _, fl := range files {
				if !strings.HasPrefix(fl.Path, "/") {
					t.Fatalf("relative path %q", fl.Path)
				}
			}
		}
		files = append(files, conf(text), dropIn("z.conf", text))
		for _, u := range []User{ubuntu, root} {
			r := Memlock(files, u, Options{RootOnlyLiteral: true})
			if r.NoLimits != nil && (r.Soft != nil || r.Hard != nil) {
				t.Fatalf("no-limits with settings: %+v", r)
			}
		}
		_, _ = SessionLimits(append(files, File{Path: "/etc/pam.d/sshd", Text: text}), "sshd")
		_, _ = ParseUser(text)
		_, _, _ = ProcLimit(text)
	})
}

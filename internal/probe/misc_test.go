package probe

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	judge "github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func TestGDRCopyMemlockNVMeLustreFaults(t *testing.T) {
	runFaults(t, []fault{
		{"no /dev/gdrdrv", func(s map[string]bundle.Section) {
			set(s, sectionGDRDevice, "stat: cannot statx '/dev/gdrdrv': No such file or directory", 1)
		}, nil, []string{result.GDRCopy}, "/dev/gdrdrv"},
		{"/dev/gdrdrv regular file", func(s map[string]bundle.Section) {
			set(s, sectionGDRDevice, "regular empty file", 0)
		}, nil, []string{result.GDRCopy}, "not a character device"},
		{"gdrdrv not loaded", func(s map[string]bundle.Section) {
			set(s, sectionLsmod, "Module                  Size  Used by\nnvidia              11698176  0\n", 0)
		}, nil, []string{result.GDRCopy}, "not loaded"},
		{"lsmod garbage", func(s map[string]bundle.Section) {
			set(s, sectionLsmod, "Segmentation fault", 0)
		}, nil, []string{result.GDRCopy}, "header"},
		{"gdrcopy pin", nil, func(e *settings.Expectations) { e.GDRCopy = "2.6" }, []string{result.GDRCopy}, "GDRCopy"},
		{"memlock 64 from a limits file", func(s map[string]bundle.Section) {
			set(s, sectionLimitsFiles, s[sectionLimitsFiles].Output+"\n==> /etc/security/limits.d/99-site.conf\n| *  -  memlock  64", 0)
		}, nil, []string{result.Memlock}, "gets locked memory 64 KiB (from /etc/security/limits.d/99-site.conf:1"},
		{"limits files unreadable", func(s map[string]bundle.Section) {
			set(s, sectionLimitsFiles, "==> /etc/security/limits.d/99-site.conf\nsed: can't read /etc/security/limits.d/99-site.conf: Permission denied", 1)
		}, nil, []string{result.Memlock}, "could not be worked out"},
		{"limits files garbage", func(s map[string]bundle.Section) { set(s, sectionLimitsFiles, "sh: ulimit: bad option", 0) }, nil, []string{result.Memlock}, "neither a file header"},
		{"NVMe not mounted", func(s map[string]bundle.Section) { set(s, sectionNVMe, "", 1) }, nil, []string{result.NVMe}, "not mounted"},
		{"NVMe mounted elsewhere", func(s map[string]bundle.Section) {
			set(s, sectionNVMe, "/mnt /dev/nvme1n1 ext4 3.5T", 0)
		}, nil, []string{result.NVMe}, "unreadable"},
		{"lfs missing", func(s map[string]bundle.Section) {
			set(s, sectionLfs, "lfs: not found (looked in /usr/bin/lfs, /usr/sbin/lfs, PATH)", 127)
		}, nil, []string{result.Lustre}, "command not found"},
		{"lustre module missing for kernel", func(s map[string]bundle.Section) {
			set(s, sectionModinfoLustre, "modinfo: ERROR: Module lustre not found.", 1)
		}, nil, []string{result.Lustre}, "running kernel"},
		{"lustre pin", nil, func(e *settings.Expectations) { e.Lustre = "2.16" }, []string{result.Lustre}, "does not satisfy"},
		{"lustre utils and module differ", func(s map[string]bundle.Section) {
			set(s, sectionLfs, "lfs 2.15.5", 0)
		}, func(e *settings.Expectations) { e.Lustre = "" }, []string{result.Lustre}, "different releases"},
	})
}

func TestNVMeNotJudgedWarns(t *testing.T) {
	c := statusOf(evaluate(t, func(s map[string]bundle.Section) { set(s, sectionProductName, "p7-future.48xlarge", 0) }, func(e *settings.Expectations) { *e = settings.Expectations{} }), result.NVMe)
	if c.Status != result.Warn || !strings.Contains(c.Message, "expect.nvme") {
		t.Errorf("nvme on an unprofiled type: %s: %s", c.Status, c.Message)
	}
}

func TestLustreNotRequired(t *testing.T) {
	no := false
	// Installed and consistent: judged as one release.
	c := statusOf(evaluate(t, nil, func(e *settings.Expectations) { e.Lustre, e.LustreExpected = "", &no }), result.Lustre)
	if c.Status != result.Pass || c.Basis != judge.BasisRule {
		t.Errorf("installed, not required: %s %q: %s", c.Status, c.Basis, c.Message)
	}
	// Not installed: nothing to judge, skipped.
	c = statusOf(evaluate(t, func(s map[string]bundle.Section) {
		set(s, sectionLfs, "lfs: not found (looked in /usr/bin/lfs, PATH)", 127)
		set(s, sectionModinfoLustre, "modinfo: ERROR: Module lustre not found.", 1)
	}, func(e *settings.Expectations) { e.Lustre, e.LustreExpected = "", &no }), result.Lustre)
	if c.Status != result.Skip {
		t.Errorf("absent, not required: %s: %s", c.Status, c.Message)
	}
}

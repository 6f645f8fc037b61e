package guard

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func bakedFrom(s Snapshot) Baked {
	b := Baked{Kernel: s.RunningKernel, Packages: map[string]BakedPackage{}}
	for _, n := range Guarded(s, settings.GuardPolicy{}) {
		p := s.Packages[n]
		b.Packages[n] = BakedPackage{Version: p.Version, Held: p.Held}
	}
	return b
}

func TestJudgeFirstBoot(t *testing.T) {
	base, _ := held(t)
	baked := bakedFrom(base)
	for _, tt := range []struct {
		name     string
		mutate   func(*Snapshot)
		kernel   result.Status
		packages result.Status
		mention  string
	}{
		{"as baked", func(*Snapshot) {}, result.Pass, result.Pass, ""},
		{"first-boot dist-upgrade pulled 1015", func(s *Snapshot) {
			setPkg(s, "linux-image-"+k15, "ii ", "7.0.0-1015.15")
			setPkg(s, "linux-aws", "ii ", "7.0.0.1015.15")
			s.NextBootKernel = k15
		}, result.Fail, result.Fail, "linux-aws: 7.0.0.1014.14 → 7.0.0.1015.15"},
		{"GRUB default points at another kernel", func(s *Snapshot) {
			s.NextBootKernel, s.NextBootSource = k15, `grub.cfg default "gnulinux-advanced>gnulinux-7.0.0-1015-aws-advanced"`
		}, result.Fail, result.Pass, "next boot would run 7.0.0-1015-aws"},
		{"rebooted into another kernel", func(s *Snapshot) { s.RunningKernel = k15 }, result.Fail, result.Pass, "runs 7.0.0-1015-aws"},
		{"userspace moved", func(s *Snapshot) { setPkg(s, "libnvidia-compute-595", "ii ", "595.99.01-1") }, result.Pass, result.Fail, "libnvidia-compute-595"},
		{"hold lifted", func(s *Snapshot) { setPkg(s, "linux-aws", "ii ", "7.0.0.1014.14") }, result.Pass, result.Fail, "linux-aws: held → not held"},
	} {
		cur := clone(t, base)
		tt.mutate(&cur)
		cs := JudgeFirstBoot(baked, cur, settings.GuardPolicy{}, "at first boot")
		if cs[0].ID != result.FirstBootKernel || cs[1].ID != result.FirstBootPackages {
			t.Fatalf("ids %s %s", cs[0].ID, cs[1].ID)
		}
		if cs[0].Status != tt.kernel || cs[1].Status != tt.packages {
			t.Errorf("%s: kernel %s (%s), packages %s (%s)", tt.name, cs[0].Status, cs[0].Message, cs[1].Status, cs[1].Message)
		}
		if tt.mention != "" && !strings.Contains(cs[0].Message+cs[1].Message, tt.mention) {
			t.Errorf("%s: messages do not mention %q: %s | %s", tt.name, tt.mention, cs[0].Message, cs[1].Message)
		}
	}
}

package probe

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func TestParseJobMemlock(t *testing.T) {
	s := map[string]bundle.Section{}
	set(s, sectionUnitMemlock, "Id=slurmd.service\nLoadState=loaded\nLimitMEMLOCK=infinity\n\nId=containerd.service\nLoadState=loaded\nLimitMEMLOCK=8388608\n\nId=docker.service\nLoadState=not-found\nLimitMEMLOCK=8388608\n", 0)
	set(s, sectionDockerDaemon, absentWord, 0)
	set(s, sectionContainerdSpec, specWord+" /etc/containerd/base-spec.json\n"+`{"process": {"rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1048576, "soft": 1048576}, {"type": "RLIMIT_MEMLOCK", "hard": 18446744073709551615, "soft": 65536}]}}`, 0)
	f := ParseJobMemlock(s)
	if !f.Units.OK() || len(f.Units.Value) != 3 || !f.Units.Value[0].Limit.Unlimited || f.Units.Value[1].Limit.KiB != 8192 || f.Units.Value[2].Loaded {
		t.Errorf("units: %+v", f.Units)
	}
	if !f.Docker.OK() || f.Docker.Value.Present {
		t.Errorf("docker: %+v", f.Docker)
	}
	c := f.Containerd
	if !c.OK() || !c.Value.Set || !c.Value.Hard.Unlimited || c.Value.Soft.KiB != 64 || c.Value.Config != "/etc/containerd/base-spec.json" {
		t.Errorf("containerd: %+v", c)
	}

	// Unreadable answers are problems, never defaults.
	for name, out := range map[string]string{
		sectionUnitMemlock:    "Id=slurmd.service\nLoadState=loaded\nLimitMEMLOCK=lots\n\nId=a\nLoadState=loaded\nLimitMEMLOCK=0\n\nId=b\nLoadState=loaded\nLimitMEMLOCK=0\n",
		sectionDockerDaemon:   presentWord + "\n{not json",
		sectionContainerdSpec: "sed: cannot read",
	} {
		bad := map[string]bundle.Section{}
		for k, v := range s {
			bad[k] = v
		}
		set(bad, name, out, 0)
		g := ParseJobMemlock(bad)
		if g.Units.OK() && g.Docker.OK() && g.Containerd.OK() {
			t.Errorf("%s %q was read", name, out)
		}
	}
	delete(s, sectionUnitMemlock)
	if g := ParseJobMemlock(s); g.Units.OK() || !strings.Contains(g.Units.Problem, "did not run") {
		t.Errorf("missing section: %+v", g.Units)
	}
}

func TestJobMemlockCommands(t *testing.T) {
	cmds := jobMemlockCommands(Options{NVMePath: "/opt/dlami/nvme", CheckTimeout: settings.DefaultCheckTimeout})
	if _, err := bundle.Script(cmds); err != nil {
		t.Fatal(err)
	}
	if cmds[0].Tool == nil || cmds[0].Tool.Paths[0] != "/usr/bin/systemctl" || !strings.Contains(cmds[0].Shell, `"$1" show -p Id -p LoadState -p LimitMEMLOCK "$u"`) {
		t.Errorf("units command: %+v", cmds[0])
	}
}

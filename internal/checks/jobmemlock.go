package checks

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func init() {
	register(Entry{
		ID: result.JobMemlock, Phase: PhaseHost, Family: "kernel", Order: 340, Judge: judgeJobMemlock,
		Doc:   "(node check only) every installed job unit (`slurmd`, `containerd`, `docker`) has `LimitMEMLOCK=infinity`, and a container runtime default that sets memlock sets it unlimited; none installed warns",
		Reads: "`systemctl show -p LimitMEMLOCK`, `/etc/docker/daemon.json`, containerd's `base_runtime_spec`",
	})
}

// judgeJobMemlock judges the locked-memory limit where jobs run on a node (check job-memlock):
// every installed job unit (slurmd, containerd, docker) must have LimitMEMLOCK=infinity, and a
// container runtime's own default memlock limit, where its configuration sets one, must be
// unlimited. A fact that could not be read fails; a node with no job unit and no runtime
// configuration has nothing to compare against and warns.
func judgeJobMemlock(r facts.Run, _ Target) result.Check {
	f := r.JobMemlock
	id := result.JobMemlock
	const expected = "unlimited for every job unit and container runtime default"
	for _, u := range []struct {
		what    string
		problem string
		ev      string
	}{
		{"systemd units", f.Units.Problem, f.Units.Evidence},
		{"docker daemon.json", f.Docker.Problem, f.Docker.Evidence},
		{"containerd base runtime spec", f.Containerd.Problem, f.Containerd.Evidence},
	} {
		if u.problem != "" {
			return check(id, result.Fail, BasisRule, expected, "unreadable", u.what+": "+u.problem, u.ev)
		}
	}
	var seen, bad []string
	for _, u := range f.Units.Value {
		if !u.Loaded {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s %s", u.Unit, u.Limit))
		if !u.Limit.Unlimited {
			bad = append(bad, fmt.Sprintf("%s has LimitMEMLOCK %s (its jobs inherit it: set LimitMEMLOCK=infinity in a drop-in, /etc/systemd/system/%s.d/memlock.conf)", u.Unit, u.Limit, u.Unit))
		}
	}
	for _, r := range []struct {
		name string
		rl   facts.RuntimeLimit
		fix  string
	}{
		{"docker", f.Docker.Value, `"default-ulimits": {"memlock": {"Name": "memlock", "Soft": -1, "Hard": -1}}`},
		{"containerd", f.Containerd.Value, `RLIMIT_MEMLOCK soft and hard 18446744073709551615 in process.rlimits`},
	} {
		if !r.rl.Set {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s default %s/%s", r.name, r.rl.Soft, r.rl.Hard))
		if !r.rl.Soft.Unlimited || !r.rl.Hard.Unlimited {
			bad = append(bad, fmt.Sprintf("%s's default for containers (%s) is memlock %s soft, %s hard (set %s)", r.name, r.rl.Config, r.rl.Soft, r.rl.Hard, r.fix))
		}
	}
	ev := evidence(f.Units.Evidence, f.Docker.Evidence, f.Containerd.Evidence)
	switch {
	case len(seen) == 0:
		return check(id, result.Warn, "", expected, "no job unit",
			"not judged: none of "+strings.Join([]string{"slurmd.service", "containerd.service", "docker.service"}, ", ")+" is installed and no container runtime sets a default: nothing on this node runs jobs yet", ev)
	case len(bad) > 0:
		return check(id, result.Fail, BasisRule, expected, strings.Join(seen, "; "),
			"locked memory is limited where jobs run: "+strings.Join(bad, "; "), ev)
	}
	return check(id, result.Pass, BasisRule, expected, strings.Join(seen, "; "), "", "")
}

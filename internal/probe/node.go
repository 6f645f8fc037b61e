package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Section names of the node's job memlock commands.
const (
	sectionUnitMemlock    = "node.unit_memlock"
	sectionDockerDaemon   = "node.docker_daemon_json"
	sectionContainerdSpec = "node.containerd_runtime_spec"
	dockerDaemonJSON      = "/etc/docker/daemon.json"
	containerdConfigTOML  = "/etc/containerd/config.toml"
	absentWord            = "@@absent"
	presentWord           = "@@present"
	specWord              = "@@spec"
	noSpecWord            = "@@nospec"
)

// JobUnits are the units whose LimitMEMLOCK jobs inherit: the Slurm daemon (its job steps) and
// the container runtimes (their containers, unless their own default overrides it).
var JobUnits = []string{"slurmd.service", "containerd.service", "docker.service"}

// unitMemlockShell asks systemd for each unit's LoadState and LimitMEMLOCK, one block per unit
// separated by a blank line; "$1" is systemctl. A unit that is not installed answers
// LoadState=not-found, which is not an error.
var unitMemlockShell = `for u in ` + strings.Join(JobUnits, " ") + `; do "$1" show -p Id -p LoadState -p LimitMEMLOCK "$u" || exit $?; echo; done`

// fileShell prints presentWord and the file, or absentWord when it does not exist.
func fileShell(path string) string {
	q := bundle.Quote(path)
	return `if [ ! -e ` + q + ` ]; then echo ` + absentWord + `; exit 0; fi; echo ` + presentWord + `; cat ` + q
}

// containerdSpecShell prints the base runtime spec containerd's config names (specWord, its
// path, then the file), noSpecWord when the config names none, absentWord without a config
// (commands/containerd-spec.sh).
var containerdSpecShell = commandShell("containerd-spec.sh",
	scriptVar{name: "config", value: containerdConfigTOML}, scriptVar{name: "absent_word", value: absentWord},
	scriptVar{name: "spec_word", value: specWord}, scriptVar{name: "no_spec_word", value: noSpecWord})

// jobMemlockCommands are the read-only commands behind facts.JobMemlock.
func jobMemlockCommands(o Options) []bundle.Command {
	t := o.timeout()
	return []bundle.Command{
		{Name: sectionUnitMemlock, Shell: unitMemlockShell, Timeout: t, Tool: hosttools.Ptr(hosttools.Systemctl)},
		{Name: sectionDockerDaemon, Shell: fileShell(dockerDaemonJSON), Timeout: t},
		{Name: sectionContainerdSpec, Shell: containerdSpecShell, Timeout: t},
	}
}

// JobMemlock reads the memlock limits where jobs run on the node: the scheduler's and the
// container runtimes' units and the runtimes' own defaults.
func JobMemlock(ctx context.Context, r Runner, o Options) (facts.JobMemlock, error) {
	sections, err := query(ctx, r, "job memlock", jobMemlockCommands(o))
	if err != nil {
		return facts.JobMemlock{}, err
	}
	return ParseJobMemlock(sections), nil
}

// ParseJobMemlock reads the job memlock sections into facts; a missing or failed section is a
// fact with its problem.
func ParseJobMemlock(sections map[string]bundle.Section) facts.JobMemlock {
	return facts.JobMemlock{
		Units:      parseWith(sections, sectionUnitMemlock, parseUnitLimits),
		Docker:     parseWith(sections, sectionDockerDaemon, parseDockerDaemon),
		Containerd: parseWith(sections, sectionContainerdSpec, parseContainerdSpec),
	}
}

// parseUnitLimits reads `systemctl show -p Id -p LoadState -p LimitMEMLOCK` blocks.
func parseUnitLimits(out string) ([]facts.UnitLimit, error) {
	var units []facts.UnitLimit
	for _, block := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n\n") {
		if strings.TrimSpace(block) == "" {
			continue
		}
		props := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return nil, fmt.Errorf("systemctl show printed %q, not KEY=VALUE", textcut.Head(line, 80))
			}
			props[k] = v
		}
		id, load, limit := props["Id"], props["LoadState"], props["LimitMEMLOCK"]
		if id == "" || load == "" {
			return nil, fmt.Errorf("systemctl show printed no Id or LoadState: %q", textcut.Head(block, 200))
		}
		u := facts.UnitLimit{Unit: id, Loaded: load == "loaded"}
		if u.Loaded {
			m, err := rlimitValue(limit)
			if err != nil {
				return nil, fmt.Errorf("%s LimitMEMLOCK: %w", id, err)
			}
			u.Limit = m
		}
		units = append(units, u)
	}
	if len(units) != len(JobUnits) {
		return nil, fmt.Errorf("systemctl show answered for %d units, asked for %d (%s)", len(units), len(JobUnits), strings.Join(JobUnits, ", "))
	}
	return units, nil
}

// rlimitValue reads a systemd resource limit: "infinity" or bytes.
func rlimitValue(v string) (facts.Memlock, error) {
	v = strings.TrimSpace(v)
	if v == "infinity" {
		return facts.Memlock{Unlimited: true}, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return facts.Memlock{}, fmt.Errorf("%q is neither infinity nor a number of bytes", textcut.Head(v, 40))
	}
	if n == math.MaxUint64 {
		return facts.Memlock{Unlimited: true}, nil
	}
	return facts.Memlock{KiB: n / 1024}, nil
}

// firstWord splits the marker line the file commands print first.
func splitMarker(out string) (marker, rest string) {
	marker, rest, _ = strings.Cut(out, "\n")
	return strings.TrimSpace(marker), rest
}

// parseDockerDaemon reads /etc/docker/daemon.json's default-ulimits memlock. Docker's ulimit
// values are raw rlimit values in bytes; -1 is unlimited.
func parseDockerDaemon(out string) (facts.RuntimeLimit, error) {
	rl := facts.RuntimeLimit{Config: dockerDaemonJSON}
	marker, body := splitMarker(out)
	switch marker {
	case absentWord:
		return rl, nil
	case presentWord:
	default:
		return rl, fmt.Errorf("reading %s printed %q", dockerDaemonJSON, textcut.Head(marker, 80))
	}
	rl.Present = true
	var doc struct {
		DefaultUlimits map[string]struct {
			Name string `json:"Name"`
			Soft int64  `json:"Soft"`
			Hard int64  `json:"Hard"`
		} `json:"default-ulimits"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		return rl, fmt.Errorf("%s is not valid JSON: %w", dockerDaemonJSON, err)
	}
	m, ok := doc.DefaultUlimits["memlock"]
	if !ok {
		return rl, nil
	}
	rl.Set = true
	rl.Soft, rl.Hard = dockerLimit(m.Soft), dockerLimit(m.Hard)
	return rl, nil
}

func dockerLimit(v int64) facts.Memlock {
	if v < 0 {
		return facts.Memlock{Unlimited: true}
	}
	return facts.Memlock{KiB: uint64(v) / 1024}
}

var specLine = regexp.MustCompile(`^` + specWord + ` (.+)$`)

// parseContainerdSpec reads RLIMIT_MEMLOCK from containerd's base runtime spec (an OCI
// runtime spec: process.rlimits[] of {type, hard, soft}).
func parseContainerdSpec(out string) (facts.RuntimeLimit, error) {
	rl := facts.RuntimeLimit{Config: containerdConfigTOML}
	marker, body := splitMarker(out)
	switch {
	case marker == absentWord:
		return rl, nil
	case marker == noSpecWord:
		rl.Present = true
		return rl, nil
	}
	m := specLine.FindStringSubmatch(marker)
	if m == nil {
		return rl, fmt.Errorf("reading %s printed %q", containerdConfigTOML, textcut.Head(marker, 80))
	}
	rl.Present, rl.Config = true, m[1]
	var spec struct {
		Process struct {
			Rlimits []struct {
				Type string `json:"type"`
				Hard uint64 `json:"hard"`
				Soft uint64 `json:"soft"`
			} `json:"rlimits"`
		} `json:"process"`
	}
	if err := json.Unmarshal([]byte(body), &spec); err != nil {
		return rl, fmt.Errorf("containerd's base_runtime_spec %s is not a readable OCI spec: %w", m[1], err)
	}
	for _, r := range spec.Process.Rlimits {
		if r.Type == "RLIMIT_MEMLOCK" {
			rl.Set = true
			rl.Soft, rl.Hard = ociLimit(r.Soft), ociLimit(r.Hard)
		}
	}
	return rl, nil
}

func ociLimit(v uint64) facts.Memlock {
	if v == math.MaxUint64 {
		return facts.Memlock{Unlimited: true}
	}
	return facts.Memlock{KiB: v / 1024}
}

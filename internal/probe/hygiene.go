package probe

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// HygieneTimeout bounds image hygiene's cleanup job (journal vacuuming is the slow part).
const HygieneTimeout = 5 * time.Minute

// Paths image hygiene removes and reads back. cloud-init's instance state is removed path by
// path, as amazon-eks-ami's cleanup does, rather than with `cloud-init clean`, which also
// removes /var/lib/cloud/scripts (the per-boot and per-instance scripts a DLAMI or a layer
// installs).
var (
	hygieneCloudState = []string{"/var/lib/cloud/instances", "/var/lib/cloud/instance", "/var/lib/cloud/data", "/var/lib/cloud/sem"}
	hygieneHistory    = []string{".bash_history", ".zsh_history", ".python_history", ".lesshst", ".viminfo"}
)

// hygieneVars are the settings of both hygiene scripts: the login user, the build key's
// base64 blob (the second field of an authorized_keys line), the paths.
func hygieneVars(loginUser, buildKey string) []scriptVar {
	blob := ""
	if f := strings.Fields(buildKey); len(f) >= 2 {
		blob = f[1]
	}
	return []scriptVar{{name: "user", value: loginUser}, {name: "blob", value: blob},
		{name: "cloud", value: strings.Join(hygieneCloudState, " ")}, {name: "hist", value: strings.Join(hygieneHistory, " ")}}
}

// HygieneScript is image hygiene's cleanup, run as root: it removes the build key from the
// authorized_keys of root and the login user, the SSH host keys, the machine id, cloud-init's
// instance state, logs and shell history.
func HygieneScript(loginUser, buildKey string) Script {
	return Script{Name: "image hygiene", File: "image-hygiene", Text: render("hygiene.sh", hygieneVars(loginUser, buildKey), nil),
		Timeout: HygieneTimeout, AsRoot: true}
}

const sectionHygiene = "hygiene.state"

// HygieneState reads back, as root, what image hygiene removed.
func HygieneState(ctx context.Context, r Runner, loginUser, buildKey string) facts.Fact[facts.HygieneState] {
	cmd := bundle.Command{Name: sectionHygiene, Shell: asRootShell(render("hygiene-probe.sh", hygieneVars(loginUser, buildKey), nil), "dlami-hygiene-probe")}
	sections, err := query(ctx, r, "reading the image's state after image hygiene", []bundle.Command{cmd})
	if err != nil {
		return facts.Unread[facts.HygieneState](err.Error(), "")
	}
	return ParseHygieneState(sections[sectionHygiene])
}

// hygieneFields is how many fields each kind of the read-back's lines has, at least and at
// most; a line of another kind, or shape, is unreadable.
var hygieneFields = map[string][2]int{
	"keys": {3, 4}, "hostkeys": {2, math.MaxInt}, "machine-id": {2, 2}, "dbus-machine-id": {2, 2},
	"cloud": {3, 3}, "history": {3, 3}, "logs": {2, 2}, "imex-nodes-config": {3, 12},
}

// ParseHygieneState reads hygiene-probe.sh's answer. An answer without its last line ("done"),
// or one that failed, is unreadable: an image is only clean when every fact says so.
func ParseHygieneState(s bundle.Section) facts.Fact[facts.HygieneState] {
	lines := strings.Split(strings.TrimSpace(s.Output), "\n")
	if s.TimedOut || s.ExitCode != 0 || len(lines) == 0 || lines[len(lines)-1] != "done" {
		return facts.Unread[facts.HygieneState](fmt.Sprintf("reading the image's state as root failed (exit %d): %s", s.ExitCode, textcut.Head(s.Output, 300)), s.Output)
	}
	var st facts.HygieneState
	saw := map[string]bool{}
	for _, l := range lines[:len(lines)-1] {
		f := strings.Fields(l)
		kind := ""
		if len(f) > 0 {
			kind = f[0]
		}
		if n, ok := hygieneFields[kind]; !ok || len(f) < n[0] || len(f) > n[1] {
			st.Unreadable = append(st.Unreadable, l)
			continue
		}
		saw[kind] = true
		switch kind {
		case "keys":
			k := facts.KeyFile{Path: f[1], Absent: f[2] == "absent"}
			if !k.Absent {
				lines, err1 := strconv.Atoi(strings.TrimPrefix(f[2], "lines="))
				build, err2 := 0, error(nil)
				if len(f) == 4 {
					build, err2 = strconv.Atoi(strings.TrimPrefix(f[3], "build="))
				}
				if err1 != nil || err2 != nil || !strings.HasPrefix(f[2], "lines=") {
					st.Unreadable = append(st.Unreadable, l)
					continue
				}
				k.Lines, k.BuildLines = lines, build
			}
			st.KeyFiles = append(st.KeyFiles, k)
		case "hostkeys":
			st.HostKeys = append(st.HostKeys, f[2:]...)
			if n, err := strconv.Atoi(f[1]); err != nil || n != len(f[2:]) {
				st.Unreadable = append(st.Unreadable, l)
			}
		case "machine-id":
			st.MachineID = f[1]
		case "dbus-machine-id":
			st.DBusMachineID = f[1]
		case "cloud":
			st.CloudState = append(st.CloudState, f[1])
		case "history":
			size, err := strconv.ParseInt(strings.TrimPrefix(f[2], "size="), 10, 64)
			if err != nil {
				st.Unreadable = append(st.Unreadable, l)
				continue
			}
			st.History = append(st.History, facts.SizedFile{Path: f[1], Size: size})
		case "logs":
			n, err := strconv.Atoi(strings.TrimPrefix(f[1], "nonempty="))
			if err != nil {
				st.Unreadable = append(st.Unreadable, l)
				continue
			}
			st.NonEmptyLogs = n
		case "imex-nodes-config":
			c := facts.IMEXNodesConfig{Path: f[1]}
			switch {
			case f[2] == "absent" && len(f) == 3:
			case f[2] == "present" && len(f) >= 4:
				n, err := strconv.Atoi(f[3])
				if err != nil || n < len(f[4:]) || n > 0 && len(f) == 4 {
					st.Unreadable = append(st.Unreadable, l)
					continue
				}
				c.Present, c.Addresses, c.Count = true, f[4:], n
			default:
				st.Unreadable = append(st.Unreadable, l)
				continue
			}
			st.IMEXNodesConfig = &c
		}
	}
	for _, k := range []string{"hostkeys", "machine-id", "dbus-machine-id", "logs", "imex-nodes-config"} {
		if !saw[k] {
			st.Missing = append(st.Missing, k)
		}
	}
	return facts.Read(st, s.Output)
}

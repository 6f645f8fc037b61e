package probe

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dpkg"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/imexctl"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Sections of the IMEX facts (grace-blackwell.md section 1.5).
const (
	sectionIMEXPackages = "host.imex_packages"
	sectionIMEXEnabled  = "host.imex_enabled"
	sectionIMEXActive   = "host.imex_active"
	sectionIMEXChannel  = "host.imex_channel"
	sectionIMEXCtl      = "host.imex_ctl"
)

// imexChannelCommand prints every `options nvidia` line of /etc/modprobe.d/*.conf as
// "FILE:LINE" (grep -H), "unreadable: FILE" for a file grep could not read, and one
// "channel0: ..." line saying whether /dev/nvidia-caps-imex-channels/channel0 is a character
// device now. The channel is created at boot by `options nvidia NVreg_CreateImexChannel0=1`;
// otherwise someone must mknod it after every boot (NVIDIA IMEX guide, imexchannels.html).
const imexChannelCommand = `for f in /etc/modprobe.d/*.conf; do [ -f "$f" ] || continue; ` +
	`grep -H -E '^[[:space:]]*options[[:space:]]+nvidia[[:space:]]' "$f" || [ $? = 1 ] || echo "unreadable: $f"; done; ` +
	`c=/dev/nvidia-caps-imex-channels/channel0; if [ -c "$c" ]; then echo "channel0: character device"; ` +
	`elif [ -e "$c" ]; then echo "channel0: not a character device"; else echo "channel0: absent"; fi`

// imexCtlShell asks nvidia-imex-ctl for the domain only where the service runs: nothing else
// answers on IMEX_CMD_PORT, and a query nobody answers costs up to the command's bound on every
// host that merely has the package. Otherwise it says so and exits 3 (`systemctl is-active`'s
// status for a unit that is not active). "$1" is nvidia-imex-ctl.
var imexCtlShell = `s=""; for p in ` + strings.Join(hosttools.Systemctl.Paths, " ") + `; do if [ -x "$p" ]; then s=$p; break; fi; done; ` +
	`if [ -n "$s" ] && ! "$s" is-active -q nvidia-imex; then echo "` + imexCtlNotRun + `"; exit 3; fi; exec "$1" -N -j`

// imexCtlNotRun is imexCtlShell's line when the service does not run.
const imexCtlNotRun = "nvidia-imex-ctl not run: nvidia-imex is not active"

// imexCommands read the IMEX facts: cheap, and harmless where IMEX is not installed (the
// tool's absence is a fact, judged only where imex asks for it).
func imexCommands(o Options) []bundle.Command {
	t := o.timeout()
	tool := func(name string, tl bundle.Tool, shell string) bundle.Command {
		return bundle.Command{Name: name, Shell: shell, Timeout: t, Tool: hosttools.Ptr(tl)}
	}
	return []bundle.Command{
		tool(sectionIMEXPackages, hosttools.DpkgQuery, `"$1" -W -f='`+dpkg.QueryFormat+`' 'nvidia-imex*'`),
		tool(sectionIMEXEnabled, hosttools.Systemctl, `"$1" is-enabled nvidia-imex`),
		tool(sectionIMEXActive, hosttools.Systemctl, `"$1" is-active nvidia-imex`),
		{Name: sectionIMEXChannel, Shell: imexChannelCommand, Timeout: t},
		tool(sectionIMEXCtl, hosttools.NvidiaIMEXCtl, imexCtlShell),
	}
}

// parseIMEX reads the IMEX sections.
func parseIMEX(sections map[string]bundle.Section) facts.IMEX {
	return facts.IMEX{
		Packages: parseIMEXPackages(sections),
		Enabled:  parseUnitEnabled(sections, sectionIMEXEnabled),
		Active:   parseUnitState(sections, sectionIMEXActive),
		Channel:  parseWith(sections, sectionIMEXChannel, parseIMEXChannel),
		Domain:   parseWith(sections, sectionIMEXCtl, imexctl.ParseJSON),
	}
}

// parseIMEXPackages reads dpkg-query's nvidia-imex* records, keeping the installed ones.
// dpkg-query exits 1 saying "no packages found matching" when dpkg knows none: none installed.
func parseIMEXPackages(sections map[string]bundle.Section) facts.Fact[[]dpkg.Package] {
	ev := evidence(sections, sectionIMEXPackages)
	s, problem := get(sections, sectionIMEXPackages)
	if problem != "" {
		if !s.TimedOut && s.ExitCode == 1 && strings.Contains(s.Output, "no packages found matching") {
			return facts.Read([]dpkg.Package{}, ev)
		}
		return facts.Unread[[]dpkg.Package](problem, ev)
	}
	q, err := dpkg.ParseQuery(s.Output)
	if err != nil {
		return facts.Unread[[]dpkg.Package](err.Error(), ev)
	}
	installed := []dpkg.Package{}
	for _, p := range q.Packages {
		if p.Installed {
			installed = append(installed, p)
		}
	}
	return facts.Read(installed, ev)
}

// unitFileStates are the words `systemctl is-enabled` prints (systemctl(1), "is-enabled").
var unitFileStates = map[string]bool{
	"enabled": true, "enabled-runtime": true, "linked": true, "linked-runtime": true, "alias": true,
	"masked": true, "masked-runtime": true, "static": true, "indirect": true, "disabled": true,
	"generated": true, "transient": true, "bad": true, "not-found": true,
}

// parseUnitEnabled reads `systemctl is-enabled UNIT`'s section, whatever its exit status
// (non-zero for every state but enabled, static and the like); a missing tool or a command
// stopped at its bound is unread.
func parseUnitEnabled(sections map[string]bundle.Section, name string) facts.Fact[string] {
	ev := evidence(sections, name)
	if s, ok := sections[name]; ok && !s.TimedOut && s.ExitCode != 127 {
		if w, err := parseUnitFileState(s.Output); err == nil {
			return facts.Read(w, ev)
		}
	}
	_, problem := get(sections, name)
	if problem == "" {
		problem = "systemctl printed no unit file state"
	}
	return facts.Unread[string](problem, ev)
}

// parseUnitFileState reads what `systemctl is-enabled UNIT` prints: one of systemctl(1)'s unit
// file states. Older systemd says a missing unit in words ("Failed to get unit file state for
// X: No such file or directory"): that is "not-found". Anything else is unreadable.
func parseUnitFileState(out string) (string, error) {
	w := firstLine(out)
	switch {
	case unitFileStates[w]:
		return w, nil
	case strings.Contains(out, "Failed to get unit file state") && strings.Contains(out, "No such file or directory"):
		return "not-found", nil
	}
	return "", fmt.Errorf("systemctl is-enabled: not a unit file state: %q", textcut.Head(strings.TrimSpace(out), 120))
}

// parseIMEXChannel reads imexChannelCommand's lines.
func parseIMEXChannel(out string) (facts.IMEXChannel, error) {
	var c facts.IMEXChannel
	seen := false
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "unreadable: "):
			return facts.IMEXChannel{}, fmt.Errorf("modprobe configuration %s could not be read", strings.TrimPrefix(line, "unreadable: "))
		case strings.HasPrefix(line, "channel0: "):
			switch strings.TrimPrefix(line, "channel0: ") {
			case "character device":
				c.Device = true
			case "absent", "not a character device":
			default:
				return facts.IMEXChannel{}, fmt.Errorf("unreadable channel line %q", line)
			}
			seen = true
		case strings.HasPrefix(line, "/etc/modprobe.d/"):
			file, opts, ok := strings.Cut(line, ":")
			if !ok {
				return facts.IMEXChannel{}, fmt.Errorf("unreadable modprobe line %q", line)
			}
			f := strings.Fields(opts)
			if len(f) < 2 || f[0] != "options" || f[1] != "nvidia" {
				return facts.IMEXChannel{}, fmt.Errorf("unreadable modprobe line %q", line)
			}
			for _, p := range f[2:] {
				if p == "#" || strings.HasPrefix(p, "#") {
					break
				}
				if p == "NVreg_CreateImexChannel0=1" {
					c.Options = append(c.Options, file+": "+strings.TrimSpace(opts))
					break
				}
			}
		default:
			return facts.IMEXChannel{}, fmt.Errorf("unexpected line %q", line)
		}
	}
	if !seen {
		return facts.IMEXChannel{}, errors.New("no channel0 line: the command did not finish")
	}
	return c, nil
}

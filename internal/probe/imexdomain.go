package probe

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/imexctl"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// imexDomainMarker marks the lines imex-domain.sh prints about itself.
const imexDomainMarker = "@@DLAMI-IMEX"

// DefaultIMEXDomainTimeout bounds the wait for the one-node domain: ParallelCluster's prolog
// waits up to 60 s for nvidia-imex to start (grace-blackwell.md section 1.5).
const DefaultIMEXDomainTimeout = 60 * time.Second

// IMEXDomainScript brings up a one-node IMEX domain of the tray's own private address, as root,
// waiting up to timeout (DefaultIMEXDomainTimeout when 0) for it to come UP, and always puts
// nodes_config.cfg and the service back as they were (scripts/imex-domain.sh).
func IMEXDomainScript(timeout time.Duration) Script {
	if timeout <= 0 {
		timeout = DefaultIMEXDomainTimeout
	}
	text := render("imex-domain.sh", []scriptVar{{name: "M", value: imexDomainMarker}, {name: "timeout_s", value: seconds(timeout)},
		{name: "systemctl_paths", value: paths(hosttools.Systemctl)}, {name: "ctl_paths", value: paths(hosttools.NvidiaIMEXCtl)},
		{name: "ip_paths", value: paths(hosttools.IP)}}, nil)
	// The bound covers the wait, the restart before it and the restore after it.
	return Script{Name: "the one-node IMEX domain", File: "imex-domain", Text: text, Timeout: timeout + time.Minute, AsRoot: true}
}

// ParseIMEXDomainRun reads imex-domain.sh's output: code is its exit status, timedOut when its
// bound stopped it.
func ParseIMEXDomainRun(output string, code int, timedOut bool) facts.IMEXOneNode {
	ev := textcut.Tail(output, 4*evidenceMax)
	r := facts.IMEXOneNode{Ran: true}
	var doc strings.Builder
	inDoc, ended, restoreSeen := false, false, false
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		rest, ok := strings.CutPrefix(line, imexDomainMarker+" ")
		if !ok {
			if inDoc {
				doc.WriteString(line + "\n")
			}
			continue
		}
		word, arg, _ := strings.Cut(rest, " ")
		arg = textcut.Head(strings.TrimSpace(arg), 500)
		switch word {
		case "WAS":
			r.WasActive = arg
		case "CONFIG":
			r.HadConfig = arg == "present"
		case "BAKED":
			if f := strings.Fields(arg); len(f) > 0 {
				r.BakedCount, _ = strconv.Atoi(f[0])
				r.BakedAddresses = f[1:]
			}
		case "ADDRESS":
			r.Address = arg
		case "RESTART":
			r.RestartExit, _ = strconv.Atoi(arg)
		case "ACTIVE":
			r.ActiveAfter = arg
		case "ERROR":
			if r.Problem == "" {
				r.Problem = arg
			}
		case "BEGIN":
			inDoc = true
		case "END":
			inDoc, ended = false, true
		case "RESTORED", "UNCHANGED":
			restoreSeen = true
		case "RESTORE-FAILED":
			restoreSeen = true
			r.RestoreProblem = cmp.Or(arg, "the restore failed")
		}
	}
	switch {
	case !restoreSeen:
		// The trap never reported: whether the image keeps the temporary file is unknown.
		why := "the script ended without reporting its restore"
		if timedOut || bundle.TimedOut(code) {
			why = "the script was stopped at its bound before reporting its restore"
		}
		r.RestoreProblem = why + ": /etc/nvidia-imex/nodes_config.cfg and nvidia-imex may not be as they were"
	}
	switch {
	case r.Problem != "":
		r.Domain = facts.Unread[imexctl.Domain](r.Problem, ev)
	case !ended:
		why := "the script ended before reading the domain"
		if timedOut || bundle.TimedOut(code) {
			why = "the script was stopped at its bound before reading the domain"
		}
		r.Domain = facts.Unread[imexctl.Domain](why, ev)
	default:
		d, err := imexctl.ParseJSON(doc.String())
		if err != nil {
			r.Domain = facts.Unread[imexctl.Domain](err.Error()+": "+textcut.Head(strings.TrimSpace(doc.String()), 300), ev)
		} else {
			r.Domain = facts.Read(d, ev)
		}
	}
	return r
}

// imexNodesMarker marks the lines imex-nodes.sh prints about itself.
const imexNodesMarker = "@@DLAMI-IMEXNODES"

// IMEXNodesTimeout bounds writing a node's list and restarting nvidia-imex: ParallelCluster's
// prolog gives the stop 15 s and the start 60 s (grace-blackwell.md section 1.5).
const IMEXNodesTimeout = 90 * time.Second

// IMEXNodesScript writes addresses, in this order, as the node's
// /etc/nvidia-imex/nodes_config.cfg and restarts nvidia-imex, as root (scripts/imex-nodes.sh):
// the verification's domain across its trays. Every address must be an IPv4 address (EC2's
// private addresses; IMEX's list holds addresses, one per line).
func IMEXNodesScript(addresses []string) (Script, error) {
	if len(addresses) == 0 {
		return Script{}, fmt.Errorf("the IMEX domain needs the nodes' addresses, got none")
	}
	for _, a := range addresses {
		if ip, err := netip.ParseAddr(a); err != nil || !ip.Is4() {
			return Script{}, fmt.Errorf("the IMEX domain's node list: %q is not an IPv4 address", a)
		}
	}
	text := render("imex-nodes.sh", []scriptVar{{name: "M", value: imexNodesMarker}, {name: "addresses", value: strings.Join(addresses, " ")},
		{name: "systemctl_paths", value: paths(hosttools.Systemctl)}}, nil)
	return Script{Name: "the IMEX domain's node list", File: "imex-nodes", Text: text, Timeout: IMEXNodesTimeout, AsRoot: true}, nil
}

// ParseIMEXNodesRun reads imex-nodes.sh's output: code is its exit status, timedOut when its
// bound stopped it. The node's view of the domain is read afterwards (IMEXView).
func ParseIMEXNodesRun(output string, code int, timedOut bool) facts.IMEXDomainNode {
	ev := textcut.Tail(output, evidenceMax)
	var n facts.IMEXDomainNode
	restart, active := false, ""
	var printed []string
	for _, line := range strings.Split(output, "\n") {
		line = strings.TrimRight(line, "\r")
		rest, ok := strings.CutPrefix(line, imexNodesMarker+" ")
		if !ok {
			if restart && active == "" && strings.TrimSpace(line) != "" {
				printed = append(printed, line)
			}
			continue
		}
		word, arg, _ := strings.Cut(rest, " ")
		arg = textcut.Head(strings.TrimSpace(arg), 500)
		switch word {
		case "ERROR":
			n.Problem = cmp.Or(n.Problem, arg)
		case "RESTART":
			if c, err := strconv.Atoi(arg); err == nil {
				n.RestartExit, restart = c, true
			}
		case "ACTIVE":
			active = cmp.Or(arg, "unknown")
		}
	}
	n.RestartOutput = textcut.Head(strings.Join(printed, "\n"), 500)
	switch {
	case n.Problem != "":
	case timedOut || bundle.TimedOut(code):
		n.Problem = "writing nodes_config.cfg and restarting nvidia-imex did not end within its bound"
	case !restart || active == "":
		n.Problem = fmt.Sprintf("the job ended (status %d) before reporting the restart of nvidia-imex", code)
	}
	if active != "" {
		n.Active = facts.Read(active, ev)
	} else {
		n.Active = facts.Unread[string](cmp.Or(n.Problem, "not reported"), ev)
	}
	n.View = facts.Unread[imexctl.Domain]("not read yet", "")
	return n
}

// IMEXView reads the node's view of its IMEX domain in one round trip: whether nvidia-imex is
// active and `nvidia-imex-ctl -N -j` (asked only where the service runs), as the host suite
// reads them.
func IMEXView(ctx context.Context, r Runner, o Options) (facts.Fact[string], facts.Fact[imexctl.Domain], error) {
	var cmds []bundle.Command
	for _, c := range imexCommands(o) {
		if c.Name == sectionIMEXActive || c.Name == sectionIMEXCtl {
			cmds = append(cmds, c)
		}
	}
	sections, err := query(ctx, r, "the IMEX domain", cmds)
	if err != nil {
		return facts.Fact[string]{}, facts.Fact[imexctl.Domain]{}, err
	}
	return parseUnitState(sections, sectionIMEXActive), parseWith(sections, sectionIMEXCtl, imexctl.ParseJSON), nil
}

package probe

import (
	"bufio"
	"cmp"
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

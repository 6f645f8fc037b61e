package probe

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Sections of the node check's installation and its run on a verification instance.
const (
	sectionMachine          = "nodecheck.machine"
	sectionNodeCheckPresent = "nodecheck.present"
	sectionNodeCheckRun     = "nodecheck.run"
	// nodeCheckRunSlack is how much longer the command may take than the node check's own
	// bound.
	nodeCheckRunSlack = 60 * time.Second
	// nodeCheckEnableTimeout bounds daemon-reload, enable and the installed binary's
	// --version.
	nodeCheckEnableTimeout = 2 * time.Minute
)

// Machine is the host's architecture as `uname -m` prints it.
func Machine(ctx context.Context, r Runner) (string, error) {
	sections, err := query(ctx, r, "reading the host's architecture", []bundle.Command{{Name: sectionMachine, Shell: `"$1" -m`, Tool: hosttools.Ptr(hosttools.Uname)}})
	if err != nil {
		return "", err
	}
	s := sections[sectionMachine]
	if s.ExitCode != 0 || s.TimedOut {
		return "", fmt.Errorf("uname -m exited %d: %s", s.ExitCode, textcut.Head(s.Output, 200))
	}
	return strings.TrimSpace(s.Output), nil
}

// NodeCheckEnableScript enables the installed node check's unit and runs its binary once.
func NodeCheckEnableScript(unit, binary string) Script {
	return Script{Name: "enabling the node check", File: "node-check-enable", AsRoot: true, Timeout: nodeCheckEnableTimeout,
		Text: render("node-check-enable.sh", []scriptVar{{name: "systemctl_paths", value: paths(hosttools.Systemctl)}, {name: "unit", value: unit}, {name: "binary", value: binary}}, nil)}
}

// NodeCheck runs the image's node check at binary in mode (report: judge and write, never
// act) with --json, as root, bounded by timeout plus slack, and returns its run, the JSON
// report unread (package engine reads it, readNodeCheckReport). The
// NCCL test is left off: the verification runs its own.
func NodeCheck(ctx context.Context, r Runner, binary, mode string, timeout time.Duration) (facts.NodeCheckRun, error) {
	bin := bundle.Quote(binary)
	sections, err := query(ctx, r, "looking for the node check", []bundle.Command{{Name: sectionNodeCheckPresent, Shell: "if [ -x " + bin + " ]; then echo present; else echo absent; fi"}})
	if err != nil {
		return facts.NodeCheckRun{}, err
	}
	if strings.TrimSpace(sections[sectionNodeCheckPresent].Output) != "present" {
		return facts.NodeCheckRun{Absent: true}, nil
	}
	// stdout is the JSON report; the one-line verdict and notes go to stderr, dropped here
	// (the report carries them).
	cmd := bundle.Command{Name: sectionNodeCheckRun, Timeout: timeout + nodeCheckRunSlack,
		Shell: asRootShell("exec "+bin+" --mode "+bundle.Quote(mode)+" --json --nccl=false 2>/dev/null", "dlami-node-check")}
	sections, err = query(ctx, r, "the image's node check", []bundle.Command{cmd})
	if err != nil {
		return facts.NodeCheckRun{}, err
	}
	return ParseNodeCheck(sections[sectionNodeCheckRun]), nil
}

// ParseNodeCheck keeps the node check's run from its section: its exit status and what it
// printed (the JSON report, which the engine reads with the report's own types: a transport
// reads no record format).
func ParseNodeCheck(s bundle.Section) facts.NodeCheckRun {
	return facts.NodeCheckRun{ExitCode: s.ExitCode, TimedOut: s.TimedOut, Output: s.Output}
}

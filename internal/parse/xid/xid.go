// Package xid finds NVIDIA Xid (GPU) and SXid (NVSwitch) error reports in kernel log text
// (dmesg with or without -T/--ctime/--decode/--time-format=iso, journalctl -k, syslog) and
// classifies them.
//
// Line shapes handled (see testdata/*.source):
//
//	[  219.47] NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable ...
//	[Fri Apr  5 21:29:39 2024] NVRM: Xid (PCI:0000:a1:00): 79, pid=..., name=..., GPU has fallen off the bus.
//	NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.        (old drivers: no pid/name)
//	NVRM: Xid (0000:02:00): 79, ...                                     (older still: no "PCI:")
//	nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up
//
// Only the line that carries "Xid (...)" is an event; the NVRM continuation lines that follow
// (crash dump notes, GSP RPC history tables) are context, not further events.
//
// Classification follows NVIDIA's published Xid Catalog: catalog/xid-catalog.tsv is the
// transcription (source URL and date in its header), catalog_gen.go the table generated from it
// (go generate), and actionFor the one place its resolution buckets become Actions.
package xid

import (
	"regexp"
	"strconv"
	"strings"
)

//go:generate go run ./catalog/gen -in catalog/xid-catalog.tsv -out catalog_gen.go

// Event is one Xid or SXid report.
type Event struct {
	// PCI is the device address as printed ("0000:1e:00", "0000:06:00.0").
	PCI string
	// Xid is the error number (the SXid number when SXid is true).
	Xid int
	// SXid is true for NVSwitch errors ("nvidia-nvswitchN: SXid ...").
	SXid bool
	// Switch is the NVSwitch device ("nvidia-nvswitch1") of an SXid, when printed.
	Switch string
	// PID and Process are the pid=/name= fields when printed ("'<unknown>'" kept as is).
	PID     string
	Process string
	// Message is the driver's text after the number and the pid/name fields.
	Message string
	// Line is the whole log line, as evidence.
	Line     string
	Severity Severity
}

// The patterns are anchored and run from the "NVRM: Xid (" / "SXid (" position, so the
// timestamp prefixes of the many log formats never matter and matching stays cheap.
var (
	xidAt    = regexp.MustCompile(`^NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?)\): (\d{1,6})\b,?\s*(.*)$`)
	sxidAt   = regexp.MustCompile(`^SXid \((?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?)\): (\d{1,6})\b,?\s*(.*)$`)
	switchAt = regexp.MustCompile(`(nvidia-nvswitch\d*): $`)
	pidName  = regexp.MustCompile(`^pid=('[^']*'|[^,]*),\s*(?:name=([^,]*),?\s*)?(.*)$`)
)

// Parse returns the events in text, in order, and the lines that mention an Xid or SXid but
// could not be read (truncated, mangled). A caller judging health must treat unparsed lines as
// failures too: an unreadable Xid report is still an Xid report.
func Parse(text string) (events []Event, unparsed []string) {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r \t")
		if !mentions(line) {
			continue
		}
		if i := strings.Index(line, "SXid ("); i >= 0 {
			if m := sxidAt.FindStringSubmatch(line[i:]); m != nil {
				n, _ := strconv.Atoi(m[2]) // at most 6 digits: cannot fail
				e := Event{PCI: m[1], Xid: n, SXid: true, Message: strings.TrimSpace(m[3]), Line: line}
				if sw := switchAt.FindStringSubmatch(line[:i]); sw != nil {
					e.Switch = sw[1]
				}
				e.Severity = Classify(e)
				events = append(events, e)
				continue
			}
		}
		if i := strings.Index(line, "NVRM: Xid ("); i >= 0 {
			if m := xidAt.FindStringSubmatch(line[i:]); m != nil {
				n, _ := strconv.Atoi(m[2])
				e := Event{PCI: m[1], Xid: n, Line: line, Message: strings.TrimSpace(m[3])}
				if p := pidName.FindStringSubmatch(e.Message); p != nil {
					e.PID, e.Process, e.Message = p[1], strings.TrimSpace(p[2]), strings.TrimSpace(p[3])
				}
				e.Severity = Classify(e)
				events = append(events, e)
				continue
			}
		}
		unparsed = append(unparsed, line)
	}
	return events, unparsed
}

// mentions reports whether a line claims to be an Xid/SXid report.
func mentions(line string) bool {
	if strings.Contains(line, "SXid") {
		return true
	}
	// Cheap exact test first: most kernel log lines are not NVRM lines at all.
	if !strings.Contains(line, "NVRM") {
		return false
	}
	return strings.Contains(line, "NVRM: Xid") || strings.Contains(strings.ToLower(line), "nvrm: xid")
}

// Action is what an operator should do about an event.
type Action string

const (
	ActionRestartApp  Action = "restart the application"
	ActionMonitor     Action = "monitor"
	ActionResetGPU    Action = "reset the GPU (reboot the instance)"
	ActionRetire      Action = "retire the instance"
	ActionInvestigate Action = "investigate"
)

// Severity classifies an Xid: what it is about and what to do.
type Severity struct {
	// Name is NVIDIA's description of the Xid ("GPU has fallen off the bus"), or for a code
	// NVIDIA lists as unused, its mnemonic with a note saying so.
	Name string
	// Class is ours, not NVIDIA's: one of application, driver, engine, display, memory, nvlink,
	// bus, firmware, power, timeout, security, recovery, test, nvswitch (SXid), unknown (an Xid
	// the catalog does not list).
	Class  string
	Action Action
	// Mnemonic is the catalog's name for the Xid ("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS").
	Mnemonic string
	// Resolution is NVIDIA's immediate-action resolution bucket ("RESET_GPU", "RESTART_BM"), or
	// NONE_PUBLISHED where the catalog gives none. Action is derived from it by actionFor.
	Resolution string
	// Investigation is NVIDIA's investigatory-action bucket ("CONTACT_SUPPORT",
	// "WORKFLOW_XID_31"), for when the Xid recurs; empty where the catalog gives none.
	Investigation string
}

// catalogEntry is one row of NVIDIA's Xid Catalog; catalogLookup (catalog_gen.go, generated
// from catalog/xid-catalog.tsv) holds them all.
type catalogEntry struct {
	mnemonic, description, immediate, investigatory, class string
}

// name is what the report calls the Xid. NVIDIA's description "Unused" says nothing about
// what happened, so an unused code is named by its mnemonic instead.
func (c catalogEntry) name() string {
	if c.description == "Unused" {
		return c.mnemonic + " (listed by NVIDIA as unused on current GPUs)"
	}
	return c.description
}

// actionFor maps NVIDIA's immediate-action resolution bucket to what this tool tells the
// operator of a bake host: an EC2 instance that is thrown away after the bake, where the
// tenant can reboot or stop/start but not touch the hardware. This is the only place buckets
// become actions. ok is false for a bucket this table does not know; the action is then
// "investigate", so a catalog revision with a new bucket fails closed until it is mapped here.
func actionFor(bucket string) (action Action, ok bool) {
	switch bucket {
	case "RESTART_APP":
		return ActionRestartApp, true
	case "IGNORE":
		// NVIDIA: no action required. The host check still fails on the Xid unless the user
		// ignores it; the advice is only to watch for repeats.
		return ActionMonitor, true
	case "RESET_GPU":
		return ActionResetGPU, true
	case "RESTART_VM":
		// On EC2 the VM is the instance: rebooting it restarts the VM.
		return ActionResetGPU, true
	case "RESTART_BM":
		// An EC2 reboot keeps the instance on the same physical host; only a stop/start onto
		// other hardware restarts "bare metal", and for a bake that means abandoning this
		// instance.
		return ActionRetire, true
	case "CHECK_MECHANICALS":
		// Seating and power cables are the cloud provider's; the tenant can only move off
		// the host.
		return ActionRetire, true
	case "WORKFLOW_XID_48":
		// Both branches of NVIDIA's workflow (solo: RESET_GPU; with Xid 63/64:
		// DRAIN_AND_RESET) reset the GPU.
		return ActionResetGPU, true
	case "WORKFLOW_NVLINK_ERR":
		// Xid 74: NVIDIA's trigger text says a GPU reset or node reboot is needed to clear it.
		return ActionResetGPU, true
	case "WORKFLOW_NVLINK5_ERR":
		// Xids 144-150 need the intrInfo/errorStatus registers decoded against NVIDIA's
		// decode sheet, which this package does not do; RESET_GPU is the most severe immediate
		// action that sheet gives, so it is assumed.
		return ActionResetGPU, true
	case "CHECK_UVM":
		// "If UVM/vGPU is being utilized, RESET_GPU; otherwise IGNORE": CUDA on a DLAMI uses
		// the nvidia-uvm module, so the reset branch applies.
		return ActionResetGPU, true
	case "WORKFLOW_XID_45":
		// Solo: restart Fabric Manager; with other Xids: follow those. One event cannot tell
		// which, so a person has to look.
		return ActionInvestigate, true
	case "XID_154":
		// The action is in the message; Classify reads it. Without a readable one, investigate.
		return ActionInvestigate, true
	case "CONTACT_SUPPORT", "UPDATE_SWFW":
		// Support case, or the image's driver/firmware stack needs changing: nothing a reboot
		// fixes.
		return ActionInvestigate, true
	case catalogNoBucket:
		// NVIDIA lists the Xid but gives no bucket: nothing to judge by.
		return ActionInvestigate, true
	}
	return ActionInvestigate, false
}

// catalogNoBucket marks a catalog row whose immediate-action cell NVIDIA left empty (the data
// file's NONE_PUBLISHED).
const catalogNoBucket = "NONE_PUBLISHED"

// Classify returns the severity of e from NVIDIA's Xid Catalog. An Xid the catalog does not
// list is "unlisted Xid" / unknown / investigate: never assumed harmless. Xid 154 takes its
// action from the message ("... to 0x1 (GPU Reset Required)"); an SXid is fatal or not as its
// message says (Fabric Manager guide).
func Classify(e Event) Severity {
	if e.SXid {
		s := Severity{Name: "NVSwitch error", Class: "nvswitch", Action: ActionInvestigate}
		msg := strings.ToLower(e.Message)
		switch {
		case strings.HasPrefix(msg, "non-fatal"):
			s.Name, s.Action = "NVSwitch non-fatal error", ActionMonitor
		case strings.HasPrefix(msg, "fatal"):
			s.Name, s.Action = "NVSwitch fatal error", ActionResetGPU
		}
		return s
	}
	entry, ok := catalogLookup(e.Xid)
	if !ok {
		return Severity{Name: "unlisted Xid", Class: "unknown", Action: ActionInvestigate}
	}
	action, _ := actionFor(entry.immediate) // an unmapped bucket already yields investigate
	s := Severity{
		Name:          entry.name(),
		Class:         entry.class,
		Action:        action,
		Mnemonic:      entry.mnemonic,
		Resolution:    entry.immediate,
		Investigation: entry.investigatory,
	}
	if e.Xid == 154 {
		s.Action = recoveryAction(e.Message)
	}
	return s
}

// recoveryState finds the "0x1 (GPU Reset Required)" states an Xid 154 message names.
var recoveryState = regexp.MustCompile(`0x[0-9A-Fa-f]+ \(([^)]*)\)`)

// recoveryAction reads an Xid 154 message ("GPU recovery action changed from 0x0 (None) to 0x1
// (GPU Reset Required)"). NVIDIA lists the states None, Drain P2P, Drain and Reset, GPU Reset
// Required and Node Reboot Required. Every state named counts, "from" as much as "to": a reset
// that was required earlier in the boot still says the GPU failed. Only a message whose every
// state is None is "monitor"; an unknown state, Drain P2P, or no readable state is "investigate".
func recoveryAction(message string) Action {
	states := recoveryState.FindAllStringSubmatch(message, -1)
	if len(states) == 0 {
		return ActionInvestigate
	}
	action := ActionMonitor
	for _, m := range states {
		switch strings.ToLower(strings.TrimSpace(m[1])) {
		case "none":
		case "gpu reset required", "node reboot required", "drain and reset":
			return ActionResetGPU
		default:
			action = ActionInvestigate
		}
	}
	return action
}

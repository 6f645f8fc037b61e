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
package xid

import (
	"regexp"
	"strconv"
	"strings"
)

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
	Name string
	// Class is one of application, memory, nvlink, bus, firmware, driver, timeout, recovery,
	// nvswitch, unknown.
	Class  string
	Action Action
}

// table is the Xid catalog this tool judges by. Sources:
//   - NVIDIA "Xid Errors" catalog (docs.nvidia.com/deploy/xid-errors), names and actions;
//   - host-layer.md (from the EKS troubleshooting notes): 31 illegal memory access = application
//     bug; 48, 63, 64, 92 ECC / row remap; 74 NVLink; 79 fallen off the bus = retire the
//     instance; 61 PMU;
//   - awsome-distributed-training gpu-cluster-healthcheck's r590 classification (anchors.md B),
//     for the reset/retire split.
//
// The 144-150 range is the NVLink error range NVIDIA added for Blackwell-generation drivers;
// the per-number names were not verified here, so they share one generic name.
var table = map[int]Severity{
	8:   {"GPU stopped processing", "driver", ActionResetGPU},
	13:  {"graphics engine exception", "application", ActionRestartApp},
	31:  {"GPU memory page fault (illegal memory access)", "application", ActionRestartApp},
	32:  {"invalid or corrupted push buffer stream", "driver", ActionInvestigate},
	38:  {"driver firmware error", "firmware", ActionResetGPU},
	43:  {"GPU stopped processing (channel reset)", "application", ActionRestartApp},
	45:  {"preemptive cleanup after earlier errors", "application", ActionMonitor},
	48:  {"double-bit ECC error", "memory", ActionResetGPU},
	61:  {"internal micro-controller (PMU) breakpoint/warning", "firmware", ActionResetGPU},
	62:  {"internal micro-controller (PMU) halt", "firmware", ActionResetGPU},
	63:  {"ECC page retirement / row remap recorded (reset to apply)", "memory", ActionResetGPU},
	64:  {"ECC page retirement / row remap recording failure", "memory", ActionRetire},
	68:  {"video decoder (NVDEC) exception", "application", ActionInvestigate},
	69:  {"graphics engine class error", "application", ActionRestartApp},
	74:  {"NVLink error", "nvlink", ActionResetGPU},
	79:  {"GPU has fallen off the bus", "bus", ActionRetire},
	92:  {"high single-bit ECC error rate", "memory", ActionMonitor},
	94:  {"contained ECC error", "memory", ActionRestartApp},
	95:  {"uncontained ECC error", "memory", ActionResetGPU},
	109: {"context switch timeout", "timeout", ActionRestartApp},
	119: {"GSP RPC timeout", "firmware", ActionResetGPU},
	120: {"GSP error", "firmware", ActionResetGPU},
	121: {"C2C link corrected error", "nvlink", ActionMonitor},
	140: {"unrecovered ECC error", "memory", ActionResetGPU},
	143: {"GPU initialization failure", "driver", ActionResetGPU},
	154: {"GPU recovery action changed", "recovery", ActionInvestigate},
}

func init() {
	for n := 144; n <= 150; n++ {
		table[n] = Severity{"NVLink error (Blackwell-generation range)", "nvlink", ActionResetGPU}
	}
}

// Classify returns the severity of e. Xid 154 takes its action from the message ("... to 0x1
// (GPU Reset Required)"); an SXid is fatal or not as its message says (Fabric Manager guide).
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
	s, ok := table[e.Xid]
	if !ok {
		return Severity{Name: "unlisted Xid", Class: "unknown", Action: ActionInvestigate}
	}
	if e.Xid == 154 {
		msg := strings.ToLower(e.Message)
		switch {
		case strings.Contains(msg, "node reboot required"), strings.Contains(msg, "gpu reset required"):
			s.Action = ActionResetGPU
		case strings.Contains(msg, "(none)"):
			s.Action = ActionMonitor
		}
	}
	return s
}

// Package dkms parses `dkms status` output into one entry per module, version and kernel. It
// understands both the dkms 2.x form ("name, version, kernel, arch: state") and the dkms 3.x
// form ("name/version, kernel, arch: state"), with or without the kernel and arch (a module
// that is only "added"), and keeps dkms's own warning lines apart.
package dkms

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Entry is one line of `dkms status`.
type Entry struct {
	Module  string `json:"module"`
	Version string `json:"version"`
	// Kernel and Arch are empty for a module that is added but not built for any kernel.
	Kernel string `json:"kernel,omitempty"`
	Arch   string `json:"arch,omitempty"`
	// State is dkms's word for it: "added", "built", "installed", "installed-weak", "broken", ...
	State string `json:"state"`
	// Notes are the parenthesised remarks after the state, such as
	// "WARNING! Diff between built and installed module!" or "original_module exists".
	Notes []string `json:"notes,omitempty"`
}

// Installed reports whether the module is installed for kernel.
func (e Entry) Installed(kernel string) bool {
	return e.Kernel == kernel && e.State == "installed"
}

// Status is the parsed output of `dkms status`.
type Status struct {
	Entries []Entry
	// Warnings are lines dkms prints besides entries (stderr is folded into the output):
	// "Error! ...", "Warning: ...", "Deprecated feature: ...".
	Warnings []string
}

var warningPrefixes = []string{"Error!", "Error:", "Warning", "WARNING", "Deprecated feature", "Notice", "dkms:"}

// Parse parses `dkms status` output. A line that is neither an entry nor a known dkms
// warning is an error: an entry list we only half understood must not be judged complete.
func Parse(out string) (Status, error) {
	var s Status
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" {
			continue
		}
		if isWarning(line) {
			s.Warnings = append(s.Warnings, line)
			continue
		}
		e, err := parseLine(line)
		if err != nil {
			return Status{}, fmt.Errorf("dkms status line %d %q: %w", i+1, textcut.Head(line, 120), err)
		}
		s.Entries = append(s.Entries, e)
	}
	return s, nil
}

func isWarning(line string) bool {
	for _, p := range warningPrefixes {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

func parseLine(line string) (Entry, error) {
	lhs, rhs, ok := strings.Cut(line, ": ")
	if !ok {
		lhs, ok = strings.CutSuffix(line, ":")
		if !ok {
			return Entry{}, fmt.Errorf(`no ": state" part; expected "name/version, kernel, arch: state"`)
		}
	}
	parts := strings.Split(lhs, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	var e Entry
	if name, ver, slash := strings.Cut(parts[0], "/"); slash {
		// dkms >= 3: name/version, kernel, arch
		e.Module, e.Version = name, ver
		parts = parts[1:]
	} else {
		// dkms 2: name, version, kernel, arch
		if len(parts) < 2 {
			return Entry{}, fmt.Errorf("no module version")
		}
		e.Module, e.Version = parts[0], parts[1]
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
	case 2:
		e.Kernel, e.Arch = parts[0], parts[1]
	default:
		return Entry{}, fmt.Errorf("want kernel and arch after the module version, got %d fields", len(parts))
	}
	if e.Module == "" || e.Version == "" || strings.ContainsAny(e.Module+e.Version+e.Kernel+e.Arch, " \t") {
		return Entry{}, fmt.Errorf("module %q, version %q, kernel %q, arch %q: a field is empty or has blanks", e.Module, e.Version, e.Kernel, e.Arch)
	}
	if (e.Kernel == "") != (e.Arch == "") {
		return Entry{}, fmt.Errorf("kernel %q without arch %q", e.Kernel, e.Arch)
	}
	state, notes, err := parseState(strings.TrimSpace(rhs))
	if err != nil {
		return Entry{}, err
	}
	e.State, e.Notes = state, notes
	return e, nil
}

// parseState splits "installed (WARNING! ...) (original_module exists)" into the state word
// and its notes. Text after the state that is not in parentheses is kept as a note too.
func parseState(s string) (string, []string, error) {
	state, rest, _ := strings.Cut(s, " ")
	state = strings.TrimSuffix(state, ",")
	if state == "" || strings.ContainsAny(state, "()") {
		return "", nil, fmt.Errorf("no state after the colon")
	}
	var notes []string
	rest = strings.TrimSpace(rest)
	for rest != "" {
		if rest[0] == '(' {
			if end := strings.IndexByte(rest, ')'); end > 0 {
				notes = append(notes, strings.TrimSpace(rest[1:end]))
				rest = strings.TrimSpace(rest[end+1:])
				continue
			}
		}
		notes = append(notes, rest)
		break
	}
	return state, notes, nil
}

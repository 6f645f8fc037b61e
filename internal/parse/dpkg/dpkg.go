// Package dpkg parses the output of dpkg-query into typed package records and orders Debian
// version strings. It runs nothing: the guard runs dpkg-query with QueryArgs and hands the output here.
package dpkg

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// QueryFormat is the dpkg-query -f format Parse understands: status abbreviation, name,
// version and architecture, tab-separated, one package a line.
const QueryFormat = `${db:Status-Abbrev}\t${Package}\t${Version}\t${Architecture}\n`

// QueryArgs are dpkg-query's arguments that list every package dpkg knows about (installed,
// held, config-files only, ...) in QueryFormat. It reads the dpkg database only and needs no root.
const QueryArgs = `-W -f='` + QueryFormat + `'`

// Package is one line of dpkg-query output.
type Package struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	Architecture string `json:"architecture"`
	// Status is the raw three-character db:Status-Abbrev ("hi ", "ii ", "rc ", "iF ", "iiR").
	Status string `json:"status"`
	// Held is true when the selection (first character) is h: apt will not change it.
	Held bool `json:"held"`
	// Installed is true only for a fully installed package (second character i); a
	// half-configured or unpacked package is not installed.
	Installed bool `json:"installed"`
}

// Query is the parsed output of QueryCommand.
type Query struct {
	Packages []Package
	// Warnings are dpkg-query's own warning lines (stderr is folded into the output).
	Warnings []string
}

const (
	wantChars   = "uihrp"    // unknown, install, hold, remove, purge
	statusChars = "ncHUFWti" // not-installed, config-files, half-installed, unpacked, half-configured, triggers-awaited, triggers-pending, installed
	errChars    = " R"       // none, reinst-required
)

// ParseQuery parses dpkg-query output in QueryFormat. Any line that is neither a package
// record nor a dpkg-query warning is an error: a half-understood package list must never be
// judged as complete.
func ParseQuery(out string) (Query, error) {
	var q Query
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "dpkg-query: warning:") {
			q.Warnings = append(q.Warnings, line)
			continue
		}
		p, err := parseLine(line)
		if err != nil {
			return Query{}, fmt.Errorf("dpkg-query line %d %q: %w (expected output of dpkg-query %s)", i+1, textcut.Head(line, 120), err, QueryArgs)
		}
		q.Packages = append(q.Packages, p)
	}
	return q, nil
}

func parseLine(line string) (Package, error) {
	f := strings.Split(line, "\t")
	if len(f) != 4 {
		return Package{}, fmt.Errorf("want 4 tab-separated fields, got %d", len(f))
	}
	st := f[0]
	// An abbreviation whose error flag is blank may reach us with the trailing space cut.
	if len(st) == 2 {
		st += " "
	}
	if len(st) != 3 || !strings.ContainsRune(wantChars, rune(st[0])) ||
		!strings.ContainsRune(statusChars, rune(st[1])) || !strings.ContainsRune(errChars, rune(st[2])) {
		return Package{}, fmt.Errorf("status %q is not a dpkg status abbreviation like \"ii \" or \"hi \"", f[0])
	}
	name := f[1]
	if name == "" || strings.ContainsAny(name, " /:") {
		return Package{}, fmt.Errorf("package name %q is not a dpkg package name", name)
	}
	return Package{
		Name:         name,
		Version:      f[2],
		Architecture: f[3],
		Status:       st,
		Held:         st[0] == 'h',
		Installed:    st[1] == 'i',
	}, nil
}

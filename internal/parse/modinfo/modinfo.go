// Package modinfo parses modinfo(8) output: one field (`modinfo -F version efa`) or the whole
// listing (`modinfo efa`).
package modinfo

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Field reads `modinfo -F <field> <module>`: exactly one non-empty value. Empty output (the
// module has no such field) and modinfo's "ERROR: Module x not found" are errors, so a missing
// module never yields a version.
func Field(text string) (string, error) {
	var vals []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line != "" {
			vals = append(vals, line)
		}
	}
	switch {
	case len(vals) == 0:
		return "", errors.New("modinfo: empty output (module has no such field)")
	case strings.Contains(vals[0], "modinfo: ERROR") || strings.Contains(vals[0], "not found"):
		return "", fmt.Errorf("modinfo: %s", textcut.Head(vals[0], 160))
	case len(vals) > 1:
		return "", fmt.Errorf("modinfo: want one value, got %d lines: %q", len(vals), textcut.Head(strings.Join(vals, " | "), 160))
	}
	return vals[0], nil
}

// Info is a full modinfo listing: every key with its values in order (alias, firmware and
// parm repeat).
type Info map[string][]string

// Get returns the first value of key, or "".
func (i Info) Get(key string) string {
	if v := i[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Parse reads a full `modinfo <module>` listing: "key:   value" lines, with lines that start
// with whitespace continuing the previous value (signatures wrap).
func Parse(text string) (Info, error) {
	info := Info{}
	last := ""
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if (line[0] == ' ' || line[0] == '\t') && last != "" {
			v := info[last]
			v[len(v)-1] += strings.TrimSpace(line)
			continue
		}
		if strings.HasPrefix(line, "modinfo: ") {
			return nil, fmt.Errorf("modinfo: %s", textcut.Head(strings.TrimSpace(strings.TrimPrefix(line, "modinfo: ")), 160))
		}
		key, val, ok := strings.Cut(line, ":")
		key = strings.TrimSpace(key)
		if !ok || key == "" || strings.ContainsAny(key, " \t") {
			return nil, fmt.Errorf("modinfo: line %d is not \"key: value\": %q", n+1, textcut.Head(line, 160))
		}
		info[key] = append(info[key], strings.TrimSpace(val))
		last = key
	}
	if len(info) == 0 {
		return nil, errors.New("modinfo: empty output")
	}
	return info, nil
}

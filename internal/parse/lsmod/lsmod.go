// Package lsmod parses lsmod(8) output into the set of loaded kernel modules.
package lsmod

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Module is one loaded module.
type Module struct {
	Name    string
	Size    int64
	UsedBy  int
	Holders []string
}

// Set is the loaded modules by name.
type Set map[string]Module

// Has reports whether name is loaded. Module names are compared with '-' and '_' treated alike,
// as the kernel does ("efa-nv-peermem" and "efa_nv_peermem" are one module).
func (s Set) Has(name string) bool {
	_, ok := s[normalize(name)]
	return ok
}

// Parse reads lsmod output. The "Module Size Used by" header must come first: without it the
// text is an error message ("lsmod: command not found"), not an empty module list.
func Parse(text string) (Set, error) {
	set := Set{}
	header := false
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if !header {
			if len(f) >= 2 && f[0] == "Module" && f[1] == "Size" {
				header = true
				continue
			}
			return nil, fmt.Errorf("lsmod: no \"Module Size Used by\" header; first line %q", textcut.Head(line, 160))
		}
		if len(f) < 3 {
			return nil, fmt.Errorf("lsmod: line %d: want name, size, use count; got %q", n+1, textcut.Head(line, 160))
		}
		size, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("lsmod: line %d: size %q is not a number", n+1, textcut.Head(f[1], 160))
		}
		used, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, fmt.Errorf("lsmod: line %d: use count %q is not a number", n+1, textcut.Head(f[2], 160))
		}
		m := Module{Name: f[0], Size: size, UsedBy: used}
		if len(f) > 3 {
			for _, h := range strings.Split(f[3], ",") {
				if h != "" {
					m.Holders = append(m.Holders, h)
				}
			}
		}
		set[normalize(f[0])] = m
	}
	if !header {
		return nil, errors.New("lsmod: empty output")
	}
	return set, nil
}

func normalize(name string) string { return strings.ReplaceAll(name, "-", "_") }

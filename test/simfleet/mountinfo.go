package simfleet

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Mount is one line of /proc/PID/mountinfo (proc(5)), the fields the fleet needs to prove
// that nothing of a host is still mounted.
type Mount struct {
	ID           int
	ParentID     int
	Root         string // the mounted subtree of the source filesystem
	MountPoint   string // absolute, escapes (\040 …) decoded
	FSType       string
	Source       string
	SuperOptions string // e.g. overlayfs' lowerdir=…,upperdir=…
}

// ParseMountinfo reads the text of /proc/PID/mountinfo. A line it cannot read is an error
// naming the line: the fleet decides whether a host is gone from this, so it never guesses.
func ParseMountinfo(text string) ([]Mount, error) {
	var mounts []Mount
	for n, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := parseMountinfoLine(line)
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d %q: %w", n+1, line, err)
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

// parseMountinfoLine reads "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue":
// six fixed fields, optional fields up to "-", then type, source and super options.
func parseMountinfoLine(line string) (Mount, error) {
	fields := strings.Fields(line)
	sep := -1
	for i := 6; i < len(fields); i++ {
		if fields[i] == "-" {
			sep = i
			break
		}
	}
	if len(fields) < 7 || sep < 0 || len(fields) < sep+3 {
		return Mount{}, fmt.Errorf("want at least 6 fields, a \"-\" separator, a type and a source")
	}
	id, err := strconv.Atoi(fields[0])
	if err != nil {
		return Mount{}, fmt.Errorf("mount ID %q is not a number", fields[0])
	}
	parent, err := strconv.Atoi(fields[1])
	if err != nil {
		return Mount{}, fmt.Errorf("parent ID %q is not a number", fields[1])
	}
	root, err := unescapeMountinfo(fields[3])
	if err != nil {
		return Mount{}, fmt.Errorf("root: %w", err)
	}
	point, err := unescapeMountinfo(fields[4])
	if err != nil {
		return Mount{}, fmt.Errorf("mount point: %w", err)
	}
	if !strings.HasPrefix(point, "/") {
		return Mount{}, fmt.Errorf("mount point %q is not absolute", point)
	}
	source, err := unescapeMountinfo(fields[sep+2])
	if err != nil {
		return Mount{}, fmt.Errorf("source: %w", err)
	}
	m := Mount{ID: id, ParentID: parent, Root: root, MountPoint: point, FSType: fields[sep+1], Source: source}
	if len(fields) > sep+3 {
		if m.SuperOptions, err = unescapeMountinfo(fields[sep+3]); err != nil {
			return Mount{}, fmt.Errorf("super options: %w", err)
		}
	}
	return m, nil
}

// unescapeMountinfo decodes the kernel's octal escapes of space, tab, newline and backslash.
func unescapeMountinfo(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("truncated escape in %q", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape %q in %q", s[i:i+4], s)
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// MountsUnder returns the mount points at or below dir, deepest first (the order to unmount
// them in).
func MountsUnder(mounts []Mount, dir string) []string {
	dir = filepath.Clean(dir)
	var out []string
	for _, m := range mounts {
		if m.MountPoint == dir || strings.HasPrefix(m.MountPoint, dir+"/") || dir == "/" {
			out = append(out, m.MountPoint)
		}
	}
	// Deepest first: a longer path under dir is never a parent of a shorter one.
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

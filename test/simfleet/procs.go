package simfleet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process is a process that still belongs to a simulated host.
type Process struct {
	PID     int
	Root    string // its root directory (a host's processes are chrooted into merged/)
	Cmdline string // argv joined by spaces
}

func (p Process) String() string {
	return fmt.Sprintf("pid %d (root %s): %s", p.PID, p.Root, p.Cmdline)
}

// ProcessesUsing lists the processes of this machine that belong to a host under dir:
// chrooted at or below it (sshd and everything it started), or running a script of
// scriptsDir (test/simhost) with a path under dir as an argument (the host's supervisor, a
// boot in progress). Processes that exit while it reads are skipped; anything else it cannot
// read is an error, never "none".
func ProcessesUsing(procRoot, dir, scriptsDir string) ([]Process, error) {
	dir = filepath.Clean(dir)
	if !filepath.IsAbs(dir) || dir == "/" {
		return nil, fmt.Errorf("processes using %q: want an absolute directory other than /", dir)
	}
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("listing processes in %s: %w", procRoot, err)
	}
	self := os.Getpid()
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		// pid 1 is this machine's init, never a host's process; in a VM sandbox or a
		// container even root may not read its root link.
		if err != nil || pid == self || pid == 1 {
			continue
		}
		root, err := os.Readlink(filepath.Join(procRoot, e.Name(), "root"))
		if err != nil {
			if gone(err) {
				continue
			}
			return nil, fmt.Errorf("reading the root of pid %d: %w", pid, err)
		}
		raw, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "cmdline"))
		if err != nil {
			if gone(err) {
				continue
			}
			return nil, fmt.Errorf("reading the command line of pid %d: %w", pid, err)
		}
		cmdline := strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
		if under(root, dir) || (mentions(cmdline, scriptsDir) && mentions(cmdline, dir)) {
			out = append(out, Process{PID: pid, Root: root, Cmdline: cmdline})
		}
	}
	return out, nil
}

// gone reports an error from a process that exited meanwhile (ENOENT, ESRCH).
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), "no such process")
}

// under reports whether path is dir or below it. A root the kernel marks " (deleted)" (its
// mount was detached lazily) still counts: the process is still there.
func under(path, dir string) bool {
	path = strings.TrimSuffix(path, " (deleted)")
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// mentions reports whether a command line names dir or a path below it as one argument.
func mentions(cmdline, dir string) bool {
	for _, arg := range strings.Fields(cmdline) {
		if under(filepath.Clean(arg), dir) {
			return true
		}
	}
	return false
}

// LoopDevicesUsing lists the attached loop devices (sysRoot/block/loop*/loop/backing_file)
// whose backing file is at or below dir: a host's NVMe volume image that is still attached
// keeps its disk busy after the mounts are gone. A device detached while it reads is skipped.
func LoopDevicesUsing(sysRoot, dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	if !filepath.IsAbs(dir) || dir == "/" {
		return nil, fmt.Errorf("loop devices using %q: want an absolute directory other than /", dir)
	}
	files, err := filepath.Glob(filepath.Join(sysRoot, "block", "loop*", "loop", "backing_file"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			if gone(err) {
				continue
			}
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		backing := strings.TrimSpace(string(b))
		if under(backing, dir) {
			dev := filepath.Base(filepath.Dir(filepath.Dir(f)))
			out = append(out, "/dev/"+dev+" ("+backing+")")
		}
	}
	return out, nil
}

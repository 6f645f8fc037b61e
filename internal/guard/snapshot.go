package guard

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dkms"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dpkg"
)

// SnapshotSchema is the version of the Snapshot JSON. DecodeSnapshot refuses any other, so a
// baseline written by a different plugin version is never silently misread.
const SnapshotSchema = 1

// Snapshot is what the guard knows about a host at one moment. It is stored on the host as
// the baseline (BaselinePath) and read back by later provisioners, so it is plain JSON.
type Snapshot struct {
	Schema        int    `json:"schema"`
	RunningKernel string `json:"running_kernel"`
	// NextBootKernel is the kernel release grub will boot next; empty when it could not be
	// determined. NextBootSource says how it was determined (see ParseSnapshot).
	NextBootKernel string `json:"next_boot_kernel"`
	NextBootSource string `json:"next_boot_source"`
	// InstalledKernelImages are the kernel releases with a /boot/vmlinuz-<release>, newest
	// first by Debian version ordering.
	InstalledKernelImages []string `json:"installed_kernel_images"`
	// Packages is keyed by package name; a second architecture of the same name (multiarch)
	// is keyed "name:arch".
	Packages map[string]Package `json:"packages"`
	// DKMSAvailable is false when the host has no dkms command (then DKMS is empty).
	DKMSAvailable  bool              `json:"dkms_available"`
	DKMS           []dkms.Entry      `json:"dkms"`
	DKMSWarnings   []string          `json:"dkms_warnings,omitempty"`
	ModuleVersions map[string]Module `json:"module_versions"`
	TakenAt        time.Time         `json:"taken_at"`
}

// Package is the dpkg state of one package.
type Package struct {
	Version string `json:"version"`
	Held    bool   `json:"held"`
	// Installed is true only for a fully installed package (status ?i?).
	Installed bool `json:"installed"`
	// Status is dpkg's three-character abbreviation ("hi ", "ii ", "rc ", "iF ").
	Status string `json:"status"`
	Arch   string `json:"arch,omitempty"`
}

// Present reports whether the package has files on the host: installed, or caught half way
// (unpacked, half-configured, ...). Not-installed and config-files-only are not present.
func (p Package) Present() bool {
	return len(p.Status) >= 2 && p.Status[1] != 'n' && p.Status[1] != 'c'
}

// Module is what modinfo reported for one kernel module for the running kernel.
type Module struct {
	Present bool   `json:"present"`
	Version string `json:"version,omitempty"`
}

// SectionError is a command whose output could not be turned into a Snapshot. It carries the
// raw output so the failed check can show it as evidence.
type SectionError struct {
	Section  string
	ExitCode int
	Output   string
	Err      error
}

func (e *SectionError) Error() string {
	return fmt.Sprintf("%s (exit %d): %v", e.Section, e.ExitCode, e.Err)
}

func (e *SectionError) Unwrap() error { return e.Err }

// ParseSnapshot builds a Snapshot from the sections of Commands. A missing section, a
// non-zero exit, a timeout or output it cannot parse is an error (a *SectionError naming the
// command): the guard never judges a partial picture.
//
// The next-boot kernel is determined in this order, mirroring what grub does on Ubuntu on EC2:
//  1. grub.cfg present: the entry grub's default selects. A grubenv next_entry (grub-reboot)
//     wins; otherwise the header's `set default=`, where "${saved_entry}" means grubenv's
//     saved_entry. An entry naming a kernel ("gnulinux-<release>-advanced-<uuid>",
//     "... with Linux <release>") gives that release; "0", an empty default or
//     "gnulinux-simple-<uuid>" mean the first menu entry, whose first `linux` line names
//     /boot/vmlinuz-<release>.
//  2. no grub.cfg: grubenv saved_entry when it names a kernel.
//  3. otherwise, or when the default cannot be resolved (e.g. "1>2"): the newest
//     /boot/vmlinuz-* by Debian version ordering, which is what grub's 10_linux puts first.
//
// NextBootSource records which rule applied. TakenAt is left for the caller, who knows when
// the commands ran.
func ParseSnapshot(sections map[string]bundle.Section) (Snapshot, error) {
	s := Snapshot{Schema: SnapshotSchema}

	out, err := section(sections, sectionRunning)
	if err != nil {
		return Snapshot{}, err
	}
	s.RunningKernel = strings.TrimSpace(out)
	if !kernelRelease.MatchString(s.RunningKernel) {
		return Snapshot{}, sectionErr(sections, sectionRunning, errors.New("uname -r did not print one kernel release"))
	}

	out, err = section(sections, sectionBootImages)
	if err != nil {
		return Snapshot{}, err
	}
	s.InstalledKernelImages = parseBootImages(out)

	env, envErr := grubEnv(sections)
	if envErr != nil {
		return Snapshot{}, envErr
	}
	cfg, cfgErr := grubCfgSection(sections)
	if cfgErr != nil {
		return Snapshot{}, cfgErr
	}
	s.NextBootKernel, s.NextBootSource = nextBoot(env, cfg, s.InstalledKernelImages)

	out, err = section(sections, sectionPackages)
	if err != nil {
		return Snapshot{}, err
	}
	q, err := dpkg.ParseQuery(out)
	if err != nil {
		return Snapshot{}, sectionErr(sections, sectionPackages, err)
	}
	if len(q.Packages) == 0 {
		return Snapshot{}, sectionErr(sections, sectionPackages, errors.New("dpkg-query listed no packages"))
	}
	s.Packages = make(map[string]Package, len(q.Packages))
	for _, p := range q.Packages {
		key := p.Name
		if _, dup := s.Packages[key]; dup {
			key = p.Name + ":" + p.Architecture
		}
		s.Packages[key] = Package{Version: p.Version, Held: p.Held, Installed: p.Installed, Status: p.Status, Arch: p.Architecture}
	}

	out, err = section(sections, sectionDKMS)
	if err != nil {
		return Snapshot{}, err
	}
	if strings.TrimSpace(out) != absent {
		st, err := dkms.Parse(out)
		if err != nil {
			return Snapshot{}, sectionErr(sections, sectionDKMS, err)
		}
		s.DKMSAvailable, s.DKMS, s.DKMSWarnings = true, st.Entries, st.Warnings
	}
	if s.DKMS == nil {
		s.DKMS = []dkms.Entry{}
	}

	s.ModuleVersions = make(map[string]Module, len(Modules))
	for _, m := range Modules {
		mod, err := parseModinfo(sections, sectionModinfoPrefix+m, m)
		if err != nil {
			return Snapshot{}, err
		}
		s.ModuleVersions[m] = mod
	}
	return s, nil
}

// section returns a command's output when it ran to completion with exit status 0.
func section(sections map[string]bundle.Section, name string) (string, error) {
	sec, ok := sections[name]
	if !ok {
		return "", &SectionError{Section: name, Err: errors.New("no output: the command did not run (send guard.Commands() in the bundle)")}
	}
	if sec.TimedOut {
		return "", &SectionError{Section: name, ExitCode: sec.ExitCode, Output: sec.Output, Err: errors.New("timed out")}
	}
	if sec.ExitCode != 0 {
		return "", &SectionError{Section: name, ExitCode: sec.ExitCode, Output: sec.Output, Err: errors.New("command failed")}
	}
	return sec.Output, nil
}

func sectionErr(sections map[string]bundle.Section, name string, err error) error {
	sec := sections[name]
	return &SectionError{Section: name, ExitCode: sec.ExitCode, Output: sec.Output, Err: err}
}

var kernelRelease = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+~-]*$`)

var modNotFound = regexp.MustCompile(`^modinfo: ERROR: Module \S+ not found\.?$`)

func parseModinfo(sections map[string]bundle.Section, name, module string) (Module, error) {
	sec, ok := sections[name]
	if !ok {
		return Module{}, &SectionError{Section: name, Err: errors.New("no output: the command did not run (send guard.Commands() in the bundle)")}
	}
	out := strings.TrimSpace(sec.Output)
	if !sec.TimedOut && sec.ExitCode == 1 && modNotFound.MatchString(out) {
		return Module{Present: false}, nil
	}
	if _, err := section(sections, name); err != nil {
		return Module{}, err
	}
	if strings.Contains(out, "\n") {
		return Module{}, sectionErr(sections, name, fmt.Errorf("modinfo -F version %s printed more than one line", module))
	}
	return Module{Present: true, Version: out}, nil
}

// parseBootImages turns /boot/vmlinuz-<release> paths into releases, newest first, skipping
// what grub's 10_linux skips as garbage (dpkg leftovers, rpm backups).
func parseBootImages(out string) []string {
	seen := map[string]bool{}
	var rels []string
	for _, line := range strings.Split(out, "\n") {
		rel, ok := strings.CutPrefix(path.Base(strings.TrimSpace(line)), "vmlinuz-")
		if !ok || rel == "" || strings.Contains(rel, ".dpkg-") ||
			strings.HasSuffix(rel, ".rpmsave") || strings.HasSuffix(rel, ".rpmnew") || seen[rel] {
			continue
		}
		seen[rel] = true
		rels = append(rels, rel)
	}
	sort.SliceStable(rels, func(i, j int) bool { return dpkg.CompareVersions(rels[i], rels[j]) > 0 })
	if rels == nil {
		rels = []string{}
	}
	return rels
}

type grubEnvVars struct {
	present               bool
	savedEntry, nextEntry string
}

func grubEnv(sections map[string]bundle.Section) (grubEnvVars, error) {
	out, err := section(sections, sectionGrubEnv)
	if err != nil {
		return grubEnvVars{}, err
	}
	if strings.TrimSpace(out) == absent {
		return grubEnvVars{}, nil
	}
	env := grubEnvVars{present: true}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		switch {
		case !ok && strings.TrimSpace(line) == "":
		case k == "saved_entry":
			env.savedEntry = v
		case k == "next_entry":
			env.nextEntry = v
		default:
			return grubEnvVars{}, sectionErr(sections, sectionGrubEnv, fmt.Errorf("unexpected line %q in grubenv output", line))
		}
	}
	return env, nil
}

type grubCfg struct {
	present bool
	// defaults are the values of the header's `set default=` lines, quotes removed.
	defaults []string
	// firstLinux is the kernel path of the first linux line ("/boot/vmlinuz-7.0.0-1014-aws").
	firstLinux string
}

func grubCfgSection(sections map[string]bundle.Section) (grubCfg, error) {
	out, err := section(sections, sectionGrubCfg)
	if err != nil {
		return grubCfg{}, err
	}
	if strings.TrimSpace(out) == absent {
		return grubCfg{}, nil
	}
	cfg := grubCfg{present: true}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "set" && len(f) >= 2 && strings.HasPrefix(f[1], "default="):
			v := strings.TrimPrefix(strings.Join(f[1:], " "), "default=")
			cfg.defaults = append(cfg.defaults, strings.Trim(v, `"'`))
		case (f[0] == "linux" || f[0] == "linuxefi" || f[0] == "linux16") && len(f) >= 2:
			if cfg.firstLinux == "" {
				cfg.firstLinux = f[1]
			}
		default:
			return grubCfg{}, sectionErr(sections, sectionGrubCfg, fmt.Errorf("unexpected line %q in grub.cfg output", line))
		}
	}
	return cfg, nil
}

var (
	entryAdvanced = regexp.MustCompile(`^gnulinux-(.+)-(?:advanced|recovery|init-upstart|init-sysvinit)-[0-9a-fA-F-]+$`)
	entryTitle    = regexp.MustCompile(`with Linux ([^ >()]+)`)
)

type resolution int

const (
	unresolved resolution = iota
	firstEntry
	namedKernel
)

// resolveEntry says what a grub default or saved entry selects.
func resolveEntry(e string) (resolution, string) {
	e = strings.TrimSpace(e)
	switch {
	case e == "" || e == "0" || strings.HasPrefix(e, "gnulinux-simple-"):
		return firstEntry, ""
	}
	// A submenu path "a>b": the last element names the entry.
	last := e
	if i := strings.LastIndexByte(e, '>'); i >= 0 {
		last = e[i+1:]
	}
	if m := entryAdvanced.FindStringSubmatch(last); m != nil {
		return namedKernel, m[1]
	}
	if m := entryTitle.FindStringSubmatch(last); m != nil {
		return namedKernel, m[1]
	}
	return unresolved, ""
}

func kernelFromPath(p string) string {
	rel, ok := strings.CutPrefix(path.Base(p), "vmlinuz-")
	if !ok {
		return ""
	}
	return rel
}

func nextBoot(env grubEnvVars, cfg grubCfg, images []string) (kernel, source string) {
	newest := func(why string) (string, string) {
		if len(images) == 0 {
			return "", "unknown: " + why + " and no /boot/vmlinuz-*"
		}
		return images[0], "newest /boot/vmlinuz-* (" + why + ")"
	}
	if cfg.present {
		var entry, from string
		switch {
		case env.nextEntry != "":
			entry, from = env.nextEntry, "grubenv next_entry"
		default:
			// The header sets default twice: "${next_entry}" when one is set, and the
			// configured GRUB_DEFAULT otherwise.
			for _, d := range cfg.defaults {
				if d != "${next_entry}" {
					entry, from = d, "grub.cfg default"
				}
			}
			if entry == "${saved_entry}" {
				entry, from = env.savedEntry, "grubenv saved_entry"
			}
		}
		switch r, k := resolveEntry(entry); r {
		case namedKernel:
			return k, from + " " + quote(entry)
		case firstEntry:
			if k := kernelFromPath(cfg.firstLinux); k != "" {
				return k, "grub.cfg first entry"
			}
			return newest("grub.cfg first entry has no versioned linux line")
		default:
			return newest(from + " " + quote(entry) + " not resolvable")
		}
	}
	if r, k := resolveEntry(env.savedEntry); env.savedEntry != "" && r == namedKernel {
		return k, "grubenv saved_entry " + quote(env.savedEntry)
	}
	return newest("no /boot/grub/grub.cfg")
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// Encode returns the Snapshot as indented JSON, for BaselinePath.
func (s Snapshot) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("guard: encoding snapshot: %w", err)
	}
	return append(b, '\n'), nil
}

// DecodeSnapshot reads a Snapshot written by Encode. It rejects another schema version, a
// snapshot without a running kernel or without packages, and unknown fields, so a truncated
// or foreign baseline fails the guard instead of passing it.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var s Snapshot
	if err := dec.Decode(&s); err != nil {
		return Snapshot{}, fmt.Errorf("guard: the baseline is not a snapshot: %w", err)
	}
	switch {
	case s.Schema != SnapshotSchema:
		return Snapshot{}, fmt.Errorf("guard: the baseline has schema %d, this plugin reads %d (all dlami provisioners of one build must be the same plugin version)", s.Schema, SnapshotSchema)
	case s.RunningKernel == "":
		return Snapshot{}, fmt.Errorf("guard: the baseline has no running_kernel")
	case len(s.Packages) == 0:
		return Snapshot{}, fmt.Errorf("guard: the baseline has no packages")
	}
	return s, nil
}

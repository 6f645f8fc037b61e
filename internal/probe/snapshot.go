package probe

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dkms"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dpkg"
)

// Section names of the guard snapshot's commands.
const (
	sectionRunning    = "guard.uname"
	sectionGrubEnv    = "guard.grubenv"
	sectionGrubCfg    = "guard.grubcfg"
	sectionBootImages = "guard.vmlinuz"
	sectionPackages   = "guard.dpkg"
	sectionDKMS       = "guard.dkms"
	// sectionModinfoPrefix + module name, one section per entry of facts.GuardedModules.
	sectionModinfoPrefix = "guard.modinfo."
)

// absent is what a command prints when the thing it reads does not exist on the host, so an
// empty file and a missing file stay distinguishable.
const absent = "@dlami-guard absent"

// Commands returns the read-only commands a Snapshot is built from, each tool at its absolute
// path (package hosttools). None needs root:
// grub.cfg is world-readable on Ubuntu (grub-mkconfig makes it 0444 unless it holds a
// password), /boot is listable, and dpkg, dkms and modinfo only read their databases.
func snapshotCommands() []bundle.Command {
	cmds := []bundle.Command{
		{Name: sectionRunning, Shell: `"$1" -r`, Tool: hosttools.Ptr(hosttools.Uname)},
		{Name: sectionGrubEnv, Shell: commandShell("grubenv.sh", scriptVar{name: "absent", value: absent})},
		// Only the default-entry lines of the header and the first linux line matter
		// (commands/grubcfg.sh).
		{Name: sectionGrubCfg, Shell: commandShell("grubcfg.sh", scriptVar{name: "absent", value: absent})},
		// A glob loop instead of ls: no "cannot access" noise when there is no image.
		{Name: sectionBootImages, Shell: `for f in /boot/vmlinuz-*; do [ -e "$f" ] && echo "$f"; done; exit 0`},
		{Name: sectionPackages, Shell: `"$1" ` + dpkg.QueryArgs, Timeout: time.Minute, Tool: hosttools.Ptr(hosttools.DpkgQuery)},
		// No dkms on the host means no DKMS modules, which is fine.
		{Name: sectionDKMS, Shell: `if [ -n "$1" ]; then "$1" status; else echo '` + absent + `'; fi`, Timeout: time.Minute, Tool: hosttools.Ptr(hosttools.DKMS)},
	}
	for _, m := range facts.GuardedModules {
		cmds = append(cmds, bundle.Command{
			Name:  sectionModinfoPrefix + m,
			Shell: fmt.Sprintf(`"$1" -F version %s`, bundle.Quote(m)),
			Tool:  hosttools.Ptr(hosttools.Modinfo),
		})
	}
	return cmds
}

// ParseSnapshot builds a facts.Snapshot from the sections of the snapshot commands. A missing section, a
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
func ParseSnapshot(sections map[string]bundle.Section) (facts.Snapshot, error) {
	s := facts.Snapshot{Schema: facts.SnapshotSchema}

	out, err := section(sections, sectionRunning)
	if err != nil {
		return facts.Snapshot{}, err
	}
	s.RunningKernel = strings.TrimSpace(out)
	if !kernelRelease.MatchString(s.RunningKernel) {
		return facts.Snapshot{}, sectionErr(sections, sectionRunning, errors.New("uname -r did not print one kernel release"))
	}

	out, err = section(sections, sectionBootImages)
	if err != nil {
		return facts.Snapshot{}, err
	}
	s.InstalledKernelImages = parseBootImages(out)

	env, envErr := grubEnv(sections)
	if envErr != nil {
		return facts.Snapshot{}, envErr
	}
	cfg, cfgErr := grubCfgSection(sections)
	if cfgErr != nil {
		return facts.Snapshot{}, cfgErr
	}
	s.NextBootKernel, s.NextBootSource = nextBoot(env, cfg, s.InstalledKernelImages)

	out, err = section(sections, sectionPackages)
	if err != nil {
		return facts.Snapshot{}, err
	}
	q, err := dpkg.ParseQuery(out)
	if err != nil {
		return facts.Snapshot{}, sectionErr(sections, sectionPackages, err)
	}
	if len(q.Packages) == 0 {
		return facts.Snapshot{}, sectionErr(sections, sectionPackages, errors.New("dpkg-query listed no packages"))
	}
	s.Packages = make(map[string]facts.SnapshotPackage, len(q.Packages))
	for _, p := range q.Packages {
		key := p.Name
		if _, dup := s.Packages[key]; dup {
			key = p.Name + ":" + p.Architecture
		}
		s.Packages[key] = facts.SnapshotPackage{Version: p.Version, Held: p.Held, Installed: p.Installed, Status: p.Status, Arch: p.Architecture}
	}

	out, err = section(sections, sectionDKMS)
	if err != nil {
		return facts.Snapshot{}, err
	}
	if strings.TrimSpace(out) != absent {
		st, err := dkms.Parse(out)
		if err != nil {
			return facts.Snapshot{}, sectionErr(sections, sectionDKMS, err)
		}
		s.DKMSAvailable, s.DKMS, s.DKMSWarnings = true, st.Entries, st.Warnings
	}
	if s.DKMS == nil {
		s.DKMS = []dkms.Entry{}
	}

	s.ModuleVersions = make(map[string]facts.SnapshotModule, len(facts.GuardedModules))
	for _, m := range facts.GuardedModules {
		mod, err := parseModinfo(sections, sectionModinfoPrefix+m, m)
		if err != nil {
			return facts.Snapshot{}, err
		}
		s.ModuleVersions[m] = mod
	}
	return s, nil
}

// section returns a command's output when it ran to completion with exit status 0.
func section(sections map[string]bundle.Section, name string) (string, error) {
	sec, ok := sections[name]
	if !ok {
		return "", &facts.SnapshotSectionError{Section: name, Err: errors.New("no output: the command did not run (the snapshot commands did not all run)")}
	}
	if sec.TimedOut {
		return "", &facts.SnapshotSectionError{Section: name, ExitCode: sec.ExitCode, Output: sec.Output, Err: errors.New("timed out")}
	}
	if sec.ExitCode != 0 {
		return "", &facts.SnapshotSectionError{Section: name, ExitCode: sec.ExitCode, Output: sec.Output, Err: errors.New("command failed")}
	}
	return sec.Output, nil
}

func sectionErr(sections map[string]bundle.Section, name string, err error) error {
	sec := sections[name]
	return &facts.SnapshotSectionError{Section: name, ExitCode: sec.ExitCode, Output: sec.Output, Err: err}
}

var kernelRelease = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+~-]*$`)

var modNotFound = regexp.MustCompile(`^modinfo: ERROR: Module \S+ not found\.?$`)

func parseModinfo(sections map[string]bundle.Section, name, module string) (facts.SnapshotModule, error) {
	sec, ok := sections[name]
	if !ok {
		return facts.SnapshotModule{}, &facts.SnapshotSectionError{Section: name, Err: errors.New("no output: the command did not run (the snapshot commands did not all run)")}
	}
	out := strings.TrimSpace(sec.Output)
	if !sec.TimedOut && sec.ExitCode == 1 && modNotFound.MatchString(out) {
		return facts.SnapshotModule{Present: false}, nil
	}
	if _, err := section(sections, name); err != nil {
		return facts.SnapshotModule{}, err
	}
	if strings.Contains(out, "\n") {
		return facts.SnapshotModule{}, sectionErr(sections, name, fmt.Errorf("modinfo -F version %s printed more than one line", module))
	}
	return facts.SnapshotModule{Present: true, Version: out}, nil
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

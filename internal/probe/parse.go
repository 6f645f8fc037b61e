package probe

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/efapkgs"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/fiinfo"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpuhealth"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpumem"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/ibport"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/kernlog"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/kjournal"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/lsmod"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/migmode"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/modinfo"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvlink"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/rdmastat"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/xid"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// evidenceMax bounds one section's output quoted as evidence.
const evidenceMax = 2000

// ParseHost reads the host suite's sections into facts. It is a pure function of the sections:
// a missing section, a command that failed, timed out or printed something unreadable gives a
// fact with its problem, never a guess.
func ParseHost(sections map[string]bundle.Section) facts.Host {
	h := facts.Host{
		Instance:         instanceType(sections),
		Machine:          parseMachine(sections),
		GPUMemory:        parseWith(sections, sectionGPUMemory, gpumem.Parse),
		MIG:              parseWith(sections, sectionMIG, migmode.Parse),
		PCI:              parsePCI(sections),
		NvidiaModule:     moduleField(sections, sectionModinfoNvidia, "nvidia"),
		NvidiaLicense:    moduleField(sections, sectionNvidiaLicense, "nvidia"),
		EFAModule:        moduleField(sections, sectionModinfoEFA, "efa"),
		PeerMemModule:    moduleField(sections, sectionModinfoPeer, "efa_nv_peermem"),
		GDRDrvModule:     moduleField(sections, sectionModinfoGDRDrv, "gdrdrv"),
		LustreModule:     moduleField(sections, sectionModinfoLustre, "lustre"),
		Loaded:           parseWith(sections, sectionLsmod, lsmod.Parse),
		FabricManager:    parseUnitState(sections, sectionFabricManager),
		Persistenced:     parseUnitState(sections, sectionPersistenced),
		EFAInstaller:     parseWith(sections, sectionEFAPackages, efapkgs.Parse),
		LibfabricRuntime: parseWith(sections, sectionFiInfoVersion, func(out string) (string, error) { v, err := fiinfo.ParseVersion(out); return v.Libfabric, err }),
		RDMA:             parseRDMA(sections),
		RDMAPorts:        parseWith(sections, sectionRDMAPorts, ibport.Parse),
		GDRDevice:        parseWith(sections, sectionGDRDevice, func(out string) (string, error) { return firstLine(out), nil }),
		Memlock:          parseMemlock(sections),
		LoginMemlock:     parseLoginMemlock(sections),
		NVMe:             parseMount(sections),
		Lfs:              parseWith(sections, sectionLfs, parseLfs),
		KernelLog:        parseKernelLog(sections),
		KernelJournal:    parseWith(sections, sectionJournalKernel, parseKernelJournal),
		Health: facts.Health{
			GPUs:         parseWith(sections, sectionGPUHealth, gpuhealth.Parse),
			Query:        parseWith(sections, sectionNvsmiQuery, parseHealthQuery),
			NVLink:       parseWith(sections, sectionNVLinkStatus, nvlink.ParseStatus),
			NVLinkErrors: parseWith(sections, sectionNVLinkErrors, nvlink.ParseErrors),
			Fabric:       parseWith(sections, sectionNvsmiQuery, nvlink.ParseFabric),
			RDMAStats:    parseWith(sections, sectionRDMAStats, rdmastat.Parse),
		},
		IMEX: parseIMEX(sections),
	}
	h.Domains, h.EFAProviderMissing = parseFiInfo(sections)
	h.GPUs = parseWith(sections, sectionNvidiaSMI, func(out string) ([]nvsmi.GPU, error) {
		gpus, err := nvsmi.Parse(out)
		if err != nil {
			return nil, fmt.Errorf("unreadable nvidia-smi output: %w", err)
		}
		return gpus, nil
	})
	if s, problem := get(sections, sectionNvidiaSMI); problem == "" {
		h.CUDADriver = nvsmi.CUDAVersion(s.Output)
	}
	return h
}

// parseFiInfo reads `fi_info -p efa -t FI_EP_RDM`. fi_info exits non-zero when the provider
// lists nothing, and its output then says why in libfabric's words (fi_getinfo: -61): that
// answer is read, not reduced to "exited 1". A timeout, a missing tool, or other output of a
// failed run stay the section's problem.
func parseFiInfo(sections map[string]bundle.Section) (facts.Fact[[]string], string) {
	ev := evidence(sections, sectionFiInfo)
	s, problem := get(sections, sectionFiInfo)
	if problem != "" && (s.TimedOut || s.ExitCode == 127 || strings.TrimSpace(s.Output) == "") {
		return facts.Unread[[]string](problem, ev), ""
	}
	domains, err := fiinfo.ParseDomains(s.Output)
	var none *fiinfo.NoProviderError
	switch {
	case errors.As(err, &none):
		return facts.Unread[[]string](fmt.Sprintf("%s: libfabric has no EFA provider on this host: %s", sectionFiInfo, none.Line), ev), none.Line
	case problem != "":
		return facts.Unread[[]string](problem, ev), ""
	case err != nil:
		return facts.Unread[[]string](err.Error(), ev), ""
	}
	return facts.Read(domains, ev), ""
}

// parseHealthQuery reads the GPUs' health fields from `nvidia-smi -q`, which names each GPU's
// architecture; a list nvidia-smi left incomplete is unreadable.
func parseHealthQuery(out string) ([]gpuhealth.GPU, error) {
	r, err := gpuhealth.ParseQuery(out)
	if err != nil {
		return nil, err
	}
	if err := r.Incomplete(); err != nil {
		return nil, err
	}
	return r.GPUs, nil
}

// get returns a section and, when it cannot be trusted, why.
func get(sections map[string]bundle.Section, name string) (bundle.Section, string) {
	s, ok := sections[name]
	switch {
	case !ok:
		return s, fmt.Sprintf("%s: no output (the command did not run)", name)
	case s.TimedOut:
		return s, fmt.Sprintf("%s: timed out", name)
	case s.ExitCode == 127:
		return s, fmt.Sprintf("%s: command not found (exit 127): %s", name, textcut.Head(firstLine(s.Output), 200))
	case s.ExitCode != 0:
		return s, fmt.Sprintf("%s: exited %d", name, s.ExitCode)
	}
	return s, ""
}

// parseWith reads one section with parse: the section's problem, else the parser's error, is
// the fact's problem.
// parseMachine reads `uname -m`: one word.
func parseMachine(sections map[string]bundle.Section) facts.Fact[string] {
	return parseWith(sections, sectionHostMachine, func(out string) (string, error) {
		m := strings.TrimSpace(out)
		if m == "" || strings.ContainsAny(m, " \t\n") {
			return "", fmt.Errorf("uname -m printed %q, not one architecture word", m)
		}
		return m, nil
	})
}

func parseWith[T any](sections map[string]bundle.Section, name string, parse func(string) (T, error)) facts.Fact[T] {
	ev := evidence(sections, name)
	s, problem := get(sections, name)
	if problem != "" {
		return facts.Unread[T](problem, ev)
	}
	v, err := parse(s.Output)
	if err != nil {
		return facts.Unread[T](err.Error(), ev)
	}
	return facts.Read(v, ev)
}

// evidence renders raw output of some sections, bounded, with the tool path that answered.
func evidence(sections map[string]bundle.Section, names ...string) string {
	var b strings.Builder
	for _, n := range names {
		s, ok := sections[n]
		if !ok {
			fmt.Fprintf(&b, "[%s: no output]\n", n)
			continue
		}
		status := fmt.Sprintf("exit %d", s.ExitCode)
		if s.TimedOut {
			status = "timed out"
		}
		if s.Tool != "" {
			status += ", " + s.Tool
		}
		fmt.Fprintf(&b, "[%s: %s]\n%s\n", n, status, textcut.HeadNote(strings.TrimRight(s.Output, "\n"), evidenceMax))
	}
	return strings.TrimRight(b.String(), "\n")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}

// ec2Type matches an EC2 instance type name ("p6-b200.48xlarge", "g5.xlarge"); Xen hosts write
// "HVM domU" into product_name and IMDS errors come back as HTML, neither matches.
var ec2Type = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9-]+$`)

// instanceType is the DMI product_name when it names an instance type (Nitro writes it there),
// else IMDSv2's answer.
func instanceType(sections map[string]bundle.Section) facts.Instance {
	for _, c := range []struct{ name, source string }{
		{sectionProductName, "product_name"},
		{sectionIMDS, "imds"},
	} {
		s, ok := sections[c.name]
		if !ok || s.ExitCode != 0 || s.TimedOut {
			continue
		}
		if v := strings.TrimSpace(s.Output); ec2Type.MatchString(v) {
			return facts.Instance{Type: v, Source: c.source}
		}
	}
	return facts.Instance{}
}

func parsePCI(sections map[string]bundle.Section) facts.Fact[pci.Inventory] {
	return parseWith(sections, sectionPCI, func(out string) (pci.Inventory, error) {
		inv, err := pci.Parse(out)
		if err == nil && len(inv.Devices) == 0 {
			err = fmt.Errorf("/sys/bus/pci/devices lists no device: the PCI inventory is unreadable on this host")
		}
		return inv, err
	})
}

// moduleField reads a `modinfo -F` answer.
func moduleField(sections map[string]bundle.Section, name, module string) facts.Fact[string] {
	return parseWith(sections, name, func(out string) (string, error) {
		v, err := modinfo.Field(out)
		if err != nil {
			return "", fmt.Errorf("modinfo %s: %w", module, err)
		}
		return v, nil
	})
}

// unitStates are the words `systemctl is-active` prints; it exits non-zero for every state but
// active, so the word, not the exit status, is the answer.
var unitStates = map[string]bool{
	"active": true, "inactive": true, "failed": true, "activating": true,
	"deactivating": true, "reloading": true, "unknown": true, "maintenance": true, "refreshing": true,
}

func parseUnitState(sections map[string]bundle.Section, name string) facts.Fact[string] {
	ev := evidence(sections, name)
	if s, ok := sections[name]; ok && !s.TimedOut {
		if w := firstLine(s.Output); unitStates[w] {
			return facts.Read(w, ev)
		}
	}
	_, problem := get(sections, name)
	if problem == "" {
		problem = "systemctl printed no unit state"
	}
	return facts.Unread[string](problem, ev)
}

var oldEFAName = regexp.MustCompile(`^efa_\d+$`)

// parseRDMA reads /sys/class/infiniband. No such directory is a host without RDMA devices;
// any other failure to list it is a failure to look.
func parseRDMA(sections map[string]bundle.Section) facts.Fact[facts.RDMADevices] {
	ev := evidence(sections, sectionInfiniband)
	s, problem := get(sections, sectionInfiniband)
	switch {
	case problem == "":
	case !s.TimedOut && s.ExitCode != 127 && s.ExitCode != 0 && strings.Contains(s.Output, "No such file or directory"):
		return facts.Read(facts.RDMADevices{}, ev)
	default:
		return facts.Unread[facts.RDMADevices](problem, ev)
	}
	var d facts.RDMADevices
	for _, line := range strings.Split(s.Output, "\n") {
		n := strings.TrimSpace(line)
		switch {
		case n == "":
		case strings.HasPrefix(n, "rdmap"), oldEFAName.MatchString(n):
			d.EFA = append(d.EFA, n)
		default:
			d.Other = append(d.Other, n)
		}
	}
	return facts.Read(d, ev)
}

func parseMemlock(sections map[string]bundle.Section) facts.Fact[facts.Memlock] {
	return parseWith(sections, sectionMemlock, func(out string) (facts.Memlock, error) {
		v := strings.TrimSpace(out)
		if v == "unlimited" {
			return facts.Memlock{Unlimited: true}, nil
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return facts.Memlock{}, fmt.Errorf("ulimit -l printed %q", textcut.Head(v, 80))
		}
		return facts.Memlock{KiB: n}, nil
	})
}

// parseMount reads findmnt: exit 0 with the mount's line, or exit 1 with no output when
// nothing is mounted there.
func parseMount(sections map[string]bundle.Section) facts.Fact[facts.Mount] {
	ev := evidence(sections, sectionNVMe)
	s, ok := sections[sectionNVMe]
	switch {
	case ok && !s.TimedOut && s.ExitCode == 0:
		if f := strings.Fields(firstLine(s.Output)); len(f) >= 1 {
			return facts.Read(facts.Mount{Mounted: true, Target: f[0], Details: strings.Join(f[1:], " ")}, ev)
		}
	case ok && !s.TimedOut && s.ExitCode == 1 && strings.TrimSpace(s.Output) == "":
		return facts.Read(facts.Mount{}, ev)
	}
	_, problem := get(sections, sectionNVMe)
	if problem == "" {
		problem = "findmnt output unreadable"
	}
	return facts.Unread[facts.Mount](problem, ev)
}

var lfsVersion = regexp.MustCompile(`(?m)^lfs\s+(\S+)`)

func parseLfs(out string) (string, error) {
	if m := lfsVersion.FindStringSubmatch(out); m != nil {
		return strings.TrimSpace(m[1]), nil
	}
	return "", fmt.Errorf("lfs --version printed %q", textcut.Head(firstLine(out), 80))
}

// parseKernelLog reads dmesg's section, colours removed (ssh_pty makes util-linux colour it).
func parseKernelLog(sections map[string]bundle.Section) facts.Fact[facts.KernelLog] {
	ev := evidence(sections, sectionDmesg)
	// An empty ring buffer (exit 0, no output: a layer ran dmesg -c) is read, and empty: the
	// xid check fails on it unless the journal's copy of the boot can be judged instead.
	s, problem := get(sections, sectionDmesg)
	if problem != "" {
		return facts.Unread[facts.KernelLog](problem, ev)
	}
	boot := ""
	if b, p := get(sections, sectionBootID); p == "" {
		boot = strings.TrimSpace(b.Output)
	}
	return facts.Read(ReadKernelLog(s.Output, boot), ev)
}

// ReadKernelLog reads dmesg's output of boot bootID line by line: stamp, message and Xid
// report.
func ReadKernelLog(out, bootID string) facts.KernelLog {
	log := facts.KernelLog{BootID: bootID}
	text := strings.TrimRight(kernlog.Uncolored(out), "\n")
	if text == "" {
		return log
	}
	for _, raw := range strings.Split(text, "\n") {
		l := facts.LogLine{Raw: raw, Text: kernlog.Text(raw), XidReport: xidReport(raw)}
		l.Stamp, l.Stamped = kernlog.Stamp(raw)
		log.Lines = append(log.Lines, l)
	}
	return log
}

// xidReport reads the Xid or SXid report a log record is, if any.
func xidReport(line string) facts.XidReport {
	events, unparsed := xid.Parse(line)
	switch {
	case len(events) > 0:
		return facts.XidReport{Xid: &events[0]}
	case len(unparsed) > 0:
		return facts.XidReport{Unreadable: true}
	}
	return facts.XidReport{}
}

// parseKernelJournal reads journalctl -k -b 0. Empty output is a read journal that holds no
// kernel message of this boot (no journal files, Storage=none): a fact, judged by the xid
// check, not a problem.
func parseKernelJournal(out string) (facts.KernelJournal, error) { return ReadKernelJournal(out) }

// ReadKernelJournal reads journalctl -k -o short-monotonic's output: its records, each with the
// Xid report it is, and the warnings of the journal files it skipped.
func ReadKernelJournal(out string) (facts.KernelJournal, error) {
	o, err := kjournal.ParseOutput(out)
	if err != nil {
		return facts.KernelJournal{}, fmt.Errorf("journalctl -k -b 0: %w", err)
	}
	j := facts.KernelJournal{Ignored: o.Ignored}
	for _, e := range o.Entries {
		j.Entries = append(j.Entries, facts.JournalEntry{Entry: e, XidReport: xidReport(e.Line)})
	}
	return j, nil
}

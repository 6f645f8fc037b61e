package nccltests

import (
	"bytes"
	"regexp"
	"strconv"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// This file holds the one table of rules that turns the lines around the result table into
// facts. Every such line goes through every rule, whatever its shape: an NCCL INFO or NCCL WARN
// line (the rule sees the message after the tag), a line behind an Open MPI or srun prefix (the
// prefix is gone by then), or a plain line (the rule sees the whole line). Each fact is derived
// by the rules that name it here and nowhere else, so the same text means the same fact in
// every shape of line.

// Kinds of evidence, each kept maxPerKind times. The kinds from kindPath on are about the data
// paths and go to Transport.DataLines, the others to Transport.Lines.
const (
	kindNetwork = iota
	kindProvider
	kindOFI
	kindPlugin
	kindSocket
	kindNCCLNet
	kindForwardCompat
	kindPath
	kindNVLS
	kindCount
)

// factRules is the rule table. Rules whose evidence should win a line come before the more
// general ones (a provider line is a NET/OFI line too). The table is never written after
// package initialisation.
var factRules = []rule{
	{fact: "failure: any NCCL WARN line", warnOnly: true, how: matchPrefix, lit: []byte(""), set: markFailure},
	{fact: "failure: nccl-tests NCCL error", how: matchContains, lit: []byte("Test NCCL failure"), set: markFailure},
	{fact: "failure: nccl-tests CUDA error", how: matchContains, lit: []byte("Test CUDA failure"), set: markFailure},
	{fact: "failure: nccl-tests timeout", how: matchContains, lit: []byte("Test timeout"), set: markFailure},
	{fact: "failure: nccl-tests rank failed", how: matchContains, lit: []byte("Test failure"), set: markFailure},
	{fact: "failure: MPI abort", how: matchContains, lit: []byte("MPI_ABORT"), set: markFailure},
	{fact: "failure: mpirun saw a rank die", how: matchContains, lit: []byte("mpirun noticed"), set: markFailure},
	{fact: "failure: mpirun saw a rank fail", how: matchContains, lit: []byte("mpirun detected"), set: markFailure},
	{fact: "failure: segmentation fault", how: matchContains, lit: []byte("Segmentation fault"), set: markFailure},
	{fact: "failure: NCCL error", how: matchContains, lit: []byte("NCCL error"), set: markFailure},
	{fact: "failure: NCCL system error", how: matchContains, lit: []byte("unhandled system error"), set: markFailure},

	{fact: "NCCLVersion", how: matchPrefix, lit: []byte("NCCL version "), set: (*parser).ncclVersion},
	{fact: "Networks (and Socket)", how: matchPrefix, lit: []byte("Using network "), set: (*parser).network},
	{fact: "Providers", how: matchContains, lit: []byte("elected Provider is "), set: (*parser).provider},
	{fact: "Providers", how: matchContains, lit: []byte("elected provider is "), set: (*parser).provider},
	{fact: "OFIPlugin, OFIVersion", how: matchContains, lit: []byte("Initializing aws-ofi-nccl"), set: (*parser).ofiInit},
	{fact: "OFIPlugin", how: matchPrefix, lit: []byte("NET/OFI"), set: (*parser).ofiLine},
	{fact: "NetPlugin (OFIPlugin when Libfabric/OFI)", how: matchContains, lit: []byte("Loaded net plugin "), set: (*parser).loadedPlugin},
	{fact: "NetPluginEnv", how: matchContains, lit: []byte("NCCL_NET_PLUGIN set by environment to "), set: (*parser).pluginEnv},
	{fact: "NetPluginEnv", how: matchContains, lit: []byte("Plugin name set by env to "), set: (*parser).pluginEnv},
	{fact: "PluginMissing", how: matchContains, lit: []byte("Could not find: libnccl-net"), set: (*parser).pluginMissing},
	{fact: "PluginMissing", how: matchContains, lit: []byte("No plugin found"), set: (*parser).pluginMissing},
	{fact: "PluginMissing", how: matchContains, lit: []byte("Using internal network plugin"), set: (*parser).pluginMissing},
	{fact: "PluginMissing", how: matchContains, lit: []byte("Using internal net plugin"), set: (*parser).pluginMissing},
	{fact: "Socket", how: matchContains, lit: []byte("NET/Socket"), set: (*parser).socket},
	{fact: "NCCLNetIB", how: matchRegexp, lit: []byte("NCCL_NET"),
		// "NCCL_NET=IB", "-x NCCL_NET=ib", `NCCL_NET="IB"`, "NCCL_NET set by environment to IB"; not
		// NCCL_NET_PLUGIN, NCCL_NET_GDR_LEVEL or another network whose name starts with IB.
		re:  regexp.MustCompile(`NCCL_NET(?:=| set by environment to )["']*(?i:ib)(?:[^A-Za-z0-9_]|$)`),
		set: (*parser).ncclNetIB},
	{fact: "ForwardCompat", how: matchContains, lit: []byte("CUDA Forward Compatibility mode ENABLED"), set: (*parser).forwardCompat},

	{fact: "DataPaths, DataTransports", how: matchPrefix, lit: []byte("Channel "), set: (*parser).dataPath},
	{fact: "DataPaths, DataTransports (NCCL 2.4-2.6)", how: matchPrefix, lit: []byte("Ring "), set: (*parser).dataPath},
	{fact: "DataPaths, DataTransports (CollNet)", how: matchPrefix, lit: []byte("CollNet "), set: (*parser).dataPath},
	{fact: "DataPaths, DataTransports (CollNet, NCCL 2.7-2.9)", how: matchPrefix, lit: []byte("Coll "), set: (*parser).dataPath},
	{fact: "NVLSAvailable", how: matchPrefix, lit: []byte("NVLS multicast support is available"), set: (*parser).nvlsAvailable},
	{fact: "NVLS", how: matchPrefix, lit: []byte("NVLS comm "), set: (*parser).nvlsUsed},
	{fact: "NVLS", how: matchPrefix, lit: []byte("Connected NVLS"), set: (*parser).nvlsUsed},
	{fact: "RingsConnected", how: matchPrefix, lit: []byte("Connected all rings"), set: (*parser).ringsConnected},
	{fact: "TreesConnected", how: matchPrefix, lit: []byte("Connected all trees"), set: (*parser).treesConnected},
	{fact: "NRanks, Hosts' Ranks", how: matchContains, lit: []byte("Init COMPLETE"), set: (*parser).initComplete},
}

func markFailure(_ *parser, l *factLine, _ []byte) { l.failure = true }

func (p *parser) ncclVersion(_ *factLine, rest []byte) {
	if p.res.NCCLVersion != "" {
		return
	}
	if f := bytes.Fields(rest); len(f) > 0 && f[0][0] >= '0' && f[0][0] <= '9' {
		p.res.NCCLVersion = textcut.Prefix(string(f[0]), 40)
	}
}

func (p *parser) network(l *factLine, rest []byte) {
	tr := &p.res.Transport
	name := textcut.Prefix(bytes.TrimSpace(rest), 40)
	if len(name) == 0 {
		return
	}
	if !contains(tr.Networks, name) {
		tr.Networks = addDistinct(tr.Networks, string(name))
	}
	socket := bytes.EqualFold(name, []byte("Socket"))
	if socket {
		tr.Socket = true
		p.evidence(kindSocket, l)
	}
	p.evidence(kindNetwork, l)
	if h := p.onHost(); h != nil {
		if !contains(h.Networks, name) {
			h.Networks = addDistinct(h.Networks, string(name))
		}
		if socket {
			h.socket(l)
		}
	}
}

// provider reads "Selected Provider is efa" / "Selected provider is efa, fabric is efa-direct
// (found 8 nics)"; rest starts at the provider name.
func (p *parser) provider(l *factLine, rest []byte) {
	tr := &p.res.Transport
	name := rest
	if end := bytes.IndexAny(rest, " ,("); end >= 0 {
		name = rest[:end]
	}
	if len(name) == 0 {
		return
	}
	name = textcut.Prefix(name, 40)
	nics := -1
	if k := bytes.Index(rest, []byte("(found ")); k >= 0 {
		d := rest[k+len("(found "):]
		j := 0
		for j < len(d) && j < 9 && d[j] >= '0' && d[j] <= '9' {
			j++
		}
		if j > 0 {
			nics, _ = strconv.Atoi(string(d[:j]))
		}
	}
	p.evidence(kindProvider, l)
	if h := p.onHost(); h != nil && nics >= 0 && (h.NICs == nil || *h.NICs < nics) {
		n := nics
		h.NICs = &n
	}
	for _, q := range tr.Providers {
		if q.Name == string(name) && (q.NICs == nil && nics < 0 || q.NICs != nil && *q.NICs == nics) {
			return
		}
	}
	if len(tr.Providers) >= maxDistinct {
		return
	}
	pr := Provider{Name: string(name)}
	if nics >= 0 {
		n := nics // only this copy escapes, not the per-line variable
		pr.NICs = &n
	}
	tr.Providers = append(tr.Providers, pr)
}

func (p *parser) ofiInit(l *factLine, rest []byte) {
	tr := &p.res.Transport
	tr.OFIPlugin = true
	p.hostOFI()
	if f := bytes.Fields(rest); len(f) > 0 && tr.OFIVersion == "" {
		tr.OFIVersion = textcut.Prefix(string(f[0]), 40)
	}
	p.evidence(kindOFI, l)
}

func (p *parser) ofiLine(l *factLine, _ []byte) {
	p.res.Transport.OFIPlugin = true
	p.hostOFI()
	p.evidence(kindOFI, l)
}

// loadedPlugin reads "Loaded net plugin NAME (vN)".
func (p *parser) loadedPlugin(l *factLine, rest []byte) {
	tr := &p.res.Transport
	name := rest
	if j := bytes.LastIndex(name, []byte(" (v")); j >= 0 {
		name = name[:j]
	}
	name = bytes.TrimSpace(name)
	if tr.NetPlugin == "" {
		tr.NetPlugin = textcut.Prefix(string(name), 40)
	}
	if bytes.Contains(name, []byte("Libfabric")) || bytes.Contains(name, []byte("OFI")) {
		tr.OFIPlugin = true
		p.hostOFI()
	}
	p.evidence(kindPlugin, l)
}

func (p *parser) pluginEnv(l *factLine, rest []byte) {
	tr := &p.res.Transport
	if f := bytes.Fields(rest); len(f) > 0 && tr.NetPluginEnv == "" {
		tr.NetPluginEnv = textcut.Prefix(string(f[0]), 80)
		p.evidence(kindPlugin, l)
	}
}

func (p *parser) pluginMissing(l *factLine, _ []byte) {
	p.res.Transport.PluginMissing = true
	p.evidence(kindPlugin, l)
}

func (p *parser) socket(l *factLine, _ []byte) {
	p.res.Transport.Socket = true
	p.evidence(kindSocket, l)
	if h := p.onHost(); h != nil {
		h.socket(l)
	}
}

func (p *parser) ncclNetIB(l *factLine, _ []byte) {
	p.res.Transport.NCCLNetIB = true
	p.evidence(kindNCCLNet, l)
}

func (p *parser) forwardCompat(l *factLine, _ []byte) {
	p.res.Transport.ForwardCompat = true
	p.evidence(kindForwardCompat, l)
}

var bVia = []byte(" via ")

// dataPath reads a connection line, "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read" or
// "Ring 00 : 7 -> 8 [send] via NET/Socket/0"; the same prefixes without " via " (the ring
// order, "Channel 00/24 :    0   1   2") name no path.
func (p *parser) dataPath(l *factLine, rest []byte) {
	i := bytes.Index(rest, bVia)
	if i < 0 {
		return
	}
	path := textcut.Prefix(bytes.TrimSpace(rest[i+len(bVia):]), 80)
	if len(path) == 0 {
		return
	}
	tr := &p.res.Transport
	if !contains(tr.DataPaths, path) && len(tr.DataPaths) < MaxDataPaths {
		tr.DataPaths = append(tr.DataPaths, string(path))
	}
	if kind := pathTransport(path); !contains(tr.DataTransports, kind) {
		tr.DataTransports = addDistinct(tr.DataTransports, string(kind))
	}
	p.evidence(kindPath, l)
	if h := p.onHost(); h != nil && bytes.HasPrefix(path, []byte("NET/")) {
		h.NetPaths = true
		if bytes.HasSuffix(path, []byte("/GDRDMA")) {
			h.GDRDMA = true
		} else if h.NoGDRDMALine == "" {
			h.NoGDRDMALine = textcut.Prefix(string(l.text), MaxEvidenceLine)
		}
	}
}

// initComplete reads "... rank R nranks N ... Init COMPLETE": the communicator's size, and a
// rank of the host that printed it.
func (p *parser) initComplete(_ *factLine, _ []byte) {
	msg := p.fl.msg
	rank, okRank := numberAfter(msg, []byte(" rank "))
	if n, ok := numberAfter(msg, []byte(" nranks ")); ok && n > p.res.NRanks {
		p.res.NRanks = n
	}
	h := p.onHost()
	if h == nil || !okRank {
		return
	}
	for _, r := range h.Ranks {
		if r == rank {
			return
		}
	}
	if len(h.Ranks) < MaxRanksPerHost {
		h.Ranks = append(h.Ranks, rank)
	}
}

// numberAfter returns the decimal number that follows the first key in msg.
func numberAfter(msg, key []byte) (int, bool) {
	i := bytes.Index(msg, key)
	if i < 0 {
		return 0, false
	}
	d := msg[i+len(key):]
	j := 0
	for j < len(d) && j < 9 && d[j] >= '0' && d[j] <= '9' {
		j++
	}
	if j == 0 {
		return 0, false
	}
	n, err := strconv.Atoi(string(d[:j]))
	return n, err == nil
}

// onHost is the host of the line the rules look at, nil when the line names none.
func (p *parser) onHost() *HostNet {
	if p.host < 0 {
		return nil
	}
	return &p.res.Hosts[p.host]
}

func (p *parser) hostOFI() {
	if h := p.onHost(); h != nil {
		h.OFIPlugin = true
	}
}

func (h *HostNet) socket(l *factLine) {
	h.Socket = true
	if h.SocketLine == "" {
		h.SocketLine = textcut.Prefix(string(l.text), MaxEvidenceLine)
	}
}

// hostIndex returns the index in res.Hosts of the host named name, adding it when it is new;
// -1 for no name or when MaxHosts are kept already.
func (p *parser) hostIndex(name []byte) int {
	if len(name) == 0 {
		return -1
	}
	for i := range p.res.Hosts {
		if p.res.Hosts[i].Name == string(name) {
			return i
		}
	}
	if len(p.res.Hosts) >= MaxHosts {
		return -1
	}
	p.res.Hosts = append(p.res.Hosts, HostNet{Name: string(name)})
	return len(p.res.Hosts) - 1
}

// hostOf returns the host of an NCCL line, "host" of "host:pid:tid [dev] NCCL INFO ...", or nil
// when the line does not start that way.
func hostOf(t []byte) []byte {
	c := bytes.IndexByte(t, ':')
	if c <= 0 || c > maxHostName {
		return nil
	}
	name := t[:c]
	for _, b := range name {
		if b <= ' ' || b == '[' || b == ']' || b >= 0x7f {
			return nil
		}
	}
	// pid:tid follow, each all digits.
	rest := t[c+1:]
	for field := 0; field < 2; field++ {
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if j == 0 || j == len(rest) {
			return nil
		}
		sep := byte(':')
		if field == 1 {
			sep = ' '
		}
		if rest[j] != sep {
			return nil
		}
		rest = rest[j+1:]
	}
	return name
}

// maxHostName bounds a host name (DNS names are at most 253 bytes).
const maxHostName = 253

func (p *parser) nvlsAvailable(l *factLine, _ []byte) {
	p.res.Transport.NVLSAvailable = true
	p.evidence(kindNVLS, l)
}

func (p *parser) nvlsUsed(l *factLine, _ []byte) {
	p.res.Transport.NVLS = true
	p.evidence(kindNVLS, l)
}

func (p *parser) ringsConnected(_ *factLine, _ []byte) { p.res.Transport.RingsConnected = true }

func (p *parser) treesConnected(_ *factLine, _ []byte) { p.res.Transport.TreesConnected = true }

// evidence keeps l as a representative line of its kind: the first rule to offer a line decides
// its kind, each kind keeps a few lines, and each message is kept once although every rank
// prints it behind its own host:pid:tid [dev] prefix.
func (p *parser) evidence(kind int, l *factLine) {
	if l.offered {
		return
	}
	l.offered = true
	msg := textcut.Prefix(l.msg, MaxEvidenceLine) // kept cut, so de-duplication memory stays bounded too
	if p.kinds[kind] >= maxPerKind || contains(p.kept, msg) {
		return
	}
	p.kinds[kind]++
	line := textcut.Prefix(string(l.text), MaxEvidenceLine)
	if kind >= kindPath {
		p.res.Transport.DataLines = append(p.res.Transport.DataLines, line)
	} else {
		p.res.Transport.Lines = append(p.res.Transport.Lines, line)
	}
	p.kept = append(p.kept, string(msg))
}

func (p *parser) addError(t []byte) {
	if len(p.res.Errors) < maxErrors {
		p.res.Errors = append(p.res.Errors, textcut.Prefix(string(t), MaxEvidenceLine))
	}
}

// contains reports whether list holds b, without allocating.
func contains(list []string, b []byte) bool {
	for _, s := range list {
		if s == string(b) {
			return true
		}
	}
	return false
}

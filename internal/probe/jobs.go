package probe

import (
	"bufio"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dcgmdiag"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nccltests"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pingpong"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Markers of the lines the job scripts print about themselves.
const (
	ncclMarker = "@@DLAMI-NCCL"
	dcgmMarker = "@@DLAMI-DCGM"
	efaMarker  = "@@DLAMI-EFA"
	// ncclBinaryPlaceholder stands for the all_reduce_perf binary among the test's arguments.
	ncclBinaryPlaceholder = "@@BINARY@@"
	// jobTailMax bounds the end of a job's output kept as evidence.
	jobTailMax = 3000
)

// NCCLScript is the 1-node NCCL test of host-layer.md, run as the login user (not root: Open
// MPI refuses root without extra flags, and the test needs no privilege). ranks 0 lets the
// script count the GPUs nvidia-smi lists. file names the uploaded script ("nccl", "gdr").
func NCCLScript(name, file string, n settings.NCCL, ranks int) (Script, error) {
	n, err := n.Resolved()
	if err != nil {
		return Script{}, err
	}
	return ncclScript(name, file, n, ranks, nil), nil
}

// across is where a test across nodes runs: the nodes' private addresses (the first node, where
// the script runs, first) and the login user's folder holding the test's key and known_hosts.
type across struct {
	hosts  []string
	keyDir string
}

// ncclScript renders nccl.sh for n (resolved), on one node when a is nil.
func ncclScript(name, file string, n settings.NCCL, ranks int, a *across) Script {
	vars := []scriptVar{{name: "M", value: ncclMarker}, {name: "want", value: n.CUDAVersion}, {name: "ranks", value: ""}, {name: "timeout_s", value: seconds(n.Timeout)},
		{name: "mpirun_paths", value: paths(hosttools.Mpirun)}, {name: "nvsmi_paths", value: paths(hosttools.NvidiaSMI)},
		{name: "hosts", value: ""}, {name: "keydir", value: ""}, {name: "ssh_paths", value: paths(hosttools.SSH)}}
	if ranks > 0 {
		vars[2].value = strconv.Itoa(ranks)
	}
	if a != nil {
		vars[6].value, vars[7].value = strings.Join(a.hosts, " "), a.keyDir
	}
	names := slices.Sorted(maps.Keys(n.Env))
	vars = append(vars, scriptVar{name: "env_count", value: strconv.Itoa(len(names))})
	for i, k := range names {
		// Exported: the script reads them back with printenv, so each rank gets NAME=VALUE
		// whatever the value holds.
		vars = append(vars, scriptVar{fmt.Sprintf("env_key_%d", i+1), k, true}, scriptVar{fmt.Sprintf("env_value_%d", i+1), n.Env[k], true})
	}
	text := render("nccl.sh", vars, append([]string{ncclBinaryPlaceholder}, n.Args...))
	return Script{Name: name, File: file, Text: text, Timeout: n.Timeout}
}

// ParseNCCLRun reads the NCCL test script's output into facts: its own marker lines and what
// nccl-tests printed. code is the script's exit status; timedOut when its bound stopped it.
func ParseNCCLRun(output string, code int, timedOut bool, timeout time.Duration) facts.NCCLRun {
	res, _ := nccltests.ParseString(output) // reading a string cannot fail
	r := facts.NCCLRun{Result: res, ExitCode: code, TimedOut: timedOut || bundle.TimedOut(code), Timeout: timeout,
		Tail: textcut.Tail(output, jobTailMax)}
	prefix := ncclMarker + " "
	for rest := output; rest != ""; {
		i := strings.Index(rest, prefix)
		if i < 0 {
			break
		}
		if i > 0 && rest[i-1] != '\n' {
			rest = rest[i+len(prefix):]
			continue
		}
		line := rest[i:]
		if j := strings.IndexByte(line, '\n'); j >= 0 {
			line = line[:j]
		}
		rest = rest[i+len(line):]
		line = strings.TrimRight(line, "\r")
		kind, val, _ := strings.Cut(strings.TrimPrefix(line, prefix), " ")
		switch kind {
		case "BINARY":
			r.Binary = textcut.Head(val, 300)
		case "RANKS":
			r.Ranks = textcut.Head(val, 20)
		case "NODES":
			r.Nodes = textcut.Head(val, 20)
		case "ERROR":
			r.ScriptErrors = append(r.ScriptErrors, textcut.Head(val, 500))
		default:
			continue
		}
		if len(r.MarkerLines) < 5 {
			r.MarkerLines = append(r.MarkerLines, textcut.Head(line, 500))
		}
	}
	return r
}

// DCGMScript runs `dcgmi diag -r level -j` with DCGM's own thresholds, starting DCGM's host
// engine when none answers and stopping the one it started.
func DCGMScript(level settings.DCGMLevel) (Script, error) {
	return DCGMScriptWith(level, DCGMOptions{})
}

// DCGMOptions are what DCGM's tests must be told of the host they run on.
type DCGMOptions struct {
	// MinPCIeWidth, when above 0, is the PCIe link width DCGM's pcie test requires of each GPU
	// (its min_pci_width, 16 for most GPUs by default): the slot's width where the instance
	// type wires the GPU to a slot narrower than the GPU's own x16. Without it DCGM fails the
	// single-GPU G6 sizes' L4 at x8 with DCGM_FR_PCIE_WIDTH (error 46); AWS's own suites pass
	// the same parameters (aws-parallelcluster-cookbook gpu_health_check.sh: "-p
	// pcie.h2d_d2h_single_pinned.min_pci_width=8;pcie.h2d_d2h_single_unpinned.min_pci_width=8"
	// for the L4; aws-k8s-tester dcgm-diag.yaml: min_pci_width 8.0 for both subtests).
	MinPCIeWidth int
}

// parameters renders o as dcgmi diag's -p value ("test.subtest.parameter=value;..."); "" when
// DCGM's defaults hold.
func (o DCGMOptions) parameters() string {
	if o.MinPCIeWidth <= 0 {
		return ""
	}
	w := strconv.Itoa(o.MinPCIeWidth)
	return "pcie.h2d_d2h_single_pinned.min_pci_width=" + w + ";pcie.h2d_d2h_single_unpinned.min_pci_width=" + w
}

// DCGMScriptWith runs `dcgmi diag -r level -j` told what o says of the host, starting DCGM's
// host engine when none answers and stopping the one it started.
func DCGMScriptWith(level settings.DCGMLevel, o DCGMOptions) (Script, error) {
	if err := level.Validate("dcgm_level"); err != nil || level.Off() {
		return Script{}, fmt.Errorf("dcgm: no run at level %d", level)
	}
	if o.MinPCIeWidth < 0 || o.MinPCIeWidth > 32 {
		return Script{}, fmt.Errorf("dcgm: min_pci_width %d is not a PCIe link width", o.MinPCIeWidth)
	}
	text := render("dcgm.sh", []scriptVar{{name: "M", value: dcgmMarker}, {name: "level", value: strconv.Itoa(int(level))},
		{name: "parameters", value: o.parameters()},
		{name: "dcgmi_paths", value: paths(hosttools.Dcgmi)}, {name: "hostengine_paths", value: paths(hosttools.NvHostengine)}}, nil)
	return Script{Name: "the DCGM diagnostics", File: "dcgm", Text: text, Timeout: level.Timeout()}, nil
}

// ParseDCGMRun reads the DCGM script's output: the diagnostics' report, or why they could not
// run. missing is true when DCGM is not installed.
func ParseDCGMRun(output string, level settings.DCGMLevel) (f facts.Fact[facts.DCGM], missing bool) {
	ev := textcut.Tail(output, 4*evidenceMax)
	var doc, stderr strings.Builder
	d := facts.DCGM{Level: int(level), ExitCode: -1}
	inErr := false
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, dcgmMarker+" "); ok {
			word, arg, _ := strings.Cut(rest, " ")
			switch word {
			case "MISSING":
				return facts.Unread[facts.DCGM]("dcgm: "+arg, ev), true
			case "ERROR":
				return facts.Unread[facts.DCGM]("dcgm: "+arg, ev), false
			case "STARTED":
				d.StartedHostEngine = true
			case "EXIT":
				// The shell's $?: 0-255 in decimal digits, nothing else.
				if a := strings.TrimSpace(arg); exitStatus.MatchString(a) {
					rc, _ := strconv.Atoi(a)
					d.ExitCode, d.Exit = rc, dcgmdiag.ExitStatus(rc)
				}
			case "STDERR":
				inErr = true
			}
			continue
		}
		if inErr {
			stderr.WriteString(line + "\n")
		} else {
			doc.WriteString(line + "\n")
		}
	}
	rep, err := dcgmdiag.Parse(doc.String())
	if err != nil {
		msg := err.Error()
		if s := strings.TrimSpace(stderr.String()); s != "" {
			msg += ": " + textcut.Head(s, 300)
		}
		return facts.Unread[facts.DCGM](msg, ev), false
	}
	d.Report = rep
	return facts.Read(d, ev), false
}

// EFA traffic test figures: each pair exchanges efaPingIterations messages of efaPingSize
// bytes, on ports from efaBasePort up.
const (
	efaPingIterations = 1000
	efaPingSize       = 65536
	efaBasePort       = 47800
)

// exitStatus is a shell exit status as $? prints it.
var exitStatus = regexp.MustCompile(`^(?:0|[1-9][0-9]?|1[0-9][0-9]|2[0-4][0-9]|25[0-5])$`)

var efaDeviceName = regexp.MustCompile(`^(rdmap[0-9a-z]+|efa_[0-9]+)$`)

// EFATrafficScript runs, for every device, an RDM fi_pingpong between a server and a client on
// that device, with shared-memory transfer off so the bytes cross the device; devices run in
// groups of e.Concurrency, each pair bounded by e.Timeout.
func EFATrafficScript(devices []string, e settings.EFATraffic) (Script, error) {
	e = settings.Function{EFATraffic: e}.Resolved().EFATraffic
	for _, d := range devices {
		if !efaDeviceName.MatchString(d) {
			return Script{}, fmt.Errorf("efa traffic: %q is not an EFA device name", d)
		}
	}
	text := efaTrafficText(devices, e, paths(hosttools.FiPingpong))
	return Script{Name: "the EFA traffic test", File: "efa-traffic", Text: text, Timeout: e.Budget(len(devices))}, nil
}

// efaTrafficText renders the traffic script with fi_pingpong looked for at pingPaths.
func efaTrafficText(devices []string, e settings.EFATraffic, pingPaths string) string {
	return render("efa-traffic.sh", []scriptVar{{name: "M", value: efaMarker}, {name: "timeout_s", value: seconds(e.Timeout)},
		{name: "iterations", value: strconv.Itoa(efaPingIterations)}, {name: "size", value: strconv.Itoa(efaPingSize)},
		{name: "concurrency", value: strconv.Itoa(e.Concurrency)}, {name: "base_port", value: strconv.Itoa(efaBasePort)},
		{name: "pingpong_paths", value: pingPaths}}, devices)
}

// ParseEFATraffic reads the traffic script's output: one ping-pong per device.
func ParseEFATraffic(output string) ([]facts.Fact[facts.PingPong], error) {
	var out []facts.Fact[facts.PingPong]
	var cur *facts.PingPong
	var body strings.Builder
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, efaMarker+" ")
		if !ok {
			if cur != nil {
				body.WriteString(line + "\n")
			}
			continue
		}
		f := strings.Fields(rest)
		switch {
		case len(f) >= 1 && f[0] == "ERROR":
			return nil, fmt.Errorf("efa traffic: %s", strings.TrimPrefix(rest, "ERROR "))
		case len(f) == 2 && f[0] == "BEGIN":
			cur = &facts.PingPong{Device: f[1]}
			body.Reset()
		case len(f) >= 3 && f[0] == "END" && cur != nil && f[1] == cur.Device:
			rc, _ := strconv.Atoi(f[2])
			src, tries := -1, 1
			if len(f) >= 4 {
				src, _ = strconv.Atoi(f[3])
			}
			if len(f) >= 5 {
				tries, _ = strconv.Atoi(f[4])
			}
			cur.ExitCode = rc
			cur.TimedOut = bundle.TimedOut(rc) || bundle.TimedOut(src)
			text := strings.TrimSpace(body.String())
			ev := fmt.Sprintf("[%s client: exit %d after %d connect tries, server: exit %d]\n%s", cur.Device, rc, tries, src, textcut.HeadNote(text, evidenceMax))
			switch tables, err := pingpong.Parse(text); {
			case rc != 0 && !bundle.TimedOut(rc) && strings.Contains(text, "Connection refused"):
				// The script tries a refused connect again while the server runs and the
				// pair's bound lasts: refused to the end, the server never listened.
				out = append(out, facts.Unread[facts.PingPong](fmt.Sprintf("%s: the client's connect was refused on all %d tries, until the pair's bound or the server's end (server exit %d): the server never listened on its port", cur.Device, tries, src), ev))
			case cur.TimedOut:
				out = append(out, facts.Unread[facts.PingPong](fmt.Sprintf("%s: the ping-pong hung and was stopped", cur.Device), ev))
			case rc != 0 || (src != 0 && src != -1):
				why := fmt.Sprintf("%s: the ping-pong failed (client exit %d, server exit %d)", cur.Device, rc, src)
				if err != nil {
					why += ": " + err.Error()
				}
				out = append(out, facts.Unread[facts.PingPong](why, ev))
			case err != nil:
				out = append(out, facts.Unread[facts.PingPong](cur.Device+": "+err.Error(), ev))
			default:
				cur.Client = tables
				out = append(out, facts.Read(*cur, ev))
			}
			cur = nil
		}
	}
	if cur != nil {
		return out, fmt.Errorf("efa traffic: the output of %s is cut short", cur.Device)
	}
	return out, nil
}

// seconds renders a duration as whole seconds for timeout(1), at least 1.
func seconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(d/time.Second)))
}

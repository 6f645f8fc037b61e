// Package nodeconf is the interface of dlami-node-check that the plugin and the command share:
// its modes and actions, the config file the provisioner installs and the command reads, where
// it is installed in the image, and the files that install it (the systemd unit, the Slurm
// HealthCheckProgram wrapper, the node-problem-detector custom plugin). It runs nothing.
package nodeconf

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Modes of the command (--mode).
const (
	// ModeBoot is the systemd unit's: judge, write the reports and the textfile, act on a
	// failure (Action), exit 1 when the node failed.
	ModeBoot = "boot"
	// ModeReport judges and writes, never acts; exit 1 when the node failed. The
	// post-processor runs it on the verification instance (with --json).
	ModeReport = "report"
	// ModeSlurm is Slurm's HealthCheckProgram: the program drains the node itself with the
	// reason, and undrains a node it drained once the node passes again.
	ModeSlurm = "slurm"
	// ModeNPD is a node-problem-detector custom plugin: exit 0 healthy, 1 problem, 2 unknown,
	// one short line on stdout.
	ModeNPD = "npd"
)

// Actions on a failure in ModeBoot (node_check.action).
const (
	// ActionBlock: the units named in node_check.before do not start (the unit is RequiredBy
	// them, and fails).
	ActionBlock = "block"
	// ActionDrain: drain the node in Slurm with the failed check ids as the reason.
	ActionDrain = "drain"
	// ActionReport: only report (journal, reports, textfile).
	ActionReport = "report"
)

// Modes and Actions in the order the docs list them.
var (
	Modes   = []string{ModeBoot, ModeReport, ModeSlurm, ModeNPD}
	Actions = []string{ActionBlock, ActionDrain, ActionReport}
)

// DefaultAction is what a failing boot does when nothing says otherwise: keep the job units
// from starting.
const DefaultAction = ActionBlock

// Timeout is node_check.timeout (or the config's timeout) as set, else (0) DefaultTimeout: the
// one place the default is applied, by the provisioner, the command and the verification. A
// negative bound is left for their validation to refuse.
func Timeout(d time.Duration) time.Duration {
	if d == 0 {
		return DefaultTimeout
	}
	return d
}

// Action returns action, or DefaultAction when it is empty.
func Action(action string) string {
	if action == "" {
		return DefaultAction
	}
	return action
}

// CheckAction refuses an action the command does not know, naming setting.
func CheckAction(setting, action string) error {
	if !slices.Contains(Actions, action) {
		return fmt.Errorf("%s %q: use %s", setting, action, strings.Join(Actions, ", "))
	}
	return nil
}

// CheckMode refuses a mode the command does not know, naming setting.
func CheckMode(setting, mode string) error {
	if !slices.Contains(Modes, mode) {
		return fmt.Errorf("%s %q: use %s", setting, mode, strings.Join(Modes, ", "))
	}
	return nil
}

// NPD's exit statuses (custom plugin protocol: OK, NonOK, Unknown).
const (
	NPDOK      = 0
	NPDProblem = 1
	NPDUnknown = 2
)

// NPDMaxMessage is node-problem-detector's default max_output_length: the condition message
// is cut there.
const NPDMaxMessage = 80

// Where the provisioner installs the node check in the image.
const (
	BinaryPath       = "/usr/local/sbin/dlami-node-check"
	SlurmWrapperPath = "/usr/local/sbin/dlami-node-check-slurm"
	ConfigPath       = "/etc/dlami-node-check/config.json"
	UnitName         = "dlami-node-check.service"
	UnitPath         = "/etc/systemd/system/" + UnitName
	NPDConfigPath    = "/etc/node-problem-detector.d/custom-plugin-monitor/dlami-node-check.json"
	DefaultOutDir    = "/var/lib/dlami-node-check"
	// DefaultTextfile is in the directory Debian's and Ubuntu's prometheus-node-exporter
	// package points --collector.textfile.directory at.
	DefaultTextfile = "/var/lib/prometheus/node-exporter/dlami_node_check.prom"
	DefaultScontrol = "/usr/bin/scontrol"
	// NPDCondition is the node condition node-problem-detector sets while the check fails.
	NPDCondition = "DLAMINodeCheckFailed"
	// DefaultTimeout bounds a run at boot.
	DefaultTimeout = 5 * time.Minute
	// SlurmTimeout bounds a run as Slurm's HealthCheckProgram, which Slurm kills after 60s.
	SlurmTimeout = 50 * time.Second
	// unitSlack is how much longer systemd waits than the command's own bound.
	unitSlack = 30 * time.Second
)

// GPUServices are the units the check runs after: the GPUs must be up.
var GPUServices = []string{"nvidia-persistenced.service", "nvidia-fabricmanager.service", "nvidia-dcgm.service"}

// DrainAfter are the units a drain-mode check runs after: scontrol authenticates through
// munged and talks to slurmctld over the network, and Slurm's configuration and commands may
// live on a network file system (AWS ParallelCluster's /opt/slurm). network-online.target is
// pulled in with Wants= as systemd.special(7) asks of a unit that needs the network up.
var DrainAfter = []string{"munge.service", "network-online.target", "remote-fs.target"}

// DefaultBefore are the units the check runs before (and, with action block, keeps from
// starting when it fails).
var DefaultBefore = []string{"slurmd.service", "kubelet.service"}

// Config is the file the provisioner installs at ConfigPath; the command reads it and its
// flags override it.
type Config struct {
	Action   string `json:"action"`
	BOMPath  string `json:"bom_path"`
	OutDir   string `json:"out_dir"`
	Textfile string `json:"textfile"`
	// Timeout bounds a run; CheckTimeout each probe command.
	Timeout      Duration `json:"timeout"`
	CheckTimeout Duration `json:"check_timeout"`
	// The load and function phases a boot runs besides the host suite, each off unless set:
	// the 1-node NCCL test, DCGM's diagnostics at this level (0 off), the EFA traffic test and
	// the GPUDirect RDMA all-reduce. Their floors and bounds are the bake's (the bill of
	// materials carries them).
	NCCL          bool `json:"nccl"`
	DCGMLevel     int  `json:"dcgm_level,omitempty"`
	EFATraffic    bool `json:"efa_traffic,omitempty"`
	GPUDirectRDMA bool `json:"gpudirect_rdma,omitempty"`
	// ContainerGPU runs the container-gpu check (with the bake's container_check).
	ContainerGPU bool `json:"container_gpu,omitempty"`
	// SkipChecks and WarnChecks are node_check's skip_checks and warn_checks, on top of the
	// bake's.
	SkipChecks []string `json:"skip_checks,omitempty"`
	WarnChecks []string `json:"warn_checks,omitempty"`
	Scontrol   string   `json:"scontrol"`
	// Before are the units the systemd unit runs before (for the record).
	Before []string `json:"before"`
	// LoginUser is the user whose new logins the memlock check judges (the bake's SSH user).
	LoginUser string `json:"login_user,omitempty"`
	// Replace is who replaces a failing node (Replacers; "" is DefaultReplace), NPDCondition
	// the condition the node-problem-detector plugin reports (NPDConditions; "" is
	// NPDConditionFailed), Evidence what is kept before the node is isolated. See fleet.go.
	Replace      string   `json:"replace,omitempty"`
	NPDCondition string   `json:"npd_condition,omitempty"`
	Evidence     Evidence `json:"evidence"`
}

// Duration is a duration written the way Go and HCL read it ("5m0s").
type Duration time.Duration

// Duration returns d as a time.Duration.
func (d Duration) Duration() time.Duration { return time.Duration(d) }

// MarshalText writes d as "5m0s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a duration such as "5m0s" or "90s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Encode renders c as indented JSON.
func (c Config) Encode() []byte {
	b, _ := json.MarshalIndent(c, "", "  ") // plain strings, ints, bools and durations: cannot fail
	return append(b, '\n')
}

// DecodeConfig reads a Config; unknown fields are refused, so a typo never silently falls
// back to a default.
func DecodeConfig(data []byte) (Config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return Config{}, err
	}
	return c, nil
}

var unitNameRE = regexp.MustCompile(`^[A-Za-z0-9:_.\\@-]+\.(service|target|socket|mount|timer)$`)

// CheckUnitName refuses a name systemd would not take as a unit, naming setting.
func CheckUnitName(setting, name string) error {
	if !unitNameRE.MatchString(name) {
		return fmt.Errorf("%s %q: not a systemd unit name (letters, digits, ':', '_', '.', '@', '-', ending in .service, .target, .socket, .mount or .timer)", setting, name)
	}
	return nil
}

// Unit renders the systemd unit: a oneshot after the GPU services (with action drain also
// after DrainAfter) and before the units in before; with action block it is RequiredBy them too, so that its failure keeps them from
// starting (systemd does not start a unit whose Requires= dependency, ordered before it,
// failed). Its start is bounded (TimeoutStartSec, beyond the command's own --timeout).
func Unit(c Config) string {
	timeout := c.Timeout.Duration()
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w("# Installed by packer-plugin-dlami (node_check): judges this node against the image's")
	w("# bill of materials at every boot. Verdict: journalctl -u %s; reports in %s.", UnitName, c.OutDir)
	w("[Unit]")
	w("Description=dlami node check (GPUs, driver, EFA, kernel and packages against the image)")
	w("Documentation=https://github.com/dlami-bake/packer-plugin-dlami/blob/main/docs/provisioners/dlami.mdx#node-check")
	w("After=%s", strings.Join(GPUServices, " "))
	if c.Action == ActionDrain {
		w("# action drain: scontrol needs munge, the network and Slurm's configuration.")
		w("After=%s", strings.Join(DrainAfter, " "))
		w("Wants=network-online.target")
	}
	if len(c.Before) > 0 {
		w("Before=%s", strings.Join(c.Before, " "))
	}
	w("")
	w("[Service]")
	w("Type=oneshot")
	w("RemainAfterExit=yes")
	w("ExecStart=%s --mode %s --config %s", BinaryPath, ModeBoot, ConfigPath)
	// The evidence bundle of a failing boot comes after the run's own bound.
	w("TimeoutStartSec=%d", int((timeout+c.Evidence.Budget(ModeBoot)+unitSlack)/time.Second))
	w("StandardOutput=journal")
	w("StandardError=journal")
	w("")
	w("[Install]")
	w("WantedBy=multi-user.target")
	if c.Action == ActionBlock && len(c.Before) > 0 {
		w("RequiredBy=%s", strings.Join(c.Before, " "))
	}
	return b.String()
}

// slurmWrapper is the HealthCheckProgram: Slurm runs it without arguments. It names
// BinaryPath, ModeSlurm and ConfigPath (a test holds them together).
//
//go:embed slurm-wrapper.sh
var slurmWrapper string

// SlurmWrapper is the HealthCheckProgram the provisioner installs at SlurmWrapperPath.
func SlurmWrapper() string { return slurmWrapper }

// NPDConfig is node-problem-detector's custom plugin monitor configuration, for the condition
// c.NPDCondition names. DLAMINodeCheckFailed (the default) is True while the check exits 1.
// AcceleratedHardwareReady is the condition Karpenter's and EKS's node repair act on when it is
// False: node-problem-detector sets a custom plugin's condition True on exit 1 and False on
// exit 0 (pkg/custompluginmonitor, toConditionStatus), so the npd mode answers it inverted
// (NPDExit), and the problem metrics, which count True as a problem, are off for it.
func NPDConfig(c Config) []byte {
	timeout := c.Timeout.Duration()
	// A failing run keeps its evidence before it answers: the rule waits for that too.
	ruleTimeout := timeout + c.Evidence.Budget(ModeNPD) + ActionBudget
	condition := map[string]string{
		"type": NPDCondition, "reason": "DLAMINodeCheckPassed",
		"message": "the node matches its image's bill of materials and passes the host suite",
	}
	rule := map[string]any{
		"type": "permanent", "condition": NPDCondition, "reason": NPDCondition,
		"path": BinaryPath, "args": []string{"--mode", ModeNPD, "--config", ConfigPath},
		"timeout": ruleTimeout.String(),
	}
	metrics := true
	if NPDConditionOf(c.NPDCondition) == NPDConditionAcceleratedHardwareReady {
		// The default (False) is what node-problem-detector reports at its start and whenever
		// the plugin exits 0: the node failed. The plugin's own line is the message of True
		// (ready); node-problem-detector puts the default message on False.
		condition = map[string]string{
			"type": NPDConditionAcceleratedHardwareReady, "reason": NPDCondition,
			"message": "the DLAMI node check failed on this node or has not judged it yet: journalctl -u " + UnitName + " and " + DefaultOutDir + "/dlami-report.json say why",
		}
		rule["condition"], rule["reason"] = NPDConditionAcceleratedHardwareReady, "DLAMINodeCheckPassed"
		metrics = false
	}
	doc := map[string]any{
		"plugin": "custom",
		"pluginConfig": map[string]any{
			"invoke_interval":   "10m",
			"timeout":           (ruleTimeout + unitSlack).String(),
			"max_output_length": NPDMaxMessage,
			"concurrency":       1,
			"enable_message_change_based_condition_update": false,
		},
		"source":           "dlami-node-check",
		"metricsReporting": metrics,
		"conditions":       []map[string]string{condition},
		"rules":            []map[string]any{rule},
	}
	b, _ := json.MarshalIndent(doc, "", "  ") // maps of plain values: cannot fail
	return append(b, '\n')
}

// NPDExit is the npd mode's exit status for a run whose node failed (or not), for the
// condition the plugin reports: node-problem-detector's custom plugin protocol (0 OK, 1
// NonOK) for DLAMINodeCheckFailed, the other way round for AcceleratedHardwareReady, whose
// True means ready.
func NPDExit(condition string, failed bool) int {
	inverted := NPDConditionOf(condition) == NPDConditionAcceleratedHardwareReady
	if failed != inverted {
		return NPDProblem
	}
	return NPDOK
}

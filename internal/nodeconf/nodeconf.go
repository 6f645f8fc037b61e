//go:generate packer-sdc mapstructure-to-hcl2 -type Config,Evidence
//go:generate packer-sdc struct-markdown

// Package nodeconf is the interface of dlami-node-check that the plugin and the command share:
// its modes and actions, its settings (the provisioner's node_check block, which is also the
// config file the provisioner installs and the command reads), where
// it is installed in the image, and the files that install it (the systemd unit, the Slurm
// HealthCheckProgram wrapper, the node-problem-detector custom plugin). It runs nothing.
package nodeconf

import (
	"cmp"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// Mode is how the command runs (--mode).
type Mode string

// Modes of the command.
const (
	// ModeBoot is the systemd unit's: judge, write the reports and the textfile, act on a
	// failure (Action), exit 1 when the node failed.
	ModeBoot Mode = "boot"
	// ModeReport judges and writes, never acts; exit 1 when the node failed. The
	// post-processor runs it on the verification instance (with --json).
	ModeReport Mode = "report"
	// ModeSlurm is Slurm's HealthCheckProgram: the program drains the node itself with the
	// reason, and undrains a node it drained once the node passes again.
	ModeSlurm Mode = "slurm"
	// ModeNPD is a node-problem-detector custom plugin: exit 0 healthy, 1 problem, 2 unknown,
	// one short line on stdout.
	ModeNPD Mode = "npd"
)

// Action is what a failing boot does (node_check.action, --action).
type Action string

// Actions on a failure in ModeBoot.
const (
	// ActionBlock: the units named in node_check.before do not start (the unit is RequiredBy
	// them, and fails).
	ActionBlock Action = "block"
	// ActionDrain: drain the node in Slurm with the failed check ids as the reason.
	ActionDrain Action = "drain"
	// ActionReport: only report (journal, reports, textfile).
	ActionReport Action = "report"
)

// Modes and Actions in the order the docs list them.
var (
	Modes   = []Mode{ModeBoot, ModeReport, ModeSlurm, ModeNPD}
	Actions = []Action{ActionBlock, ActionDrain, ActionReport}
)

// DefaultAction is what a failing boot does when nothing says otherwise: keep the job units
// from starting.
const DefaultAction = ActionBlock

// Validate refuses an action the command does not know, naming setting.
func (a Action) Validate(setting string) error {
	if !slices.Contains(Actions, a) {
		return fmt.Errorf("%s %q: use %s", setting, a, joined(Actions))
	}
	return nil
}

// Validate refuses a mode the command does not know, naming setting.
func (m Mode) Validate(setting string) error {
	if !slices.Contains(Modes, m) {
		return fmt.Errorf("%s %q: use %s", setting, m, joined(Modes))
	}
	return nil
}

// joined lists vs as the docs do: "block, drain, report".
func joined[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
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

// Config is the node_check block of the provisioner, and the file it installs at ConfigPath:
// one type, read from HCL and written and read as JSON. The command reads the file, overlays
// its flags and validates the result with the same Validate as the provisioner. Resolved fills
// in the defaults; a field left zero in the file takes its default the same way.
type Config struct {
	// What a failing boot does: `block` (the units in `before` do not start: the unit is
	// RequiredBy them), `drain` (`scontrol update nodename=<node> state=drain
	// reason="dlami: <failed ids>"`, never over an operator's drain) or `report` (journal,
	// reports and textfile only). Defaults to `block`.
	Action Action `mapstructure:"action" json:"action"`
	// Units the check runs before (and, with `block`, keeps from starting when it fails).
	// Defaults to `["slurmd.service", "kubelet.service"]`.
	Before []string `mapstructure:"before" json:"before"`
	// Run the 1-node NCCL test at every boot too (minutes of GPU time per boot), with the
	// bake's nccl settings. Defaults to false.
	NCCL bool `mapstructure:"nccl" json:"nccl"`
	// Run DCGM's diagnostics at this level at every boot (1 takes seconds to a minute, 2 a
	// few minutes); 0 turns them off. Defaults to 0.
	DCGMLevel settings.DCGMLevel `mapstructure:"dcgm_level" json:"dcgm_level,omitempty"`
	// Run the EFA traffic test at every boot (an RDM ping-pong across every EFA device, with
	// the bake's efa_traffic floor and bounds). Defaults to false.
	EFATraffic bool `mapstructure:"efa_traffic" json:"efa_traffic,omitempty"`
	// Run the GPUDirect RDMA all-reduce at every boot (with the bake's gpudirect_rdma floor).
	// Defaults to false.
	GPUDirectRDMA bool `mapstructure:"gpudirect_rdma" json:"gpudirect_rdma,omitempty"`
	// Run the container-gpu check at every boot (a container with all GPUs on each engine,
	// from the bake's container_check image or rootfs). Defaults to false.
	ContainerGPU bool `mapstructure:"container_gpu" json:"container_gpu,omitempty"`
	// Check ids the node check does not judge, on top of the provisioner's skip_checks.
	SkipChecks []string `mapstructure:"skip_checks" json:"skip_checks,omitempty"`
	// Check ids whose failure only warns on a node, on top of the provisioner's warn_checks.
	WarnChecks []string `mapstructure:"warn_checks" json:"warn_checks,omitempty"`
	// Bound of one run at boot; a run that reaches it fails (the unit's TimeoutStartSec is
	// 30s longer). Defaults to 5m.
	Timeout time.Duration `mapstructure:"timeout" json:"-"`
	// node_exporter textfile (*.prom) the check writes, atomically, at every run; `none`
	// writes none. Defaults to /var/lib/prometheus/node-exporter/dlami_node_check.prom (the
	// textfile directory of Ubuntu's prometheus-node-exporter).
	Textfile string `mapstructure:"textfile" json:"textfile"`
	// The user whose new logins the memlock check judges on the node (the check runs as root,
	// and pam_limits gives root other limits). Defaults to the user Packer logged in as.
	LoginUser string `mapstructure:"login_user" json:"login_user,omitempty"`
	// Who replaces a failing node once the check has isolated it: `none` (the check isolates
	// only; right for Slurm on AWS ParallelCluster, whose clustermgtd replaces a drained idle
	// node whatever the drain's reason) or `asg` (the check finds its Auto Scaling group with
	// `DescribeAutoScalingInstances` and marks itself `Unhealthy` with `SetInstanceHealth`,
	// grace period not respected; the group terminates and replaces it; the instance role needs
	// `autoscaling:DescribeAutoScalingInstances` and `autoscaling:SetInstanceHealth`). Not with
	// `npd_condition = "AcceleratedHardwareReady"`: two engines would replace the node. The
	// request is not sent for a node an operator holds in Slurm (drained with a reason of their
	// own), and waits while Slurm runs jobs on the node (a later run sends it once the node is
	// drained and idle); a `--simulate-failure` drill sends it only with
	// `--simulate-failure-replace`. Defaults to `none`.
	Replace string `mapstructure:"replace" json:"replace,omitempty"`
	// The node condition the node-problem-detector custom plugin reports:
	// `DLAMINodeCheckFailed` (True while the check fails: isolation only, no repair engine acts
	// on a custom condition) or `AcceleratedHardwareReady` (False while the check fails: what
	// Karpenter's node repair and EKS node auto repair replace a node on after 10 minutes; do
	// not run EKS's node monitoring agent beside it, which owns that condition).
	// node-problem-detector reports the condition False from its start until the check's first
	// run answers, so `AcceleratedHardwareReady` needs a `timeout` of at most 5m (half the
	// repair's toleration), or healthy nodes could be replaced. Defaults to
	// `DLAMINodeCheckFailed`.
	NPDCondition string `mapstructure:"npd_condition" json:"npd_condition,omitempty"`
	// What the check keeps of a failing node before it isolates it (the block's settings
	// below); kept by default, with the defaults below.
	Evidence Evidence `mapstructure:"evidence" json:"evidence"`

	// The file's own settings, which the provisioner fills in from its other settings
	// (manifest_path, check_timeout) and the command's flags override; not in the block.

	// BOMPath is the bill of materials in the image (the provisioner's manifest_path).
	BOMPath string `mapstructure:"-" mapstructure-to-hcl2:",skip" undocumented:"true" json:"bom_path"`
	// OutDir receives the reports; "" (--out "") writes none.
	OutDir string `mapstructure:"-" mapstructure-to-hcl2:",skip" undocumented:"true" json:"out_dir"`
	// CheckTimeout bounds each probe command (the provisioner's check_timeout).
	CheckTimeout time.Duration `mapstructure:"-" mapstructure-to-hcl2:",skip" undocumented:"true" json:"-"`
	// Scontrol is Slurm's scontrol, by absolute path.
	Scontrol string `mapstructure:"-" mapstructure-to-hcl2:",skip" undocumented:"true" json:"scontrol"`
}

// TextfileNone is the textfile setting that writes none.
const TextfileNone = "none"

// Resolved returns c with every default filled in: the one place they are applied, by the
// provisioner's Prepare and the command's start alike.
func (c Config) Resolved() Config {
	c.Action = cmp.Or(Action(strings.TrimSpace(string(c.Action))), DefaultAction)
	if c.Before == nil {
		c.Before = slices.Clone(DefaultBefore)
	}
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.Textfile = cmp.Or(c.Textfile, DefaultTextfile)
	c.Replace = ReplaceOf(strings.TrimSpace(c.Replace))
	c.NPDCondition = NPDConditionOf(strings.TrimSpace(c.NPDCondition))
	c.Evidence = c.Evidence.Resolved()
	c.BOMPath = cmp.Or(c.BOMPath, bom.DefaultPath)
	c.OutDir = cmp.Or(c.OutDir, DefaultOutDir)
	c.CheckTimeout = cmp.Or(c.CheckTimeout, settings.DefaultCheckTimeout)
	c.Scontrol = cmp.Or(c.Scontrol, DefaultScontrol)
	return c
}

// TextfilePath is the textfile to write; "" writes none.
func (c Config) TextfilePath() string {
	if c.Textfile == TextfileNone {
		return ""
	}
	return c.Textfile
}

// The bounds of a run: one rule for node_check.timeout and --timeout. A manual run is bounded
// like a boot (a shorter bound only judges less of the node in time, and fails it).
const (
	MinTimeout = 10 * time.Second
	MaxTimeout = time.Hour
)

// loginUserRE is what useradd takes by default (NAME_REGEX of adduser): no shell syntax.
var loginUserRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// Validate reports every bad setting of c (resolved), each named by name(setting), setting
// as the block and the file spell it ("timeout", "evidence.dir", "before[1]"): the
// provisioner names them node_check.<setting>, the command by its flags.
func (c Config) Validate(name func(setting string) string) error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if c.LoginUser != "" && !loginUserRE.MatchString(c.LoginUser) {
		add(fmt.Errorf("%s %q: a user name (lower-case letters, digits, '_' and '-', starting with a letter or '_', at most 32)", name("login_user"), c.LoginUser))
	}
	add(c.Action.Validate(name("action")))
	for i, u := range c.Before {
		add(CheckUnitName(name(fmt.Sprintf("before[%d]", i)), u))
	}
	if c.Action == ActionBlock && len(c.Before) == 0 {
		add(fmt.Errorf("%s = \"block\" with an empty %s blocks nothing: name the units to keep from starting, or use action \"report\"", name("action"), name("before")))
	}
	add(c.DCGMLevel.Validate(name("dcgm_level")))
	errs = append(errs, checks.CheckSelection(name("skip_checks"), c.SkipChecks)...)
	errs = append(errs, checks.CheckSelection(name("warn_checks"), c.WarnChecks)...)
	if c.Timeout < MinTimeout || c.Timeout > MaxTimeout {
		add(fmt.Errorf("%s %s: use 10s to 1h", name("timeout"), c.Timeout))
	}
	if c.CheckTimeout < time.Second {
		add(fmt.Errorf("%s %s: must be at least 1s", name("check_timeout"), c.CheckTimeout))
	}
	if t := c.Textfile; t != TextfileNone && t != "" && (!path.IsAbs(t) || !strings.HasSuffix(t, ".prom") || path.Clean(t) != t) {
		add(fmt.Errorf("%s %q: an absolute path ending in .prom (node_exporter's textfile collector reads only *.prom), or \"none\"", name("textfile"), t))
	}
	if !path.IsAbs(c.BOMPath) {
		add(fmt.Errorf("%s %q: must be an absolute path", name("bom_path"), c.BOMPath))
	}
	if c.OutDir != "" && !path.IsAbs(c.OutDir) {
		add(fmt.Errorf("%s %q: must be an absolute path", name("out_dir"), c.OutDir))
	}
	if !path.IsAbs(c.Scontrol) {
		add(fmt.Errorf("%s %q: must be an absolute path", name("scontrol"), c.Scontrol))
	}
	add(c.checkFleet(name))
	return errors.Join(errs...)
}

// Encode renders c as indented JSON.
func (c Config) Encode() []byte {
	b, _ := json.MarshalIndent(c, "", "  ") // plain strings, ints, bools and durations: cannot fail
	return append(b, '\n')
}

// DecodeConfig reads a Config; unknown fields are refused, so a typo never silently falls
// back to a default.
func DecodeConfig(data []byte) (Config, error) {
	var c Config
	if err := strictJSON(data, &c); err != nil {
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
	timeout := c.Timeout
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
	timeout := c.Timeout
	// A failing run keeps its evidence before it answers: the rule waits for that too.
	ruleTimeout := timeout + c.Evidence.Budget(ModeNPD) + ActionBudget
	condition := map[string]string{
		"type": NPDCondition, "reason": "DLAMINodeCheckPassed",
		"message": "the node matches its image's bill of materials and passes the host suite",
	}
	rule := map[string]any{
		"type": "permanent", "condition": NPDCondition, "reason": NPDCondition,
		"path": BinaryPath, "args": []string{"--mode", string(ModeNPD), "--config", ConfigPath},
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

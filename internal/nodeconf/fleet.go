//go:generate packer-sdc struct-markdown

package nodeconf

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// What hands a failing node to the engine that replaces it (node_check.replace). The facts
// each value rests on are in docs/node-check-fleet.md (Auto Scaling's SetInstanceHealth,
// Karpenter's and EKS's repair conditions, ParallelCluster's drained-node replacement).
const (
	// ReplaceNone: the node check isolates (block, drain, NPD condition) and asks nothing
	// more. With Slurm on AWS ParallelCluster this is the right value: clustermgtd replaces a
	// drained idle node whatever the drain's reason.
	ReplaceNone = "none"
	// ReplaceASG: the node check finds its Auto Scaling group (DescribeAutoScalingInstances)
	// and marks itself Unhealthy (SetInstanceHealth, ShouldRespectGracePeriod=false); the
	// group terminates and replaces it.
	ReplaceASG = "asg"
)

// Replacers are the values of node_check.replace, in the order the docs list them.
var Replacers = []string{ReplaceNone, ReplaceASG}

// DefaultReplace is node_check.replace when nothing says otherwise.
const DefaultReplace = ReplaceNone

// The node condition the node-problem-detector plugin reports (node_check.npd_condition).
const (
	// NPDConditionFailed is a condition of the node check's own, True while it fails: it
	// isolates (a taint controller, a scheduler, a person reads it) but no repair engine acts
	// on it (Karpenter and EKS node auto repair compare fixed condition types only).
	NPDConditionFailed = NPDCondition
	// NPDConditionAcceleratedHardwareReady is the condition Karpenter's node repair (AWS
	// provider, NodeRepair feature gate) and EKS node auto repair replace a node on when it is
	// False for 10 minutes. node-problem-detector sets a custom plugin's condition True on a
	// problem (exit 1) and False when healthy (exit 0), so the npd mode answers this
	// condition the other way round: exit 1 (True, ready) when the node passes, exit 0
	// (False) when it fails.
	NPDConditionAcceleratedHardwareReady = "AcceleratedHardwareReady"
)

// NPDConditions are the values of node_check.npd_condition.
var NPDConditions = []string{NPDConditionFailed, NPDConditionAcceleratedHardwareReady}

// NPDConditionOf returns c, or NPDConditionFailed when it is empty.
func NPDConditionOf(c string) string {
	if c == "" {
		return NPDConditionFailed
	}
	return c
}

// ReplaceOf returns r, or DefaultReplace when it is empty.
func ReplaceOf(r string) string {
	if r == "" {
		return DefaultReplace
	}
	return r
}

// CheckReplace refuses a replace value the command does not know, naming setting.
func CheckReplace(setting, v string) error {
	if !slices.Contains(Replacers, v) {
		return fmt.Errorf("%s %q: use %s", setting, v, strings.Join(Replacers, ", "))
	}
	return nil
}

// CheckNPDCondition refuses a condition the command does not report, naming setting.
func CheckNPDCondition(setting, v string) error {
	if !slices.Contains(NPDConditions, v) {
		return fmt.Errorf("%s %q: use %s", setting, v, strings.Join(NPDConditions, ", "))
	}
	return nil
}

// CheckOneOwner refuses settings under which two engines would replace the same failing node:
// Auto Scaling (replace "asg") and Kubernetes node repair (the AcceleratedHardwareReady
// condition, which Karpenter and EKS node auto repair act on; an EKS managed node group is an
// Auto Scaling group, so both would terminate it and each launch a replacement). Setting
// names are the caller's (node_check.replace or --replace, ...).
func CheckOneOwner(replaceSetting, replace, conditionSetting, condition string) error {
	if ReplaceOf(replace) == ReplaceASG && NPDConditionOf(condition) == NPDConditionAcceleratedHardwareReady {
		return fmt.Errorf("%s = %q together with %s = %q: two owners would replace the same node (Auto Scaling on SetInstanceHealth, and Karpenter or EKS node auto repair on AcceleratedHardwareReady=False; a managed node group is itself an Auto Scaling group): keep one, either replace = %q with npd_condition = %q, or replace = %q with npd_condition = %q",
			replaceSetting, replace, conditionSetting, condition, ReplaceASG, NPDConditionFailed, ReplaceNone, NPDConditionAcceleratedHardwareReady)
	}
	return nil
}

// RepairToleration is how long Karpenter's node repair (AWS provider, RepairPolicies) and EKS
// node auto repair wait on AcceleratedHardwareReady=False before they replace the node: 10
// minutes (docs/node-check-fleet.md has the sources).
const RepairToleration = 10 * time.Minute

// MaxAcceleratedHardwareReadyTimeout is the longest run bound allowed with npd_condition
// AcceleratedHardwareReady: half the repair toleration. node-problem-detector reports every
// condition of a custom plugin False from its start (custompluginmonitor initialConditions)
// until the plugin's first run answers, so a healthy node reads "not ready" for as long as
// that first run takes; with the other half for node-problem-detector's start, the plugin's
// own timeout slack and clock skew, the first run must end well inside the toleration.
const MaxAcceleratedHardwareReadyTimeout = RepairToleration / 2

// CheckConditionTimeout refuses a run bound that could keep a healthy node's
// AcceleratedHardwareReady False long enough for node repair to replace it (setting names
// are the caller's: node_check.timeout or --timeout, ...).
func CheckConditionTimeout(timeoutSetting string, timeout time.Duration, conditionSetting, condition string) error {
	if NPDConditionOf(condition) != NPDConditionAcceleratedHardwareReady || timeout <= MaxAcceleratedHardwareReadyTimeout {
		return nil
	}
	return fmt.Errorf("%s %s together with %s = %q: node-problem-detector reports AcceleratedHardwareReady False from its start until the node check's first run answers, and Karpenter's and EKS's node repair replace a node whose AcceleratedHardwareReady has been False for %s; a run that may take %s could get a healthy node replaced: set %s to at most %s (turn off the slow phases, nccl and dcgm_level, which the npd mode runs within it), or use %s = %q, which no repair engine acts on",
		timeoutSetting, timeout, conditionSetting, condition, RepairToleration, timeout, timeoutSetting, MaxAcceleratedHardwareReadyTimeout, conditionSetting, NPDConditionFailed)
}

// Evidence is node_check's evidence block: the bundle a failing node leaves behind (its
// report, the kernel log around each Xid and SXid from dmesg and the journal, `nvidia-smi -q`,
// `nvidia-bug-report.sh`, the instance's identity from IMDSv2 and the image's build), written
// before the node is drained or replaced. Zero fields take the defaults (Resolved).
type Evidence struct {
	// Keep no evidence. Defaults to false.
	Disable bool `mapstructure:"disable" json:"disable,omitempty"`
	// Where the bundles are kept on the node. Defaults to /var/lib/dlami-node-check/evidence.
	Dir string `mapstructure:"dir" json:"dir,omitempty"`
	// How many bundles are kept; the oldest is removed first. Defaults to 10.
	MaxBundles int `mapstructure:"max_bundles" json:"max_bundles,omitempty"`
	// How many MiB the bundles may take in all; the oldest are removed first (the newest is
	// always kept). Defaults to 512.
	MaxSizeMB int `mapstructure:"max_size_mb" json:"max_size_mb,omitempty"`
	// Upload each bundle to this S3 location too (`s3://bucket/prefix`; the key is
	// `<prefix>/<instance id>/<bundle>`), with the instance role (`s3:PutObject` on it), into
	// a bucket in the instance's region. A failed upload never keeps the node from being
	// isolated: the report and the journal say why.
	S3URI string `mapstructure:"s3_uri" json:"s3_uri,omitempty"`
	// Run `dcgmi diag -r <level> -j` into the bundle (3: DCGM's long diagnostics, about 15
	// minutes of full GPU load, which NVIDIA gives to an administrator as post-mortem); 0 runs
	// none. Not in slurm mode nor for a simulated failure. Defaults to 0.
	DCGMLevel settings.DCGMLevel `mapstructure:"dcgm_level" json:"dcgm_level,omitempty"`
	// Bound of `nvidia-bug-report.sh` (NVIDIA: usually quick; may hang). Not run in slurm
	// mode. Defaults to 3m.
	BugReportTimeout time.Duration `mapstructure:"bug_report_timeout" json:"-"`
}

// MaxBytes is MaxSizeMB in bytes.
func (e Evidence) MaxBytes() int64 { return int64(e.MaxSizeMB) << 20 }

// Evidence defaults and bounds.
const (
	DefaultEvidenceDir        = DefaultOutDir + "/evidence"
	DefaultEvidenceMaxBundles = 10
	DefaultEvidenceMaxSizeMB  = 512
	DefaultBugReportTimeout   = 3 * time.Minute
	// maxEvidenceSizeMB is the largest total a store may be bounded to (1 TiB).
	maxEvidenceSizeMB = 1 << 20
	// EvidenceQuickBudget bounds the quick parts of a bundle together (nvidia-smi -q, the
	// instance identity, writing it): seconds on a healthy driver, bounded for a hung one.
	EvidenceQuickBudget = 20 * time.Second
	// SlurmEvidenceBudget bounds a bundle in slurm mode, where slurmd kills the program after
	// 60 seconds: only the quick parts run (no bug report, no DCGM), and never past the
	// time the drain needs.
	SlurmEvidenceBudget = 8 * time.Second
	// ActionBudget bounds the actions after the verdict (drain, upload, replacement request).
	ActionBudget = 30 * time.Second
)

// Resolved returns e with every zero field at its default.
func (e Evidence) Resolved() Evidence {
	if e.Dir == "" {
		e.Dir = DefaultEvidenceDir
	}
	if e.MaxBundles == 0 {
		e.MaxBundles = DefaultEvidenceMaxBundles
	}
	if e.MaxSizeMB == 0 {
		e.MaxSizeMB = DefaultEvidenceMaxSizeMB
	}
	if e.BugReportTimeout == 0 {
		e.BugReportTimeout = DefaultBugReportTimeout
	}
	return e
}

// Budget is the longest a bundle of e may take in mode: its quick parts, the bug report and
// DCGM's diagnostics where that mode runs them; 0 when evidence is off. The systemd unit and
// the node-problem-detector rule wait this much longer than the run's own bound.
func (e Evidence) Budget(mode Mode) time.Duration {
	if e.Disable {
		return 0
	}
	if mode == ModeSlurm {
		return SlurmEvidenceBudget
	}
	r := e.Resolved()
	return EvidenceQuickBudget + r.BugReportTimeout + r.DCGMLevel.Timeout()
}

// s3BucketRE is an S3 general purpose bucket name (3-63 lower-case letters, digits, '.' and
// '-', starting and ending with a letter or digit).
var s3BucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// ParseS3URI splits s3://bucket[/prefix] into the bucket and the key prefix (no slashes at its
// ends; "" for none).
func ParseS3URI(uri string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%q does not start with s3://", uri)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if !s3BucketRE.MatchString(bucket) || strings.Contains(bucket, "..") {
		return "", "", fmt.Errorf("%q: %q is not an S3 bucket name (3 to 63 lower-case letters, digits, '.' and '-')", uri, bucket)
	}
	prefix = strings.Trim(prefix, "/")
	if strings.Contains(prefix, "//") || strings.ContainsAny(prefix, "\x00\n\r") {
		return "", "", fmt.Errorf("%q: the key prefix %q has an empty segment or a control character", uri, prefix)
	}
	return bucket, prefix, nil
}

// Validate reports every bad evidence setting, each named with prefix (e.g.
// "node_check.evidence.").
func (e Evidence) Validate(prefix string) []error {
	var errs []error
	if e.Dir != "" && (!path.IsAbs(e.Dir) || path.Clean(e.Dir) != e.Dir || e.Dir == "/") {
		errs = append(errs, fmt.Errorf("%sdir %q: an absolute, clean path other than /", prefix, e.Dir))
	}
	if e.MaxBundles < 0 || e.MaxBundles > 1000 {
		errs = append(errs, fmt.Errorf("%smax_bundles %d: use 1 to 1000 (0 takes the default, %d)", prefix, e.MaxBundles, DefaultEvidenceMaxBundles))
	}
	if e.MaxSizeMB < 0 || e.MaxSizeMB > maxEvidenceSizeMB {
		errs = append(errs, fmt.Errorf("%smax_size_mb %d: use 1 to %d (0 takes the default, %d)", prefix, e.MaxSizeMB, maxEvidenceSizeMB, DefaultEvidenceMaxSizeMB))
	}
	if e.S3URI != "" {
		if _, _, err := ParseS3URI(e.S3URI); err != nil {
			errs = append(errs, fmt.Errorf("%ss3_uri: %w", prefix, err))
		}
	}
	if err := e.DCGMLevel.Validate(prefix + "dcgm_level"); err != nil {
		errs = append(errs, err)
	}
	if t := e.BugReportTimeout; t != 0 && (t < 10*time.Second || t > time.Hour) {
		errs = append(errs, fmt.Errorf("%sbug_report_timeout %s: use 10s to 1h (NVIDIA: the report is usually quick)", prefix, t))
	}
	return errs
}

// checkFleet reports every bad fleet setting of c (replace, npd_condition, evidence) and the
// combinations that would fight: two engines replacing the node, or a timeout too long for
// npd_condition AcceleratedHardwareReady.
func (c Config) checkFleet(name func(string) string) error {
	var errs []error
	if err := CheckReplace(name("replace"), ReplaceOf(c.Replace)); err != nil {
		errs = append(errs, err)
	}
	if err := CheckNPDCondition(name("npd_condition"), NPDConditionOf(c.NPDCondition)); err != nil {
		errs = append(errs, err)
	}
	if err := CheckOneOwner(name("replace"), c.Replace, name("npd_condition"), c.NPDCondition); err != nil {
		errs = append(errs, err)
	}
	if err := CheckConditionTimeout(name("timeout"), c.Timeout, name("npd_condition"), c.NPDCondition); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.Evidence.Validate(name("evidence")+".")...)
	return errors.Join(errs...)
}

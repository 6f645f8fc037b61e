//go:generate packer-sdc mapstructure-to-hcl2 -type NodeCheckEvidenceConfig
//go:generate packer-sdc struct-markdown

package dlami

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheckbin"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// NodeCheckConfig is the node_check block: dlami-node-check in the image, run by a systemd
// unit at every boot (and usable as Slurm's HealthCheckProgram, a node-problem-detector custom
// plugin and a node_exporter textfile writer).
type NodeCheckConfig struct {
	// What a failing boot does: `block` (the units in `before` do not start: the unit is
	// RequiredBy them), `drain` (`scontrol update nodename=<node> state=drain
	// reason="dlami: <failed ids>"`, never over an operator's drain) or `report` (journal,
	// reports and textfile only). Defaults to `block`.
	Action string `mapstructure:"action"`
	// Units the check runs before (and, with `block`, keeps from starting when it fails).
	// Defaults to `["slurmd.service", "kubelet.service"]`.
	Before []string `mapstructure:"before"`
	// Run the 1-node NCCL test at every boot too (minutes of GPU time per boot), with the
	// bake's nccl settings. Defaults to false.
	NCCL bool `mapstructure:"nccl"`
	// Run DCGM's diagnostics at this level at every boot (1 takes seconds to a minute, 2 a
	// few minutes); 0 turns them off. Defaults to 0.
	DCGMLevel int `mapstructure:"dcgm_level"`
	// Run the EFA traffic test at every boot (an RDM ping-pong across every EFA device, with
	// the bake's efa_traffic floor and bounds). Defaults to false.
	EFATraffic bool `mapstructure:"efa_traffic"`
	// Run the GPUDirect RDMA all-reduce at every boot (with the bake's gpudirect_rdma floor).
	// Defaults to false.
	GPUDirectRDMA bool `mapstructure:"gpudirect_rdma"`
	// Run the container-gpu check at every boot (a container with all GPUs on each engine,
	// from the bake's container_check image or rootfs). Defaults to false.
	ContainerGPU bool `mapstructure:"container_gpu"`
	// Check ids the node check does not judge, on top of the provisioner's skip_checks.
	SkipChecks []string `mapstructure:"skip_checks"`
	// Check ids whose failure only warns on a node, on top of the provisioner's warn_checks.
	WarnChecks []string `mapstructure:"warn_checks"`
	// Bound of one run at boot; a run that reaches it fails (the unit's TimeoutStartSec is
	// 30s longer). Defaults to 5m.
	Timeout time.Duration `mapstructure:"timeout"`
	// node_exporter textfile (*.prom) the check writes, atomically, at every run; `none`
	// writes none. Defaults to /var/lib/prometheus/node-exporter/dlami_node_check.prom (the
	// textfile directory of Ubuntu's prometheus-node-exporter).
	Textfile string `mapstructure:"textfile"`
	// The user whose new logins the memlock check judges on the node (the check runs as root,
	// and pam_limits gives root other limits). Defaults to the user Packer logged in as.
	LoginUser string `mapstructure:"login_user"`
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
	Replace string `mapstructure:"replace"`
	// The node condition the node-problem-detector custom plugin reports:
	// `DLAMINodeCheckFailed` (True while the check fails: isolation only, no repair engine acts
	// on a custom condition) or `AcceleratedHardwareReady` (False while the check fails: what
	// Karpenter's node repair and EKS node auto repair replace a node on after 10 minutes; do
	// not run EKS's node monitoring agent beside it, which owns that condition).
	// node-problem-detector reports the condition False from its start until the check's first
	// run answers, so `AcceleratedHardwareReady` needs a `timeout` of at most 5m (half the
	// repair's toleration), or healthy nodes could be replaced. Defaults to
	// `DLAMINodeCheckFailed`.
	NPDCondition string `mapstructure:"npd_condition"`
	// What the check keeps of a failing node before it isolates it (the block's settings
	// below); kept by default, with the defaults below.
	Evidence *NodeCheckEvidenceConfig `mapstructure:"evidence"`
}

// NodeCheckEvidenceConfig is node_check's evidence block: the bundle a failing node leaves
// behind (its report, the kernel log around each Xid and SXid from dmesg and the journal,
// `nvidia-smi -q`, `nvidia-bug-report.sh`, the instance's identity from IMDSv2 and the image's
// build), written before the node is drained or replaced.
type NodeCheckEvidenceConfig struct {
	// Keep no evidence. Defaults to false.
	Disable bool `mapstructure:"disable"`
	// Where the bundles are kept on the node. Defaults to /var/lib/dlami-node-check/evidence.
	Dir string `mapstructure:"dir"`
	// How many bundles are kept; the oldest is removed first. Defaults to 10.
	MaxBundles int `mapstructure:"max_bundles"`
	// How many MiB the bundles may take in all; the oldest are removed first (the newest is
	// always kept). Defaults to 512.
	MaxSizeMB int `mapstructure:"max_size_mb"`
	// Upload each bundle to this S3 location too (`s3://bucket/prefix`; the key is
	// `<prefix>/<instance id>/<bundle>`), with the instance role (`s3:PutObject` on it), into
	// a bucket in the instance's region. A failed upload never keeps the node from being
	// isolated: the report and the journal say why.
	S3URI string `mapstructure:"s3_uri"`
	// Run `dcgmi diag -r <level> -j` into the bundle (3: DCGM's long diagnostics, about 15
	// minutes of full GPU load, which NVIDIA gives to an administrator as post-mortem); 0 runs
	// none. Not in slurm mode nor for a simulated failure. Defaults to 0.
	DCGMLevel int `mapstructure:"dcgm_level"`
	// Bound of `nvidia-bug-report.sh` (NVIDIA: usually quick; may hang). Not run in slurm
	// mode. Defaults to 3m.
	BugReportTimeout time.Duration `mapstructure:"bug_report_timeout"`
}

// config is the evidence block as the command reads it; zero fields are the command's
// defaults (nodeconf.Evidence.Resolved).
func (e *NodeCheckEvidenceConfig) config() nodeconf.Evidence {
	if e == nil {
		return nodeconf.Evidence{}
	}
	return nodeconf.Evidence{Disabled: e.Disable, Dir: e.Dir, MaxBundles: e.MaxBundles, MaxBytes: int64(e.MaxSizeMB) << 20,
		S3URI: e.S3URI, DCGMLevel: e.DCGMLevel, BugReportTimeout: nodeconf.Duration(e.BugReportTimeout)}
}

// loginUserRE is what useradd takes by default (NAME_REGEX of adduser): no shell syntax.
var loginUserRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// prepare fills in the defaults and reports every bad setting, naming it.
func (n *NodeCheckConfig) prepare(validate bool) []error {
	n.Action = strings.TrimSpace(n.Action)
	n.Replace, n.NPDCondition = strings.TrimSpace(n.Replace), strings.TrimSpace(n.NPDCondition)
	n.Action = nodeconf.Action(n.Action)
	if n.Before == nil {
		n.Before = slices.Clone(nodeconf.DefaultBefore)
	}
	n.Timeout = nodeconf.Timeout(n.Timeout)
	if n.Textfile == "" {
		n.Textfile = nodeconf.DefaultTextfile
	}
	var errs []error
	if n.LoginUser != "" && !loginUserRE.MatchString(n.LoginUser) {
		errs = append(errs, fmt.Errorf("node_check.login_user %q: a user name (lower-case letters, digits, '_' and '-', starting with a letter or '_', at most 32)", n.LoginUser))
	}
	if err := nodeconf.CheckAction("node_check.action", n.Action); err != nil {
		errs = append(errs, err)
	}
	for i, u := range n.Before {
		if err := nodeconf.CheckUnitName(fmt.Sprintf("node_check.before[%d]", i), u); err != nil {
			errs = append(errs, err)
		}
	}
	if n.Action == nodeconf.ActionBlock && len(n.Before) == 0 {
		errs = append(errs, errors.New("node_check.action = \"block\" with an empty node_check.before blocks nothing: name the units to keep from starting, or use action \"report\""))
	}
	if err := settings.DCGMLevel(n.DCGMLevel).Validate("node_check.dcgm_level"); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, checks.CheckSelection("node_check.skip_checks", n.SkipChecks)...)
	errs = append(errs, checks.CheckSelection("node_check.warn_checks", n.WarnChecks)...)
	if n.Timeout < 10*time.Second || n.Timeout > time.Hour {
		errs = append(errs, fmt.Errorf("node_check.timeout %s: use 10s to 1h", n.Timeout))
	}
	if n.Textfile != "none" && (!path.IsAbs(n.Textfile) || !strings.HasSuffix(n.Textfile, ".prom") || path.Clean(n.Textfile) != n.Textfile) {
		errs = append(errs, fmt.Errorf("node_check.textfile %q: an absolute path ending in .prom (node_exporter's textfile collector reads only *.prom), or \"none\"", n.Textfile))
	}
	fleet := nodeconf.Config{Replace: n.Replace, NPDCondition: n.NPDCondition, Timeout: nodeconf.Duration(n.Timeout), Evidence: n.Evidence.config()}
	if e := n.Evidence; e != nil && (e.MaxSizeMB < 0 || e.MaxSizeMB > 1<<20) {
		errs = append(errs, fmt.Errorf("node_check.evidence.max_size_mb %d: use 1 to 1048576 (0 takes the default, %d)", e.MaxSizeMB, nodeconf.DefaultEvidenceMaxBytes>>20))
		fleet.Evidence.MaxBytes = 0 // said once, in the setting's own unit
	}
	if err := fleet.CheckFleet("node_check."); err != nil {
		errs = append(errs, err)
	}
	if !validate {
		errs = append(errs, errors.New("node_check needs the bill of materials, which validate = false does not write: put node_check on the provisioner that validates"))
	}
	if err := nodecheckbin.Available(); err != nil {
		errs = append(errs, fmt.Errorf("node_check: %w", err))
	}
	return errs
}

// config is what the command reads in the image.
func (n *NodeCheckConfig) config(manifestPath string, checkTimeout time.Duration) *nodeconf.Config {
	c := &nodeconf.Config{
		Action: n.Action, BOMPath: manifestPath, OutDir: nodeconf.DefaultOutDir, Textfile: n.Textfile,
		Timeout: nodeconf.Duration(n.Timeout), CheckTimeout: nodeconf.Duration(checkTimeout),
		NCCL: n.NCCL, DCGMLevel: n.DCGMLevel, EFATraffic: n.EFATraffic, GPUDirectRDMA: n.GPUDirectRDMA,
		ContainerGPU: n.ContainerGPU,
		SkipChecks:   n.SkipChecks, WarnChecks: n.WarnChecks,
		Scontrol: nodeconf.DefaultScontrol, Before: n.Before, LoginUser: n.LoginUser,
		Replace: n.Replace, NPDCondition: n.NPDCondition, Evidence: n.Evidence.config(),
	}
	if c.Textfile == "none" {
		c.Textfile = ""
	}
	return c
}

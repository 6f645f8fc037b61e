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

	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheck"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheckbin"
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
	// Run the 1-node NCCL test at every boot too (minutes of GPU time per boot). Defaults to
	// false.
	NCCL bool `mapstructure:"nccl"`
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
}

// loginUserRE is what useradd takes by default (NAME_REGEX of adduser): no shell syntax.
var loginUserRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// prepare fills in the defaults and reports every bad setting, naming it.
func (n *NodeCheckConfig) prepare(validate bool) []error {
	n.Action = strings.TrimSpace(n.Action)
	if n.Action == "" {
		n.Action = nodecheck.ActionBlock
	}
	if n.Before == nil {
		n.Before = slices.Clone(nodecheck.DefaultBefore)
	}
	if n.Timeout == 0 {
		n.Timeout = nodecheck.DefaultTimeout
	}
	if n.Textfile == "" {
		n.Textfile = nodecheck.DefaultTextfile
	}
	var errs []error
	if n.LoginUser != "" && !loginUserRE.MatchString(n.LoginUser) {
		errs = append(errs, fmt.Errorf("node_check.login_user %q: a user name (lower-case letters, digits, '_' and '-', starting with a letter or '_', at most 32)", n.LoginUser))
	}
	if !slices.Contains(nodecheck.Actions, n.Action) {
		errs = append(errs, fmt.Errorf("node_check.action %q: use %s", n.Action, strings.Join(nodecheck.Actions, ", ")))
	}
	for i, u := range n.Before {
		if err := nodecheck.CheckUnitName(fmt.Sprintf("node_check.before[%d]", i), u); err != nil {
			errs = append(errs, err)
		}
	}
	if n.Action == nodecheck.ActionBlock && len(n.Before) == 0 {
		errs = append(errs, errors.New("node_check.action = \"block\" with an empty node_check.before blocks nothing: name the units to keep from starting, or use action \"report\""))
	}
	if n.Timeout < 10*time.Second || n.Timeout > time.Hour {
		errs = append(errs, fmt.Errorf("node_check.timeout %s: use 10s to 1h", n.Timeout))
	}
	if n.Textfile != "none" && (!path.IsAbs(n.Textfile) || !strings.HasSuffix(n.Textfile, ".prom") || path.Clean(n.Textfile) != n.Textfile) {
		errs = append(errs, fmt.Errorf("node_check.textfile %q: an absolute path ending in .prom (node_exporter's textfile collector reads only *.prom), or \"none\"", n.Textfile))
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
func (n *NodeCheckConfig) config(manifestPath string, checkTimeout time.Duration) *nodecheck.Config {
	c := &nodecheck.Config{
		Action: n.Action, BOMPath: manifestPath, OutDir: nodecheck.DefaultOutDir, Textfile: n.Textfile,
		TimeoutSeconds: int(n.Timeout / time.Second), CheckTimeoutSeconds: int(checkTimeout / time.Second),
		NCCL: n.NCCL, Scontrol: nodecheck.DefaultScontrol, Before: n.Before, LoginUser: n.LoginUser,
	}
	if c.Textfile == "none" {
		c.Textfile = ""
	}
	return c
}

package dlami

import (
	"errors"
	"fmt"

	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheckbin"
)

// prepareNodeCheck resolves the node_check block into the file the command reads (with the
// bill of materials at manifest_path and each probe command bounded by check_timeout) and
// reports every bad setting, naming it: the command validates the file with the same rule.
func (c *Config) prepareNodeCheck() []error {
	n := c.NodeCheck.Resolved()
	n.BOMPath, n.CheckTimeout = c.ManifestPath, c.CheckTimeout
	*c.NodeCheck = n
	var errs []error
	if err := n.Validate(nodeCheckSetting); err != nil {
		errs = append(errs, err)
	}
	if c.Validate != nil && !*c.Validate {
		errs = append(errs, errors.New("node_check needs the bill of materials, which validate = false does not write: put node_check on the provisioner that validates"))
	}
	if err := nodecheckbin.Available(); err != nil {
		errs = append(errs, fmt.Errorf("node_check: %w", err))
	}
	return errs
}

// nodeCheckSetting names a setting of the node check's file as the template spells it.
func nodeCheckSetting(setting string) string {
	switch setting {
	case "bom_path":
		return "manifest_path"
	case "check_timeout":
		return "check_timeout"
	}
	return "node_check." + setting
}

package facts

import (
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dpkg"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/imexctl"
)

// IMEX is what the host shows of NVIDIA IMEX, the service multi-node NVLink depends on
// (grace-blackwell.md section 1.5): its packages, its unit, IMEX channel 0 and the domain as
// `nvidia-imex-ctl -N -j` reports it.
type IMEX struct {
	// Packages are the installed packages named nvidia-imex* (empty: none installed).
	Packages Fact[[]dpkg.Package]
	// Enabled is `systemctl is-enabled nvidia-imex`'s word ("enabled", "disabled", "masked",
	// "static", ...; "not-found" when the unit does not exist).
	Enabled Fact[string]
	// Active is `systemctl is-active nvidia-imex`'s word.
	Active Fact[string]
	// Channel is how IMEX channel 0 comes to exist.
	Channel Fact[IMEXChannel]
	// Domain is `nvidia-imex-ctl -N -j`'s view of the domain (unread when the tool is missing
	// or the service does not answer).
	Domain Fact[imexctl.Domain]
	// OneNode is the bake's one-node domain (nil: not brought up in this run).
	OneNode *IMEXOneNode
}

// IMEXChannel is what creates /dev/nvidia-caps-imex-channels/channel0, which the admin must
// create (it does not survive a reboot) unless the driver does at load time with `options
// nvidia NVreg_CreateImexChannel0=1` (NVIDIA IMEX guide, imexchannels.html).
type IMEXChannel struct {
	// Options are the `options nvidia` lines of /etc/modprobe.d/*.conf that set
	// NVreg_CreateImexChannel0=1, each "file: line".
	Options []string
	// Device is true when /dev/nvidia-caps-imex-channels/channel0 is a character device now.
	Device bool
}

// PackageVersion is the installed IMEX package's version (nvidia-imex, or the branch's
// nvidia-imex-<major> before driver 590): what a fleet picks AMIs by (the dlami:nvidia_imex tag).
func (x IMEX) PackageVersion() (string, bool) {
	if !x.Packages.OK() {
		return "", false
	}
	for _, p := range x.Packages.Value {
		if p.Installed && (p.Name == "nvidia-imex" || strings.HasPrefix(p.Name, "nvidia-imex-")) {
			return p.Version, true
		}
	}
	return "", false
}

// AtBoot reports whether channel 0 is created at every boot.
func (c IMEXChannel) AtBoot() bool { return len(c.Options) > 0 }

// IMEXOneNode is the bake's one-node IMEX domain (issue 35; grace-blackwell.md section 1.5):
// nodes_config.cfg holding only the tray's own private address, the service restarted, the
// domain as `nvidia-imex-ctl -N -j` reported it once UP or at the bound, then the file and the
// service put back. Only a bake brings one up: a verification or a node check judges what the
// image has and changes nothing.
type IMEXOneNode struct {
	// Ran is true when the script ran; NotRun says why it did not ("" when it ran or does not
	// apply).
	Ran    bool
	NotRun string
	// WasActive is `systemctl is-active nvidia-imex` before; HadConfig whether nodes_config.cfg
	// existed (it is put back byte for byte, or removed).
	WasActive string
	HadConfig bool
	// BakedCount is how many lines of the image's own nodes_config.cfg are real addresses (an
	// IPv4 address other than the placeholder 0.0.0.0), BakedAddresses the first few.
	BakedCount     int
	BakedAddresses []string
	// Address is the tray's own private address the file held.
	Address string
	// RestartExit is `systemctl restart nvidia-imex`'s status; ActiveAfter the unit's state
	// after the wait.
	RestartExit int
	ActiveAfter string
	// Problem says why the domain could not be brought up at all (a tool missing, no address).
	Problem string
	// Domain is the last answer of `nvidia-imex-ctl -N -j`.
	Domain Fact[imexctl.Domain]
	// RestoreProblem says what could not be put back ("" when everything was).
	RestoreProblem string
}

// IMEXDomainRun is the IMEX domain across a verification's trays (issue 35; grace-blackwell.md
// section 1.5), as ParallelCluster's and PCS's job prolog forms it: every node's private
// address written into every node's nodes_config.cfg, nvidia-imex restarted on every node, then
// every node's view of the domain read until all are healthy, a node's service has failed (it
// does not come up by waiting) or the wait's bound.
type IMEXDomainRun struct {
	// Ran is true once the nodes were configured; NotRun says why the domain was not brought
	// up ("" when it ran).
	Ran    bool
	NotRun string
	// Problem says why the domain could not be brought up at all (a node list IMEX cannot
	// take).
	Problem string
	// Addresses are the lines written into every node's nodes_config.cfg, in node order: IMEX
	// numbers the nodes in this order.
	Addresses []string
	// Nodes are each node's part, in node order.
	Nodes []IMEXDomainNode
	// Waited is how long the views were read after the restarts; TimedOut is true when the
	// wait ended at its bound, Bound.
	Waited, Bound time.Duration
	TimedOut      bool
}

// IMEXDomainNode is one node's part of the domain across the trays.
type IMEXDomainNode struct {
	// Problem says why the node could not be configured (the job failed, a tool is missing);
	// RestartExit is `systemctl restart nvidia-imex`'s status and RestartOutput the start of
	// what it printed when it failed.
	Problem       string
	RestartExit   int
	RestartOutput string
	// Active is `systemctl is-active nvidia-imex` at the last reading; View the node's last
	// view of the domain (`nvidia-imex-ctl -N -j`; unread when the service does not run or
	// does not answer).
	Active Fact[string]
	View   Fact[imexctl.Domain]
}

// Healthy reports whether the domain came up on every node: each node configured, its
// nvidia-imex active, and its view healthy by ParallelCluster's rule (imexctl.Domain.Problems:
// UP, every node READY, every pair CONNECTED) over exactly the nodes written.
func (r IMEXDomainRun) Healthy() bool {
	if !r.Ran || r.Problem != "" || len(r.Nodes) == 0 {
		return false
	}
	for _, n := range r.Nodes {
		if !n.Healthy(r.Addresses) {
			return false
		}
	}
	return true
}

// Healthy reports whether this node joined the domain of addresses: configured, its
// nvidia-imex active, and its view healthy over exactly those nodes.
func (n IMEXDomainNode) Healthy(addresses []string) bool {
	return n.Problem == "" && n.Active.OK() && n.Active.Value == "active" && n.View.OK() &&
		n.View.Value.Healthy() && len(n.View.Value.Mismatches(addresses)) == 0
}

// Hopeless reports whether waiting longer cannot make the domain healthy: a node could not be
// configured, or its nvidia-imex is neither running nor starting (a unit that failed does not
// come up by waiting).
func (r IMEXDomainRun) Hopeless() bool {
	if r.Problem != "" {
		return true
	}
	for _, n := range r.Nodes {
		if n.Problem != "" {
			return true
		}
		if n.Active.OK() && n.Active.Value != "active" && n.Active.Value != "activating" && n.Active.Value != "reloading" {
			return true
		}
	}
	return false
}

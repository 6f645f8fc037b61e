package facts

import (
	"strings"

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

package settings

import "fmt"

// IMEX says who owns NVIDIA IMEX, the service multi-node NVLink depends on (grace-blackwell.md
// section 1.5): the host's own `nvidia-imex` unit, the EKS DRA driver's ComputeDomain daemons,
// or nobody. It is the `imex` setting; IMEXUnset ("") stays distinguishable until the
// instance type is known, and Resolved settles it.
type IMEX string

// IMEX owners.
const (
	// IMEXUnset: the setting is absent; Resolved gives IMEXHost on multi-node NVLink types
	// (an UltraServer tray, profile.MultiNodeNVLink) and IMEXOff elsewhere.
	IMEXUnset IMEX = ""
	// IMEXHost: the host's nvidia-imex service runs the domain (Slurm, ParallelCluster, PCS):
	// the package matches the driver, the unit is enabled and channel 0 exists at boot.
	IMEXHost IMEX = "host"
	// IMEXDRA: the EKS DRA driver starts its own IMEX daemons; the host unit must be disabled
	// and masked, else `Failed to allocate Imex session ... NV_ERR_IN_USE`
	// (kubernetes-sigs/dra-driver-nvidia-gpu#524).
	IMEXDRA IMEX = "dra"
	// IMEXOff: IMEX is not judged.
	IMEXOff IMEX = "off"
)

// IMEXSetting names the setting in messages.
const IMEXSetting = "imex"

// Validate names setting (IMEXSetting, or a block's prefix of it) when m is not an owner.
func (m IMEX) Validate(setting string) error {
	switch m {
	case IMEXUnset, IMEXHost, IMEXDRA, IMEXOff:
		return nil
	}
	return fmt.Errorf("%s = %q: use %q (the host's nvidia-imex service), %q (the EKS DRA driver's), %q, or leave it unset for %q on multi-node NVLink types (p6e-gb200) and %q elsewhere",
		setting, string(m), IMEXHost, IMEXDRA, IMEXOff, IMEXHost, IMEXOff)
}

// Resolved is the owner m stands for on an instance type whose NVLink domain spans trays
// (multiNodeNVLink) or not: the setting when set, else IMEXHost on multi-node NVLink types and
// IMEXOff elsewhere. This is the default's one owner.
func (m IMEX) Resolved(multiNodeNVLink bool) IMEX {
	switch {
	case m != IMEXUnset:
		return m
	case multiNodeNVLink:
		return IMEXHost
	}
	return IMEXOff
}

package profile

// Generation is a GPU architecture, spelled as `nvidia-smi -q` prints its "Product
// Architecture" line, so a judge can compare a profile's figure with what the host says.
// Which health fields a GPU has depends on it: a field its generation does not have prints
// "N/A", which is not a failure (and not a pass of something else either).
type Generation string

// The generations of the profiled GPUs.
const (
	Turing    Generation = "Turing"       // T4G (g5g)
	Ampere    Generation = "Ampere"       // A100 (p4d, p4de), A10G (g5)
	Ada       Generation = "Ada Lovelace" // L4 (g6, gr6, g6f, gr6f), L40S (g6e)
	Hopper    Generation = "Hopper"       // H100 (p5), H200 (p5e, p5en)
	Blackwell Generation = "Blackwell"    // B200 (p6-b200), B300 (p6-b300), GB200 (p6e-gb200)
)

// rank orders the generations; 0 is unknown.
func (g Generation) rank() int {
	switch g {
	case Turing:
		return 1
	case Ampere:
		return 2
	case Ada:
		return 3
	case Hopper:
		return 4
	case Blackwell:
		return 5
	}
	return 0
}

// Known reports whether g is one of the generations above.
func (g Generation) Known() bool { return g.rank() > 0 }

// HasRowRemapping reports GPUs that repair memory by row remapping (remapped_rows.pending and
// .failure read Yes/No): GA100, GA10x, AD10x, GH100 and GB10x in NVIDIA's memory error
// management guide ("Supported GPUs"), i.e. Ampere and later. Their retired_pages.pending
// reads "[N/A]": not applicable, never a failure. False for an unknown generation.
func (g Generation) HasRowRemapping() bool { return g.rank() >= Ampere.rank() }

// HasPageRetirement reports GPUs that retire pages instead (retired_pages.pending reads
// Yes/No): the generations before Ampere. Their remapped_rows.* read "[N/A]". False for an
// unknown generation.
func (g Generation) HasPageRetirement() bool { return g.Known() && g.rank() < Ampere.rank() }

// HasFabricState reports GPUs whose `nvidia-smi -q` Fabric section carries a registration
// State and Status (Completed/Success once Fabric Manager has registered the GPU with the
// NVSwitches): Hopper and later (Completed/Success on 8x H100 with R535 and R565, in
// internal/parse/nvlink/testdata; on a live p6-b300.48xlarge with 595.91.07 per the public
// runbook the B300 nvlink -e fixture cites). An A100 prints "N/A" for both, NVSwitch or not
// (8x A100-SXM4-40GB on NVSwitch, driver 535.129.03, in internal/parse/nvlink/testdata), so on
// p4d/p4de the judge reads Fabric Manager's state and the NVLink link state instead. The
// state only means something where the GPUs sit on an NVSwitch fabric (Profile.NVSwitch).
func (g Generation) HasFabricState() bool { return g.rank() >= Hopper.rank() }

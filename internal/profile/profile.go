// Package profile holds what a healthy host of each EC2 GPU instance type looks like: GPU model,
// generation and count, EFA devices, whether the GPUs sit on an NVSwitch fabric (so Fabric
// Manager must run), the PCIe width of the GPUs' slots where it is documented narrower than
// the GPU's own, local NVMe and the 1-node NCCL all-reduce bandwidth floor. Host checks take
// these as defaults that explicit settings override; a type without a profile is judged
// against its own PCI inventory. Every figure carries its source; an unsourced figure stays
// out.
package profile

import (
	"sort"
	"strings"
)

// Profile is the expected shape of one instance type.
type Profile struct {
	InstanceType string
	// Arch is "x86_64" or "arm64".
	Arch string
	// GPUModel matches the nvidia-smi name ("NVIDIA B200") as a whole word, case-insensitively.
	GPUModel string
	// Generation is the GPU architecture, spelled as `nvidia-smi -q` prints "Product
	// Architecture": it says which health fields the GPUs have (see Generation's methods).
	Generation Generation
	GPUCount   int
	// EFACount is the EFA device count a bake must see; 0 means "take it from the PCI
	// inventory" (types where EFA is optional, or where the count is not confirmed).
	EFACount int
	// MaxEFA is the most EFA interfaces the type supports (EC2 DescribeInstanceTypes);
	// informational.
	MaxEFA int
	// NVSwitch means the GPUs sit on NVSwitches that Fabric Manager drives.
	NVSwitch bool
	// MultiNodeNVLink means the GPUs' NVLink domain spans trays (an UltraServer): the fabric
	// registers with a clique (nvidia-smi -q's Fabric section: CliqueId and ClusterUUID
	// non-zero) and IMEX, not Fabric Manager, serves it. Never set on NVSwitch hosts, where
	// zeroed clique fields are healthy.
	MultiNodeNVLink bool
	// NVLinks is how many NVLink links each GPU has up; 0 means "not judged by count" (no
	// NVLink, or no sourced figure).
	NVLinks int
	// PCIeWidth is the PCIe link width of each GPU's slot where a public source documents it
	// narrower than the GPU's own maximum (nvidia-smi's pcie.link.width.max reports the GPU's
	// x16 there); 0 means no such figure: expect the width the GPU reports as its maximum.
	PCIeWidth int
	// PCIeWidthUnsettled marks sizes whose slot width public sources disagree on (the
	// multi-GPU G6 sizes): a link narrower than the GPU's maximum warns, naming
	// expect.pcie_width, instead of failing.
	PCIeWidthUnsettled bool
	// NVMe means the type has local NVMe instance store, which the DLAMI mounts at
	// /opt/dlami/nvme.
	NVMe bool
	// BusBWFloorGBps is the lowest acceptable busbw (GB/s) of the 1-node all-reduce at 1 GiB;
	// 0 means "report, do not judge".
	BusBWFloorGBps float64
	// TwoNodeBusBWFloorGBps is the lowest acceptable busbw (GB/s) of a 2-node all-reduce over
	// EFA at TwoNodeFloorBytes, from a published 2-node run of the type; 0 means no such run is
	// known: the multi-node check warns unless multi_node.busbw_floor_gbps is set.
	TwoNodeBusBWFloorGBps float64
	TwoNodeFloorBytes     int64
	// Note is shown with the profile: limits of what it knows.
	Note string
	// Untested marks a profile built from public figures that no bake of this project has
	// run against.
	Untested bool
	// Source says where the figures come from.
	Source string
}

const (
	// srcKIT: the Karpenter instance-types reference, generated from EC2 DescribeInstanceTypes
	// (GPU name and count, local NVMe, MaximumEfaInterfaces), karpenter.sh/docs/reference/instance-types,
	// and its zz_generated.vpclimits.go (network cards), both generated 2026-08.
	srcKIT      = "EC2 DescribeInstanceTypes via the Karpenter instance-types reference (GPUs, NVMe, max EFA)"
	srcAwsome   = "awsome-distributed-training gpu-cluster-healthcheck instance-profiles.conf (GPUs, EFA devices, NVLink)"
	srcPCluster = "aws-parallelcluster-cookbook Fabric Manager detection (NVSwitch 10de:1af1 on P4, 10de:22a3 on P5, ConnectX-7 bridges on P6)"
	srcHostDoc  = "host-layer.md: P6-B200.48xlarge 8 x NVIDIA B200, 8 EFA, 1-node all-reduce 1 GiB busbw 711 GB/s (a reference, not a guarantee)"
	// srcNVLink: NVIDIA's data sheets give each GPU's NVLink bandwidth and generation: A100 SXM
	// 600 GB/s over 12 NVLink 3 links, H100/H200 SXM 900 GB/s over 18 NVLink 4 links, B200/B300
	// 1.8 TB/s over 18 NVLink 5 links; awsome's gpu-cluster-healthcheck counts the same per type.
	srcNVLink = "NVIDIA A100/H100/H200/B200 data sheets (12, 18, 18, 18 NVLink links per GPU)"
	// srcArch: which chips are which generation: NVIDIA's memory error management guide,
	// "Supported GPUs" (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/supported-gpus.html:
	// GA100 = A100, GA10x = A10G, AD10x = L4/L40S, GH100 = H100/H200, GB10x = B200/B300/GB200);
	// the spellings are nvidia-smi -q's "Product Architecture" (Ampere, Ada Lovelace, Hopper,
	// Blackwell) in the captures under internal/parse/nvlink/testdata. T4G: the T4's Turing
	// (NVIDIA T4 data sheet).
	srcArch = "GPU generation: NVIDIA memory error management guide, Supported GPUs (GA100/GA10x Ampere, AD10x Ada, GH100 Hopper, GB10x Blackwell)"
	// srcL4x8: two AWS-maintained test suites document that the single-GPU G6 and Gr6 sizes
	// wire the L4 (an x16 card) to an x8 slot: aws/aws-k8s-tester
	// test/images/nvidia/gpu_unit_tests/tests/dcgm-diag.yaml @ 83655796 ("g6.*/gr6.*
	// single-GPU sizes wire the L4 to a PCIe x8 slot", PR #806, 2026-07: DCGM's pcie test
	// fails them with DCGM_FR_PCIE_WIDTH otherwise) and aws/aws-parallelcluster-cookbook PR
	// #2803 (2024-09: "NVIDIA L4 GPUs have up to 16 lanes but G6 instances only use 8";
	// gpu_health_check.sh sets min_pci_width=8 for "NVIDIA L4").
	srcL4x8 = "PCIe x8 slot: aws/aws-k8s-tester dcgm-diag.yaml (g6/gr6 single-GPU sizes wire the L4 to a PCIe x8 slot, PR #806) and aws/aws-parallelcluster-cookbook PR #2803 (G6 uses 8 of the L4's 16 lanes)"
	// noteG6Width: the multi-GPU G6 sizes: PR #2803 says "G6 instances only use 8" for the
	// family, aws-k8s-tester names only the single-GPU sizes; not settled, so not set.
	noteG6Width = "PCIe slot width not settled for the multi-GPU sizes (aws-parallelcluster-cookbook PR #2803 says x8 for G6, aws-k8s-tester names only single-GPU sizes): set expect.pcie_width to judge it"
	noteGEFA    = "EFA optional on G types: the count is taken from the PCI inventory"
	// The published 2-node all-reduce runs the multi-node floors come from (at 2 GiB, out of
	// place), copied in internal/parse/nccltests/testdata with their sources.
	srcTwoNodeP5   = "2-node floor 350 = ~80% of 437.8 and 443.7 GB/s at 2 GiB (awsome-distributed-training nccl-tests README: EKS and Slurm runs on 2 × p5.48xlarge)"
	srcTwoNodeP4de = "2-node floor 60 = ~77% of 78.3 GB/s at 2 GiB (awsome-distributed-training nccl-tests README: Slurm run on 2 × p4de.24xlarge)"
	noteBusBWNA    = "busbw not judged: no NVLink/NVSwitch; no trusted 1-node PCIe all-reduce reference"
)

// Why these floors (1 node, 8 GPUs, all-reduce at 1 GiB, NVLink only):
//   - p6-b200: 600 GB/s. The seed measured 711 GB/s at 1 GiB; 600 is ~84% of that and equals
//     the NVLink-only warning level of awsome's healthcheck.
//   - p5/p5e/p5en (H100/H200, NVLink 4 + NVSwitch): 350 GB/s. A public p5.48xlarge run shows
//     441.8 GB/s at 1 GiB (awsome-distributed-training micro-benchmarks/nccl-tests/aws-batch);
//     Azure NHC hard floors at 16 GiB are 460 (H100) and 431 (H200). 350 (~79% of 441.8) is
//     deliberately loose because a false failure blocks a bake.
//   - p4d/p4de (A100, NVLink 3): 180 GB/s. A public p4d run shows 230.8 GB/s at 1 GiB on one
//     node (NVIDIA/nccl#527); 180 is ~78% of it.
//   - p6-b300: not set. No public 1-node figure; the warning asks for expect.busbw_floor_gbps.
//
// Single-GPU sizes have no meaningful all-reduce busbw (nccl-tests reports 0 for one rank).
var profiles = build()

func build() []Profile {
	ps := []Profile{
		{InstanceType: "p4d.24xlarge", Arch: "x86_64", GPUModel: "A100-SXM4-40GB", Generation: Ampere, GPUCount: 8, EFACount: 4, MaxEFA: 4, NVSwitch: true, NVLinks: 12, NVMe: true, BusBWFloorGBps: 180,
			Source: srcNVLink + "; " + srcKIT + "; " + srcAwsome + "; " + srcPCluster + "; busbw floor ~78% of 230.8 GB/s (NVIDIA/nccl#527)"},
		{InstanceType: "p4de.24xlarge", Arch: "x86_64", GPUModel: "A100-SXM4-80GB", Generation: Ampere, GPUCount: 8, EFACount: 4, MaxEFA: 4, NVSwitch: true, NVLinks: 12, NVMe: true, BusBWFloorGBps: 180,
			TwoNodeBusBWFloorGBps: 60, TwoNodeFloorBytes: 2 << 30,
			Source: srcNVLink + "; " + srcKIT + "; " + srcAwsome + "; busbw floor as p4d (same HGX A100 NVLink 3 board); " + srcTwoNodeP4de},
		// p5.4xlarge: one H100, no NVSwitch; one EFA interface at most, optional.
		{InstanceType: "p5.4xlarge", Arch: "x86_64", GPUModel: "H100", Generation: Hopper, GPUCount: 1, EFACount: 0, MaxEFA: 1, NVSwitch: false, NVMe: true,
			Note: "EFA optional (at most 1): the count is taken from the PCI inventory; single GPU: busbw not judged", Source: srcKIT},
		{InstanceType: "p5.48xlarge", Arch: "x86_64", GPUModel: "H100", Generation: Hopper, GPUCount: 8, EFACount: 32, MaxEFA: 32, NVSwitch: true, NVLinks: 18, NVMe: true, BusBWFloorGBps: 350,
			TwoNodeBusBWFloorGBps: 350, TwoNodeFloorBytes: 2 << 30,
			Source: srcNVLink + "; " + srcKIT + "; " + srcAwsome + "; " + srcPCluster + "; busbw floor ~79% of 441.8 GB/s (awsome aws-batch nccl-tests README); " + srcTwoNodeP5},
		{InstanceType: "p5e.48xlarge", Arch: "x86_64", GPUModel: "H200", Generation: Hopper, GPUCount: 8, EFACount: 32, MaxEFA: 32, NVSwitch: true, NVLinks: 18, NVMe: true, BusBWFloorGBps: 350,
			Source: srcNVLink + "; " + srcKIT + "; " + srcAwsome + "; busbw floor as p5 (~81% of Azure NHC H200 431 GB/s at 16 GiB), unmeasured here"},
		// p5en EFA devices can come up late after boot (anchors.md B.7): a first count may be low.
		{InstanceType: "p5en.48xlarge", Arch: "x86_64", GPUModel: "H200", Generation: Hopper, GPUCount: 8, EFACount: 16, MaxEFA: 16, NVSwitch: true, NVLinks: 18, NVMe: true, BusBWFloorGBps: 350,
			Source: srcNVLink + "; " + srcKIT + "; " + srcAwsome + "; busbw floor as p5e, unmeasured here"},
		{InstanceType: "p6-b200.48xlarge", Arch: "x86_64", GPUModel: "B200", Generation: Blackwell, GPUCount: 8, EFACount: 8, MaxEFA: 8, NVSwitch: true, NVLinks: 18, NVMe: true, BusBWFloorGBps: 600,
			Source: srcNVLink + "; " + srcHostDoc + "; " + srcKIT + "; " + srcAwsome + "; " + srcPCluster + "; busbw floor 600 = ~84% of the 711 GB/s reference"},
		// p6-b300: 17 network cards, card 0 ENA-only (aws-parallelcluster#7143), so 16 EFA;
		// nvidia-smi names the GPU "NVIDIA B300 SXM6 AC" (vllm-project/vllm#30441).
		{InstanceType: "p6-b300.48xlarge", Arch: "x86_64", GPUModel: "B300", Generation: Blackwell, GPUCount: 8, EFACount: 16, MaxEFA: 16, NVSwitch: true, NVLinks: 18, NVMe: true,
			Note: "no public 1-node busbw figure: set expect.busbw_floor_gbps", Untested: true,
			Source: srcNVLink + "; " + srcKIT + "; aws-parallelcluster#7143 (17 network cards, card 0 ENA-only); " + srcPCluster + " (PR 3101 enables Fabric Manager on B300)"},
		// p6e-gb200.36xlarge: one Grace-Blackwell compute tray of an UltraServer. Its NVLink
		// switches sit in separate trays: no Fabric Manager on the instance, nvidia-imex instead
		// (AWS PCS user guide; aws-parallelcluster-cookbook PR 3098). The EFA maximum (16 in
		// one public describe-instance-types quote) is contradicted elsewhere, so it is not
		// judged from the profile.
		{InstanceType: "p6e-gb200.36xlarge", Arch: "arm64", GPUModel: "GB200", Generation: Blackwell, GPUCount: 4, EFACount: 0, MaxEFA: 16, NVSwitch: false, MultiNodeNVLink: true, NVMe: true,
			Note: "arm64 UltraServer tray: Fabric Manager not used (IMEX instead); EFA count taken from the PCI inventory", Untested: true,
			Source: "EKS user guide, P6e-GB200 UltraServers (4 Blackwell GPUs per p6e-gb200.36xlarge); AWS PCS user guide (IMEX); aws-parallelcluster-cookbook PR 3098 (no Fabric Manager on GB200)"},
	}
	// G types: PCIe GPUs, no NVSwitch. Local NVMe on every size but g5g's.
	type size struct {
		gpus, maxEFA int
		// pcieWidth is the documented slot width (0: none documented).
		pcieWidth int
	}
	g := func(family, model string, gen Generation, arch string, nvme bool, sizes map[string]size, note string) {
		for name, v := range sizes {
			p := Profile{
				InstanceType: family + "." + name, Arch: arch, GPUModel: model, Generation: gen, GPUCount: v.gpus,
				EFACount: 0, MaxEFA: v.maxEFA, NVSwitch: false, PCIeWidth: v.pcieWidth, PCIeWidthUnsettled: note == noteG6Width, NVMe: nvme,
				Note: strings.TrimPrefix(note+"; "+noteGEFA+"; "+noteBusBWNA, "; "), Source: srcKIT + "; " + srcArch,
			}
			if v.pcieWidth > 0 {
				p.Source += "; " + srcL4x8
			}
			ps = append(ps, p)
		}
	}
	// GPUs, max EFA, documented PCIe slot width per size.
	g("g5", "A10G", Ampere, "x86_64", true, map[string]size{"xlarge": {1, 0, 0}, "2xlarge": {1, 0, 0}, "4xlarge": {1, 0, 0}, "8xlarge": {1, 1, 0}, "16xlarge": {1, 1, 0}, "12xlarge": {4, 1, 0}, "24xlarge": {4, 1, 0}, "48xlarge": {8, 1, 0}}, "")
	g("g6", "L4", Ada, "x86_64", true, map[string]size{"xlarge": {1, 0, 8}, "2xlarge": {1, 0, 8}, "4xlarge": {1, 0, 8}, "8xlarge": {1, 1, 8}, "16xlarge": {1, 1, 8}}, "")
	g("g6", "L4", Ada, "x86_64", true, map[string]size{"12xlarge": {4, 1, 0}, "24xlarge": {4, 1, 0}, "48xlarge": {8, 1, 0}}, noteG6Width)
	g("g6e", "L40S", Ada, "x86_64", true, map[string]size{"xlarge": {1, 0, 0}, "2xlarge": {1, 0, 0}, "4xlarge": {1, 0, 0}, "8xlarge": {1, 1, 0}, "16xlarge": {1, 1, 0}, "12xlarge": {4, 1, 0}, "24xlarge": {4, 2, 0}, "48xlarge": {8, 4, 0}}, "")
	g("gr6", "L4", Ada, "x86_64", true, map[string]size{"4xlarge": {1, 0, 8}, "8xlarge": {1, 1, 8}}, "")
	g("g5g", "T4G", Turing, "arm64", false, map[string]size{"xlarge": {1, 0, 0}, "2xlarge": {1, 0, 0}, "4xlarge": {1, 0, 0}, "8xlarge": {1, 0, 0}, "16xlarge": {2, 0, 0}, "metal": {2, 0, 0}}, "arm64; no instance store")
	// g6f/gr6f: a fraction of one L4, shown by nvidia-smi as one vGPU ("NVIDIA L4-12Q" on
	// gr6f.4xlarge); it needs NVIDIA's GRID driver, which the Base OSS DLAMI does not ship
	// (awslabs/amazon-eks-ami#2443). A vGPU's PCIe link is the hypervisor's: no width is set.
	grid := "fractional L4 (vGPU): needs the NVIDIA GRID driver, which the Base OSS DLAMI does not ship"
	g("g6f", "L4", Ada, "x86_64", true, map[string]size{"large": {1, 0, 0}, "xlarge": {1, 0, 0}, "2xlarge": {1, 0, 0}, "4xlarge": {1, 0, 0}}, grid)
	g("gr6f", "L4", Ada, "x86_64", true, map[string]size{"4xlarge": {1, 0, 0}}, grid)
	for i := range ps {
		if strings.HasPrefix(ps[i].InstanceType, "p") {
			ps[i].Source += "; " + srcArch
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].InstanceType < ps[j].InstanceType })
	return ps
}

// Lookup returns the profile of an instance type ("p6-b200.48xlarge"); case and surrounding
// space are ignored.
func Lookup(instanceType string) (Profile, bool) {
	t := strings.ToLower(strings.TrimSpace(instanceType))
	i := sort.Search(len(profiles), func(i int) bool { return profiles[i].InstanceType >= t })
	if i < len(profiles) && profiles[i].InstanceType == t {
		return profiles[i], true
	}
	return Profile{}, false
}

// All returns every built-in profile, sorted by instance type.
func All() []Profile {
	return append([]Profile(nil), profiles...)
}

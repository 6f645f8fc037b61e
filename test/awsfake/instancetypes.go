package awsfake

import (
	"encoding/xml"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The instance types the fake can describe, with every figure from the project's fact sheet
// ../shared/docs/ec2-gpu-network-facts.md (its source keys are quoted in the comments:
// K-vpc = karpenter-provider-aws zz_generated.vpclimits.go, K-doc = its instance-types.md,
// K-fake = its generated DescribeInstanceTypes fixture, SM-test = sagemaker-python-sdk's
// g5.48xlarge DescribeInstanceTypes output, UG-EFA = EC2 User Guide "Maximize network bandwidth
// on Amazon EC2 instances with multiple network cards", Pricing = the AWS Price List API).
// A figure the fact sheet marks "not found" is nil here and left out of every answer; a launch
// that needs it to be judged is refused, naming the figure (see checkLaunchLayout). Every type
// internal/profile knows is described: the profiled sizes outside the fact sheet's tables come
// from the same Karpenter files (the block comment above them says which figure from which).
// Other types (t3.micro, …) are not described at all: DescribeInstanceTypes answers
// InvalidInstanceType for them, and RunInstances launches them with one default interface only.

// InstanceTypeInfo is what the fake knows of one instance type.
type InstanceTypeInfo struct {
	InstanceType string
	// Architecture is ProcessorInfo.SupportedArchitectures[0]; "" = not found.
	Architecture    string
	CPUManufacturer string // ProcessorInfo.Manufacturer; "" = not found
	DefaultVCPUs    *int   // VCpuInfo.DefaultVCpus
	MemoryMiB       *int   // MemoryInfo.SizeInMiB
	// GPU: GpuInfo.Gpus[0]; GPUName "" = no GPU (the type has no GpuInfo). GPUCount 0 with a
	// name is a fractional GPU (g6f, gr6f): Count is left out.
	GPUName         string
	GPUManufacturer string
	GPUCount        int
	GPUMemoryMiB    *int // per GPU
	// Network.
	NetworkPerformance        string // type level; "" = not found
	EfaSupported              *bool
	MaximumEfaInterfaces      *int // EfaInfo; nil with EfaSupported false (absent) or not found
	MaximumNetworkCards       *int
	MaximumNetworkInterfaces  *int
	DefaultNetworkCardIndex   *int
	Ipv4AddressesPerInterface *int
	// CardInterfaces is NetworkCards[i].MaximumNetworkInterfaces per card index; nil = not found.
	CardInterfaces []int
	// CardPerformance is NetworkCards[i].NetworkPerformance where known (g5.48xlarge card 0).
	CardPerformance map[int]string
	// EFACards are the network cards that take an EFA interface, where the User Guide says so
	// (p6-b300 and p6e-gb200: not card 0); nil = not found, every card is allowed.
	EFACards []int
	// BareMetal: BareMetal true and no Hypervisor (K-vpc IsBareMetal; g5g.metal).
	BareMetal bool
	// LocalNVMe: InstanceStorageInfo with NvmeSupport "required" (every instance store of a
	// Nitro GPU type is NVMe; "required" is the p5.48xlarge answer's). Which types have instance
	// store: K-doc's karpenter.k8s.aws/instance-local-nvme (as internal/profile's NVMe), and
	// EKS-UG for p6e-gb200 (3 × 7.5 TB); StorageGB is TotalSizeInGB where sourced (p5.48xlarge,
	// K-fake: 30400), else left out.
	LocalNVMe bool
	StorageGB *int
	// GPUPartitionSize is GpuInfo.Gpus[0].GpuPartitionSize; nil = left out (no public sample
	// gives the value for g6f/gr6f, so the fake leaves it out and the Count out: the plugin
	// must refuse them either way).
	GPUPartitionSize *float64
	Source           string
}

// num and flag make the pointers of a sourced figure; a nil pointer is a figure not found.
func num(v int) *int    { return &v }
func flag(v bool) *bool { return &v }

// cards gives n network cards per interfaces each; cardRange the card indexes from..to.
func cards(n, per int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = per
	}
	return out
}
func cardRange(from, to int) []int {
	var out []int
	for c := from; c <= to; c++ {
		out = append(out, c)
	}
	return out
}

// instanceTypes is the fake's catalogue, in the fact sheet's order.
var instanceTypes = func() map[string]*InstanceTypeInfo {
	list := []*InstanceTypeInfo{
		// P4 / P5 family (fact sheet table "P4 / P5 family").
		{InstanceType: "p4d.24xlarge", Architecture: "x86_64", CPUManufacturer: "Intel", DefaultVCPUs: num(96), MemoryMiB: num(1179648),
			GPUName: "A100", GPUManufacturer: "NVIDIA", GPUCount: 8, GPUMemoryMiB: num(40960), NetworkPerformance: "400 Gigabit",
			EfaSupported: flag(true), MaximumEfaInterfaces: num(4), MaximumNetworkCards: num(4), MaximumNetworkInterfaces: num(60),
			DefaultNetworkCardIndex: num(0), Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(4, 15),
			Source: "K-vpc (cards, interfaces), K-doc (EFA, GPU, vCPU, memory), Pricing (400 Gigabit); EFA cards not found"},
		{InstanceType: "p4de.24xlarge", Architecture: "x86_64", CPUManufacturer: "Intel", DefaultVCPUs: num(96), MemoryMiB: num(1179648),
			GPUName: "A100", GPUManufacturer: "NVIDIA", GPUCount: 8, GPUMemoryMiB: num(81920),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(4), MaximumNetworkCards: num(4), MaximumNetworkInterfaces: num(60),
			DefaultNetworkCardIndex: num(0), Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(4, 15),
			Source: "K-vpc, K-doc; NetworkPerformance and EFA cards not found"},
		{InstanceType: "p5.4xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(16), MemoryMiB: num(262144),
			GPUName: "H100", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(81920),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(4),
			DefaultNetworkCardIndex: num(0), Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 4), EFACards: []int{0},
			Source: "K-vpc, K-doc, UG-EFA (card 0, its only card); NetworkPerformance not found"},
		{InstanceType: "p5.48xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(192), MemoryMiB: num(2097152),
			GPUName: "H100", GPUManufacturer: "NVIDIA", GPUCount: 8, GPUMemoryMiB: num(81920), NetworkPerformance: "3200 Gigabit",
			EfaSupported: flag(true), MaximumEfaInterfaces: num(32), MaximumNetworkCards: num(32), MaximumNetworkInterfaces: num(64),
			DefaultNetworkCardIndex: num(0), Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(32, 2), EFACards: cardRange(0, 31),
			Source: "K-vpc, K-doc, K-fake (32 EFA, 64 interfaces, card 0 = 2), UG-EFA (efa-only on cards 0..31), Pricing (3200 Gigabit)"},
		{InstanceType: "p5e.48xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(192), MemoryMiB: num(2097152),
			GPUName: "H200", GPUManufacturer: "NVIDIA", GPUCount: 8, GPUMemoryMiB: num(144384),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(32), MaximumNetworkCards: num(32), MaximumNetworkInterfaces: num(64),
			DefaultNetworkCardIndex: num(0), Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(32, 2), EFACards: cardRange(0, 31),
			Source: "K-vpc, K-doc, UG-EFA (P5/P5e layout); NetworkPerformance not found"},
		{InstanceType: "p5en.48xlarge", Architecture: "x86_64", CPUManufacturer: "Intel", DefaultVCPUs: num(192), MemoryMiB: num(2097152),
			GPUName: "H200", GPUManufacturer: "NVIDIA", GPUCount: 8, GPUMemoryMiB: num(144384),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(16), MaximumNetworkCards: num(16), MaximumNetworkInterfaces: num(64),
			DefaultNetworkCardIndex: num(0), Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(16, 4),
			Source: "K-vpc, K-doc; NetworkPerformance and EFA cards not found"},
		// P6 family (fact sheet table "P6 family").
		{InstanceType: "p6-b200.48xlarge", Architecture: "x86_64", CPUManufacturer: "Intel", DefaultVCPUs: num(192), MemoryMiB: num(2097152),
			GPUName: "B200", GPUManufacturer: "NVIDIA", GPUCount: 8, GPUMemoryMiB: num(183359),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(8), MaximumNetworkCards: num(8), MaximumNetworkInterfaces: num(32),
			DefaultNetworkCardIndex: num(0), Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(8, 4), EFACards: cardRange(0, 7),
			Source: "K-vpc, K-doc, UG-EFA (efa-only on cards 0..7); NetworkPerformance not found"},
		{InstanceType: "p6-b300.48xlarge", Architecture: "x86_64", CPUManufacturer: "Intel", DefaultVCPUs: num(192), MemoryMiB: num(4194304),
			GPUName: "B300", GPUManufacturer: "NVIDIA", GPUCount: 8, GPUMemoryMiB: num(275040),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(16), MaximumNetworkCards: num(17), MaximumNetworkInterfaces: num(68),
			DefaultNetworkCardIndex: num(0), Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(17, 4), EFACards: cardRange(1, 16),
			Source: "K-vpc, K-doc, UG-EFA and aws-parallelcluster#7143 (card 0 ENA-only, EFA on cards 1..16); NetworkPerformance not found"},
		// p6e-gb200.36xlarge: UG-EFA's prose ("up to 17 network cards"; EFA-only on the odd
		// cards 1..15, ENA or EFA on the even cards 2..16, card 0 ENA) and MaximumEfaInterfaces 16
		// as NVIDIA/aicr#1256 quotes `aws ec2 describe-instance-types` (secondary;
		// grace-blackwell.md 1.1). MaximumNetworkInterfaces, per-card interfaces, GPU, vCPU,
		// memory and architecture: not found.
		{InstanceType: "p6e-gb200.36xlarge", EfaSupported: flag(true), MaximumEfaInterfaces: num(16), MaximumNetworkCards: num(17), DefaultNetworkCardIndex: num(0),
			EFACards: cardRange(1, 16),
			Source:   "UG-EFA prose, NVIDIA/aicr#1256 (MaximumEfaInterfaces, secondary); absent from Karpenter's data; most figures not found"},
		// G5 / G6 / G6e and a non-GPU control (fact sheet table "G5 / G6 / G6e and a non-GPU control").
		{InstanceType: "g5.xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(4), MemoryMiB: num(16384),
			GPUName: "A10G", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(22888),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(4), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(15), CardInterfaces: cards(1, 4),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		// g5.48xlarge: the A10G's per-GPU memory is K-doc's 2026 capture (22888); SM-test's older
		// capture says 24576 (EC2 changed the reported value). TotalGpuMemoryInMiB is left out
		// for that reason (SM-test's 196608 belongs to the old figure).
		{InstanceType: "g5.48xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(192), MemoryMiB: num(786432),
			GPUName: "A10G", GPUManufacturer: "NVIDIA", GPUCount: 8, GPUMemoryMiB: num(22888), NetworkPerformance: "100 Gigabit",
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(7),
			DefaultNetworkCardIndex: num(0), Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(1, 7),
			CardPerformance: map[int]string{0: "100 Gigabit"}, EFACards: []int{0},
			Source: "SM-test (full DescribeInstanceTypes output), K-vpc, K-doc"},
		{InstanceType: "g6.xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(4), MemoryMiB: num(16384),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(22888), NetworkPerformance: "Up to 10 Gigabit",
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(4), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(15), CardInterfaces: cards(1, 4),
			Source: "K-vpc, K-doc, Pricing (Up to 10 Gigabit)"},
		{InstanceType: "g6e.48xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(192), MemoryMiB: num(1572864),
			GPUName: "L40S", GPUManufacturer: "NVIDIA", GPUCount: 8, GPUMemoryMiB: num(45776),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(4), MaximumNetworkCards: num(4), MaximumNetworkInterfaces: num(40),
			DefaultNetworkCardIndex: num(0), Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(4, 10),
			Source: "K-vpc, K-doc; NetworkPerformance and EFA cards not found"},
		// Every other size internal/profile knows (G5, G6, G6e, Gr6, G5g, G6f, Gr6f), not in the
		// fact sheet's tables but from the same two sources, read at aws/karpenter-provider-aws
		// 1d927085: K-vpc (zz_generated.vpclimits.go, last change 7f27b4e8, 2026-08-18) for
		// MaximumNetworkInterfaces, Ipv4AddressesPerInterface, DefaultNetworkCardIndex and
		// NetworkCards; K-doc (website/content/en/preview/reference/instance-types.md, last change
		// 692ccdd0, 2026-07-11) for vCPUs, memory, CPU manufacturer, architecture (amd64 = x86_64,
		// arm64 = arm64), GPU name, count and per-GPU memory, and vpc.amazonaws.com/efa =
		// EfaInfo.MaximumEfaInterfaces (no EFA resource: EfaSupported false, as the fact sheet reads
		// it for g5.xlarge). K-doc lower-cases names: the case of A10G, L4 and L40S is the fact
		// sheet's (A10G also K-fake), "AWS" for Graviton is K-fake's (c6g.large, t4g.*).
		// Not found for any of them: NetworkPerformance (type and card), which cards take EFA (nil:
		// every card; the single-card types have only card 0 anyway), EnaSupport.
		{InstanceType: "g5.2xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(8), MemoryMiB: num(32768),
			GPUName: "A10G", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(22888),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(4), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(15), CardInterfaces: cards(1, 4),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g5.4xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(16), MemoryMiB: num(65536),
			GPUName: "A10G", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(22888),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g5.8xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(32), MemoryMiB: num(131072),
			GPUName: "A10G", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(22888),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc; NetworkPerformance not found"},
		{InstanceType: "g5.12xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(48), MemoryMiB: num(196608),
			GPUName: "A10G", GPUManufacturer: "NVIDIA", GPUCount: 4, GPUMemoryMiB: num(22888),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(15), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(1, 15),
			Source: "K-vpc, K-doc, K-fake (GPU, EFA, interfaces); NetworkPerformance not found"},
		{InstanceType: "g5.16xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(64), MemoryMiB: num(262144),
			GPUName: "A10G", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(22888),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc; NetworkPerformance not found"},
		{InstanceType: "g5.24xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(96), MemoryMiB: num(393216),
			GPUName: "A10G", GPUManufacturer: "NVIDIA", GPUCount: 4, GPUMemoryMiB: num(22888),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(15), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(1, 15),
			Source: "K-vpc, K-doc; NetworkPerformance not found"},
		{InstanceType: "g6.2xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(8), MemoryMiB: num(32768),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(22888),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(4), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(15), CardInterfaces: cards(1, 4),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g6.4xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(16), MemoryMiB: num(65536),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(22888),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g6.8xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(32), MemoryMiB: num(131072),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(22888),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc; NetworkPerformance not found"},
		{InstanceType: "g6.12xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(48), MemoryMiB: num(196608),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 4, GPUMemoryMiB: num(22888),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc; NetworkPerformance not found"},
		{InstanceType: "g6.16xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(64), MemoryMiB: num(262144),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(22888),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(15), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(1, 15),
			Source: "K-vpc, K-doc; NetworkPerformance not found"},
		{InstanceType: "g6.24xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(96), MemoryMiB: num(393216),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 4, GPUMemoryMiB: num(22888),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(15), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(1, 15),
			Source: "K-vpc, K-doc; NetworkPerformance not found"},
		{InstanceType: "g6.48xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(192), MemoryMiB: num(786432),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 8, GPUMemoryMiB: num(22888),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(15), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(1, 15),
			Source: "K-vpc, K-doc; NetworkPerformance not found"},
		// g6e.24xlarge: 2 cards of 10 interfaces and 2 EFA (K-vpc, K-doc); an older EC2 page says
		// G6e has "up to four network cards" (fact sheet), consistent with g6e.48xlarge's 4.
		{InstanceType: "g6e.xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(4), MemoryMiB: num(32768),
			GPUName: "L40S", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(45776),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(4), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(15), CardInterfaces: cards(1, 4),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g6e.2xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(8), MemoryMiB: num(65536),
			GPUName: "L40S", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(45776),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(4), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(15), CardInterfaces: cards(1, 4),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g6e.4xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(16), MemoryMiB: num(131072),
			GPUName: "L40S", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(45776),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g6e.8xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(32), MemoryMiB: num(262144),
			GPUName: "L40S", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(45776),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc; NetworkPerformance not found"},
		{InstanceType: "g6e.12xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(48), MemoryMiB: num(393216),
			GPUName: "L40S", GPUManufacturer: "NVIDIA", GPUCount: 4, GPUMemoryMiB: num(45776),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(10), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 10),
			Source: "K-vpc, K-doc; NetworkPerformance not found"},
		{InstanceType: "g6e.16xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(64), MemoryMiB: num(524288),
			GPUName: "L40S", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(45776),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(15), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(1, 15),
			Source: "K-vpc, K-doc; NetworkPerformance not found"},
		{InstanceType: "g6e.24xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(96), MemoryMiB: num(786432),
			GPUName: "L40S", GPUManufacturer: "NVIDIA", GPUCount: 4, GPUMemoryMiB: num(45776),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(2), MaximumNetworkCards: num(2), MaximumNetworkInterfaces: num(20), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(2, 10),
			Source: "K-vpc, K-doc; NetworkPerformance and EFA cards not found"},
		{InstanceType: "gr6.4xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(16), MemoryMiB: num(131072),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(22888),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "gr6.8xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(32), MemoryMiB: num(262144),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(22888),
			EfaSupported: flag(true), MaximumEfaInterfaces: num(1), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc; NetworkPerformance not found"},
		// G5g (Graviton, arm64). GPU name: K-doc gives only the lower-cased "t4g"; the case EC2
		// answers was not found in a public DescribeInstanceTypes output, so the name is K-doc's
		// verbatim (compare GPU names case-insensitively). g5g.metal is bare metal: K-vpc
		// IsBareMetal true with no hypervisor (K-fake's m5.metal shows the same shape).
		{InstanceType: "g5g.xlarge", Architecture: "arm64", CPUManufacturer: "AWS", DefaultVCPUs: num(4), MemoryMiB: num(8192),
			GPUName: "t4g", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(16384),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(4), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(15), CardInterfaces: cards(1, 4),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g5g.2xlarge", Architecture: "arm64", CPUManufacturer: "AWS", DefaultVCPUs: num(8), MemoryMiB: num(16384),
			GPUName: "t4g", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(16384),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(4), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(15), CardInterfaces: cards(1, 4),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g5g.4xlarge", Architecture: "arm64", CPUManufacturer: "AWS", DefaultVCPUs: num(16), MemoryMiB: num(32768),
			GPUName: "t4g", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(16384),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g5g.8xlarge", Architecture: "arm64", CPUManufacturer: "AWS", DefaultVCPUs: num(32), MemoryMiB: num(65536),
			GPUName: "t4g", GPUManufacturer: "NVIDIA", GPUCount: 1, GPUMemoryMiB: num(16384),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g5g.16xlarge", Architecture: "arm64", CPUManufacturer: "AWS", DefaultVCPUs: num(64), MemoryMiB: num(131072),
			GPUName: "t4g", GPUManufacturer: "NVIDIA", GPUCount: 2, GPUMemoryMiB: num(16384),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(15), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(1, 15),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g5g.metal", Architecture: "arm64", CPUManufacturer: "AWS", DefaultVCPUs: num(64), MemoryMiB: num(131072),
			GPUName: "t4g", GPUManufacturer: "NVIDIA", GPUCount: 2, GPUMemoryMiB: num(16384),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(15), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(50), CardInterfaces: cards(1, 15), BareMetal: true,
			Source: "K-vpc (IsBareMetal, no hypervisor), K-doc (no EFA resource); NetworkPerformance not found"},
		// G6f / Gr6f: a fraction of one L4. K-doc shows instance-gpu-count 0, no nvidia.com/gpu
		// resource, and the partition's memory (1/8, 1/8, 1/4, 1/2 of the L4's 22888 MiB); whether
		// EC2 answers Count 0 or leaves Count out is not distinguishable there, so GpuInfo has the
		// name, manufacturer and memory and no Count. The newer fractional-GPU fields (logical GPU
		// count, partition size): not found in a public sample.
		{InstanceType: "g6f.large", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(2), MemoryMiB: num(8192),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 0, GPUMemoryMiB: num(2861),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(2), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(10), CardInterfaces: cards(1, 2),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g6f.xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(4), MemoryMiB: num(16384),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 0, GPUMemoryMiB: num(2861),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(4), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(15), CardInterfaces: cards(1, 4),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g6f.2xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(8), MemoryMiB: num(32768),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 0, GPUMemoryMiB: num(5722),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(4), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(15), CardInterfaces: cards(1, 4),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "g6f.4xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(16), MemoryMiB: num(65536),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 0, GPUMemoryMiB: num(11444),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "gr6f.4xlarge", Architecture: "x86_64", CPUManufacturer: "AMD", DefaultVCPUs: num(16), MemoryMiB: num(131072),
			GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 0, GPUMemoryMiB: num(11444),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc (no EFA resource); NetworkPerformance not found"},
		{InstanceType: "c7i.8xlarge", Architecture: "x86_64", CPUManufacturer: "Intel", DefaultVCPUs: num(32), MemoryMiB: num(65536),
			EfaSupported: flag(false), MaximumNetworkCards: num(1), MaximumNetworkInterfaces: num(8), DefaultNetworkCardIndex: num(0),
			Ipv4AddressesPerInterface: num(30), CardInterfaces: cards(1, 8),
			Source: "K-vpc, K-doc (no EFA resource, no GPU); NetworkPerformance not found"},
	}
	m := make(map[string]*InstanceTypeInfo, len(list))
	for _, t := range list {
		// Instance store: every GPU type here but g5g (K-doc: no instance-local-nvme); c7i
		// (not c7id) has none.
		fam, _, _ := strings.Cut(t.InstanceType, ".")
		t.LocalNVMe = fam != "g5g" && fam != "c7i"
		if t.InstanceType == "p5.48xlarge" {
			t.StorageGB = num(30400)
		}
		m[t.InstanceType] = t
	}
	return m
}()

// LookupInstanceType returns the fake's figures for an instance type, or false when the fact
// sheet has none.
func LookupInstanceType(name string) (InstanceTypeInfo, bool) {
	t, ok := instanceTypes[name]
	if !ok {
		return InstanceTypeInfo{}, false
	}
	return *t, true
}

// DescribableInstanceTypes lists the types DescribeInstanceTypes answers for, sorted.
func DescribableInstanceTypes() []string { return sortedKeys(instanceTypes) }

// AddInstanceType makes this fake describe and launch name, a type EC2 sells that the fact
// sheet (and so the plugin's built-in profiles) does not know yet, with the figures of the
// fact sheet's type like: what a new GPU type looks like to a plugin written before it (issue
// 36). Call it before serving.
func (s *Server) AddInstanceType(name, like string) error {
	if !instanceTypeShape.MatchString(name) {
		return fmt.Errorf("new instance type %q: not an instance type name", name)
	}
	if _, known := instanceTypes[name]; known {
		return fmt.Errorf("new instance type %q: the fact sheet already has it", name)
	}
	base, ok := instanceTypes[like]
	if !ok {
		return fmt.Errorf("new instance type %q: like %q, which the fact sheet does not have (it has %s)", name, like, strings.Join(DescribableInstanceTypes(), ", "))
	}
	t := *base
	t.InstanceType = name
	t.Source = "AddInstanceType: a type the fact sheet does not have, with " + like + "'s figures"
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.newTypes == nil {
		s.newTypes = map[string]*InstanceTypeInfo{}
	}
	s.newTypes[name] = &t
	return nil
}

// instanceType returns this fake's figures for name: the fact sheet's, else AddInstanceType's.
func (s *Server) instanceType(name string) (*InstanceTypeInfo, bool) {
	if t, ok := instanceTypes[name]; ok {
		return t, true
	}
	t, ok := s.newTypes[name]
	return t, ok
}

// efaCardAllowed reports whether an EFA interface may go on card c: every card unless the
// User Guide names the cards that take one.
func (t *InstanceTypeInfo) efaCardAllowed(c int) bool {
	return t.EFACards == nil || slices.Contains(t.EFACards, c)
}

// DescribeInstanceTypesInput is the decoded form of DescribeInstanceTypes.
type DescribeInstanceTypesInput struct {
	DescribeInput
}

var instanceTypeFilters = map[string]bool{
	"instance-type": true, "network-info.efa-supported": true, "network-info.efa-info.maximum-efa-interfaces": true,
	"network-info.maximum-network-cards": true, "network-info.maximum-network-interfaces": true,
	"processor-info.supported-architecture": true, "gpu-info.count": true, "gpu-info.manufacturer": true, "gpu-info.name": true,
	"current-generation": true,
}

// ParseDescribeInstanceTypes decodes DescribeInstanceTypes (InstanceType.N, Filter.N,
// MaxResults 5-100, NextToken).
func ParseDescribeInstanceTypes(form url.Values) (DescribeInstanceTypesInput, error) {
	d, err := parseDescribe(form, describeParams{idParam: "InstanceType", filters: instanceTypeFilters, maxResultsLo: 5})
	if err != nil {
		return DescribeInstanceTypesInput{DescribeInput: d}, err
	}
	for _, t := range d.IDs {
		if !instanceTypeShape.MatchString(t) {
			return DescribeInstanceTypesInput{DescribeInput: d}, inputError("InvalidInstanceType", "Invalid value '%s' for InstanceType.", t)
		}
	}
	if d.MaxResults > 100 {
		return DescribeInstanceTypesInput{DescribeInput: d}, inputError("InvalidParameterValue", "Value (%d) for parameter maxResults is invalid. Expecting a value between 5 and 100", d.MaxResults)
	}
	return DescribeInstanceTypesInput{DescribeInput: d}, nil
}

func (s *Server) describeInstanceTypes(_ string, in DescribeInstanceTypesInput) response {
	var all []*InstanceTypeInfo
	for _, name := range DescribableInstanceTypes() {
		all = append(all, instanceTypes[name])
	}
	for _, name := range sortedKeys(s.newTypes) {
		all = append(all, s.newTypes[name])
	}
	types, next, errResp, ok := describe(describeSpec[*InstanceTypeInfo]{
		in: in.DescribeInput, all: all, id: func(t *InstanceTypeInfo) string { return t.InstanceType },
		// InvalidInstanceType is EC2's code for an unsupported type (EC2 API Reference, "Error
		// codes"); the message is the fake's own: the type may well exist on EC2, the fake just
		// has no public figures for it.
		notFound: func(missing []string) response {
			return badRequest("InvalidInstanceType", "The fake EC2 has no public figures for instance type(s) %s (it describes %s; add a type to ec2-gpu-network-facts.md first)",
				strings.Join(missing, ", "), strings.Join(DescribableInstanceTypes(), ", "))
		},
		field: instanceTypeField,
	})
	if !ok {
		return errResp
	}
	out := xmlDescribeInstanceTypes{ec2Meta: meta(), Types: []xmlInstanceTypeInfo{}, NextToken: next}
	for _, t := range types {
		out.Types = append(out.Types, renderInstanceType(t))
	}
	return xmlOK(out)
}

func optString(p *int) []string {
	if p == nil {
		return nil
	}
	return []string{strconv.Itoa(*p)}
}

func instanceTypeField(t *InstanceTypeInfo, name string) []string {
	switch name {
	case "instance-type":
		return []string{t.InstanceType}
	case "network-info.efa-supported":
		if t.EfaSupported == nil {
			return nil
		}
		return []string{boolString(*t.EfaSupported)}
	case "network-info.efa-info.maximum-efa-interfaces":
		return optString(t.MaximumEfaInterfaces)
	case "network-info.maximum-network-cards":
		return optString(t.MaximumNetworkCards)
	case "network-info.maximum-network-interfaces":
		return optString(t.MaximumNetworkInterfaces)
	case "processor-info.supported-architecture":
		if t.Architecture == "" {
			return nil
		}
		return []string{t.Architecture}
	case "gpu-info.count":
		if t.GPUName == "" || t.GPUCount == 0 {
			return nil
		}
		return []string{itoa(t.GPUCount)}
	case "gpu-info.manufacturer":
		if t.GPUName == "" {
			return nil
		}
		return []string{t.GPUManufacturer}
	case "gpu-info.name":
		if t.GPUName == "" {
			return nil
		}
		return []string{t.GPUName}
	case "current-generation":
		return []string{"true"}
	}
	return nil
}

type xmlNetworkCard struct {
	NetworkCardIndex         int    `xml:"networkCardIndex"`
	NetworkPerformance       string `xml:"networkPerformance,omitempty"`
	MaximumNetworkInterfaces int    `xml:"maximumNetworkInterfaces"`
}

type xmlEfaInfo struct {
	MaximumEfaInterfaces int `xml:"maximumEfaInterfaces"`
}

type xmlNetworkInfo struct {
	NetworkPerformance        string           `xml:"networkPerformance,omitempty"`
	MaximumNetworkInterfaces  *int             `xml:"maximumNetworkInterfaces,omitempty"`
	MaximumNetworkCards       *int             `xml:"maximumNetworkCards,omitempty"`
	DefaultNetworkCardIndex   *int             `xml:"defaultNetworkCardIndex,omitempty"`
	NetworkCards              []xmlNetworkCard `xml:"networkCards>item,omitempty"`
	Ipv4AddressesPerInterface *int             `xml:"ipv4AddressesPerInterface,omitempty"`
	EnaSupport                string           `xml:"enaSupport,omitempty"`
	EfaSupported              *bool            `xml:"efaSupported,omitempty"`
	EfaInfo                   *xmlEfaInfo      `xml:"efaInfo,omitempty"`
}

type xmlGpuMemory struct {
	SizeInMiB int `xml:"sizeInMiB"`
}

type xmlGpuDevice struct {
	Name          string        `xml:"name"`
	Manufacturer  string        `xml:"manufacturer"`
	Count         int           `xml:"count,omitempty"` // left out for a fractional GPU
	MemoryInfo    *xmlGpuMemory `xml:"memoryInfo,omitempty"`
	PartitionSize *float64      `xml:"gpuPartitionSize,omitempty"`
}

type xmlGpuInfo struct {
	Gpus []xmlGpuDevice `xml:"gpus>item"`
}

type xmlVCpuInfo struct {
	DefaultVCpus int `xml:"defaultVCpus"`
}

type xmlMemoryInfo struct {
	SizeInMiB int `xml:"sizeInMiB"`
}

type xmlProcessorInfo struct {
	SupportedArchitectures []string `xml:"supportedArchitectures>item"`
	Manufacturer           string   `xml:"manufacturer,omitempty"`
}

type xmlInstanceTypeInfo struct {
	InstanceType      string            `xml:"instanceType"`
	CurrentGeneration bool              `xml:"currentGeneration"`
	Hypervisor        string            `xml:"hypervisor,omitempty"`
	BareMetal         bool              `xml:"bareMetal,omitempty"`
	ProcessorInfo     *xmlProcessorInfo `xml:"processorInfo,omitempty"`
	VCpuInfo          *xmlVCpuInfo      `xml:"vCpuInfo,omitempty"`
	MemoryInfo        *xmlMemoryInfo    `xml:"memoryInfo,omitempty"`
	NetworkInfo       xmlNetworkInfo    `xml:"networkInfo"`
	GpuInfo           *xmlGpuInfo       `xml:"gpuInfo,omitempty"`
	InstanceStorage   *xmlInstanceStore `xml:"instanceStorageInfo,omitempty"`
}

type xmlDescribeInstanceTypes struct {
	XMLName xml.Name `xml:"DescribeInstanceTypesResponse"`
	ec2Meta
	Types     []xmlInstanceTypeInfo `xml:"instanceTypeSet>item"`
	NextToken string                `xml:"nextToken,omitempty"`
}

type xmlInstanceStore struct {
	NvmeSupport   string `xml:"nvmeSupport"`
	TotalSizeInGB *int   `xml:"totalSizeInGB,omitempty"`
}

func renderInstanceType(t *InstanceTypeInfo) xmlInstanceTypeInfo {
	// Every type of the fact sheet is Nitro ("All types below are Nitro"), current generation;
	// a bare-metal type has no hypervisor (K-vpc).
	x := xmlInstanceTypeInfo{InstanceType: t.InstanceType, CurrentGeneration: true, Hypervisor: "nitro"}
	if t.BareMetal {
		x.Hypervisor, x.BareMetal = "", true
	}
	if t.Architecture != "" {
		x.ProcessorInfo = &xmlProcessorInfo{SupportedArchitectures: []string{t.Architecture}, Manufacturer: t.CPUManufacturer}
	}
	if t.DefaultVCPUs != nil {
		x.VCpuInfo = &xmlVCpuInfo{DefaultVCpus: *t.DefaultVCPUs}
	}
	if t.MemoryMiB != nil {
		x.MemoryInfo = &xmlMemoryInfo{SizeInMiB: *t.MemoryMiB}
	}
	if t.GPUName != "" {
		d := xmlGpuDevice{Name: t.GPUName, Manufacturer: t.GPUManufacturer, Count: t.GPUCount, PartitionSize: t.GPUPartitionSize}
		if t.GPUMemoryMiB != nil {
			d.MemoryInfo = &xmlGpuMemory{SizeInMiB: *t.GPUMemoryMiB}
		}
		x.GpuInfo = &xmlGpuInfo{Gpus: []xmlGpuDevice{d}}
	}
	n := xmlNetworkInfo{NetworkPerformance: t.NetworkPerformance, MaximumNetworkInterfaces: t.MaximumNetworkInterfaces,
		MaximumNetworkCards: t.MaximumNetworkCards, DefaultNetworkCardIndex: t.DefaultNetworkCardIndex,
		Ipv4AddressesPerInterface: t.Ipv4AddressesPerInterface, EfaSupported: t.EfaSupported}
	for c, max := range t.CardInterfaces {
		n.NetworkCards = append(n.NetworkCards, xmlNetworkCard{NetworkCardIndex: c, MaximumNetworkInterfaces: max, NetworkPerformance: t.CardPerformance[c]})
	}
	if t.EfaSupported != nil && *t.EfaSupported && t.MaximumEfaInterfaces != nil {
		n.EfaInfo = &xmlEfaInfo{MaximumEfaInterfaces: *t.MaximumEfaInterfaces}
	}
	// EnaSupport "required" is SM-test's g5.48xlarge value; every Nitro type requires ENA, but
	// the fact sheet sources it for g5.48xlarge only, so only there.
	if t.InstanceType == "g5.48xlarge" {
		n.EnaSupport = "required"
	}
	x.NetworkInfo = n
	if t.LocalNVMe {
		x.InstanceStorage = &xmlInstanceStore{NvmeSupport: "required", TotalSizeInGB: t.StorageGB}
	}
	return x
}

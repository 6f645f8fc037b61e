// Package instancetype is what EC2 itself says of an instance type (DescribeInstanceTypes),
// typed for the judges: GPU count, manufacturer and per-GPU memory, the architectures the type
// runs, whether it has local NVMe instance store, and whether its GPU is a fraction of one.
// It also owns the rules that follow from those figures alone: the architecture a bake's AMI
// and host must have, the refusal of fractional-GPU types, and the tolerance between the
// API's GPU memory and what nvidia-smi shows.
//
// What EC2 cannot say (the EFA devices a launch attached, NVSwitch, NVLink counts, PCIe slot
// widths, bandwidth floors) is not here: see Unjudged.
//
// Sources: shared/docs/instance-types-api.md (EC2 API GpuDeviceInfo, GpuInfo, ProcessorInfo,
// InstanceStorageInfo; the p5.48xlarge answer).
package instancetype

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
)

// Source names this package's figures in results and reports.
const Source = "DescribeInstanceTypes"

// Description is EC2's answer for one instance type, reduced to what the checks judge.
type Description struct {
	InstanceType string
	// Architectures is ProcessorInfo.SupportedArchitectures ("x86_64", "arm64").
	Architectures []string
	// GPUName and GPUManufacturer are GpuInfo.Gpus[0]'s ("H100", "NVIDIA"); "" without GpuInfo.
	GPUName, GPUManufacturer string
	// GPUCount is the sum of GpuInfo.Gpus[].Count (0 without a count).
	GPUCount int
	// GPUMemoryMiB is the per-GPU MemoryInfo.SizeInMiB of the first GPU entry; 0 when absent.
	GPUMemoryMiB int
	// PartitionSize is GpuPartitionSize, the fraction of one GPU the type gets; 0 when EC2
	// did not answer the field.
	PartitionSize float64
	// NVMe says InstanceStorageInfo is present with NVMe support: the DLAMI mounts the
	// instance store at /opt/dlami/nvme. StorageGB is its TotalSizeInGB (0 when absent).
	NVMe      bool
	StorageGB int64
	// MaxEFA is EfaInfo.MaximumEfaInterfaces: a maximum, not what a launch attached.
	MaxEFA int
}

// HasGPU reports whether EC2 lists a GPU for the type.
func (d Description) HasGPU() bool { return d.GPUName != "" || d.GPUCount > 0 }

// Fractional reports whether the type gets a fraction of one GPU: GpuPartitionSize below 1,
// or a GPU listed without a count (how the g6f/gr6f answers read where the partition field is
// not given: Karpenter's data shows a GPU count of 0 for them).
func (d Description) Fractional() bool {
	if d.PartitionSize > 0 && d.PartitionSize < 1 {
		return true
	}
	return d.GPUName != "" && d.GPUCount == 0
}

// FromAPI reduces one DescribeInstanceTypes entry.
func FromAPI(it types.InstanceTypeInfo) Description {
	d := Description{InstanceType: string(it.InstanceType)}
	if p := it.ProcessorInfo; p != nil {
		for _, a := range p.SupportedArchitectures {
			d.Architectures = append(d.Architectures, string(a))
		}
	}
	if g := it.GpuInfo; g != nil {
		for i, dev := range g.Gpus {
			d.GPUCount += int(aws.ToInt32(dev.Count))
			if i > 0 {
				continue
			}
			d.GPUName, d.GPUManufacturer = aws.ToString(dev.Name), aws.ToString(dev.Manufacturer)
			if dev.MemoryInfo != nil {
				d.GPUMemoryMiB = int(aws.ToInt32(dev.MemoryInfo.SizeInMiB))
			}
			d.PartitionSize = aws.ToFloat64(dev.GpuPartitionSize)
		}
	}
	if s := it.InstanceStorageInfo; s != nil && s.NvmeSupport != types.EphemeralNvmeSupportUnsupported {
		d.NVMe = true
		d.StorageGB = aws.ToInt64(s.TotalSizeInGB)
	}
	if n := it.NetworkInfo; n != nil && n.EfaInfo != nil {
		d.MaxEFA = int(aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces))
	}
	return d
}

// API is the one EC2 call this package makes.
type API interface {
	DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
}

// ErrDenied wraps a refusal of ec2:DescribeInstanceTypes: the caller falls back to the profile
// and the PCI inventory and says so.
var ErrDenied = errors.New("ec2:DescribeInstanceTypes denied")

// Describe reads one instance type, bounded by timeout. A denial wraps ErrDenied and names the
// IAM permission to grant.
func Describe(ctx context.Context, api API, instanceType string, timeout time.Duration) (Description, error) {
	typ := strings.TrimSpace(instanceType)
	if typ == "" {
		return Description{}, errors.New("no instance type to describe")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := api.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{types.InstanceType(typ)}})
	if err != nil {
		if awsaccess.IsAccessDenied(err) {
			return Description{}, fmt.Errorf("%w for %s (grant ec2:DescribeInstanceTypes to judge the type from EC2's own description): %v", ErrDenied, typ, err)
		}
		return Description{}, fmt.Errorf("DescribeInstanceTypes %s: %w", typ, err)
	}
	for _, it := range out.InstanceTypes {
		if string(it.InstanceType) == typ {
			return FromAPI(it), nil
		}
	}
	return Description{}, fmt.Errorf("DescribeInstanceTypes %s: EC2 returned no such instance type", typ)
}

// Refuse returns an error naming setting when the type cannot bake or verify a Base OSS DLAMI
// image: a fractional GPU (a vGPU that needs NVIDIA's GRID driver, which the Base OSS DLAMI
// does not ship: amazon-eks-ami#2443; ParallelCluster leaves these types out of its GPU tests,
// aws-parallelcluster PR 7381), or a GPU that is not NVIDIA's. A type without any GPU is not
// refused here (a two-phase bake's first phase runs on a CPU type).
func (d Description) Refuse(setting string) error {
	if d.Fractional() {
		part := "a fraction of one GPU"
		if d.PartitionSize > 0 {
			part = fmt.Sprintf("%g of one GPU (GpuPartitionSize)", d.PartitionSize)
		}
		return fmt.Errorf("%s = %q: the type gets %s (%s %s, fractional vGPU): the Base OSS DLAMI's driver cannot drive it (it needs NVIDIA's GRID driver); use a type with whole GPUs such as g6.xlarge", setting, d.InstanceType, part, d.GPUManufacturer, d.GPUName)
	}
	if d.HasGPU() && d.GPUManufacturer != "" && !strings.EqualFold(d.GPUManufacturer, "NVIDIA") {
		return fmt.Errorf("%s = %q: DescribeInstanceTypes says its GPU is %s %s, not NVIDIA: the NVIDIA DLAMI cannot drive it; use an NVIDIA GPU type", setting, d.InstanceType, d.GPUManufacturer, d.GPUName)
	}
	return nil
}

// Supports reports whether the type runs arch ("x86_64", "arm64"; `uname -m`'s "aarch64" is
// arm64).
func (d Description) Supports(arch string) bool {
	return slices.Contains(d.Architectures, NormalizeArch(arch))
}

// NormalizeArch spells an architecture as EC2 does: `uname -m` prints "aarch64" for arm64 and
// "amd64" is Go's and Debian's name of x86_64.
func NormalizeArch(arch string) string {
	switch a := strings.ToLower(strings.TrimSpace(arch)); a {
	case "aarch64", "arm64":
		return "arm64"
	case "amd64", "x86_64":
		return "x86_64"
	default:
		return a
	}
}

// Architecture witnesses: each names where it came from and the setting that changes it.
type ArchWitness struct {
	// Arch is the architecture as the witness states it ("" = unknown).
	Arch string
	// What names the witness ("the DLAMI (data source architecture)", "uname -m").
	What string
	// Setting is the setting a user changes to fix a disagreement ("" = none).
	Setting string
}

// Supported are the architectures an instance type runs (nil = not known) and where that came
// from, which the error quotes: EC2's description or a built-in profile.
type Supported struct {
	Arches []string
	From   string
}

// FromEC2 is Supported from DescribeInstanceTypes' SupportedArchitectures.
func FromEC2(arches []string) Supported {
	return Supported{Arches: arches, From: "DescribeInstanceTypes: SupportedArchitectures"}
}

// JudgeArchitecture returns an error when the witnesses disagree with each other or with the
// architectures the type runs (supported). Unknown witnesses are left out; the error names
// every setting that would fix it.
func JudgeArchitecture(instanceType string, supported Supported, witnesses ...ArchWitness) error {
	var known []ArchWitness
	for _, w := range witnesses {
		if strings.TrimSpace(w.Arch) != "" {
			w.Arch = NormalizeArch(w.Arch)
			known = append(known, w)
		}
	}
	var problems []string
	var settings []string
	addSetting := func(s string) {
		if s != "" && !slices.Contains(settings, s) {
			settings = append(settings, s)
		}
	}
	if len(supported.Arches) > 0 {
		for _, w := range known {
			if !slices.Contains(supported.Arches, w.Arch) {
				problems = append(problems, fmt.Sprintf("%s is %s but %s runs only %s (%s)", w.What, w.Arch, instanceType, strings.Join(supported.Arches, ", "), supported.From))
				addSetting(w.Setting)
				addSetting("instance_type")
			}
		}
	}
	for i := 1; i < len(known); i++ {
		if known[i].Arch != known[0].Arch {
			problems = append(problems, fmt.Sprintf("%s is %s but %s is %s", known[0].What, known[0].Arch, known[i].What, known[i].Arch))
			addSetting(known[0].Setting)
			addSetting(known[i].Setting)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	fix := ""
	if len(settings) > 0 {
		fix = "; change " + strings.Join(settings, " or ") + " so that the AMI, the instance type and the host agree"
	}
	return fmt.Errorf("architecture mismatch: %s%s", strings.Join(problems, "; "), fix)
}

// MemoryTolerance is how far nvidia-smi's memory.total may stray from the API's per-GPU
// MemoryInfo.SizeInMiB, as a fraction of the API's figure, either way. nvidia-smi shows less
// than the API on H100 (81559 vs 81920 MiB, -0.4%) and H200 (143771 vs 144384), more on A10G
// and L4 (23028 / 23034 vs 22888, +0.6%), and EC2 changed its A10G figure from 24576 to 22888
// (-6.9%: an old answer against today's nvidia-smi reads -6.3%): 8% covers all of them while a
// different memory size of the same model (A100 40 vs 80 GB, H100 80 vs 94 GB, L4 24 vs L40S
// 48 GB) is 15% or more apart (shared/docs/instance-types-api.md: modal-labs/modal-client PR
// 2797; the captures under internal/parse/gpuhealth/testdata).
const MemoryTolerance = 0.08

// MemoryAgrees reports whether an nvidia-smi memory.total (MiB) matches the API's per-GPU
// figure within MemoryTolerance.
func MemoryAgrees(apiMiB, smiMiB int) bool {
	if apiMiB <= 0 {
		return false
	}
	diff := float64(smiMiB - apiMiB)
	if diff < 0 {
		diff = -diff
	}
	return diff <= MemoryTolerance*float64(apiMiB)
}

// Unjudged lists what DescribeInstanceTypes cannot say about a host and the expect setting that
// makes each judged (shared/docs/instance-types-api.md §3.2).
var Unjudged = []struct{ What, Setting string }{
	{"EFA device count (the API gives a maximum; the devices are what the launch attached)", "expect.efa_count"},
	{"NVSwitch fabric / Fabric Manager (judged from the PCI ids 10de:1af1, 10de:22a3, 10de:2941 and ConnectX-7 bridges only)", "expect.fabric_manager"},
	{"NVLink links per GPU", "expect.nvlinks"},
	{"PCIe slot width of the GPUs", "expect.pcie_width"},
	{"1-node all-reduce busbw floor", "expect.busbw_floor_gbps"},
}

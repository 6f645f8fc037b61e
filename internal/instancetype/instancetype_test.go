package instancetype

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// p548 is the real p5.48xlarge answer of shared/docs/instance-types-api.md (K-fake @ 1d927085).
func p548() types.InstanceTypeInfo {
	return types.InstanceTypeInfo{
		InstanceType:  "p5.48xlarge",
		ProcessorInfo: &types.ProcessorInfo{Manufacturer: aws.String("AMD"), SupportedArchitectures: []types.ArchitectureType{"x86_64"}},
		GpuInfo: &types.GpuInfo{Gpus: []types.GpuDeviceInfo{{Name: aws.String("H100"), Manufacturer: aws.String("NVIDIA"), Count: aws.Int32(8),
			MemoryInfo: &types.GpuDeviceMemoryInfo{SizeInMiB: aws.Int32(81920)}}}},
		InstanceStorageInfo: &types.InstanceStorageInfo{NvmeSupport: types.EphemeralNvmeSupportRequired, TotalSizeInGB: aws.Int64(30400)},
		NetworkInfo:         &types.NetworkInfo{EfaInfo: &types.EfaInfo{MaximumEfaInterfaces: aws.Int32(32)}},
	}
}

func TestFromAPI(t *testing.T) {
	d := FromAPI(p548())
	want := Description{InstanceType: "p5.48xlarge", Architectures: []string{"x86_64"}, GPUName: "H100", GPUManufacturer: "NVIDIA",
		GPUCount: 8, GPUMemoryMiB: 81920, NVMe: true, StorageGB: 30400, MaxEFA: 32}
	if d.InstanceType != want.InstanceType || strings.Join(d.Architectures, ",") != "x86_64" || d.GPUName != want.GPUName ||
		d.GPUManufacturer != want.GPUManufacturer || d.GPUCount != 8 || d.GPUMemoryMiB != 81920 || !d.NVMe || d.StorageGB != 30400 || d.MaxEFA != 32 {
		t.Fatalf("FromAPI = %+v, want %+v", d, want)
	}
	if d.Fractional() || d.Refuse("instance_type") != nil {
		t.Fatalf("p5.48xlarge refused: %v", d.Refuse("instance_type"))
	}
	noStore := p548()
	noStore.InstanceStorageInfo = nil
	if FromAPI(noStore).NVMe {
		t.Fatal("a type without InstanceStorageInfo reads as having NVMe")
	}
}

func TestRefuse(t *testing.T) {
	cases := []struct {
		name string
		d    Description
		want string // "" = not refused
	}{
		{"whole GPUs", Description{InstanceType: "g6.xlarge", GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 1}, ""},
		{"no GPU (two-phase first phase)", Description{InstanceType: "c7i.8xlarge"}, ""},
		{"partition size 1/8", Description{InstanceType: "g6f.large", GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 1, PartitionSize: 0.125}, "0.125 of one GPU"},
		{"count left out", Description{InstanceType: "g6f.xlarge", GPUName: "L4", GPUManufacturer: "NVIDIA"}, "a fraction of one GPU"},
		{"partition size 1", Description{InstanceType: "g6.xlarge", GPUName: "L4", GPUManufacturer: "NVIDIA", GPUCount: 1, PartitionSize: 1}, ""},
		{"not NVIDIA", Description{InstanceType: "g4ad.xlarge", GPUName: "Radeon Pro V520", GPUManufacturer: "AMD", GPUCount: 1}, "not NVIDIA"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.d.Refuse("instance_type")
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Fatal("not refused")
			case c.want != "" && (!strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), `instance_type = "`+c.d.InstanceType+`"`)):
				t.Fatalf("error %q does not name instance_type and %q", err, c.want)
			}
		})
	}
}

func TestJudgeArchitecture(t *testing.T) {
	ami := func(a string) ArchWitness { return ArchWitness{a, "the DLAMI", "the data source's architecture"} }
	host := func(a string) ArchWitness { return ArchWitness{a, "uname -m", ""} }
	cases := []struct {
		name      string
		supported Supported
		w         []ArchWitness
		want      []string // substrings; nil = agree
	}{
		{"all x86_64", FromEC2([]string{"x86_64"}), []ArchWitness{ami("x86_64"), host("x86_64")}, nil},
		{"aarch64 is arm64", FromEC2([]string{"arm64"}), []ArchWitness{ami("arm64"), host("aarch64")}, nil},
		{"arm64 AMI on x86_64 type", FromEC2([]string{"x86_64"}), []ArchWitness{ami("arm64"), host("x86_64")},
			[]string{"the DLAMI is arm64 but p5.48xlarge runs only x86_64 (DescribeInstanceTypes: SupportedArchitectures)", "instance_type", "the data source's architecture", "uname -m is x86_64"}},
		// A profile's architecture is quoted as the profile's, never as EC2's.
		{"from a profile", Supported{Arches: []string{"x86_64"}, From: "profile p5.48xlarge"}, []ArchWitness{ami("arm64")},
			[]string{"runs only x86_64 (profile p5.48xlarge)"}},
		{"type unknown, witnesses disagree", Supported{}, []ArchWitness{ami("arm64"), host("x86_64")}, []string{"the DLAMI is arm64 but uname -m is x86_64"}},
		{"unknown witnesses left out", FromEC2([]string{"x86_64"}), []ArchWitness{ami(""), host("x86_64")}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := JudgeArchitecture("p5.48xlarge", c.supported, c.w...)
			if c.want == nil {
				if err != nil {
					t.Fatalf("mismatch reported: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no mismatch reported")
			}
			for _, s := range c.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

func TestMemoryAgrees(t *testing.T) {
	cases := []struct {
		api, smi int
		want     bool
	}{
		{81920, 81559, true},   // H100: nvidia-smi shows less (shared docs)
		{144384, 143771, true}, // H200
		{22888, 23028, true},   // A10G: nvidia-smi shows more than today's API figure
		{24576, 23028, true},   // A10G against EC2's old figure
		{81920, 40960, false},  // an A100 40 GB where 80 GB is expected
		{22888, 46068, false},  // an L40S where an L4 is expected
		{0, 81559, false},      // no API figure: nothing agrees
	}
	for _, c := range cases {
		if got := MemoryAgrees(c.api, c.smi); got != c.want {
			t.Errorf("MemoryAgrees(%d, %d) = %v, want %v", c.api, c.smi, got, c.want)
		}
	}
}

type fakeAPI struct {
	out *ec2.DescribeInstanceTypesOutput
	err error
	got []types.InstanceType
}

func (f *fakeAPI) DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("call without a deadline")
	}
	f.got = in.InstanceTypes
	return f.out, f.err
}

func TestDescribe(t *testing.T) {
	ctx := context.Background()
	f := &fakeAPI{out: &ec2.DescribeInstanceTypesOutput{InstanceTypes: []types.InstanceTypeInfo{p548()}}}
	d, err := Describe(ctx, f, " p5.48xlarge ", time.Second)
	if err != nil || d.GPUCount != 8 || len(f.got) != 1 || f.got[0] != "p5.48xlarge" {
		t.Fatalf("Describe = %+v, %v (asked %v)", d, err, f.got)
	}
	denied := &fakeAPI{err: &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."}}
	_, err = Describe(ctx, denied, "p5.48xlarge", time.Second)
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "grant ec2:DescribeInstanceTypes") {
		t.Fatalf("denied: %v", err)
	}
	other := &fakeAPI{err: &smithy.GenericAPIError{Code: "InvalidInstanceType"}}
	if _, err = Describe(ctx, other, "p9.huge", time.Second); err == nil || errors.Is(err, ErrDenied) {
		t.Fatalf("invalid type: %v", err)
	}
	empty := &fakeAPI{out: &ec2.DescribeInstanceTypesOutput{}}
	if _, err = Describe(ctx, empty, "p5.48xlarge", time.Second); err == nil {
		t.Fatal("an empty answer read as a description")
	}
}

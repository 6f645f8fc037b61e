package checks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/instancetype"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/gpumem"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// h100Host is a host with n H100s (nvidia-smi, the PCI bus, memory.total 81559 MiB), uname -m
// machine and local NVMe mounted.
func h100Host(n, onBus int, machine string, memMiB int) facts.Host {
	var gpus []nvsmi.GPU
	var mem []gpumem.GPU
	for i := range n {
		gpus = append(gpus, nvsmi.GPU{Index: i, Name: "NVIDIA H100 80GB HBM3", DriverVersion: "595.91.07", BusID: fmt.Sprintf("00000000:%02X:00.0", 0x51+i)})
		mem = append(mem, gpumem.GPU{Index: i, TotalMiB: memMiB})
	}
	var inv pci.Inventory
	for i := range onBus {
		inv.GPUs = append(inv.GPUs, pci.Device{Address: fmt.Sprintf("0000:%02x:00.0", 0x51+i), Vendor: 0x10de, Device: 0x2330, Class: 0x030200})
	}
	return facts.Host{
		Instance:  facts.Instance{Type: "p5.48xlarge", Source: "imds"},
		Machine:   facts.Read(machine, machine),
		GPUs:      facts.Read(gpus, ""),
		GPUMemory: facts.Read(mem, ""),
		PCI:       facts.Read(inv, ""),
		NVMe:      facts.Read(facts.Mount{Mounted: true, Target: settings.DefaultNVMePath, Details: "/dev/md0 ext4"}, ""),
	}
}

// p548 is EC2's p5.48xlarge answer (shared/docs/instance-types-api.md).
func p548() *instancetype.Description {
	return &instancetype.Description{InstanceType: "p5.48xlarge", Architectures: []string{"x86_64"}, GPUName: "H100", GPUManufacturer: "NVIDIA",
		GPUCount: 8, GPUMemoryMiB: 81920, NVMe: true, StorageGB: 30400, MaxEFA: 32}
}

func TestInstanceTypeFromEC2(t *testing.T) {
	noProfile := func(tg *Target) { tg.Profile = nil; tg.InstanceType = "p5.96xlarge-new" }
	stale := func(tg *Target) {
		p, _ := profile.Lookup("p5.48xlarge")
		p.GPUCount, p.NVMe = 4, false
		tg.Profile = &p
	}
	cases := []struct {
		name     string
		host     facts.Host
		ec2      *instancetype.Description
		ec2Prob  string
		expect   settings.Expectations
		tweak    func(*Target)
		check    string
		want     result.Status
		contains []string
	}{
		{name: "no profile: GPUs from EC2", host: h100Host(8, 8, "x86_64", 81559), ec2: p548(), tweak: noProfile,
			check: result.GPU, want: result.Warn, contains: []string{"judged from DescribeInstanceTypes", "expect.gpu_model"}},
		{name: "no profile: one GPU fewer fails", host: h100Host(7, 7, "x86_64", 81559), ec2: p548(), tweak: noProfile,
			check: result.GPU, want: result.Fail, contains: []string{"from DescribeInstanceTypes says 8", "DescribeInstanceTypes says p5.96xlarge-new has 8 GPUs but the PCI bus has 7"}},
		{name: "memory of another GPU fails", host: h100Host(8, 8, "x86_64", 40960), ec2: p548(),
			check: result.GPU, want: result.Fail, contains: []string{"GPU 0 has 40960 MiB, DescribeInstanceTypes says 81920"}},
		{name: "memory unreadable fails", host: func() facts.Host {
			h := h100Host(8, 8, "x86_64", 81559)
			h.GPUMemory = facts.Unread[[]gpumem.GPU]("exit 9", "")
			return h
		}(), ec2: p548(),
			check: result.GPU, want: result.Fail, contains: []string{"memory.total unreadable"}},
		{name: "profiled, EC2 agrees", host: h100Host(8, 8, "x86_64", 81559), ec2: p548(), expect: settings.Expectations{Architecture: "x86_64"},
			check: result.InstanceType, want: result.Pass},
		{name: "arm64 AMI on x86_64 type", host: h100Host(8, 8, "x86_64", 81559), ec2: p548(), expect: settings.Expectations{Architecture: "arm64"},
			check: result.InstanceType, want: result.Fail, contains: []string{"the AMI (expect.architecture) is arm64 but p5.48xlarge runs only x86_64", "instance_type"}},
		{name: "host aarch64 on x86_64 type", host: h100Host(8, 8, "aarch64", 81559), ec2: p548(),
			check: result.InstanceType, want: result.Fail, contains: []string{"the host (uname -m) is arm64"}},
		{name: "stale profile", host: h100Host(8, 8, "x86_64", 81559), ec2: p548(), tweak: stale,
			check: result.InstanceType, want: result.Warn, contains: []string{"profile p5.48xlarge is stale", "GPU count: the profile says 4, DescribeInstanceTypes 8", "NVMe: the profile says false"}},
		{name: "stale profile: the GPU count judges EC2's", host: h100Host(8, 8, "x86_64", 81559), ec2: p548(), tweak: stale,
			check: result.GPU, want: result.Pass},
		{name: "stale profile: NVMe judged from EC2", host: h100Host(8, 8, "x86_64", 81559), ec2: p548(), tweak: stale,
			check: result.NVMe, want: result.Pass, contains: nil},
		{name: "denied: warns, profile judges", host: h100Host(8, 8, "x86_64", 81559), ec2Prob: "ec2:DescribeInstanceTypes denied",
			check: result.InstanceType, want: result.Warn, contains: []string{"not read (ec2:DescribeInstanceTypes denied)", "judged from profile p5.48xlarge"}},
		{name: "denied, no profile: PCI inventory", host: h100Host(8, 8, "x86_64", 81559), ec2Prob: "ec2:DescribeInstanceTypes denied", tweak: noProfile,
			check: result.InstanceType, want: result.Warn, contains: []string{"the PCI inventory", "expect.efa_count", "expect.nvlinks", "expect.pcie_width", "expect.busbw_floor_gbps", "expect.fabric_manager"}},
		{name: "denied, no profile: gpu still warns", host: h100Host(8, 8, "x86_64", 81559), ec2Prob: "denied", tweak: noProfile,
			check: result.GPU, want: result.Warn, contains: []string{"PCI inventory"}},
		{name: "fractional type refused", host: h100Host(1, 1, "x86_64", 2861),
			ec2:   &instancetype.Description{InstanceType: "g6f.large", Architectures: []string{"x86_64"}, GPUName: "L4", GPUManufacturer: "NVIDIA", GPUMemoryMiB: 2861, NVMe: true},
			check: result.InstanceType, want: result.Fail, contains: []string{`instance_type = "g6f.large"`}},
		{name: "NVMe from EC2 on an unprofiled type", host: func() facts.Host {
			h := h100Host(8, 8, "x86_64", 81559)
			h.NVMe = facts.Read(facts.Mount{}, "")
			return h
		}(), ec2: p548(), tweak: noProfile,
			check: result.NVMe, want: result.Fail, contains: []string{"not mounted"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := Resolve(c.host, settings.Checks{Expect: c.expect}, "")
			tg.EC2, tg.EC2Problem = c.ec2, c.ec2Prob
			if c.tweak != nil {
				c.tweak(&tg)
			}
			var got result.Check
			for _, e := range Catalog() {
				if e.ID == c.check {
					got = e.Judge(facts.Run{Host: c.host}, tg)
				}
			}
			if got.ID == "" {
				t.Fatalf("no check %s", c.check)
			}
			if got.Status != c.want {
				t.Fatalf("%s = %s, want %s: %s", c.check, got.Status, c.want, got.Message)
			}
			text := got.Basis + " | " + got.Expected + " | " + got.Message
			for _, s := range c.contains {
				if !strings.Contains(text, s) {
					t.Errorf("%q lacks %q", text, s)
				}
			}
		})
	}
}

// The health checks (gpu-memory, dcgm, the clocks) count the GPUs by the one resolver the gpu
// check uses: EC2's description outranks the PCI bus on a type without a profile, so a GPU gone
// from the bus is still missed there.
func TestGPUsExpectedFollowsEC2(t *testing.T) {
	h := h100Host(7, 7, "x86_64", 81559)
	for _, c := range []struct {
		name      string
		ec2       *instancetype.Description
		gpuCount  int
		wantN     int
		wantBasis string
	}{
		{"EC2 outranks the bus", p548(), 0, 8, BasisEC2},
		{"the setting outranks EC2", p548(), 6, 6, BasisSetting},
		{"without EC2: the bus", nil, 0, 7, BasisPCI},
		{"count off: still the bus", p548(), -1, 7, BasisPCI},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := Resolve(h, settings.Checks{Expect: settings.Expectations{GPUCount: c.gpuCount}}, "")
			tg.Profile, tg.InstanceType, tg.EC2 = nil, "p5.96xlarge-new", c.ec2
			n, basis, ok := tg.gpusExpected()
			if !ok || n != c.wantN || basis != c.wantBasis {
				t.Errorf("gpusExpected = %d %q %v, want %d %q", n, basis, ok, c.wantN, c.wantBasis)
			}
		})
	}
}

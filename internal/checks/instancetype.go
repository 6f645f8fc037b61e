package checks

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/instancetype"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func init() {
	register(Entry{
		ID: result.InstanceType, Phase: PhaseHost, Family: "gpu", Order: 190, Judge: judgeInstanceType,
		Doc:   "the host is what EC2 says the instance type is (ec2:DescribeInstanceTypes): `uname -m`, `expect.architecture` (the DLAMI's) and the type's SupportedArchitectures agree, the GPUs are NVIDIA's and whole (no fractional vGPU type); a built-in profile that disagrees with EC2 on GPU count, memory, architecture or NVMe warns that it is stale; without EC2's description it warns and says what is judged from the profile or the PCI inventory instead",
		Reads: "`uname -m`; ec2:DescribeInstanceTypes (by the plugin, once per run)",
	})
}

// judgeInstanceType judges the instance type as a whole: the architecture, fractional or
// foreign GPUs, and whether the built-in profile still agrees with EC2.
func judgeInstanceType(run facts.Run, t Target) result.Check {
	h := run.Host
	id := result.InstanceType
	d := t.EC2
	basis := BasisEC2
	if d == nil {
		basis = cmp.Or(t.profileName(), BasisPCI)
	}
	var expectedParts []string
	var supported instancetype.Supported
	if d != nil {
		supported = instancetype.FromEC2(d.Architectures)
		expectedParts = append(expectedParts, describeEC2(*d))
	} else if t.Profile != nil && t.Profile.Arch != "" {
		supported = instancetype.Supported{Arches: []string{t.Profile.Arch}, From: t.profileName()}
		expectedParts = append(expectedParts, t.Profile.Arch+" ("+t.profileName()+")")
	}
	if t.Expect.Architecture != "" {
		expectedParts = append(expectedParts, "AMI "+t.Expect.Architecture+" (expect.architecture)")
	}
	expected := strings.Join(expectedParts, "; ")
	actual := "uname -m " + cmp.Or(h.Machine.Value, "unreadable")
	if t.InstanceType != "" {
		actual = t.InstanceType + ", " + actual
	}

	var fails, warns []string
	if d != nil {
		if err := d.Refuse("instance_type"); err != nil {
			fails = append(fails, err.Error())
		}
	}
	if len(supported.Arches) > 0 || t.Expect.Architecture != "" {
		if !h.Machine.OK() {
			fails = append(fails, "uname -m unreadable, so the host's architecture cannot be compared with the instance type's: "+h.Machine.Problem)
		} else if err := instancetype.JudgeArchitecture(cmp.Or(t.InstanceType, "the instance type"), supported,
			instancetype.ArchWitness{Arch: t.Expect.Architecture, What: "the AMI (expect.architecture)", Setting: "the data source's architecture"},
			instancetype.ArchWitness{Arch: h.Machine.Value, What: "the host (uname -m)"}); err != nil {
			fails = append(fails, err.Error())
		}
	}
	if d != nil && t.Profile != nil {
		warns = append(warns, staleProfile(*d, t)...)
	}
	switch {
	case d == nil && t.EC2Problem != "":
		warns = append(warns, "EC2's description of the instance type was not read ("+t.EC2Problem+"): GPU count, memory, architecture and NVMe are judged from "+cmp.Or(t.profileName(), "the PCI inventory (GPU count only; memory and NVMe not at all)"))
	case d == nil && t.Profile == nil:
		warns = append(warns, t.noProfileNote()+" and EC2's description was not read: GPU count from the PCI inventory only; architecture, GPU memory and NVMe not judged")
	}
	if t.Profile == nil {
		var unset []string
		for _, u := range instancetype.Unjudged {
			if !t.settingSet(u.Setting) {
				unset = append(unset, u.What+" ("+u.Setting+")")
			}
		}
		if len(unset) > 0 {
			warns = append(warns, "EC2 cannot say, and no profile or setting does: "+strings.Join(unset, "; "))
		}
	}
	switch {
	case len(fails) > 0:
		return check(id, result.Fail, basis, expected, actual, strings.Join(append(fails, warns...), "; "), h.Machine.Evidence)
	case len(warns) > 0:
		return check(id, result.Warn, basis, expected, actual, strings.Join(warns, "; "), "")
	case len(supported.Arches) == 0 && t.Expect.Architecture == "":
		return check(id, result.Warn, basis, expected, actual, "nothing to compare the host's architecture with: set expect.architecture", "")
	}
	return check(id, result.Pass, basis, expected, actual, "", "")
}

// describeEC2 is EC2's description in a report line.
func describeEC2(d instancetype.Description) string {
	parts := []string{strings.Join(d.Architectures, "/")}
	if d.HasGPU() {
		g := fmt.Sprintf("%d x %s %s", d.GPUCount, d.GPUManufacturer, d.GPUName)
		if d.GPUMemoryMiB > 0 {
			g += fmt.Sprintf(" %d MiB", d.GPUMemoryMiB)
		}
		parts = append(parts, g)
	}
	if d.NVMe {
		parts = append(parts, "local NVMe")
	} else {
		parts = append(parts, "no instance store")
	}
	return strings.Join(parts, ", ") + " (from DescribeInstanceTypes)"
}

// staleProfile lists where the built-in profile disagrees with EC2: the checks judge EC2's
// figure (the live answer), and the warning names the profile's.
func staleProfile(d instancetype.Description, t Target) []string {
	p := *t.Profile
	var diffs []string
	if d.GPUCount > 0 && p.GPUCount > 0 && d.GPUCount != p.GPUCount {
		diffs = append(diffs, fmt.Sprintf("GPU count: the profile says %d, DescribeInstanceTypes %d", p.GPUCount, d.GPUCount))
	}
	if p.Arch != "" && len(d.Architectures) > 0 && !d.Supports(p.Arch) {
		diffs = append(diffs, fmt.Sprintf("architecture: the profile says %s, DescribeInstanceTypes %s", p.Arch, strings.Join(d.Architectures, "/")))
	}
	if p.NVMe != d.NVMe {
		diffs = append(diffs, fmt.Sprintf("NVMe: the profile says %v, DescribeInstanceTypes %v (InstanceStorageInfo)", p.NVMe, d.NVMe))
	}
	if d.GPUName != "" && p.GPUModel != "" && !modelMatches(p.GPUModel, d.GPUName) && !modelMatches(d.GPUName, p.GPUModel) && !strings.Contains(strings.ToLower(p.GPUModel), strings.ToLower(d.GPUName)) {
		diffs = append(diffs, fmt.Sprintf("GPU model: the profile says %s, DescribeInstanceTypes %s", p.GPUModel, d.GPUName))
	}
	if len(diffs) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("the %s is stale: %s; the checks judged DescribeInstanceTypes' figures (update the profile in internal/profile)", t.profileName(), strings.Join(diffs, "; "))}
}

// settingSet reports whether an expect setting named "expect.<name>" is set.
func (t Target) settingSet(setting string) bool {
	e := t.Expect
	switch strings.TrimPrefix(setting, "expect.") {
	case "efa_count":
		return e.EFACount != 0
	case "fabric_manager":
		return e.FabricManager != nil
	case "nvlinks":
		return e.NVLinks != 0
	case "pcie_width":
		return e.PCIeWidth != 0
	case "busbw_floor_gbps":
		return e.BusBWFloorGBps != 0
	}
	return false
}

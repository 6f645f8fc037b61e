package checks

import (
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func init() {
	register(Entry{
		ID: result.NVMe, Phase: PhaseHost, Family: "storage", Order: 310, Judge: judgeNVMe,
		Doc:   "local NVMe is mounted at `nvme_path` where the type has instance store",
		Reads: "`findmnt --mountpoint /opt/dlami/nvme`",
	})
}

// judgeNVMe judges the local NVMe instance store, which the DLAMI mounts at boot: whether it
// must be mounted comes from the setting, else DescribeInstanceTypes (InstanceStorageInfo),
// else the profile. The PCI bus cannot tell instance
// store from EBS reliably enough, so an unprofiled type without the setting warns.
func judgeNVMe(run facts.Run, t Target) result.Check {
	h := run.Host
	id := result.NVMe
	mount := t.Expect.NVMeMount()
	want, basis, known := false, "", false
	switch {
	case t.Expect.NVMe != nil:
		want, basis, known = *t.Expect.NVMe, BasisSetting, true
	case t.EC2 != nil:
		want, basis, known = t.EC2.NVMe, BasisEC2, true
	case t.Profile != nil:
		want, basis, known = t.Profile.NVMe, t.profileName(), true
	}
	expected := "mounted at " + mount
	switch {
	case !known:
		expected = "not judged"
	case !want:
		expected = "not required"
	}
	f := h.NVMe
	problem := f.Problem
	if f.OK() && f.Value.Mounted && f.Value.Target != mount {
		// findmnt was asked about this mount point; an answer about another one is unreadable.
		problem = "findmnt output unreadable"
	}
	mounted := problem == "" && f.Value.Mounted
	actual := "unknown"
	switch {
	case mounted:
		actual = "mounted: " + f.Value.Details
	case problem == "":
		actual = "not mounted"
	}
	switch {
	case problem != "":
		if want {
			return check(id, result.Fail, basis, expected, actual, problem, f.Evidence)
		}
		if !known {
			return check(id, result.Warn, "", expected, actual, "not judged ("+t.noProfileNote()+"; set expect.nvme); "+problem, f.Evidence)
		}
		return check(id, result.Skip, basis, expected, actual, "not required; "+problem, f.Evidence)
	case !known:
		return check(id, result.Warn, "", expected, actual, "not judged: "+t.noProfileNote()+" and expect.nvme is not set, so whether local NVMe must be mounted is unknown", "")
	case mounted:
		msg := ""
		if !want {
			msg = "mounted although not required"
		}
		return check(id, result.Pass, basis, expected, actual, msg, "")
	case want:
		return check(id, result.Fail, basis, expected, actual,
			"local NVMe instance store is not mounted at "+mount+" (the DLAMI mounts it at boot; check the instance store and the mount unit)", f.Evidence)
	}
	return check(id, result.Skip, basis, expected, actual, "no local NVMe expected on this instance type", "")
}

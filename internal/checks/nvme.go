package checks

import (
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// checkNVMe judges the local NVMe instance store, which the DLAMI mounts at boot: whether it
// must be mounted comes from the setting, else the profile. The PCI bus cannot tell instance
// store from EBS reliably enough, so an unprofiled type without the setting warns.
func checkNVMe(sections map[string]bundle.Section, t Target) result.Check {
	id := result.NVMe
	mount := t.Expect.NVMeMount()
	want, basis, known := false, "", false
	switch {
	case t.Expect.NVMe != nil:
		want, basis, known = *t.Expect.NVMe, BasisSetting, true
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
	ev := func() string { return evidence(sections, HostSectionNVMe) }
	s, ok := sections[HostSectionNVMe]
	var mounted, read bool
	actual := "unknown"
	switch {
	case ok && !s.TimedOut && s.ExitCode == 0:
		f := strings.Fields(firstLine(s.Output))
		if len(f) >= 1 && f[0] == mount {
			mounted, read = true, true
			actual = "mounted: " + strings.Join(f[1:], " ")
		}
	case ok && !s.TimedOut && s.ExitCode == 1 && strings.TrimSpace(s.Output) == "":
		// findmnt exits 1 with no output when nothing is mounted there.
		read, actual = true, "not mounted"
	}
	switch {
	case !read:
		_, problem := get(sections, HostSectionNVMe)
		if problem == "" {
			problem = "findmnt output unreadable"
		}
		if want {
			return check(id, result.Fail, basis, expected, actual, problem, ev())
		}
		if !known {
			return check(id, result.Warn, "", expected, actual, "not judged ("+t.noProfileNote()+"; set expect.nvme); "+problem, ev())
		}
		return check(id, result.Skip, basis, expected, actual, "not required; "+problem, ev())
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
			"local NVMe instance store is not mounted at "+mount+" (the DLAMI mounts it at boot; check the instance store and the mount unit)", ev())
	}
	return check(id, result.Skip, basis, expected, actual, "no local NVMe expected on this instance type", "")
}

package checks

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/lsmod"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/modinfo"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// checkGDRCopy judges GDRCopy: gdrdrv loaded and /dev/gdrdrv a character device (the DLAMI
// ships both), at the pinned version if any.
func checkGDRCopy(sections map[string]bundle.Section, t Target) result.Check {
	id := result.GDRCopy
	pin := t.Expect.GDRCopy
	expected, basis := "gdrdrv loaded, /dev/gdrdrv character device", BasisRule
	if pin != "" {
		expected, basis = "gdrdrv "+pin+" loaded, /dev/gdrdrv character device", BasisSetting
	}
	ev := func() string {
		return evidence(sections, HostSectionLsmod, HostSectionGDRDevice, HostSectionModinfoGDRDrv)
	}
	var fails []string
	loaded := "unknown"
	if s, problem := get(sections, HostSectionLsmod); problem != "" {
		fails = append(fails, problem)
	} else if set, err := lsmod.Parse(s.Output); err != nil {
		fails = append(fails, err.Error())
	} else if set.Has("gdrdrv") {
		loaded = "loaded"
	} else {
		loaded = "not loaded"
		fails = append(fails, "gdrdrv is not loaded (lsmod)")
	}
	dev := "unknown"
	if s, problem := get(sections, HostSectionGDRDevice); problem != "" {
		dev = "missing"
		fails = append(fails, "/dev/gdrdrv: "+problem)
	} else if kind := firstLine(s.Output); kind != "character special file" {
		dev = kind
		fails = append(fails, fmt.Sprintf("/dev/gdrdrv is a %q, not a character device", textcut.Head(kind, 80)))
	} else {
		dev = "character device"
	}
	version := "unknown"
	if s, problem := get(sections, HostSectionModinfoGDRDrv); problem != "" {
		fails = append(fails, problem)
	} else if v, err := modinfo.Field(s.Output); err != nil {
		fails = append(fails, "modinfo gdrdrv: "+err.Error())
	} else {
		version = v
		if ok, msg := pinned(pin, v); !ok {
			fails = append(fails, "GDRCopy: "+msg)
		}
	}
	actual := fmt.Sprintf("gdrdrv %s, version %s; /dev/gdrdrv %s", loaded, version, dev)
	if len(fails) > 0 {
		return check(id, result.Fail, basis, expected, actual, strings.Join(fails, "; "), ev())
	}
	return check(id, result.Pass, basis, expected, actual, "", "")
}

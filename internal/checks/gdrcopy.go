package checks

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

func init() {
	register(Entry{
		ID: result.GDRCopy, Phase: PhaseHost, Family: "gpu", Order: 290, Judge: judgeGDRCopy,
		Doc:   "the `gdrdrv` module is loaded and `/dev/gdrdrv` is a character device",
		Reads: "`lsmod`, `stat -c %F /dev/gdrdrv`",
	})
}

// judgeGDRCopy judges GDRCopy: gdrdrv loaded and /dev/gdrdrv a character device (the DLAMI
// ships both), at the pinned version if any.
func judgeGDRCopy(f facts.Run, t Target) result.Check {
	h := f.Host
	id := result.GDRCopy
	pin := t.Expect.GDRCopy
	expected, basis := "gdrdrv loaded, /dev/gdrdrv character device", BasisRule
	if pin != "" {
		expected, basis = "gdrdrv "+pin+" loaded, /dev/gdrdrv character device", BasisSetting
	}
	ev := func() string { return evidence(h.Loaded.Evidence, h.GDRDevice.Evidence, h.GDRDrvModule.Evidence) }
	var fails []string
	loaded := "unknown"
	switch {
	case !h.Loaded.OK():
		fails = append(fails, h.Loaded.Problem)
	case h.Loaded.Value.Has("gdrdrv"):
		loaded = "loaded"
	default:
		loaded = "not loaded"
		fails = append(fails, "gdrdrv is not loaded (lsmod)")
	}
	dev := "unknown"
	switch kind := h.GDRDevice.Value; {
	case !h.GDRDevice.OK():
		dev = "missing"
		fails = append(fails, "/dev/gdrdrv: "+h.GDRDevice.Problem)
	case kind != "character special file":
		dev = kind
		fails = append(fails, fmt.Sprintf("/dev/gdrdrv is a %q, not a character device", textcut.Head(kind, 80)))
	default:
		dev = "character device"
	}
	version := "unknown"
	if m := h.GDRDrvModule; !m.OK() {
		fails = append(fails, m.Problem)
	} else {
		version = m.Value
		if ok, msg := pinned(pin, m.Value); !ok {
			fails = append(fails, "GDRCopy: "+msg)
		}
	}
	actual := fmt.Sprintf("gdrdrv %s, version %s; /dev/gdrdrv %s", loaded, version, dev)
	if len(fails) > 0 {
		return check(id, result.Fail, basis, expected, actual, strings.Join(fails, "; "), ev())
	}
	return check(id, result.Pass, basis, expected, actual, "", "")
}

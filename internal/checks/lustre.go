package checks

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func init() {
	register(Entry{
		ID: result.Lustre, Phase: PhaseHost, Family: "storage", Order: 320, Judge: judgeLustre,
		Doc:   "the Lustre client is installed (and its version matches) when expected; when installed anyway, the utilities and the module are one release",
		Reads: "`lfs --version`, `modinfo -F version lustre`",
	})
}

// judgeLustre judges the Lustre client when it is required (lustre_expected, or a lustre pin):
// lfs and a module built for the running kernel, at the pinned version. When it is not
// required but installed, the utilities and the module must still agree.
func judgeLustre(run facts.Run, t Target) result.Check {
	h := run.Host
	id := result.Lustre
	e := t.Expect
	required := (e.LustreExpected != nil && *e.LustreExpected) || (e.LustreExpected == nil && e.Lustre != "")
	expected, basis := "not required", BasisSetting
	if required {
		expected = "lfs and lustre module"
		if e.Lustre != "" {
			expected += " " + e.Lustre
		}
	}
	ev := func() string { return evidence(h.Lfs.Evidence, h.LustreModule.Evidence) }
	var problems []string
	lfs, kmod := h.Lfs.Value, h.LustreModule.Value
	for _, f := range []facts.Fact[string]{h.Lfs, h.LustreModule} {
		if !f.OK() {
			problems = append(problems, f.Problem)
		}
	}
	actual := "not installed"
	if lfs != "" || kmod != "" {
		actual = fmt.Sprintf("lfs %s, module %s", cmp.Or(lfs, "missing"), cmp.Or(kmod, "missing"))
	}
	if !required {
		switch {
		case lfs != "" && kmod != "" && !sameRelease(lfs, kmod):
			return check(id, result.Fail, BasisRule, "lfs and module of one release", actual,
				"the Lustre utilities and the kernel module are different releases: lustre-client-utils must match lustre-client-modules", ev())
		case lfs != "" && kmod != "":
			return check(id, result.Pass, BasisRule, "lfs and module of one release", actual, "installed although not required (set expect.lustre_expected = true to require it)", "")
		}
		return check(id, result.Skip, basis, expected, actual, "Lustre not required (expect.lustre_expected); "+strings.Join(problems, "; "), ev())
	}
	if len(problems) > 0 {
		return check(id, result.Fail, basis, expected, actual,
			"Lustre client incomplete (the module must be built for the running kernel): "+strings.Join(problems, "; "), ev())
	}
	if ok, msg := pinned(e.Lustre, kmod); !ok {
		return check(id, result.Fail, basis, expected, actual, "lustre module: "+msg, ev())
	}
	if !sameRelease(lfs, kmod) {
		return check(id, result.Fail, basis, expected, actual, "the Lustre utilities and the kernel module are different releases", ev())
	}
	return check(id, result.Pass, basis, expected, actual, "", "")
}

// sameRelease compares Lustre versions up to the third component: "2.15.6" and
// "2.15.6_1fsx34" are one release.
func sameRelease(a, b string) bool {
	cut := func(v string) string {
		parts := strings.FieldsFunc(v, func(r rune) bool { return r == '.' || r == '_' || r == '-' })
		if len(parts) > 3 {
			parts = parts[:3]
		}
		return strings.Join(parts, ".")
	}
	return cut(a) == cut(b)
}

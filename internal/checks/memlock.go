package checks

import (
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// judgeMemlock judges the locked-memory limit: collectives pin large buffers, so it must be
// unlimited.
func judgeMemlock(h facts.Host, _ Target) result.Check {
	id := result.Memlock
	const expected = "unlimited"
	m := h.Memlock
	switch {
	case !m.OK():
		return check(id, result.Fail, BasisRule, expected, "unreadable", m.Problem, m.Evidence)
	case m.Value.Unlimited:
		return check(id, result.Pass, BasisRule, expected, m.Value.String(), "", "")
	}
	return check(id, result.Fail, BasisRule, expected, m.Value.String(),
		"locked memory is limited for the login session: collectives pin large buffers (set memlock unlimited in /etc/security/limits.d)", m.Evidence)
}

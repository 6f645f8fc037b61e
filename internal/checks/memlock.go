package checks

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// checkMemlock judges the login session's locked-memory limit: collectives pin large
// buffers, so it must be unlimited.
func checkMemlock(sections map[string]bundle.Section, _ Target) result.Check {
	id := result.Memlock
	const expected = "unlimited"
	ev := func() string { return evidence(sections, HostSectionMemlock) }
	s, problem := get(sections, HostSectionMemlock)
	if problem != "" {
		return check(id, result.Fail, BasisRule, expected, "unknown", problem, ev())
	}
	v := strings.TrimSpace(s.Output)
	if v == "unlimited" {
		return check(id, result.Pass, BasisRule, expected, v, "", "")
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		return check(id, result.Fail, BasisRule, expected, fmt.Sprintf("%d KiB", n),
			"locked memory is limited for the login session: collectives pin large buffers (set memlock unlimited in /etc/security/limits.d)", ev())
	}
	return check(id, result.Fail, BasisRule, expected, "unreadable", fmt.Sprintf("ulimit -l printed %q", textcut.Head(v, 80)), ev())
}

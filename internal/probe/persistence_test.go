package probe

import (
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func TestPersistenceFaults(t *testing.T) {
	daemonOff := func(s map[string]bundle.Section) { set(s, sectionPersistenced, "inactive", 3) }
	runFaults(t, []fault{
		{"daemon off, one GPU without persistence mode", func(s map[string]bundle.Section) {
			daemonOff(s)
			set(s, sectionPersistMode, "0, Enabled\n1, Disabled", 0)
		}, nil, []string{result.Persistence}, "off on GPU 1:"},
		{"daemon off, mode unreadable", func(s map[string]bundle.Section) {
			daemonOff(s)
			set(s, sectionPersistMode, "Field \"persistence_mode\" is not a valid field to query.", 2)
		}, nil, []string{result.Persistence}, "could not be read"},
		{"daemon off, garbage", func(s map[string]bundle.Section) {
			daemonOff(s)
			set(s, sectionPersistMode, "0, Maybe", 0)
		}, nil, []string{result.Persistence}, "unreadable"},
		{"systemctl missing, mode off", func(s map[string]bundle.Section) {
			set(s, sectionPersistenced, "systemctl: not found", 127)
			set(s, sectionPersistMode, "0, Disabled", 0)
		}, nil, []string{result.Persistence}, "off on GPU 0:"},
	})
	// Persistence mode on every GPU passes without the daemon.
	c := statusOf(evaluate(t, func(m map[string]bundle.Section) { daemonOff(m) }, nil), result.Persistence)
	if c.Status != result.Pass || c.Actual != "persistence mode on all 8 GPUs (nvidia-persistenced inactive)" {
		t.Errorf("mode on, daemon off: %s %q: %s", c.Status, c.Actual, c.Message)
	}
}

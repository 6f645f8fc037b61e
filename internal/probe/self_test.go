package probe

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
)

type sectionsRunner map[string]bundle.Section

func (s sectionsRunner) Query(_ context.Context, cmds []bundle.Command) (map[string]bundle.Section, error) {
	out := map[string]bundle.Section{}
	for _, c := range cmds {
		if v, ok := s[c.Name]; ok {
			out[c.Name] = v
		} else {
			out[c.Name] = bundle.Section{Output: "sh: not found", ExitCode: 127}
		}
	}
	return out, nil
}

func TestSelf(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sections sectionsRunner
		typ, id  string
		up       time.Duration
		problem  string // in the uptime's problem, "" when read
	}{
		{"all read", sectionsRunner{sectionProductName: {Output: "p5.48xlarge\n"}, sectionInstanceID: {Output: "i-0123456789abcdef0\n"}, sectionUptime: {Output: "75.50 140.02\n"}},
			"p5.48xlarge", "i-0123456789abcdef0", 75500 * time.Millisecond, ""},
		{"no cloud-init id, no uptime", sectionsRunner{sectionProductName: {Output: "p5.48xlarge"}, sectionInstanceID: {Output: "", ExitCode: 7}, sectionUptime: {Output: "garbage"}},
			"p5.48xlarge", "", 0, "want two numbers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			self, err := Self(context.Background(), tc.sections)
			if err != nil {
				t.Fatal(err)
			}
			if self.Instance.Type != tc.typ || self.ID.Value != tc.id || self.ID.OK() != (tc.id != "") || self.Uptime.Value != tc.up {
				t.Errorf("Self = %+v", self)
			}
			if tc.problem == "" && !self.Uptime.OK() || tc.problem != "" && !strings.Contains(self.Uptime.Problem, tc.problem) {
				t.Errorf("uptime problem %q, want %q", self.Uptime.Problem, tc.problem)
			}
		})
	}
}

// The instance id command is valid sh and prints cloud-init's record when there is one.
func TestInstanceIDCommandParses(t *testing.T) {
	if out, err := exec.Command("/bin/sh", "-n", "-c", instanceIDCommand).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v\n%s", err, out)
	}
	if !strings.HasPrefix(instanceIDCommand, "cat /var/lib/cloud/data/instance-id 2>/dev/null || ") {
		t.Errorf("cloud-init's record is not read first: %s", instanceIDCommand)
	}
}

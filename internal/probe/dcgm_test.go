package probe

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// The DCGM script runs dcgmi diag with the parameters DCGMOptions asks for and reports
// dcgmi's exit status on its EXIT line, which ParseDCGMRun reads into the fact.
func TestDCGMScriptRun(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatal("no sh")
	}
	doc := `{"DCGM Diagnostic": {"test_categories": [{"category": "Integration", "tests": [{"name": "pcie", "results": [{"entity_group": "GPU", "entity_id": 0, "status": "Pass"}], "test_summary": {"status": "Pass"}}]}]}}`
	for _, tt := range []struct {
		name     string
		o        DCGMOptions
		rc       int
		wantArgs string
		wantExit string
	}{
		{"defaults, exit 0", DCGMOptions{}, 0, "diag -r 2 -j", "DCGM_ST_OK"},
		{"a slot of x8, exit 226", DCGMOptions{MinPCIeWidth: 8}, 226,
			"diag -r 2 -p pcie.h2d_d2h_single_pinned.min_pci_width=8;pcie.h2d_d2h_single_unpinned.min_pci_width=8 -j", "DCGM_ST_NVVS_ERROR"},
	} {
		dir := t.TempDir()
		args := filepath.Join(dir, "args")
		dcgmi := filepath.Join(dir, "dcgmi")
		// A dcgmi that answers discovery, records diag's arguments, prints the document and
		// a warning on stderr, and exits rc.
		fake := fmt.Sprintf("#!/bin/sh\n[ \"$1\" = discovery ] && exit 0\necho \"$*\" > %s\ncat <<'DOC'\n%s\nDOC\necho 'a warning' >&2\nexit %d\n", args, doc, tt.rc)
		if err := os.WriteFile(dcgmi, []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
		s, err := DCGMScriptWith(2, tt.o)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Replace(s.Text, "dcgmi_paths='/usr/bin/dcgmi'", "dcgmi_paths="+dcgmi, 1)
		if text == s.Text {
			t.Fatalf("%s: the script names no dcgmi_paths='/usr/bin/dcgmi':\n%s", tt.name, s.Text)
		}
		out, _ := exec.Command("sh", "-c", text).CombinedOutput()
		got, err := os.ReadFile(args)
		if err != nil {
			t.Fatalf("%s: dcgmi diag did not run: %s", tt.name, out)
		}
		if strings.TrimSpace(string(got)) != tt.wantArgs {
			t.Errorf("%s: dcgmi %s, want %s", tt.name, strings.TrimSpace(string(got)), tt.wantArgs)
		}
		f, missing := ParseDCGMRun(string(out), settings.DCGMLevel(2))
		if !f.OK() || missing {
			t.Fatalf("%s: %s\n%s", tt.name, f.Problem, out)
		}
		if f.Value.ExitCode != tt.rc || f.Value.Exit.Name != tt.wantExit || len(f.Value.Report.Tests) != 1 {
			t.Errorf("%s: exit %d %+v, %d tests\n%s", tt.name, f.Value.ExitCode, f.Value.Exit, len(f.Value.Report.Tests), out)
		}
	}
	if _, err := DCGMScriptWith(2, DCGMOptions{MinPCIeWidth: 64}); err == nil {
		t.Error("min_pci_width 64 accepted")
	}
	// Without an EXIT line the fact says so: -1, which the judge never passes.
	if f, _ := ParseDCGMRun(doc+"\n", 2); !f.OK() || f.Value.ExitCode != -1 {
		t.Errorf("no EXIT line: %+v", f)
	}
}

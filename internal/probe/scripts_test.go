package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"

	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// Every embedded script, as shipped and as rendered with its settings, is valid POSIX sh; with
// shellcheck on the machine (CI installs it), none has a finding.
func TestScriptsParse(t *testing.T) {
	nccl, err := NCCLScript("the NCCL test", "nccl", settings.NCCL{Env: map[string]string{"FI_PROVIDER": "efa", "X": "it's a \"value\" with $dollar"}}, 8)
	if err != nil {
		t.Fatal(err)
	}
	dcgm, err := DCGMScript(2)
	if err != nil {
		t.Fatal(err)
	}
	efa, err := EFATrafficScript([]string{"rdmap16s27", "rdmap32s27"}, settings.EFATraffic{})
	if err != nil {
		t.Fatal(err)
	}
	multi, err := MultiNodeScript(settings.MultiNode{Nodes: 2, Env: map[string]string{"NCCL_ALGO": "Ring"}}, 8, []string{"10.0.1.5", "10.0.1.6"}, "/home/ubuntu/dlami-multinode.x1")
	if err != nil {
		t.Fatal(err)
	}
	addKey, err := MultiNodeKeyScript(true, "ssh-ed25519 AAAAC3Nza dlami-multinode-x1", "dlami-multinode-x1")
	if err != nil {
		t.Fatal(err)
	}
	imexNodes, err := IMEXNodesScript([]string{"10.0.1.5", "10.0.1.6"})
	if err != nil {
		t.Fatal(err)
	}
	rendered := map[string]string{
		"nccl": nccl.Text, "nccl-multinode": multi.Text, "multinode-key": addKey.Text, "multinode-stop": MultiNodeStopScript().Text, "dcgm": dcgm.Text, "efa-traffic": efa.Text,
		"hygiene":           HygieneScript("ubuntu", "ssh-ed25519 AAAAC3Nza k").Text,
		"node-check-enable": NodeCheckEnableScript("dlami-node-check.service", "/usr/local/sbin/dlami-node-check").Text,
		"hygiene-probe":     render("hygiene-probe.sh", hygieneVars("ubuntu", ""), nil),
		"container-engines": containerEnginesScript(),
		"imex-domain":       IMEXDomainScript(0).Text,
		"imex-nodes":        imexNodes.Text,
	}
	dir := t.TempDir()
	var files, checked []string
	for _, name := range ScriptNames() {
		p := filepath.Join(dir, "embedded-"+name)
		if err := os.WriteFile(p, []byte(scriptFile(name)), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	if len(rendered)-1 != len(ScriptNames())-1 { // nccl.sh is rendered twice (one node, several)
		t.Errorf("%d scripts rendered, %d embedded besides lib.sh: render every one here", len(rendered), len(ScriptNames())-1)
	}
	for name, text := range rendered {
		if !strings.HasPrefix(text, "#!/bin/sh\n") {
			t.Errorf("%s: rendered without its shebang first", name)
		}
		p := filepath.Join(dir, "rendered-"+name+".sh")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
		checked = append(checked, p)
	}
	for _, f := range files {
		if out, err := exec.Command("/bin/sh", "-n", f).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", filepath.Base(f), err, out)
		}
	}
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("shellcheck is not installed (test/simhost/install-deps installs it)")
		}
		t.Log("shellcheck not installed: only sh -n was run")
		return
	}
	// The rendered scripts, as they run: lib.sh's helpers are in each, used or not (SC2317).
	args := append([]string{"--shell=sh", "--severity=style", "--exclude=SC2317"}, checked...)
	if out, err := exec.Command(sc, args...).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// A setting's value reaches the NCCL script quoted: whatever it holds, the rendered script
// sets it, and nothing in it runs.
func TestNCCLScriptQuotesSettings(t *testing.T) {
	evil := `$(touch /tmp/pwned) '; rm -rf / #`
	s, err := NCCLScript("the NCCL test", "nccl", settings.NCCL{Env: map[string]string{"NCCL_SOCKET_IFNAME": evil}, Args: []string{"-b", evil}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.Text, "\nenv_value_1="+bundle.Quote(evil)+"\n") {
		t.Errorf("the value is not quoted as one word:\n%s", s.Text)
	}
	// The settings block, run alone, sets the value and runs nothing.
	start := strings.Index(s.Text, "# Set by the plugin:")
	end := strings.Index(s.Text, "find_tool() {")
	dir := t.TempDir()
	prelude := strings.ReplaceAll(s.Text[start:end], "/tmp/pwned", filepath.Join(dir, "pwned"))
	out, err := exec.Command("/bin/sh", "-c", prelude+`printf %s "$env_value_1"`).CombinedOutput()
	if err != nil || string(out) != strings.ReplaceAll(evil, "/tmp/pwned", filepath.Join(dir, "pwned")) {
		t.Errorf("the settings block set %q (%v)", out, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("a setting's value ran as a command")
	}
	if strings.Contains(s.Text, "NCCL_SOCKET_IFNAME=") {
		t.Errorf("a setting's name became a script variable:\n%s", s.Text)
	}
}

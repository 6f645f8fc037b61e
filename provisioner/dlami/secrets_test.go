package dlami

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
)

// secretConfig is a provisioner block with a token in a layer's environment, a repository
// with credentials and nccl.env, and words that are not secrets next to them.
func secretConfig(t *testing.T) map[string]interface{} {
	return map[string]interface{}{
		"report_dir": t.TempDir(),
		"layer": []map[string]interface{}{{
			"name":             "private",
			"inline":           []string{"set -x; curl -H \"Authorization: $GH_TOKEN\" https://example.com"},
			"environment":      map[string]string{"GH_TOKEN": "ghp-layer-token-0001", "FI_PROVIDER": "efa", "EXPECTED": "fail"},
			"apt_repositories": []string{"deb https://0123456789abcdef0123:@packagecloud.io/o/r/ubuntu/ noble main"},
		}},
		"nccl": map[string]interface{}{"env": map[string]string{"NCCL_ALGO": "Ring", "HF_TOKEN": "hf-nccl-token-0002"}},
	}
}

// The secrets are the values that can be secret, and only those: a value named a token, a
// repository token, an nccl.env token; not "efa", "fail" or "Ring", which would rewrite
// evidence and verdicts wherever the same word appears.
func TestPrepareRegistersOnlyWhatCanBeSecret(t *testing.T) {
	var p Provisioner
	if err := p.Prepare(secretConfig(t)); err != nil {
		t.Fatal(err)
	}
	got := p.opt.Secrets
	for _, want := range []string{"ghp-layer-token-0001", "0123456789abcdef0123", "hf-nccl-token-0002"} {
		if !slices.Contains(got, want) {
			t.Errorf("secrets %q lack %q", got, want)
		}
	}
	for _, not := range []string{"efa", "fail", "Ring"} {
		if slices.Contains(got, not) {
			t.Errorf("secrets %q hold %q", got, not)
		}
	}
}

// What the provisioner sends to the UI, a layer's `set -x` trace included, and the error it
// returns (Packer prints it) carry no secret.
func TestProvisionFiltersTheUIAndTheError(t *testing.T) {
	var p Provisioner
	if err := p.Prepare(secretConfig(t)); err != nil {
		t.Fatal(err)
	}
	// Not packersdk.BasicUi: it filters through the process's LogSecretFilter, which Prepare
	// fills here; Packer's UI, in another process, does not hold the plugin's secrets.
	out := &plainUI{}
	ui := out
	// Every command the bake runs prints the trace and fails: the first one's output reaches
	// the UI and the error.
	comm := &packersdk.MockCommunicator{StartStdout: "+ curl -H Authorization: ghp-layer-token-0001 https://x\n",
		StartStderr: "E: 401 for https://0123456789abcdef0123:@packagecloud.io hf-nccl-token-0002\n", StartExitStatus: 1}
	err := p.Provision(context.Background(), ui, comm, map[string]interface{}{"PackerRunUUID": "run-1"})
	if err == nil {
		t.Fatal("the bake passed with every command failing")
	}
	said := out.b.String()
	for _, secret := range []string{"ghp-layer-token-0001", "0123456789abcdef0123", "hf-nccl-token-0002"} {
		if strings.Contains(said, secret) {
			t.Errorf("the UI shows %q:\n%s", secret, said)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows %q: %v", secret, err)
		}
	}
	if !strings.Contains(said, "<sensitive>") || !strings.Contains(err.Error(), "<sensitive>") {
		t.Errorf("the command's output did not reach the UI and the error (nothing was filtered):\n%s\n%v", said, err)
	}
}

// plainUI writes every line as it is, as Packer's UI does with a plugin's lines.
type plainUI struct {
	packersdk.Ui
	b bytes.Buffer
}

func (u *plainUI) Say(m string)     { u.b.WriteString(m + "\n") }
func (u *plainUI) Message(m string) { u.b.WriteString(m + "\n") }
func (u *plainUI) Error(m string)   { u.b.WriteString(m + "\n") }

package dlami

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"golang.org/x/crypto/ssh"
)

// image_hygiene removes the key Packer logged in with: the public half of the builder's
// temporary private key (generated data SSHPrivateKey), else of ssh_private_key_file; with
// neither (agent, password) the key is unknown and nothing is removed.
func TestHygieneFindsTheBuildKey(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(block))
	sshPub, _ := ssh.NewPublicKey(pub)
	want := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub)))
	file := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(file, []byte(pemKey), 0o600); err != nil {
		t.Fatal(err)
	}
	ui := &packersdk.BasicUi{Reader: new(bytes.Buffer), Writer: new(bytes.Buffer), ErrorWriter: new(bytes.Buffer)}
	for _, tc := range []struct {
		name      string
		generated map[string]interface{}
		want      string
	}{
		{"temporary key", map[string]interface{}{"User": "ubuntu", "SSHPrivateKey": pemKey, "SSHPrivateKeyFile": ""}, want},
		{"private key file", map[string]interface{}{"User": "ubuntu", "SSHPrivateKey": "", "SSHPrivateKeyFile": file}, want},
		{"agent", map[string]interface{}{"User": "ubuntu", "SSHPrivateKey": "", "SSHAgentAuth": true}, ""},
		{"unreadable key", map[string]interface{}{"User": "ubuntu", "SSHPrivateKey": "not a key"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hygiene(tc.generated, ui)
			if h.LoginUser != "ubuntu" || h.BuildKey != tc.want {
				t.Errorf("hygiene = %+v, want user ubuntu, key %q", h, tc.want)
			}
		})
	}
}

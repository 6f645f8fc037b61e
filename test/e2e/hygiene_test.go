package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"golang.org/x/crypto/ssh"

	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// layerEntry finds path in an AMI's layers, topmost first, as overlayfs would: a whiteout (a
// 0/0 character device) hides what is below. found is false when no layer has it (then the
// base DLAMI's rootfs decides).
func layerEntry(t *testing.T, img awsfake.Image, path string) (data []byte, found, deleted bool) {
	t.Helper()
	for i := len(img.Layers) - 1; i >= 0; i-- {
		p := filepath.Join(img.Layers[i], path)
		st, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if st.Mode()&os.ModeCharDevice != 0 && st.Sys().(*syscall.Stat_t).Rdev == 0 {
			return nil, true, true
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return b, true, false
	}
	return nil, false, false
}

// assertHygienicImage: the golden AMI, baked with image_hygiene = true, holds no trace of the
// build that a fleet must not share: not the temporary key pair amazon-ebs logged in with
// (cloud-init put it in ubuntu's authorized_keys; the fake names the key line after the key
// pair, packer_<uuid>), no SSH host keys, an empty machine id. Two instances launched from it
// then answer SSH with host keys of their own and machine ids of their own: their first boot
// made them (cloud-init's ssh_genkeytypes and systemd, in the simulated host's boot hook).
func assertHygienicImage(t *testing.T, fake *fakeAWS, golden awsfake.Image) {
	t.Helper()
	keys, found, deleted := layerEntry(t, golden, "home/ubuntu/.ssh/authorized_keys")
	if !found || deleted {
		t.Errorf("the image's top layer has no ubuntu authorized_keys (found %v, deleted %v): the bake's cleanup should edit it, not remove it", found, deleted)
	}
	if strings.Contains(string(keys), "packer_") {
		t.Errorf("the image still holds amazon-ebs's temporary key:\n%s", keys)
	}
	for _, layer := range golden.Layers {
		matches, _ := filepath.Glob(filepath.Join(layer, "etc/ssh/ssh_host_*"))
		for _, m := range matches {
			if _, _, deleted := layerEntry(t, awsfake.Image{Layers: []string{layer}}, strings.TrimPrefix(m, layer+"/")); !deleted {
				t.Errorf("the image holds an SSH host key: %s", m)
			}
		}
	}
	if id, found, deleted := layerEntry(t, golden, "etc/machine-id"); !found || deleted || len(id) != 0 {
		t.Errorf("the image's /etc/machine-id = %q (found %v, deleted %v), want an empty file", id, found, deleted)
	}

	api := ec2.NewFromConfig(aws.Config{Region: ebsRegion, BaseEndpoint: aws.String(fake.endpoint), RetryMaxAttempts: 3,
		Credentials: credentials.NewStaticCredentialsProvider(fakeAccessKeyID, fakeSecretAccessKey, "")})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hostKeys, machineIDs := map[string]bool{}, map[string]bool{}
	for i := range 2 {
		in, err := launch.Launch(ctx, api, launch.Spec{ImageID: golden.ID, InstanceType: "p6-b200.48xlarge",
			Tags: map[string]string{"Name": fmt.Sprintf("hygiene check %d", i)}, Poll: 200 * time.Millisecond}, func(string) {})
		if err != nil {
			t.Fatalf("launching from %s: %v", golden.ID, err)
		}
		hostKey, machineID, err := sshFacts(ctx, in)
		if cerr := launch.Cleanup(ctx, in, func(string) {}); cerr != nil {
			t.Errorf("cleaning up %s: %v", in.ID, cerr)
		}
		if err != nil {
			t.Fatalf("instance %d from %s: SSH: %v", i, golden.ID, err)
		}
		if len(machineID) != 32 || strings.Trim(machineID, "0123456789abcdef") != "" {
			t.Errorf("instance %d: machine id %q, want 32 lowercase hex digits made at its boot", i, machineID)
		}
		if hostKeys[hostKey] || machineIDs[machineID] {
			t.Errorf("instance %d shares its host key or machine id with another instance of %s", i, golden.ID)
		}
		hostKeys[hostKey], machineIDs[machineID] = true, true
	}
}

// sshFacts logs in to a launched instance with its temporary key and returns the host key it
// answered with and its machine id.
func sshFacts(ctx context.Context, in *launch.Instance) (hostKey, machineID string, err error) {
	addr, err := in.Address("")
	if err != nil {
		return "", "", err
	}
	cfg := &ssh.ClientConfig{User: "ubuntu", Auth: []ssh.AuthMethod{ssh.PublicKeys(in.Signer)}, Timeout: 10 * time.Second,
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error { hostKey = string(k.Marshal()); return nil }}
	var c *ssh.Client
	for {
		if c, err = ssh.Dial("tcp", net.JoinHostPort(addr, "22"), cfg); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return "", "", fmt.Errorf("%s:22: %w", addr, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		return "", "", err
	}
	defer s.Close()
	var out bytes.Buffer
	s.Stdout = &out
	if err := s.Run("cat /etc/machine-id"); err != nil {
		return "", "", fmt.Errorf("cat /etc/machine-id: %w", err)
	}
	return hostKey, strings.TrimSpace(out.String()), nil
}

package dlami

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	sdkssh "github.com/hashicorp/packer-plugin-sdk/communicator/ssh"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hashicorp/packer-plugin-sdk/pathing"
	sshcomm "github.com/hashicorp/packer-plugin-sdk/sdk-internals/communicator/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/pause"
	"github.com/dlami-bake/packer-plugin-dlami/internal/progress"
	"github.com/dlami-bake/packer-plugin-dlami/internal/remote"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// connect opens SSH to a launched instance and reads the bill of materials the image carries.
func (p *PostProcessor) connect(ctx context.Context, in *launch.Instance, say func(string)) (host.Host, bom.BOM, error) {
	c := &p.config
	addr, err := in.Address(c.sshInterface())
	if err != nil {
		return nil, bom.BOM{}, err
	}
	connect, err := c.connector(addr)
	if err != nil {
		return nil, bom.BOM{}, err
	}
	comm, err := dialSSH(ctx, connect, c.SSHUsername, in.Signer, c.SSHTimeout, say, progress.Pace{Every: p.progressEvery})
	if err != nil {
		return nil, bom.BOM{}, err
	}
	h := remote.SSH{C: comm, TempDir: settings.DefaultRemoteFolder}
	data, err := h.ReadFile(ctx, c.ManifestPath)
	if err != nil {
		return nil, bom.BOM{}, fmt.Errorf("reading the bill of materials %s from the instance (was the image baked by the dlami provisioner? manifest_path): %w", c.ManifestPath, err)
	}
	b, err := bom.Decode(data)
	if err != nil {
		return nil, bom.BOM{}, fmt.Errorf("%s on the instance: %w", c.ManifestPath, err)
	}
	return h, b, nil
}

// connector is how to open the TCP connection to addr's SSH port: directly, or through the
// bastion (ssh_bastion_host), as Packer's own communicator does it.
func (c *Config) connector(addr string) (connector, error) {
	hostport := net.JoinHostPort(addr, "22")
	if c.SSHBastionHost == "" {
		return connector{hostport: hostport, dial: func() (net.Conn, error) { return net.DialTimeout("tcp", hostport, 10*time.Second) }}, nil
	}
	var auth []ssh.AuthMethod
	if c.SSHBastionAgentAuth {
		path := os.Getenv("SSH_AUTH_SOCK")
		if path == "" {
			return connector{}, errors.New("ssh_bastion_agent_auth = true but SSH_AUTH_SOCK is not set: start an SSH agent, or set ssh_bastion_private_key_file")
		}
		sock, err := net.Dial("unix", path)
		if err != nil {
			return connector{}, fmt.Errorf("ssh_bastion_agent_auth: connecting to the SSH agent at SSH_AUTH_SOCK: %w", err)
		}
		auth = append(auth, ssh.PublicKeysCallback(agent.NewClient(sock).Signers))
	} else {
		path, err := pathing.ExpandUser(c.SSHBastionPrivateKeyFile)
		if err != nil {
			return connector{}, fmt.Errorf("ssh_bastion_private_key_file %s: %w", c.SSHBastionPrivateKeyFile, err)
		}
		signer, err := sdkssh.FileSigner(path)
		if err != nil {
			return connector{}, fmt.Errorf("ssh_bastion_private_key_file %s: %w", c.SSHBastionPrivateKeyFile, err)
		}
		auth = append(auth, ssh.PublicKeys(signer))
	}
	bastion := net.JoinHostPort(c.SSHBastionHost, strconv.Itoa(c.SSHBastionPort))
	conf := &ssh.ClientConfig{User: c.SSHBastionUsername, Auth: auth, Timeout: 10 * time.Second,
		// As amazon-ebs's bastion: its host key is not known beforehand either.
		HostKeyCallback: ssh.InsecureIgnoreHostKey()}
	return connector{hostport: hostport, via: bastion, dial: sshcomm.BastionConnectFunc("tcp", bastion, conf, "tcp", hostport)}, nil
}

// connector opens the connection to the instance's SSH port.
type connector struct {
	hostport, via string
	dial          func() (net.Conn, error)
}

func (c connector) String() string {
	if c.via == "" {
		return c.hostport
	}
	return c.hostport + " through the bastion " + c.via
}

// dialSSH connects to the instance through Packer's own SSH communicator, retrying until
// timeout (sshd starts late in the boot), saying at pace's pace what it waits for and the last
// answer.
func dialSSH(ctx context.Context, connect connector, user string, signer ssh.Signer, timeout time.Duration, say func(string), pace progress.Pace) (packersdk.Communicator, error) {
	deadline := time.Now().Add(timeout)
	say("waiting for SSH on " + connect.String())
	var last error
	var lastMsg atomic.Value
	lastMsg.Store("no answer yet")
	stop := pace.Waiting(say, func() string {
		return fmt.Sprintf("SSH on %s (ssh_timeout; last: %s)", connect, lastMsg.Load())
	}, timeout)
	defer stop()
	for {
		comm, err := sshcomm.New(connect.hostport, &sshcomm.Config{
			SSHConfig: &ssh.ClientConfig{
				User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
				// A fresh throwaway instance: its host key is not known beforehand.
				HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second,
			},
			Connection:       connect.dial,
			HandshakeTimeout: 10 * time.Second,
			UseSftp:          true,
		})
		if err == nil {
			return comm, nil
		}
		last = err
		lastMsg.Store(err.Error())
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("SSH to %s did not answer within ssh_timeout %s: %w", connect, timeout, last)
		}
		if err := pause.Sleep(ctx, 3*time.Second); err != nil {
			return nil, err
		}
	}
}

package awsfake

import (
	"context"
)

// MachineSpec is what RunInstances asks the machine backend to boot.
type MachineSpec struct {
	InstanceID    string // "i-0abc..."
	InstanceType  string // sets the simulated host's product-name knob
	ImageID       string
	Address       string   // loopback address the host's sshd listens on, port 22
	Layers        []string // root filesystem layers of the AMI, lowest first; empty = the base DLAMI rootfs
	AuthorizedKey string   // OpenSSH public key line for user ubuntu (from the key pair), "" = none
	UserData      []byte
}

// Machines boots and stops the hosts behind instances. A nil Machines (no --simhost) means
// instances exist only as EC2 state (enough for communicator = "none").
type Machines interface {
	Start(ctx context.Context, m MachineSpec) error                            // boot; returns when sshd accepts
	Stop(ctx context.Context, instanceID string) error                         // shut down, keep the disk
	Snapshot(ctx context.Context, instanceID string) (layer string, err error) // capture the stopped instance's disk (its writable layer) as a new read-only layer directory; CreateImage stacks it on the parent AMI's layers
	Terminate(ctx context.Context, instanceID string) error                    // tear down, delete the disk; idempotent
	Close(ctx context.Context) error                                           // terminate everything (SIGTERM)
}

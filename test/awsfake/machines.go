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
	Network       MachineNetwork
}

// MachineNetwork is what a host shows of its instance's network interfaces.
type MachineNetwork struct {
	// EFACards holds the network card index of each EFA interface (InterfaceType efa or
	// efa-only) the launch attached, in card order: the host has exactly these EFA devices.
	// Empty: no EFA device, whatever the instance type (a launch with one default interface,
	// as amazon-ebs makes).
	EFACards []int
	// EFATraffic is whether the interfaces' security groups let EFA traffic through (all
	// traffic to and from the group itself); without it EFA traffic stalls.
	EFATraffic bool
	// EFATrafficBlockedBy says which rule is missing when EFATraffic is false (for logs).
	EFATrafficBlockedBy string
}

// Machines boots and stops the hosts behind instances. A nil Machines (no --simhost) means
// instances exist only as EC2 state (enough for communicator = "none").
type Machines interface {
	Start(ctx context.Context, m MachineSpec) error                            // boot; returns when sshd accepts
	Stop(ctx context.Context, instanceID string) error                         // shut down, keep the disk
	Snapshot(ctx context.Context, instanceID string) (layer string, err error) // capture the stopped instance's disk (its writable layer) as a new read-only layer directory; CreateImage stacks it on the parent AMI's layers
	Terminate(ctx context.Context, instanceID string) error                    // tear down, delete the disk; idempotent
	SetNetwork(ctx context.Context, instanceID string, n MachineNetwork) error // the security groups changed: update what the host shows (running or stopped)
	Close(ctx context.Context) error                                           // terminate everything (SIGTERM)
}

package main

import (
	"fmt"
	"io"
	"os"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
	"github.com/dlami-bake/packer-plugin-dlami/test/simfleet"
)

// machineOptions are what --simhost passes to the machine backend.
type machineOptions struct {
	SimhostDir string
	StateRoot  string
	Log        io.Writer
}

// newMachines is the simulated-host backend: test/simfleet. It is the
// only place the command names that package.
func newMachines(o machineOptions) (awsfake.Machines, error) {
	return simfleet.New(simfleet.Options{SimhostDir: o.SimhostDir, StateRoot: o.StateRoot, Log: o.Log})
}

// openMachines resolves the --simhost options and builds the backend. When
// it creates the state root itself it returns its path, for removal after a
// clean shutdown.
func openMachines(simhostDir, stateRoot string, log io.Writer, build func(machineOptions) (awsfake.Machines, error)) (awsfake.Machines, string, error) {
	if simhostDir == "" {
		dir, err := simfleet.LocateSimhost(".")
		if err != nil {
			return nil, "", fmt.Errorf("--simhost: %w (or pass --simhost-dir)", err)
		}
		simhostDir = dir
	}
	created := ""
	if stateRoot == "" {
		// Short on purpose: every layer path of an AMI goes into one
		// overlayfs mount option.
		dir, err := os.MkdirTemp("", "dlami-fleet-")
		if err != nil {
			return nil, "", fmt.Errorf("--simhost: creating the state root: %w", err)
		}
		stateRoot, created = dir, dir
	}
	m, err := build(machineOptions{SimhostDir: simhostDir, StateRoot: stateRoot, Log: log})
	if err != nil {
		if created != "" {
			_ = os.RemoveAll(created)
		}
		return nil, "", fmt.Errorf("--simhost: %w", err)
	}
	return m, created, nil
}

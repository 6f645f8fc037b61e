package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// recordingMachines is a Machines backend that boots nothing and records
// every call, so tests can see what the command asked of it.
type recordingMachines struct {
	mu    sync.Mutex
	calls []string
	opts  machineOptions
}

func (r *recordingMachines) record(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
}

func (r *recordingMachines) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func (r *recordingMachines) Start(_ context.Context, m awsfake.MachineSpec) error {
	r.record("Start %s %s %s", m.InstanceID, m.InstanceType, m.Address)
	return nil
}

func (r *recordingMachines) Stop(_ context.Context, id string) error {
	r.record("Stop %s", id)
	return nil
}

func (r *recordingMachines) Snapshot(_ context.Context, id string) (string, error) {
	r.record("Snapshot %s", id)
	return "/layers/" + id, nil
}

func (r *recordingMachines) Terminate(_ context.Context, id string) error {
	r.record("Terminate %s", id)
	return nil
}

func (r *recordingMachines) SetNetwork(_ context.Context, id string, n awsfake.MachineNetwork) error {
	r.record("SetNetwork %s %v %t", id, n.EFACards, n.EFATraffic)
	return nil
}

func (r *recordingMachines) Close(context.Context) error {
	r.record("Close")
	return nil
}

// testDeps hands m to --simhost (nil: --simhost fails) and claims root.
func testDeps(m *recordingMachines) deps {
	return deps{
		newMachines: func(o machineOptions) (awsfake.Machines, error) {
			if m == nil {
				return nil, errors.New("this test has no machine backend")
			}
			m.opts = o
			return m, nil
		},
		geteuid: func() int { return 0 },
	}
}

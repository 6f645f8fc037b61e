package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/instancetype"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
)

// DescribeFunc reads EC2's description of an instance type (ec2:DescribeInstanceTypes). The
// provisioner and the post-processor supply it with their AWS access; nil means the run has
// none, and the checks judge from the profile and the PCI inventory.
type DescribeFunc func(ctx context.Context, instanceType string) (instancetype.Description, error)

// describeTimeout bounds the one DescribeInstanceTypes call of a run.
const describeTimeout = 30 * time.Second

// ec2Description is a run's one reading of DescribeInstanceTypes, for one instance type.
type ec2Description struct {
	once    sync.Once
	typ     string
	desc    *instancetype.Description
	problem string
}

// describe reads the type once per run; later calls for the same type reuse the answer.
func (b *Bake) describe(ctx context.Context, typ string) (*instancetype.Description, string) {
	typ = strings.TrimSpace(typ)
	if b.opt.DescribeType == nil || typ == "" {
		if b.opt.DescribeType != nil {
			return nil, "the host named no instance type (DMI product_name, IMDSv2) and none is configured (instance_type)"
		}
		return nil, ""
	}
	d := &b.ec2
	d.once.Do(func() {
		d.typ = typ
		ctx, cancel := context.WithTimeout(ctx, describeTimeout)
		defer cancel()
		desc, err := b.opt.DescribeType(ctx, typ)
		if err != nil {
			d.problem = err.Error()
			if !errors.Is(err, instancetype.ErrDenied) {
				d.problem = "DescribeInstanceTypes failed: " + d.problem
			}
			b.ui.Say("dlami: " + d.problem + ": the instance type is judged from its profile, else the PCI inventory")
			return
		}
		d.desc = &desc
		b.ui.Say("dlami: instance type " + typ + ": " + describeLine(desc))
	})
	if d.typ != typ {
		return nil, fmt.Sprintf("DescribeInstanceTypes was read for %s, not %s", d.typ, typ)
	}
	return d.desc, d.problem
}

func describeLine(d instancetype.Description) string {
	return fmt.Sprintf("%s, %d x %s %s %d MiB, local NVMe %v (from DescribeInstanceTypes)", strings.Join(d.Architectures, "/"), d.GPUCount, d.GPUManufacturer, d.GPUName, d.GPUMemoryMiB, d.NVMe)
}

// checkPlatform runs before the guard and any layer: the host's `uname -m`, the AMI's
// architecture (expect.architecture, from the data source) and the instance type's
// SupportedArchitectures (DescribeInstanceTypes, else the profile) must agree, and the type
// must not be a fractional-GPU one. A mismatch fails the bake here, naming the setting to
// change: nothing a layer does can fix it.
func (b *Bake) checkPlatform(ctx context.Context) error {
	// Named, so that a mismatch is reported as stage:platform check, not a nameless stage.
	b.stage("platform check")
	rctx, cancel := context.WithTimeout(ctx, buildInstanceReadTimeout)
	in, machine, err := probe.Platform(rctx, b.host)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("reading the host's instance type and architecture: %w", err)
	}
	typ := strings.TrimSpace(in.Type)
	if typ == "" {
		typ = strings.TrimSpace(b.opt.InstanceType)
	}
	desc, _ := b.describe(ctx, typ)
	var supported instancetype.Supported
	switch {
	case desc != nil:
		supported = instancetype.FromEC2(desc.Architectures)
		if err := desc.Refuse("instance_type"); err != nil {
			return err
		}
	default:
		t := checks.Resolve(b.run.Host, b.opt.Checks, typ)
		if t.Profile != nil && t.Profile.Arch != "" {
			supported = instancetype.Supported{Arches: []string{t.Profile.Arch}, From: "the built-in profile of " + t.Profile.InstanceType}
		}
	}
	if !machine.OK() {
		if len(supported.Arches) > 0 || b.opt.Checks.Expect.Architecture != "" {
			return fmt.Errorf("uname -m unreadable, so the host's architecture cannot be compared with the instance type's: %s", machine.Problem)
		}
		return nil
	}
	if err := instancetype.JudgeArchitecture(orUnknown(typ), supported,
		instancetype.ArchWitness{Arch: b.opt.Checks.Expect.Architecture, What: "the AMI (expect.architecture)", Setting: "the data source's architecture"},
		instancetype.ArchWitness{Arch: machine.Value, What: "the host (uname -m)"}); err != nil {
		return fmt.Errorf("before any layer: %w", err)
	}
	return nil
}

func orUnknown(typ string) string {
	if typ == "" {
		return "the instance type"
	}
	return typ
}

// withEC2 adds EC2's description of the target's instance type.
func (b *Bake) withEC2(ctx context.Context, t checks.Target) checks.Target {
	t.EC2, t.EC2Problem = b.describe(ctx, t.InstanceType)
	return t
}

package engine

import (
	"context"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// containerTest is the container-gpu test: the container toolkit read without a container,
// each engine's configuration, then, with container_check.image or .rootfs set, one container
// with all GPUs per engine. It runs before DCGM's diagnostics (which take the GPUs). The
// toolkit, Docker and containerd versions join the report's manifest and so the bill of
// materials.
func (b *Bake) containerTest(ctx context.Context) error {
	o := b.opt.Checks.Function.Container
	c := &b.run.Containers
	switch {
	case o.Skip:
		c.NotRun = "container_check.skip = true"
		return nil
	case b.target.Skips(result.ContainerGPU):
		c.NotRun = "skip_checks names container-gpu"
		return nil
	case !b.gpuOK():
		c.NotRun = "the GPU checks failed"
		return nil
	}
	b.stage("GPU containers: the container toolkit and nvidia-smi -L in a container")
	start := b.now()
	got, err := probe.ContainerToolkit(ctx, b.host, b.probeOptions())
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		got.HostGPUs = facts.Unread[[]facts.ListedGPU](err.Error(), "")
	}
	got.Image, got.Rootfs = o.Image, o.Rootfs
	got.IMEX = b.target.ExpectsIMEXChannel()
	if err == nil && o.Judges() {
		rerr := probe.ContainerGPURuns(ctx, b.host, &got, probe.ContainerRunOptions{Image: o.Image, Rootfs: o.Rootfs, Namespace: o.Namespace, Timeout: o.Timeout, IMEXChannel: got.IMEX})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if rerr != nil {
			for i := range got.Engines {
				if got.Engines[i].Judged() && got.Engines[i].Run == nil {
					got.Engines[i].Run = &facts.ContainerGPURun{ExitCode: -1, Output: rerr.Error(),
						GPUs: facts.Unread[[]facts.ListedGPU](rerr.Error(), "")}
				}
			}
		}
	}
	got.Took = b.now().Sub(start)
	*c = got
	if m := containerManifest(got); len(m) > 0 {
		b.update(func(r *report.Report) { r.Manifest = mergeManifest(r.Manifest, m) })
	}
	return nil
}

// containerManifest is the container stack's versions, for the bill of materials:
// nvidia_container_toolkit, docker, containerd, podman (a key is omitted when unread).
func containerManifest(c facts.ContainerRun) map[string]string {
	m := map[string]string{}
	if c.ToolkitVersion.OK() && c.ToolkitVersion.Value != "" {
		m["nvidia_container_toolkit"] = c.ToolkitVersion.Value
	}
	for _, e := range c.Engines {
		if e.Present && e.Version.OK() && strings.TrimSpace(e.Version.Value) != "" {
			m[e.Name] = e.Version.Value
		}
	}
	return m
}

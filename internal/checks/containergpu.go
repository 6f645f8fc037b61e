package checks

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/constraint"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/imexctl"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

func init() {
	register(Entry{
		ID: result.ContainerGPU, Phase: PhaseFunction, Family: "gpu", Order: 490, Judge: judgeContainerGPU,
		Doc:   "GPU containers work on the image as the layers left it: `nvidia-container-cli info` lists exactly the host's GPU UUIDs; `nvidia-ctk cdi list` names `nvidia.com/gpu=all` and every GPU, a CDI spec is present and `nvidia-cdi-refresh.path` is enabled (toolkit 1.18 and later); each engine present and enabled (Docker, containerd, podman) registers the NVIDIA runtime or CDI (containerd's CRI config: the `nvidia` runtime); and a container started with all GPUs on each engine (`docker run --gpus all`, `ctr run` with `--device nvidia.com/gpu=all` or `--gpus`, `podman run --device nvidia.com/gpu=all`) runs `nvidia-smi -L` and sees exactly the host's GPU UUIDs. It never pulls: the container runs from `container_check.image` (already in each engine's store) or `container_check.rootfs` (`ctr run --rootfs`); without either it warns `not judged: no local image`, never passes. Where `imex` resolves to `host` (GB200 trays by default), each container also sees IMEX channel 0 (`/dev/nvidia-caps-imex-channels/channel0`). Known failure messages are named with their cause and fix",
		Reads: "`nvidia-smi -L`, `nvidia-ctk --version`, `nvidia-container-cli info`, `nvidia-ctk cdi list`, `/etc/cdi`, `/var/run/cdi`, `systemctl is-enabled nvidia-cdi-refresh.path`, `docker info`, `ctr version`, `containerd config dump`, `podman version`, a container's `nvidia-smi -L`",
	})
}

// cdiRefreshSince is the toolkit release that ships nvidia-cdi-refresh.path and .service,
// which regenerate /var/run/cdi/nvidia.yaml at boot and on driver changes (NCT-CDI).
var cdiRefreshSince = constraint.MustParse(">= 1.18.0")

// judgeContainerGPU judges the container-gpu test. Every problem found fails it, each with its
// cause where the message is a known one; with none found and nothing to start a container
// from, it warns and names the setting that makes it judge.
func judgeContainerGPU(f facts.Run, t Target) result.Check {
	id := result.ContainerGPU
	c := f.Containers
	o := t.Function.Container
	expected := "the toolkit sees every GPU, each enabled engine has the NVIDIA runtime or CDI, and a container with all GPUs sees exactly the host's GPU UUIDs"
	if c.IMEX {
		expected += " and IMEX channel 0 (imex = \"host\")"
	}
	if c.NotRun != "" {
		return check(id, result.Skip, "", "", "", "not run: "+c.NotRun, "")
	}
	var fails, evs []string
	fail := func(msg, ev string) {
		fails = append(fails, msg)
		if ev != "" {
			evs = append(evs, textcut.Head(ev, 1000))
		}
	}
	if !c.HostGPUs.OK() {
		fail("the host's own `nvidia-smi -L` could not be read: "+c.HostGPUs.Problem, c.HostGPUs.Evidence)
	}
	host := listedUUIDs(c.HostGPUs.Value)

	// The toolkit, without a container.
	toolkit := ""
	switch {
	case !c.ToolkitVersion.OK():
		fail("the NVIDIA Container Toolkit's nvidia-ctk could not be read: "+c.ToolkitVersion.Problem+" (install nvidia-container-toolkit)", c.ToolkitVersion.Evidence)
	default:
		toolkit = c.ToolkitVersion.Value
	}
	if !c.CLIInfo.OK() {
		fail(withCause("`nvidia-container-cli info` failed: "+c.CLIInfo.Problem, c.CLIInfo.Problem+"\n"+c.CLIInfo.Evidence), c.CLIInfo.Evidence)
	} else if c.HostGPUs.OK() {
		if d := uuidDiff(host, c.CLIInfo.Value.UUIDs()); d != "" {
			fail("`nvidia-container-cli info` does not list the host's GPUs: "+d, c.CLIInfo.Evidence)
		}
	}
	refresh := false
	if toolkit != "" {
		refresh, _ = cdiRefreshSince.Check(toolkit)
	}
	cdiNeeded := refresh
	for _, e := range c.Engines {
		if e.Judged() && usesCDI(e) {
			cdiNeeded = true
		}
	}
	switch {
	case !c.CDIList.OK():
		fail(withCause("`nvidia-ctk cdi list` failed: "+c.CDIList.Problem, c.CDIList.Problem+"\n"+c.CDIList.Evidence), c.CDIList.Evidence)
	case cdiNeeded:
		if msg := cdiListProblem(c.CDIList.Value, c.HostGPUs.Value); msg != "" && c.HostGPUs.OK() {
			fail(msg+" (enable nvidia-cdi-refresh.path, or run `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` in a layer)", c.CDIList.Evidence)
		}
	}
	if refresh {
		switch {
		case !c.CDISpecs.OK():
			fail("the CDI spec directories could not be read: "+c.CDISpecs.Problem, c.CDISpecs.Evidence)
		case len(c.CDISpecs.Value) == 0:
			fail(fmt.Sprintf("toolkit %s: no CDI spec in /etc/cdi or /var/run/cdi (nvidia-cdi-refresh.service writes /var/run/cdi/nvidia.yaml at boot)", toolkit), "")
		}
		switch {
		case !c.CDIRefresh.OK():
			fail("nvidia-cdi-refresh.path's state could not be read: "+c.CDIRefresh.Problem, c.CDIRefresh.Evidence)
		case c.CDIRefresh.Value != "enabled":
			fail(fmt.Sprintf("toolkit %s ships nvidia-cdi-refresh.path, but it is %s: the CDI spec is not regenerated at boot or after a driver change (systemctl enable nvidia-cdi-refresh.path)", toolkit, c.CDIRefresh.Value), "")
		}
	}

	// The engines.
	var judged, ran []string
	for _, e := range c.Engines {
		if e.NotRun != "" && !e.Present {
			fail("the container engines could not be read: "+e.NotRun, "")
			continue
		}
		if !e.Judged() {
			continue
		}
		judged = append(judged, e.Name)
		if msg, ev := engineConfigProblem(e); msg != "" {
			fail(msg, ev)
		}
		if e.Run == nil {
			continue
		}
		ran = append(ran, e.Name)
		if msg := containerRunProblem(e, o, host, c.HostGPUs.OK()); msg != "" {
			fail(msg, e.Run.Command+"\n"+e.Run.Output)
		}
		if c.IMEX && !e.Run.ImageMissing {
			if msg := judgeContainerIMEX(e); msg != "" {
				ev := ""
				if e.Run.IMEXChannels != nil {
					ev = e.Run.IMEXCommand + "\n" + e.Run.IMEXChannels.Evidence
				}
				fail(msg, ev)
			}
		}
	}

	ev := strings.Join(evs, "\n")
	switch {
	case len(fails) > 0:
		return check(id, result.Fail, BasisRule, expected, fmt.Sprintf("%d problem(s)", len(fails)), strings.Join(fails, "; "), ev)
	case len(judged) == 0:
		return check(id, result.Warn, "", expected, "no container engine enabled",
			"not judged: no container engine (docker, containerd, podman) is installed and enabled on the image, so no GPU container was started; the toolkit itself sees every GPU", "")
	case !o.Judges():
		return check(id, result.Warn, "", expected, "no container started",
			fmt.Sprintf("not judged: no local image: set %s { image = \"...\" } to an image already in the engines' stores (a layer loads it: the check never pulls), or %s { rootfs = \"...\" } for `ctr run --rootfs`; the toolkit and the configuration of %s were judged and are fine",
				settings.ContainerCheckSetting, settings.ContainerCheckSetting, strings.Join(judged, ", ")), "")
	case len(ran) < len(judged):
		return check(id, result.Warn, "", expected, "not every engine started a container",
			fmt.Sprintf("not judged on every engine: %s started a container with all GPUs, %s did not (%s rootfs runs on containerd only: set %s.image for the others)",
				orNone(ran), strings.Join(notIn(judged, ran), ", "), settings.ContainerCheckSetting, settings.ContainerCheckSetting), "")
	}

	actual := fmt.Sprintf("%d GPUs in a container on %s (toolkit %s)", len(host), strings.Join(ran, ", "), toolkit)
	if c.IMEX {
		actual += ", IMEX channel 0 in each"
	}
	return check(id, result.Pass, BasisRule, expected, actual, "", "")
}

// judgeContainerIMEX judges, with imex = "host", that a container started as the GPU one was
// sees IMEX channel 0 (/dev/nvidia-caps-imex-channels/channel0): without it fabric-handle
// cuMemCreate fails with CUDA_ERROR_NOT_PERMITTED inside the job (NVIDIA's IMEX guide,
// imexchannels.html). The toolkit's CDI spec lists the host's channels
// (shared/docs/grace-blackwell.md 1.5), so a spec written before channel 0 existed, or the
// legacy runtime without NVIDIA_IMEX_CHANNELS, gives a container none. An unread listing
// fails: it proves nothing.
func judgeContainerIMEX(e facts.ContainerEngine) string {
	run := e.Run
	switch {
	case run == nil || run.IMEXChannels == nil:
		return e.Name + ": the IMEX channels were not listed in a container"
	case !run.IMEXChannels.OK():
		return fmt.Sprintf("%s: the container's IMEX channels could not be listed (%s): %s", e.Name, run.IMEXCommand, run.IMEXChannels.Problem)
	case !slices.Contains(run.IMEXChannels.Value, "channel0"):
		seen := "no " + imexctl.ChannelDir
		if len(run.IMEXChannels.Value) > 0 {
			seen = strings.Join(run.IMEXChannels.Value, ", ")
		}
		return fmt.Sprintf("%s: the container sees %s, not IMEX channel 0 (imex = \"host\"): multi-node NVLink memory in the job fails with CUDA_ERROR_NOT_PERMITTED; create channel 0 before the CDI spec is generated (nvidia-ctk cdi generate, or nvidia-cdi-refresh after boot), or pass NVIDIA_IMEX_CHANNELS=0 on the legacy runtime", e.Name, seen)
	}
	return ""
}

// usesCDI reports whether engine e resolves GPUs through CDI rather than the NVIDIA runtime.
func usesCDI(e facts.ContainerEngine) bool {
	if e.Name == facts.EnginePodman {
		return true
	}
	return e.Config.OK() && e.Config.Value.CDI && !e.Config.Value.HasRuntime("nvidia")
}

// engineConfigProblem says what is wrong with e's configuration, "" when nothing.
func engineConfigProblem(e facts.ContainerEngine) (string, string) {
	if !e.Config.OK() {
		return withCause(e.Name+": its configuration could not be read: "+e.Config.Problem, e.Config.Evidence), e.Config.Evidence
	}
	cfg := e.Config.Value
	switch e.Name {
	case facts.EngineDocker:
		if !cfg.HasRuntime("nvidia") && !cfg.CDI {
			return fmt.Sprintf("docker registers neither the nvidia runtime nor CDI (runtimes: %s): `--gpus all` fails with `could not select device driver` (cause: the toolkit is not registered with docker; fix: `nvidia-ctk runtime configure --runtime=docker` and restart docker)", orNone(cfg.Runtimes)), ""
		}
	case facts.EngineContainerd:
		if !cfg.HasRuntime("nvidia") {
			return fmt.Sprintf("containerd's CRI configuration registers no nvidia runtime (runtimes: %s): kubelet's GPU pods get no GPU (cause: a containerd config written after `nvidia-ctk runtime configure`, e.g. a kubelet-style config.toml, replaced it; fix: run `nvidia-ctk runtime configure --runtime=containerd` after writing /etc/containerd/config.toml and restart containerd)", orNone(cfg.Runtimes)), ""
		}
	}
	return "", ""
}

// containerRunProblem says what is wrong with e's container run, "" when nothing.
func containerRunProblem(e facts.ContainerEngine, o settings.ContainerCheck, host []string, hostOK bool) string {
	r := e.Run
	switch {
	case r.ImageMissing:
		return fmt.Sprintf("%s: %s.image %q is not in its local store, and the check never pulls: load it in a layer (`docker pull`/`docker load`, `ctr -n %s image import`, `podman load`)", e.Name, settings.ContainerCheckSetting, o.Image, o.Namespace)
	case r.TimedOut:
		return fmt.Sprintf("%s: the container did not finish within %s.timeout (%s)", e.Name, settings.ContainerCheckSetting, o.Timeout)
	case r.ExitCode != 0:
		return withCause(fmt.Sprintf("%s: the container with all GPUs failed (exit %d): %s", e.Name, r.ExitCode, textcut.Head(strings.TrimSpace(r.Output), 400)), r.Output)
	case !r.GPUs.OK():
		return withCause(fmt.Sprintf("%s: the container's `nvidia-smi -L` could not be read: %s", e.Name, r.GPUs.Problem), r.Output)
	case !hostOK:
		return ""
	}
	if d := uuidDiff(host, listedUUIDs(r.GPUs.Value)); d != "" {
		return fmt.Sprintf("%s: the container does not see the host's GPUs: %s", e.Name, d)
	}
	return ""
}

// cdiListProblem says what `nvidia-ctk cdi list` lacks: nvidia.com/gpu=all and one device per
// host GPU (by index, or by UUID where only UUID names are generated).
func cdiListProblem(l facts.CDIList, host []facts.ListedGPU) string {
	var lacks []string
	if !l.Has(facts.CDIGPUKind, "all") {
		lacks = append(lacks, facts.CDIGPUKind+"=all")
	}
	idx := l.GPUIndexes()
	uuids := l.GPUUUIDs()
	for _, g := range host {
		if !slices.Contains(idx, g.Index) && !slices.Contains(uuids, g.UUID) {
			lacks = append(lacks, fmt.Sprintf("%s=%d", facts.CDIGPUKind, g.Index))
		}
	}
	if len(lacks) == 0 {
		return ""
	}
	return fmt.Sprintf("`nvidia-ctk cdi list` lacks %s (%d CDI devices listed)", strings.Join(lacks, ", "), len(l.Devices))
}

func listedUUIDs(gs []facts.ListedGPU) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.UUID
	}
	return out
}

// uuidDiff compares the UUIDs a reading lists with the host's: "" when they are the same set.
func uuidDiff(host, got []string) string {
	var missing, extra []string
	for _, u := range host {
		if !slices.Contains(got, u) {
			missing = append(missing, u)
		}
	}
	for _, u := range got {
		if !slices.Contains(host, u) {
			extra = append(extra, u)
		}
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("missing %s", strings.Join(missing, ", ")))
	}
	if len(extra) > 0 {
		parts = append(parts, fmt.Sprintf("not the host's %s", strings.Join(extra, ", ")))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("%d of the host's %d GPUs seen; %s", len(got)-len(extra), len(host), strings.Join(parts, "; "))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

package facts

import (
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvcontainercli"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvctk"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
)

// The parsed shapes of the container toolkit's tools (see their parsers).
type (
	ContainerCLIInfo   = nvcontainercli.Info
	ContainerCLIDevice = nvcontainercli.Device
	CDIList            = nvctk.List
	ListedGPU          = nvsmi.Listed
)

// CDIGPUKind is the CDI kind of NVIDIA's GPUs ("nvidia.com/gpu").
const CDIGPUKind = nvctk.GPUKind

// Container engines the container-gpu test knows.
const (
	EngineDocker     = "docker"
	EngineContainerd = "containerd"
	EnginePodman     = "podman"
)

// ContainerRun is the container-gpu test: the toolkit read without any container (the
// image-free probes), each engine's configuration, and a container started with all GPUs on
// each engine, or why not.
type ContainerRun struct {
	// NotRun says why the engine did not run the test at all ("" when it ran).
	NotRun string
	// Image and Rootfs are what the containers ran from (container_check.image, .rootfs);
	// both "" when neither is set: the runs are not judged, and the check says which setting
	// makes it judge.
	Image, Rootfs string
	// IMEX is true when the host is expected to give containers IMEX channel 0 (imex
	// resolves to "host"): each run also lists the channels a container sees.
	IMEX bool
	// HostGPUs is the host's own `nvidia-smi -L`: the GPUs every container must see.
	HostGPUs Fact[[]ListedGPU]
	// ToolkitVersion is nvidia-ctk's version ("1.20.1").
	ToolkitVersion Fact[string]
	// CLIInfo is `nvidia-container-cli info`: the library the prestart hook uses.
	CLIInfo Fact[ContainerCLIInfo]
	// CDIList is `nvidia-ctk cdi list`.
	CDIList Fact[CDIList]
	// CDISpecs are the CDI spec files in /etc/cdi and /var/run/cdi.
	CDISpecs Fact[[]string]
	// CDIRefresh is `systemctl is-enabled nvidia-cdi-refresh.path`'s word ("enabled",
	// "disabled", "not-found"): the unit toolkit 1.18+ ships to regenerate the spec.
	CDIRefresh Fact[string]
	// Engines are the container engines found on the host, in docker, containerd, podman order.
	Engines []ContainerEngine
	Took    time.Duration
}

// ContainerEngine is one engine: whether it is there and enabled, its version and
// configuration, and its container's run.
type ContainerEngine struct {
	Name string
	// Present is true when its command is installed; Enabled is its unit's `systemctl
	// is-enabled` word ("" for podman, which has no daemon).
	Present bool
	Enabled string
	// Version is the engine's (server) version ("29.1.3", "2.1.4").
	Version Fact[string]
	// Config is what its configuration says of the NVIDIA runtime and CDI.
	Config Fact[EngineConfig]
	// Run is the container started with all GPUs; nil when none was started, and NotRun says
	// why.
	Run    *ContainerGPURun
	NotRun string
}

// Judged reports whether the engine is one the check judges: installed and, for a daemon,
// enabled (a disabled engine runs nothing on the image).
func (e ContainerEngine) Judged() bool {
	if !e.Present {
		return false
	}
	return e.Name == EnginePodman || e.Enabled == "enabled" || e.Enabled == "enabled-runtime" || e.Enabled == "static" || e.Enabled == "alias" || e.Enabled == "indirect"
}

// EngineConfig is what an engine's configuration says of GPUs: the runtimes it registers
// (docker's `Runtimes`, containerd's CRI runtimes) and whether it resolves CDI devices.
type EngineConfig struct {
	Runtimes       []string
	DefaultRuntime string
	CDI            bool
}

// HasRuntime reports whether name is registered.
func (c EngineConfig) HasRuntime(name string) bool {
	for _, r := range c.Runtimes {
		if r == name {
			return true
		}
	}
	return false
}

// ContainerGPURun is one container started with all GPUs, running `nvidia-smi -L`.
type ContainerGPURun struct {
	// Command is the command line, as evidence ("docker run --rm --pull=never --gpus all IMAGE
	// nvidia-smi -L").
	Command string
	// ImageMissing is true when the image is not in the engine's local store (the check never
	// pulls).
	ImageMissing bool
	ExitCode     int
	TimedOut     bool
	// Output is what the engine and the container printed.
	Output string
	// GPUs is the container's `nvidia-smi -L`, or why it could not be read.
	GPUs Fact[[]ListedGPU]
	// IMEXChannels are the IMEX channels a second container started the same way lists in
	// /dev/nvidia-caps-imex-channels (empty: the directory is not there); nil when not asked
	// (ContainerRun.IMEX false). IMEXCommand is its command line.
	IMEXChannels *Fact[[]string]
	IMEXCommand  string
}

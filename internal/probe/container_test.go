package probe

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
)

func TestParseEngines(t *testing.T) {
	out := "docker present yes\ndocker enabled enabled\ndocker version 29.1.3\ndocker runtimes io.containerd.runc.v2 nvidia runc \ndocker default-runtime runc\ndocker cdi true\n" +
		"containerd present yes\ncontainerd enabled disabled\ncontainerd version v2.1.4\ncontainerd runtimes runc\ncontainerd default-runtime runc\ncontainerd cdi true\n" +
		"podman present no\ndone\n"
	es := parseEngines(out)
	if len(es) != 3 {
		t.Fatalf("engines %+v", es)
	}
	d, c, p := es[0], es[1], es[2]
	if !d.Judged() || d.Version.Value != "29.1.3" || !d.Config.Value.HasRuntime("nvidia") || !d.Config.Value.CDI {
		t.Errorf("docker %+v", d)
	}
	if c.Judged() || c.Version.Value != "2.1.4" || c.Config.Value.HasRuntime("nvidia") {
		t.Errorf("containerd %+v (disabled: not judged; no nvidia runtime)", c)
	}
	if p.Present || p.Judged() {
		t.Errorf("podman %+v", p)
	}
	// An answer cut short leaves every fact unread, never a guess.
	for _, e := range parseEngines(strings.TrimSuffix(out, "done\n")) {
		if e.Config.OK() || e.Version.OK() {
			t.Errorf("%s read from an unfinished answer: %+v", e.Name, e)
		}
	}
	// A docker whose info failed has no configuration to judge.
	broken := parseEngines("docker present yes\ndocker enabled enabled\ndocker error version: Cannot connect to the Docker daemon\ndocker error info: Cannot connect to the Docker daemon\ncontainerd present no\npodman present no\ndone\n")
	if broken[0].Config.OK() || !strings.Contains(broken[0].Config.Problem, "Cannot connect") {
		t.Errorf("docker %+v", broken[0])
	}
}

func TestParseUnitFileState(t *testing.T) {
	for in, want := range map[string]string{"enabled\n": "enabled", "disabled": "disabled", "masked-runtime\n": "masked-runtime",
		"Failed to get unit file state for nvidia-cdi-refresh.path: No such file or directory\n": "not-found"} {
		if got, err := parseUnitFileState(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "enabled-ish", "Failed to connect to bus: No such file or directory", "sudo: a password is required"} {
		if got, err := parseUnitFileState(bad); err == nil {
			t.Errorf("%q read as the state %q", bad, got)
		}
	}
}

// Whatever systemctl prints, the state read is one of its unit file states or an error.
func FuzzParseUnitFileState(f *testing.F) {
	f.Add("enabled\n")
	f.Add("Failed to get unit file state for x: No such file or directory")
	f.Fuzz(func(t *testing.T, out string) {
		if w, err := parseUnitFileState(out); err == nil && !unitFileStates[w] && w != "not-found" {
			t.Errorf("%q read as %q", out, w)
		}
	})
}

func TestContainerRunCommands(t *testing.T) {
	docker := facts.ContainerEngine{Name: facts.EngineDocker, Present: true, Enabled: "enabled"}
	ctr := facts.ContainerEngine{Name: facts.EngineContainerd, Present: true, Enabled: "enabled",
		Config: facts.Read(facts.EngineConfig{Runtimes: []string{"nvidia"}}, "")}
	o := ContainerRunOptions{Image: "public.ecr.aws/amazonlinux/amazonlinux:2023-minimal", Namespace: "default"}
	cmd, ok := containerRunCommand(docker, 8, o, containerListGPUs)
	if !ok || !strings.Contains(cmd.Shell, `engine='\''docker'\''`) || !strings.Contains(cmd.Shell, "--pull=never --gpus all") || strings.Contains(cmd.Shell, " pull ") {
		t.Errorf("docker: %v %q", ok, cmd.Shell)
	}
	cmd, _ = containerRunCommand(ctr, 2, o, containerListGPUs)
	if !strings.Contains(cmd.Shell, `gpu_flags='\''--gpus 0 --gpus 1'\''`) {
		t.Errorf("containerd without CDI: %q", cmd.Shell)
	}
	ctr.Config.Value.CDI = true
	if cmd, _ = containerRunCommand(ctr, 2, o, containerListGPUs); !strings.Contains(cmd.Shell, `gpu_flags='\''--device nvidia.com/gpu=all'\''`) {
		t.Errorf("containerd with CDI: %q", cmd.Shell)
	}
	if _, ok := containerRunCommand(docker, 8, ContainerRunOptions{Rootfs: "/opt/rootfs"}, containerListGPUs); ok {
		t.Error("docker cannot run a rootfs: no command expected")
	}
	if _, ok := containerRunCommand(docker, 8, ContainerRunOptions{}, containerListGPUs); ok {
		t.Error("no image: no command expected (the check never pulls)")
	}
	docker.Enabled = "disabled"
	if _, ok := containerRunCommand(docker, 8, o, containerListGPUs); ok {
		t.Error("a disabled engine is not judged")
	}
}

func TestParseContainerRun(t *testing.T) {
	sections := map[string]bundle.Section{
		"container.run.docker":     {Output: containerImageMissing + "\n"},
		"container.run.containerd": {Output: "GPU 0: NVIDIA B200 (UUID: GPU-a)\nGPU 1: NVIDIA B200 (UUID: GPU-b)\n"},
		"container.run.podman":     {Output: "Error: nvidia-container-cli: initialization error: nvml error: driver not loaded", ExitCode: 126},
	}
	if r := parseContainerRun(sections, "container.run.docker", "x"); !r.ImageMissing || r.GPUs.OK() {
		t.Errorf("docker %+v", r)
	}
	if r := parseContainerRun(sections, "container.run.containerd", "x"); !r.GPUs.OK() || len(r.GPUs.Value) != 2 {
		t.Errorf("containerd %+v", r)
	}
	if r := parseContainerRun(sections, "container.run.podman", "x"); r.GPUs.OK() || r.ExitCode != 126 || !strings.Contains(r.Output, "driver not loaded") {
		t.Errorf("podman %+v", r)
	}
}

// A container's IMEX listing: channel 0 read; a directory the container lacks is an empty
// list (a finding, not unreadable); an engine error or a stray line leaves it unread.
func TestParseContainerChannels(t *testing.T) {
	sections := map[string]bundle.Section{
		"container.imex.docker":     {Output: "channel0\n"},
		"container.imex.containerd": {Output: "ls: cannot access '/dev/nvidia-caps-imex-channels': No such file or directory\n", ExitCode: 2},
		"container.imex.podman":     {Output: "Error: crun: executable file not found", ExitCode: 127},
		"container.imex.other":      {Output: "total 0\n"},
	}
	if f := parseContainerChannels(sections, "container.imex.docker"); !f.OK() || len(f.Value) != 1 || f.Value[0] != "channel0" {
		t.Errorf("docker %+v", f)
	}
	if f := parseContainerChannels(sections, "container.imex.containerd"); !f.OK() || len(f.Value) != 0 {
		t.Errorf("containerd %+v", f)
	}
	if f := parseContainerChannels(sections, "container.imex.podman"); f.OK() {
		t.Errorf("podman read %+v", f)
	}
	if f := parseContainerChannels(sections, "container.imex.other"); f.OK() {
		t.Errorf("a stray line read %+v", f)
	}
	if f := parseContainerChannels(sections, "container.imex.absent"); f.OK() {
		t.Errorf("an absent section read %+v", f)
	}
	docker := facts.ContainerEngine{Name: facts.EngineDocker, Present: true, Enabled: "enabled"}
	cmd, ok := containerRunCommand(docker, 4, ContainerRunOptions{Image: "img"}, containerListChannels)
	if !ok || cmd.Name != "container.imex.docker" || !strings.Contains(cmd.Shell, "in_container='\\''ls -1 /dev/nvidia-caps-imex-channels'\\''") {
		t.Errorf("the listing's command %+v", cmd)
	}
}

package checks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pci"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func containerHostGPUs(n int) []facts.ListedGPU {
	gs := make([]facts.ListedGPU, n)
	for i := range gs {
		gs[i] = facts.ListedGPU{Index: i, Name: "NVIDIA B200", UUID: fmt.Sprintf("GPU-%08x", i)}
	}
	return gs
}

func smiL(gs []facts.ListedGPU) string {
	var b strings.Builder
	for _, g := range gs {
		fmt.Fprintf(&b, "GPU %d: %s (UUID: %s)\n", g.Index, g.Name, g.UUID)
	}
	return b.String()
}

// healthyContainers is a host with toolkit 1.20.1, docker (nvidia runtime) and containerd
// (nvidia CRI runtime) enabled, and both containers seeing every GPU.
func healthyContainers() facts.ContainerRun {
	host := containerHostGPUs(8)
	info := facts.ContainerCLIInfo{NVRMVersion: "595.91.07", CUDAVersion: "13.2"}
	list := facts.CDIList{Found: 9}
	for _, g := range host {
		info.Devices = append(info.Devices, facts.ContainerCLIDevice{Index: g.Index, Minor: g.Index, UUID: g.UUID})
		list.Devices = append(list.Devices, fmt.Sprintf("nvidia.com/gpu=%d", g.Index))
	}
	list.Devices = append(list.Devices, "nvidia.com/gpu=all")
	run := func(cmd string) *facts.ContainerGPURun {
		return &facts.ContainerGPURun{Command: cmd, Output: smiL(host), GPUs: facts.Read(host, "")}
	}
	return facts.ContainerRun{
		Image:          "public.ecr.aws/amazonlinux/amazonlinux:2023-minimal",
		HostGPUs:       facts.Read(host, ""),
		ToolkitVersion: facts.Read("1.20.1", ""),
		CLIInfo:        facts.Read(info, ""),
		CDIList:        facts.Read(list, ""),
		CDISpecs:       facts.Read([]string{"/var/run/cdi/nvidia.yaml"}, ""),
		CDIRefresh:     facts.Read("enabled", ""),
		Engines: []facts.ContainerEngine{
			{Name: facts.EngineDocker, Present: true, Enabled: "enabled", Version: facts.Read("29.1.3", ""),
				Config: facts.Read(facts.EngineConfig{Runtimes: []string{"io.containerd.runc.v2", "nvidia", "runc"}, DefaultRuntime: "runc", CDI: true}, ""), Run: run("docker run")},
			{Name: facts.EngineContainerd, Present: true, Enabled: "enabled", Version: facts.Read("2.1.4", ""),
				Config: facts.Read(facts.EngineConfig{Runtimes: []string{"nvidia", "runc"}, DefaultRuntime: "nvidia", CDI: true}, ""), Run: run("ctr run")},
			{Name: facts.EnginePodman},
		},
	}
}

func containerTarget(image string) Target {
	return Target{Checks: settings.Checks{Function: settings.Function{Container: settings.ContainerCheck{Image: image, Namespace: "default"}}}}
}

// failRun makes engine i's container fail with output, as the engine prints it.
func failRun(c facts.ContainerRun, i int, output string) facts.ContainerRun {
	c.Engines[i].Run = &facts.ContainerGPURun{Command: "x", ExitCode: 125, Output: output,
		GPUs: facts.Unread[[]facts.ListedGPU]("exited 125", output)}
	return c
}

func TestJudgeContainerGPU(t *testing.T) {
	img := "public.ecr.aws/amazonlinux/amazonlinux:2023-minimal"
	healthy := healthyContainers
	tests := []struct {
		name    string
		run     func() facts.ContainerRun
		target  Target
		want    result.Status
		mention []string
	}{
		{"healthy", healthy, containerTarget(img), result.Pass, []string{"8 GPUs in a container on docker, containerd"}},
		{"no image: warns, names the setting", func() facts.ContainerRun {
			c := healthy()
			c.Image = ""
			for i := range c.Engines {
				c.Engines[i].Run = nil
			}
			return c
		}, containerTarget(""), result.Warn, []string{"not judged: no local image", "container_check { image", "rootfs"}},
		{"no image and a broken config still fails", func() facts.ContainerRun {
			c := healthy()
			c.Engines[1].Config.Value.Runtimes = []string{"runc"}
			c.Engines[0].Run, c.Engines[1].Run = nil, nil
			return c
		}, containerTarget(""), result.Fail, []string{"containerd's CRI configuration registers no nvidia runtime", "nvidia-ctk runtime configure --runtime=containerd"}},
		{"kubelet-style containerd config without nvidia", func() facts.ContainerRun {
			c := healthy()
			c.Engines[1].Config.Value = facts.EngineConfig{Runtimes: []string{"runc"}, DefaultRuntime: "runc", CDI: true}
			return c
		}, containerTarget(img), result.Fail, []string{"registers no nvidia runtime", "kubelet-style"}},
		{"docker with neither runtime nor CDI", func() facts.ContainerRun {
			c := healthy()
			c.Engines[0].Config.Value = facts.EngineConfig{Runtimes: []string{"runc"}}
			return c
		}, containerTarget(img), result.Fail, []string{"docker registers neither the nvidia runtime nor CDI"}},
		{"container misses a GPU", func() facts.ContainerRun {
			c := healthy()
			seen := containerHostGPUs(7)
			c.Engines[0].Run.GPUs = facts.Read(seen, "")
			return c
		}, containerTarget(img), result.Fail, []string{"docker: the container does not see the host's GPUs", "7 of the host's 8", "missing GPU-00000007"}},
		{"container sees another GPU", func() facts.ContainerRun {
			c := healthy()
			seen := containerHostGPUs(8)
			seen[3].UUID = "GPU-ffffffff"
			c.Engines[1].Run.GPUs = facts.Read(seen, "")
			return c
		}, containerTarget(img), result.Fail, []string{"containerd", "not the host's GPU-ffffffff"}},
		{"image not local", func() facts.ContainerRun {
			c := healthy()
			c.Engines[0].Run = &facts.ContainerGPURun{ImageMissing: true, GPUs: facts.Unread[[]facts.ListedGPU]("missing", "")}
			return c
		}, containerTarget(img), result.Fail, []string{"is not in its local store", "never pulls"}},
		{"timed out", func() facts.ContainerRun {
			c := healthy()
			c.Engines[0].Run = &facts.ContainerGPURun{TimedOut: true, ExitCode: 124, GPUs: facts.Unread[[]facts.ListedGPU]("timed out", "")}
			return c
		}, containerTarget(img), result.Fail, []string{"did not finish within container_check.timeout"}},
		{"nvidia-container-cli misses a GPU", func() facts.ContainerRun {
			c := healthy()
			c.CLIInfo.Value.Devices = c.CLIInfo.Value.Devices[:6]
			return c
		}, containerTarget(img), result.Fail, []string{"`nvidia-container-cli info` does not list the host's GPUs", "6 of the host's 8"}},
		{"cdi list lacks all", func() facts.ContainerRun {
			c := healthy()
			c.CDIList.Value.Devices = c.CDIList.Value.Devices[:8]
			return c
		}, containerTarget(img), result.Fail, []string{"lacks nvidia.com/gpu=all"}},
		{"cdi list lacks a GPU", func() facts.ContainerRun {
			c := healthy()
			c.CDIList.Value.Devices = append(c.CDIList.Value.Devices[:2], c.CDIList.Value.Devices[3:]...)
			return c
		}, containerTarget(img), result.Fail, []string{"lacks nvidia.com/gpu=2"}},
		{"cdi refresh disabled", func() facts.ContainerRun {
			c := healthy()
			c.CDIRefresh.Value = "disabled"
			return c
		}, containerTarget(img), result.Fail, []string{"nvidia-cdi-refresh.path, but it is disabled"}},
		{"no cdi spec", func() facts.ContainerRun {
			c := healthy()
			c.CDISpecs.Value = nil
			return c
		}, containerTarget(img), result.Fail, []string{"no CDI spec in /etc/cdi or /var/run/cdi"}},
		{"toolkit 1.17: no refresh unit needed", func() facts.ContainerRun {
			c := healthy()
			c.ToolkitVersion.Value = "1.17.8"
			c.CDIRefresh.Value = "not-found"
			c.CDISpecs.Value = nil
			return c
		}, containerTarget(img), result.Pass, []string{"toolkit 1.17.8"}},
		{"toolkit missing", func() facts.ContainerRun {
			c := healthy()
			c.ToolkitVersion = facts.Unread[string]("container.toolkit_version: command not found (exit 127)", "")
			return c
		}, containerTarget(img), result.Fail, []string{"install nvidia-container-toolkit"}},
		{"disabled engine is not judged", func() facts.ContainerRun {
			c := healthy()
			c.Engines[1].Enabled = "disabled"
			c.Engines[1].Config.Value.Runtimes = nil
			c.Engines[1].Run = nil
			return c
		}, containerTarget(img), result.Pass, []string{"on docker "}},
		{"no engine enabled warns", func() facts.ContainerRun {
			c := healthy()
			c.Engines[0].Present, c.Engines[1].Present = false, false
			return c
		}, containerTarget(img), result.Warn, []string{"no container engine"}},
		{"rootfs judges containerd only: warns for docker", func() facts.ContainerRun {
			c := healthy()
			c.Engines[0].Run = nil
			return c
		}, Target{Checks: settings.Checks{Function: settings.Function{Container: settings.ContainerCheck{Rootfs: "/opt/rootfs"}}}}, result.Warn, []string{"docker did not"}},
		{"IMEX: channel 0 in every container passes", func() facts.ContainerRun {
			return withChannels(healthy(), facts.Read([]string{"channel0"}, ""))
		}, containerTarget(img), result.Pass, []string{"IMEX channel 0 in each"}},
		{"IMEX: no channel directory in the container fails", func() facts.ContainerRun {
			return withChannels(healthy(), facts.Read([]string(nil), ""))
		}, containerTarget(img), result.Fail, []string{"sees no /dev/nvidia-caps-imex-channels, not IMEX channel 0", "CUDA_ERROR_NOT_PERMITTED", "NVIDIA_IMEX_CHANNELS=0"}},
		{"IMEX: another channel only fails", func() facts.ContainerRun {
			return withChannels(healthy(), facts.Read([]string{"channel1"}, ""))
		}, containerTarget(img), result.Fail, []string{"sees channel1, not IMEX channel 0"}},
		{"IMEX: an unread listing fails", func() facts.ContainerRun {
			return withChannels(healthy(), facts.Unread[[]string]("container.imex.docker: exited 125", ""))
		}, containerTarget(img), result.Fail, []string{"could not be listed", "exited 125"}},
		{"IMEX: expected but never listed fails", func() facts.ContainerRun {
			c := healthy()
			c.IMEX = true
			return c
		}, containerTarget(img), result.Fail, []string{"the IMEX channels were not listed"}},
		{"not run", func() facts.ContainerRun { return facts.ContainerRun{NotRun: "the GPU checks failed"} }, containerTarget(img), result.Skip, []string{"not run: the GPU checks failed"}},
		{"host GPUs unreadable", func() facts.ContainerRun {
			c := healthy()
			c.HostGPUs = facts.Unread[[]facts.ListedGPU]("container.host_gpus: exited 9", "")
			return c
		}, containerTarget(img), result.Fail, []string{"the host's own `nvidia-smi -L` could not be read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := judgeContainerGPU(facts.Run{Containers: tt.run()}, tt.target)
			if c.Status != tt.want {
				t.Fatalf("status %s, want %s: %s", c.Status, tt.want, c.Message)
			}
			for _, m := range tt.mention {
				if !strings.Contains(c.Message+c.Actual, m) {
					t.Errorf("message %q lacks %q", c.Message+" / "+c.Actual, m)
				}
			}
		})
	}
}

// TestJudgeContainerGPUKnownMessages: each failure message of the facts file
// (container-gpu.md section 2.2), as the engine or the tool prints it, fails the check with
// its cause and fix.
func TestJudgeContainerGPUKnownMessages(t *testing.T) {
	img := "public.ecr.aws/amazonlinux/amazonlinux:2023-minimal"
	tests := []struct{ name, output, cause string }{
		{"no runtime registered", `docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].`, "not registered with docker"},
		{"nvidia runtime named not configured", `docker: Error response from daemon: could not select device driver "nvidia" with capabilities: [[gpu]].`, "names the nvidia runtime but it is not configured"},
		{"driver not loaded", "docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: initialization error: nvml error: driver not loaded: unknown.", "the NVIDIA driver is not loaded"},
		{"driver error", "nvidia-container-cli: initialization error: driver error: failed to process request: unknown.", "toolkit and driver do not match"},
		{"file exists", "nvidia-container-cli: mount error: file creation failed: /run/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs/usr/bin/nvidia-smi: file exists: unknown", "amazon-eks-ami#2165"},
		{"imex channel", "nvidia-container-cli: error parsing IMEX info: unsupported IMEX channel value: all: unknown", "amazon-eks-ami#2062"},
		{"read-only application profiles", "createContainer hook #6: exit status 1, stdout: , stderr: time=\"2025-09-18T10:00:00Z\" level=error msg=\"failed to create application profiles directory: mkdirat etc/nvidia/nvidia-application-profiles-rc.d: read-only file system\"", "amazon-eks-ami#2790"},
		{"bpf device rules", "nvidia-container-cli: mount error: failed to add device rules: unable to find any existing device filters attached to the cgroup: bpf_prog_query(BPF_CGROUP_DEVICE) failed: operation not permitted: unknown", "cgroup v2 device rules"},
		{"unresolvable cdi", "Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=all", "the CDI spec does not define"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := judgeContainerGPU(facts.Run{Containers: failRun(healthyContainers(), 0, tt.output)}, containerTarget(img))
			if c.Status != result.Fail {
				t.Fatalf("status %s, want fail", c.Status)
			}
			if !strings.Contains(c.Message, "cause: ") || !strings.Contains(c.Message, tt.cause) || !strings.Contains(c.Message, "fix: ") {
				t.Errorf("message %q does not name the cause %q and a fix", c.Message, tt.cause)
			}
		})
	}
	// The same message from `nvidia-container-cli info`, before any container.
	c := healthyContainers()
	c.CLIInfo = facts.Unread[facts.ContainerCLIInfo]("container.cli_info: exited 1", "nvidia-container-cli: initialization error: nvml error: driver not loaded")
	if got := judgeContainerGPU(facts.Run{Containers: c}, containerTarget(img)); got.Status != result.Fail || !strings.Contains(got.Message, "the NVIDIA driver is not loaded") {
		t.Errorf("cli info's error: %s %q", got.Status, got.Message)
	}
	// An unknown failure fails too, without an invented cause.
	got := judgeContainerGPU(facts.Run{Containers: failRun(healthyContainers(), 1, "ctr: something new went wrong")}, containerTarget(img))
	if got.Status != result.Fail || strings.Contains(got.Message, "cause: ") {
		t.Errorf("unknown failure: %s %q", got.Status, got.Message)
	}
}

// withChannels expects IMEX channel 0 and gives every engine's container the listing ch.
func withChannels(c facts.ContainerRun, ch facts.Fact[[]string]) facts.ContainerRun {
	c.IMEX = true
	for i := range c.Engines {
		if r := c.Engines[i].Run; r != nil {
			listed := ch
			r.IMEXChannels, r.IMEXCommand = &listed, c.Engines[i].Name+" run ... ls -1 /dev/nvidia-caps-imex-channels"
		}
	}
	return c
}

// Containers must see IMEX channel 0 where imex resolves to "host": by default on a GB200
// tray (its profile, or its GPUs on the PCI bus), never by default on a B200 board, and
// wherever the setting says host; never with dra (the DRA driver gives pods their channels).
func TestExpectsIMEXChannel(t *testing.T) {
	gb200, _ := profile.Lookup("p6e-gb200.36xlarge")
	b200, _ := profile.Lookup("p6-b200.48xlarge")
	trayBus := &facts.PCIInventory{GPUs: []pci.Device{{Vendor: 0x10de, Device: 0x2941, Class: 0x030200}, {Vendor: 0x10de, Device: 0x2941, Class: 0x030200}}}
	for _, c := range []struct {
		name string
		t    Target
		want bool
	}{
		{"GB200 profile", Target{Profile: &gb200}, true},
		{"GB200s on the bus, no profile", Target{PCI: trayBus}, true},
		{"B200 profile", Target{Profile: &b200}, false},
		{"B200 with imex = host", Target{Profile: &b200, Checks: settings.Checks{IMEX: settings.IMEXHost}}, true},
		{"GB200 with imex = dra", Target{Profile: &gb200, Checks: settings.Checks{IMEX: settings.IMEXDRA}}, false},
		{"nothing known", Target{}, false},
	} {
		if got := c.t.ExpectsIMEXChannel(); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

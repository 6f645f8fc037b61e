package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// addContainerToolkit gives the fake host the NVIDIA container toolkit 1.20.1 (CDI spec,
// nvidia-cdi-refresh.path enabled) and, with engines, docker and containerd with the nvidia
// runtime, whose containers see every GPU.
func addContainerToolkit(h *fakeHost, gpus int, engines bool) {
	var smi, info, cdi strings.Builder
	fmt.Fprintf(&info, "NVRM version:   595.91.07\nCUDA version:   13.2\n")
	fmt.Fprintf(&cdi, "INFO[0000] Found %d CDI devices\n", gpus+1)
	for i := range gpus {
		uuid := fmt.Sprintf("GPU-3ba54f6%d-1add-0c35-8a7e-18400a7ecab%d", i, i)
		fmt.Fprintf(&smi, "GPU %d: NVIDIA B200 (UUID: %s)\n", i, uuid)
		fmt.Fprintf(&info, "\nDevice Index:   %d\nDevice Minor:   %d\nModel:          NVIDIA B200\nBrand:          Nvidia\nGPU UUID:       %s\nBus Location:   00000000:%02x:00.0\nArchitecture:   10.0\n", i, i, uuid, 0x10+i)
		fmt.Fprintf(&cdi, "nvidia.com/gpu=%d\n", i)
	}
	cdi.WriteString("nvidia.com/gpu=all\n")
	h.hostOut["container.host_gpus"] = fakeSection{out: smi.String()}
	h.hostOut["container.toolkit_version"] = fakeSection{out: "NVIDIA Container Toolkit CLI version 1.20.1\ncommit: 0000000"}
	h.hostOut["container.cli_info"] = fakeSection{out: info.String()}
	h.hostOut["container.cdi_list"] = fakeSection{out: cdi.String()}
	h.hostOut["container.cdi_specs"] = fakeSection{out: "/var/run/cdi/nvidia.yaml"}
	h.hostOut["container.cdi_refresh"] = fakeSection{out: "enabled"}
	if !engines {
		h.hostOut["container.engines"] = fakeSection{out: "docker present no\ncontainerd present no\npodman present no\ndone"}
		return
	}
	h.hostOut["container.engines"] = fakeSection{out: "docker present yes\ndocker enabled enabled\ndocker version 29.1.3\ndocker runtimes io.containerd.runc.v2 nvidia runc \ndocker default-runtime runc\ndocker cdi true\n" +
		"containerd present yes\ncontainerd enabled enabled\ncontainerd version v2.1.4\ncontainerd runtimes nvidia runc\ncontainerd default-runtime nvidia\ncontainerd cdi true\npodman present no\ndone"}
	h.hostOut["container.run.docker"] = fakeSection{out: smi.String()}
	h.hostOut["container.run.containerd"] = fakeSection{out: smi.String()}
}

// TestContainerGPUThroughTheBake: the function phase runs the container-gpu test with
// container_check's image, judges it, and writes the toolkit's and engines' versions into
// the report's manifest; a kubelet-style containerd config without the nvidia runtime fails it
// naming the cause; without an image it warns and is not counted as passed.
func TestContainerGPUThroughTheBake(t *testing.T) {
	tests := []struct {
		name    string
		image   string
		edit    func(h *fakeHost)
		want    result.Status
		mention string
	}{
		{"healthy", "public.ecr.aws/amazonlinux/amazonlinux:2023-minimal", nil, result.Pass, "8 GPUs in a container on docker, containerd"},
		{"kubelet-style containerd config", "public.ecr.aws/amazonlinux/amazonlinux:2023-minimal", func(h *fakeHost) {
			s := h.hostOut["container.engines"]
			s.out = strings.Replace(s.out, "containerd runtimes nvidia runc", "containerd runtimes runc", 1)
			h.hostOut["container.engines"] = s
		}, result.Fail, "containerd's CRI configuration registers no nvidia runtime"},
		{"driver not loaded in the container", "img:1", func(h *fakeHost) {
			h.hostOut["container.run.docker"] = fakeSection{code: 125, out: "docker: Error response from daemon: failed to create task for container: OCI runtime create failed: error running hook #0: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown."}
		}, result.Fail, "the NVIDIA driver is not loaded"},
		{"no image", "", nil, result.Warn, "not judged: no local image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHost(t)
			addContainerToolkit(h, 8, true)
			if tt.edit != nil {
				tt.edit(h)
			}
			o := options(t)
			o.Checks.Function.Container = settings.ContainerCheck{Image: tt.image}
			_ = Run(context.Background(), h, &recordingUI{}, o)
			rep := readReport(t, o.ReportDir)
			c := check(rep, result.ContainerGPU)
			if c.Status != string(tt.want) || !strings.Contains(c.Message+c.Actual, tt.mention) {
				t.Fatalf("container-gpu %s %q / %q, want %s mentioning %q", c.Status, c.Actual, c.Message, tt.want, tt.mention)
			}
			if tt.want == result.Pass {
				doc, err := bom.Decode(h.files[o.ManifestPath])
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range map[string]string{"nvidia_container_toolkit": "1.20.1", "docker": "29.1.3", "containerd": "2.1.4"} {
					if doc.Components[k] != v {
						t.Errorf("bill of materials %s = %q, want %q", k, doc.Components[k], v)
					}
				}
				if doc.Checks == nil || doc.Checks.Function.Container.Image != tt.image {
					t.Errorf("bill of materials' container_check: %+v", doc.Checks)
				}
			}
		})
	}
}

package simhost_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvcontainercli"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvctk"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nvsmi"
)

// containerHost is a B200 prefix tree with the host's nvidia-smi, the toolkit's hook and an
// image loaded into docker's and containerd's stores.
func containerHost(t *testing.T, knobs map[string]string) *host {
	h := newHost(t, "p6-b200.48xlarge", knobs)
	if err := os.Symlink(filepath.Join(h.dir, smi), filepath.Join(h.prefix, "usr/bin/nvidia-smi")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.prefix, "usr/bin/nvidia-container-runtime-hook"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(h.prefix, "img.tar")
	if err := os.WriteFile(archive, []byte("dlami-sim image public.ecr.aws/amazonlinux/amazonlinux:2023-minimal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.run(nil, "root/usr/bin/docker", "load", "-i", archive)
	h.run(nil, "root/usr/bin/ctr", "-n", "default", "images", "import", archive)
	return h
}

const img = "public.ecr.aws/amazonlinux/amazonlinux:2023-minimal"

// TestContainerStandIns: the toolkit's and the engines' stand-ins print what the plugin's
// parsers read, with the host's GPU UUIDs, and each failure knob gives its real message.
func TestContainerStandIns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the engine stand-ins answer root only, as their sockets do")
	}
	h := containerHost(t, nil)
	host, err := nvsmi.ParseL(h.run(nil, smi, "-L"))
	if err != nil || len(host) != 8 {
		t.Fatalf("host nvidia-smi -L: %v %v", host, err)
	}
	info, err := nvcontainercli.ParseInfo(h.run(nil, "pkgs/files/nvidia-container-cli", "info"))
	if err != nil || len(info.Devices) != 8 || info.Devices[5].UUID != host[5].UUID || info.NVRMVersion != "595.91.07" {
		t.Fatalf("nvidia-container-cli info: %+v %v", info, err)
	}
	h.run(nil, "pkgs/files/nvidia-ctk", "cdi", "generate", "--output=/var/run/cdi/nvidia.yaml")
	out, errs, code := h.runErr(nil, "pkgs/files/nvidia-ctk", "cdi", "list")
	list, err := nvctk.ParseList(errs + out)
	if code != 0 || err != nil || list.Found != 9 || !list.Has(nvctk.GPUKind, "all") || len(list.GPUIndexes()) != 8 {
		t.Fatalf("cdi list: %+v %v\n%s%s", list, err, errs, out)
	}
	for _, run := range [][]string{
		{"root/usr/bin/docker", "run", "--rm", "--pull=never", "--gpus", "all", img, "nvidia-smi", "-L"},
		{"root/usr/bin/ctr", "-n", "default", "run", "--rm", "--device", "nvidia.com/gpu=all", img, "id1", "nvidia-smi", "-L"},
	} {
		got, err := nvsmi.ParseL(h.run(nil, run[0], run[1:]...))
		if err != nil || len(got) != 8 || got[7].UUID != host[7].UUID {
			t.Errorf("%s: %v %v", run[0], got, err)
		}
	}
	if _, errs, code := h.runErr(nil, "root/usr/bin/docker", "run", "--rm", "--pull=never", "--gpus", "all", "other:1", "nvidia-smi", "-L"); code != 125 || !strings.Contains(errs, "No such image") {
		t.Errorf("a missing image: exit %d %q", code, errs)
	}
	dump := h.run(nil, "root/usr/bin/containerd", "config", "dump")
	if !strings.Contains(dump, "enable_cdi = true") {
		t.Errorf("containerd 2 config dump lacks the CDI default:\n%s", dump)
	}

	// Each failure knob fails the container with the facts file's message.
	for knob, msg := range map[string]string{
		"no-device-driver":           `could not select device driver "" with capabilities: [[gpu]]`,
		"nvidia-driver-unconfigured": `could not select device driver "nvidia" with capabilities: [[gpu]]`,
		"driver-not-loaded":          "nvidia-container-cli: initialization error: nvml error: driver not loaded",
		"driver-error":               "initialization error: driver error: failed to process request",
		"file-exists":                "mount error: file creation failed: ",
		"imex-channel":               "error parsing IMEX info: unsupported IMEX channel value: all",
		"app-profiles-ro":            "mkdirat etc/nvidia/nvidia-application-profiles-rc.d: read-only file system",
		"bpf-device-rules":           "bpf_prog_query(BPF_CGROUP_DEVICE)",
	} {
		h.knob("container-failure", knob)
		_, errs, code := h.runErr(nil, "root/usr/bin/docker", "run", "--rm", "--pull=never", "--gpus", "all", img, "nvidia-smi", "-L")
		if code != 125 || !strings.Contains(errs, msg) {
			t.Errorf("container-failure=%s: exit %d %q", knob, code, errs)
		}
	}
	h.knob("container-failure", "")
	h.knob("container-gpus-hidden", "2")
	if got, _ := nvsmi.ParseL(h.run(nil, "root/usr/bin/ctr", "run", "--rm", "--gpus", "0", img, "id2", "nvidia-smi", "-L")); len(got) != 6 {
		t.Errorf("container-gpus-hidden=2: %d GPUs", len(got))
	}
	h.knob("container-cli-error", "imex-channel")
	if _, errs, code := h.runErr(nil, "pkgs/files/nvidia-container-cli", "info"); code != 1 || !strings.Contains(errs, "unsupported IMEX channel value") {
		t.Errorf("container-cli-error: %d %q", code, errs)
	}
}

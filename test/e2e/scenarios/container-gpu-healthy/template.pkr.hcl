# container-gpu-healthy: a layer loads a small image into docker's and containerd's local
# stores (as a bake would save one into the AMI: the check never pulls), container_check names
# it, and a container with all GPUs on each engine (enabled by rootfs/: units, daemon.json and
# config.toml with the nvidia runtime) sees exactly the host's GPUs. Must pass, with
# the toolkit's and the engines' versions in the bill of materials.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "save-test-image"
      inline = [
        # The simulated engines' image archive: its first line names the image.
        "printf 'dlami-sim image public.ecr.aws/amazonlinux/amazonlinux:2023-minimal\\n' > /tmp/al2023-minimal.tar",
        "docker load -i /tmp/al2023-minimal.tar",
        "ctr -n default images import /tmp/al2023-minimal.tar",
        "rm -f /tmp/al2023-minimal.tar",
      ]
    }

    container_check {
      image = "public.ecr.aws/amazonlinux/amazonlinux:2023-minimal"
    }
  }

  post-processor "shell-local" {
    inline = ["grep -o '\"nvidia_container_toolkit\": \"[^\"]*\"\\|\"docker\": \"[^\"]*\"\\|\"containerd\": \"[^\"]*\"' ${var.report_dir}/dlami-report.json | sed 's/^/BOM /'"]
  }
}

# container-gpu-podman-no-cdi: as container-gpu-podman, but nvidia-cdi-refresh.path is disabled
# (knob enabled-nvidia-cdi-refresh.path), so no CDI spec is written at boot: podman cannot
# resolve nvidia.com/gpu=all and its container fails with podman's own message
# (NVIDIA/nvidia-container-toolkit#146); container-gpu fails naming the cause and the fix
# (and the missing spec and refresh unit on their own).

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name         = "podman"
      apt_packages = ["podman"]
      inline = [
        # The simulated engines' image archive: its first line names the image.
        "printf 'dlami-sim image public.ecr.aws/amazonlinux/amazonlinux:2023-minimal\\n' > /tmp/al2023-minimal.tar",
        "podman load -i /tmp/al2023-minimal.tar",
        "rm -f /tmp/al2023-minimal.tar",
      ]
    }

    container_check {
      image = "public.ecr.aws/amazonlinux/amazonlinux:2023-minimal"
    }
  }
}

# container-gpu-podman: a layer installs podman (the DLAMI ships none; the simulated local
# repository has Ubuntu 24.04's 4.9.3) and loads a small image into its store; container_check
# names it. podman has no daemon and reaches GPUs through CDI only: its container runs with
# --device nvidia.com/gpu=all from the spec nvidia-cdi-refresh wrote at boot and sees exactly
# the host's GPUs. Must pass, with podman's version in the bill of materials.

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

  post-processor "shell-local" {
    inline = ["grep -o '\"podman\": \"[^\"]*\"' ${var.report_dir}/dlami-report.json | sed 's/^/BOM /'"]
  }
}

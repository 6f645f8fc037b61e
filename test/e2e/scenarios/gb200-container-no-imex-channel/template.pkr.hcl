# gb200-container-no-imex-channel: as gb200-container-imex, but the containers get no IMEX
# channel (knob container-imex-channels none: a CDI spec written before the channel existed,
# or the legacy runtime without NVIDIA_IMEX_CHANNELS) although the host creates channel 0:
# container-gpu fails, naming CUDA_ERROR_NOT_PERMITTED and the fix.

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
}

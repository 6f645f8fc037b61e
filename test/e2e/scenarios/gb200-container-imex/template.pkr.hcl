# gb200-container-imex: a GB200 tray (imex defaults to "host") whose image creates IMEX channel
# 0 at boot (/etc/modprobe.d/nvidia-imex.conf) and loads a small image into docker's and
# containerd's stores: a container with all GPUs on each engine also lists
# /dev/nvidia-caps-imex-channels and sees channel0. Must pass.

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

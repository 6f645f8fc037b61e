# container-gpu-file-exists: the healthy image, but the GPU container hits libnvidia-container's
# "file exists" mount regression (knob container-failure; awslabs/amazon-eks-ami#2165): must
# fail container-gpu naming the cause and its fix.

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

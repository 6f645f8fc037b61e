# metas-only-dist-upgrade: ParallelCluster-style holds (only linux-aws, linux-image-aws,
# linux-headers-aws); a layer unholds linux-aws and dist-upgrades. linux-aws itself stays (its new
# version needs the still-held linux-image-aws 1015), but every unheld NVIDIA package moves to
# 595.99.01 and DKMS rebuilds the module for the running kernel.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "unhold-linux-aws"
      inline = [
        "apt-mark unhold linux-aws",
        "apt-get update -q",
        "apt-get -y dist-upgrade",
      ]
    }
    layer {
      name = "never-runs"
      inline = [
        "echo \"LAYER-$(echo AFTER)-DRIFT-RAN\"",
      ]
    }
  }
}

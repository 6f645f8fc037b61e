# ubuntu-archive-upgrade: Ubuntu's archive layout (-595-server-open, precompiled modules, the
# seed's holds); a plain `apt-get -y upgrade` with 595.99.01 in the repo. The held precompiled module
# pins nvidia-kernel-common-595-server, so the driver meta and libnvidia-compute-595-server stay; Fabric
# Manager -595 and NSCQ -595 move.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "careless-upgrade"
      inline = [
        "apt-get update -q",
        "apt-get -y upgrade",
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

# nvidia-repo-upgrade: NVIDIA's repository layout (the default) with the seed's holds; a layer
# runs a plain `apt-get -y upgrade` while the local repo offers driver 595.99.01. Real apt keeps the
# driver meta, libnvidia-compute and everything nvidia-driver-open pins with "=" back (its new version
# needs nvidia-dkms-open 595.99.01, which is held), but Fabric Manager, NSCQ and IMEX depend on nothing
# of the driver and move to 595.99.01: a Fabric Manager that no longer matches the loaded module.

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

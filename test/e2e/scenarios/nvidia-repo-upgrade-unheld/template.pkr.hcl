# nvidia-repo-upgrade-unheld: NVIDIA's repository layout with nothing held (a DLAMI whose holds
# are not the seed's). `apt-get -y upgrade` moves the whole driver to 595.99.01 (NVIDIA's 590+ default:
# "upgrade to the latest drivers"), libnvidia-compute included, and DKMS rebuilds the module for the
# running kernel while 595.91.07 stays loaded: nvidia-smi now fails with the NVML mismatch.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "careless-upgrade"
      inline = [
        "apt-get update -q",
        "apt-get -y upgrade",
        "nvidia-smi || true",
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

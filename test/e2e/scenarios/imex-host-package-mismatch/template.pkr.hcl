# imex-host-package-mismatch: as imex-host-healthy, but the image came with nvidia-imex 595.99.01-1 (the local repo's newer driver branch, installed by prepare before the bake) while the loaded driver is 595.91.07: check imex fails, naming both versions.
# The simulated p6-b200 stands in for a GB200 tray: imex is set explicitly (its default is "off"
# on a type without multi-node NVLink). The simulated DLAMI ships nvidia-imex 595.91.07-1 (the
# loaded driver's version) with its unit enabled; nvidia-imex-ctl is the stand-in of
# test/simhost/pkgs/files (knob imex-ctl). The NCCL test and DCGM are off: they judge nothing here.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir
    imex       = "host"
    dcgm_level = 0
    nccl {
      skip = true
    }
  }
}

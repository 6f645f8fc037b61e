# imex-host-no-channel: as imex-host-healthy, but nothing creates IMEX channel 0 (no NVreg_CreateImexChannel0=1, no /dev/nvidia-caps-imex-channels/channel0): check imex fails, naming CUDA_ERROR_NOT_PERMITTED and the fix.
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

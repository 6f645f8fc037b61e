# driver-mismatch: nvidia-smi reports driver 580.95.05 on a host pinned to 595.91.07.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    expect {
      nvidia_driver = "595.91.07"
    }
  }
}

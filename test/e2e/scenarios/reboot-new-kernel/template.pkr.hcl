# reboot-new-kernel: a layer installs kernel 1015 and reboots; the host comes back on 1015.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name   = "kernel-and-reboot"
      inline = ["apt-get install -y linux-image-7.0.0-1015-aws"]
      reboot = true
    }
  }
}

# install-kernel-1015: a layer installs a newer kernel image, holds untouched.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name   = "new-kernel"
      inline = ["apt-get install -y linux-image-7.0.0-1015-aws"]
    }
  }
}

# kernel-headers-1015: a layer installs only linux-headers-7.0.0-1015-aws (holds intact: a new
# package is not an upgrade). It pulls the flavour headers linux-aws-7.0-headers-7.0.0-1015 and, as
# DKMS does, builds efa, gdrdrv and nvidia for 7.0.0-1015-aws: kernel-matched packages for a kernel the
# image does not run.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "headers-only"
      inline = [
        "apt-get install -y linux-headers-7.0.0-1015-aws",
        "dkms status",
      ]
    }
  }
}

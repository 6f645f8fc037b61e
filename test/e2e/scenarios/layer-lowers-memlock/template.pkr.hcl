# layer-lowers-memlock: a site layer installs a limits file that caps locked memory at 64 MiB
# for everyone, after the EFA installer's 01_efa.conf (names sort later, equal priority: it
# wins). Packer's SSH session opened before the layer and still says unlimited; a new login
# gets 65536 KiB. The memlock check judges the new login: the bake fails.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "site-limits"
      inline = [
        "printf '*  soft  memlock  65536\\n*  hard  memlock  65536\\n' > /etc/security/limits.d/99-site.conf",
        "echo SITE-LIMITS-WRITTEN",
      ]
    }
  }
}

# layer-raises-memlock: a host whose 01_efa.conf lines were commented out (as some public
# install scripts do) and whose sshd runs with 64 KiB: logins get 64 KiB. A layer installs a
# limits file that makes memlock unlimited for everyone. Packer's SSH session opened before the
# layer and still says 64 KiB; a new login gets unlimited, and the bake passes.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "memlock-unlimited"
      inline = [
        "printf '*  -  memlock  unlimited\\n' > /etc/security/limits.d/99-memlock.conf",
      ]
    }
  }
}

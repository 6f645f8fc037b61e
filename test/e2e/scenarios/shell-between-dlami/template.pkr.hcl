# shell-between-dlami: a plain shell provisioner installs kernel 1015 between two dlami
# provisioners; the second compares against the first one's baseline and fails.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = "${var.report_dir}/first"
    validate   = false
  }

  provisioner "shell" {
    inline = ["sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -q linux-image-7.0.0-1015-aws"]
  }

  provisioner "dlami" {
    report_dir = var.report_dir
  }
}

# shell-between-dlami: a plain shell provisioner installs kernel 1015 between two dlami
# provisioners; the second compares against the first one's baseline and fails.
variable "ssh_host" { type = string }
variable "ssh_port" { type = number }
variable "ssh_private_key_file" { type = string }
variable "report_dir" { type = string }

source "null" "dlami" {
  communicator         = "ssh"
  ssh_host             = var.ssh_host
  ssh_port             = var.ssh_port
  ssh_username         = "ubuntu"
  ssh_private_key_file = var.ssh_private_key_file
  ssh_timeout          = "1m"
}

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

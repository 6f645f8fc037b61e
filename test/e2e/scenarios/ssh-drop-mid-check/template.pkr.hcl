# ssh-drop-mid-check: the SSH connection dies during the host checks; the read-only bundle is
# run again and the bake completes with the right verdicts.
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
    report_dir = var.report_dir
  }

  # Proves the drop happened (the stand-in records it on the host).
  provisioner "shell" {
    inline = ["cat /tmp/dlami-sim-ssh-dropped"]
  }
}

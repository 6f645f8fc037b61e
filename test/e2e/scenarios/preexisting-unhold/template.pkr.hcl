# preexisting-unhold: the host's kernel packages were unheld before the bake (see ./prepare): the
# image does not hold them, so the guard warns, watches them all the same, and the bake goes on.
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

    layer {
      name   = "must-not-run"
      inline = ["echo \"LAYER-$(echo DID)-RUN\""]
    }
  }
}

# preexisting-unhold-required: the image does not hold linux-aws and the running kernel's image;
# with require_holds = true the guard fails on it, before any layer runs.
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
    require_holds = true
    report_dir = var.report_dir

    layer {
      name   = "must-not-run"
      inline = ["echo \"LAYER-$(echo DID)-RUN\""]
    }
  }
}

# container-toolkit-upgrade: a layer upgrades the NVIDIA container toolkit 1.20.1 -> 1.20.3
# (frequent security fixes; it does not depend on the driver version). Must pass.
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
      name = "toolkit-upgrade"
      inline = [
        "apt-get update -q",
        "apt-get install -y --only-upgrade nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container1 libnvidia-container-tools",
        "nvidia-ctk --version",
      ]
    }
  }
}

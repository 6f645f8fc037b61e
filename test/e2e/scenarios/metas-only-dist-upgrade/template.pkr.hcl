# metas-only-dist-upgrade: ParallelCluster-style holds (only linux-aws, linux-image-aws,
# linux-headers-aws); a layer unholds linux-aws and dist-upgrades. linux-aws itself stays (its new
# version needs the still-held linux-image-aws 1015), but every unheld NVIDIA package moves to
# 595.99.01 and DKMS rebuilds the module for the running kernel.
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
      name = "unhold-linux-aws"
      inline = [
        "apt-mark unhold linux-aws",
        "apt-get update -q",
        "apt-get -y dist-upgrade",
      ]
    }
    layer {
      name = "never-runs"
      inline = [
        "echo \"LAYER-$(echo AFTER)-DRIFT-RAN\"",
      ]
    }
  }
}

# ubuntu-archive-upgrade: Ubuntu's archive layout (-595-server-open, precompiled modules, the
# seed's holds); a plain `apt-get -y upgrade` with 595.99.01 in the repo. The held precompiled module
# pins nvidia-kernel-common-595-server, so the driver meta and libnvidia-compute-595-server stay; Fabric
# Manager -595 and NSCQ -595 move.
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
      name = "careless-upgrade"
      inline = [
        "apt-get update -q",
        "apt-get -y upgrade",
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

# unhold-dist-upgrade: a careless layer lifts every hold and dist-upgrades; real apt pulls
# linux-aws 7.0.0.1015.15 and kernel 7.0.0-1015-aws from the local repo.
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
      name = "careless-dist-upgrade"
      inline = [
        "apt-mark unhold $(apt-mark showhold)",
        "apt-get update -q",
        "apt-get -y dist-upgrade",
      ]
    }

    layer {
      name   = "never-runs"
      inline = ["echo \"LAYER-$(echo AFTER)-DRIFT-RAN\""]
    }
  }
}

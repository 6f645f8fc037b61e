# unhold-upgrade: a careless layer lifts every hold and runs `apt-get -y upgrade`. Real apt
# keeps linux-aws back (its new version needs new packages), so the drift is the lifted
# holds; unhold-dist-upgrade shows the same layer with dist-upgrade pulling kernel 1015.
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
        "apt-mark unhold $(apt-mark showhold)",
        "apt-get update -q",
        "apt-get -y upgrade",
      ]
    }

    layer {
      name   = "never-runs"
      inline = ["echo \"LAYER-$(echo AFTER)-DRIFT-RAN\""]
    }
  }
}

# nvidia-repo-upgrade-unheld: NVIDIA's repository layout with nothing held (a DLAMI whose holds
# are not the seed's). `apt-get -y upgrade` moves the whole driver to 595.99.01 (NVIDIA's 590+ default:
# "upgrade to the latest drivers"), libnvidia-compute included, and DKMS rebuilds the module for the
# running kernel while 595.91.07 stays loaded: nvidia-smi now fails with the NVML mismatch.
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
        "nvidia-smi || true",
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

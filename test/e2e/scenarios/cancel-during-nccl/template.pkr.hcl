# cancel-during-nccl: Ctrl-C while all_reduce_perf hangs: the report says cancelled with the checks
# done so far, and nothing is left running on the host.
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
      name   = "tools"
      inline = ["echo tools-layer-ran"]
    }
    nccl {
      timeout = "10m"
    }
  }
}

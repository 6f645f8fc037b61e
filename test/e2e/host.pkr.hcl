# The simulated host every scenario's build runs against: run-scenario builds a directory of
# this file and the scenario's template.pkr.hcl (else default.pkr.hcl), and always passes these
# four variables. A template declares builds only (`sources = ["source.null.dlami"]`).
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

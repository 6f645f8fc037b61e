# layer-reboots-itself: a layer whose vendor script reboots the host by itself.
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
    report_dir     = var.report_dir
    reboot_timeout = "3m"
    layer {
      name          = "vendor"
      expect_reboot = false
      inline        = ["echo vendor-installer-done", "reboot", "sleep 120", "echo VENDOR-AFTER-REBOOT-RAN"]
    }
    layer {
      name   = "after"
      inline = ["echo LAYER-AFTER-REBOOT-RAN"]
    }
  }
}

# healthy-runfile-metas-only: the healthy bake on a host whose NVIDIA driver is packaged as
# runfile and whose holds are the metas-only set (the DLAMI's real choice is not public:
# dlami-facts.md "Unconfirmed"). Must pass: unheld guarded packages are a warning, not a failure.
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
      name = "tools"
      inline = [
        "apt-get install -y -q jq",
        "jq --version",
        "bash -c 'echo \"layout: $(cat /var/lib/dlami-sim/first-boot.done 2>/dev/null || echo nvidia-packaging=nvidia-repo holds=seed)\"; echo \"holds: $(apt-mark showhold | tr \"\\n\" \" \")\"; dkms status; nvidia-smi --query-gpu=driver_version --format=csv,noheader | sort -u'",
      ]
    }
  }
}

# container-toolkit-upgrade: a layer upgrades the NVIDIA container toolkit 1.20.1 -> 1.20.3
# (frequent security fixes; it does not depend on the driver version). Must pass.

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

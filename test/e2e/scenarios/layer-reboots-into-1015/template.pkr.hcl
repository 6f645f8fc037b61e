# layer-reboots-into-1015: a layer whose vendor script reboots the host by itself.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir     = var.report_dir
    reboot_timeout = "3m"
    layer {
      name          = "vendor"
      expect_reboot = true
      inline        = ["apt-get install -y linux-image-7.0.0-1015-aws", "echo vendor-installer-done", "reboot", "sleep 120", "echo VENDOR-AFTER-REBOOT-RAN"]
    }
    layer {
      name   = "after"
      inline = ["echo LAYER-AFTER-REBOOT-RAN"]
    }
  }
}

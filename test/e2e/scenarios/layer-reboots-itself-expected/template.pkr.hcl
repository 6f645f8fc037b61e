# layer-reboots-itself-expected: a layer whose vendor script reboots the host by itself.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir     = var.report_dir
    reboot_timeout = "3m"
    layer {
      name          = "vendor"
      expect_reboot = true
      inline        = ["echo vendor-installer-done", "reboot", "sleep 120", "echo VENDOR-AFTER-REBOOT-RAN"]
    }
    layer {
      name   = "after"
      inline = ["echo LAYER-AFTER-REBOOT-RAN"]
    }
  }
}

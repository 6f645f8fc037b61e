# efa-traffic-device-hangs: the ping-pong on one EFA device never completes (knob
# efa-pingpong-hang); the check's timeout must stop it and leave no fi_pingpong behind.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    efa_traffic {
      timeout = "20s"
    }
  }
}

# efa-traffic-below-floor: one EFA device of eight moves a tenth of the others' ping-pong
# bandwidth (knob efa-pingpong-slow); the floor fails it.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    efa_traffic {
      min_bandwidth_mbps = 2000
    }
  }
}

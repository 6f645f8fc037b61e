# efa-traffic-server-late: every fi_pingpong server of the 32 EFA devices listens 2 s late (knob
# efa-pingpong-server-late), so each client comes before its server and is refused at first;
# the traffic test tries the connect again within the pair's bound and every device passes
# (issue 41: the test raced its own server, a false failure of healthy devices).

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    efa_traffic {
      min_bandwidth_mbps = 2000
    }
  }
}

# healthy-p5-function: every function check on, with floors set so that each one judges (without a floor
# efa-traffic and gpudirect-rdma report their figures and warn). The stand-ins' figures: 4567 MB/s
# per EFA device (FI_EFA_ENABLE_SHM_TRANSFER=0), 45 GB/s for the forced-network all-reduce.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    efa_traffic {
      min_bandwidth_mbps = 2000
    }
    gpudirect_rdma {
      busbw_floor_gbps = 30
    }
  }
}

# nccl-hang: all_reduce_perf never finishes; a short NCCL timeout must kill it.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    nccl {
      timeout = "20s"
    }
  }
}

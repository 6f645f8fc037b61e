# cancel-during-nccl: Ctrl-C while all_reduce_perf hangs: the report says cancelled with the checks
# done so far, and nothing is left running on the host.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir
    layer {
      name   = "tools"
      inline = ["echo tools-layer-ran"]
    }
    nccl {
      timeout = "10m"
    }
  }
}

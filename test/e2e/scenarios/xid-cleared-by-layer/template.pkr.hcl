# xid-cleared-by-layer: a burn-in layer runs a GPU load (the nccl-tests binary, as root) that
# makes the kernel log Xid 79 on its first run of the boot (knobs nccl-dmesg, nccl-dmesg-runs
# 1), then clears the kernel ring buffer with `dmesg -c`, as some test hooks do. The log read
# with the baseline predates the Xid, dmesg no longer shows it, and the bake's own NCCL test
# would not meet it again: only journald's copy of the kernel log (journalctl -k -b 0) still
# holds it. The xid check reads that copy and fails the build.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "burn-in"
      inline = [
        "/usr/local/cuda-13.2/efa/test-cuda-13.2/all_reduce_perf -b 8 -e 1M -f 2 -g 1 >/dev/null",
        "dmesg -c >/dev/null",
        "echo BURN-IN-DONE-RING-BUFFER-CLEARED",
      ]
    }
  }
}

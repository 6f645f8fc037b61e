# xid-cleared-no-journal: the burn-in of xid-cleared-by-layer (Xid 79 logged, then `dmesg -c`)
# on a host whose journald keeps nothing (knob journal-storage none: journald.conf
# Storage=none). The ring buffer is empty and the journal holds nothing of the boot: there is
# no kernel log left to judge, so the xid check fails closed (an empty dmesg proves nothing)
# and says how to keep the kernel log in the journal. journal-storage-none is the same host
# without the burn-in: there dmesg still has the boot's lines and the check warns.

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

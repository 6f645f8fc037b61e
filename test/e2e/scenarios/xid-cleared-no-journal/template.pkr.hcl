# xid-cleared-no-journal: the burn-in of xid-cleared-by-layer (Xid 79 logged, then `dmesg -c`)
# on a host whose journald keeps nothing (knob journal-storage none: journald.conf
# Storage=none). The Xid is gone from everywhere the plugin can read, so the xid check cannot
# judge what a layer cleared: it warns (never passes) and says how to keep the kernel log in
# the journal; a warning does not fail the build.

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
